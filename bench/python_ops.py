#!/usr/bin/python3
"""The Python package's data path beside the C++ queue, in one run.

Two daemons of the build tree on 127.0.0.1 (TCP transport), a region of
daemon B written by clients of daemon A. Each figure has its reference
measured in the same run, by bench/queue_ops_bench.cc (the same loops on an
rdmad::Queue), interleaved over BENCH_RUNS runs (median [min..max]):

  submit      a vectorized Queue.submit of 1024 8-byte WRITE records, per
              operation, beside Queue::Submit of 1024 rdmad::Ops: the
              difference is Python's overhead per operation
              (target <= 50 ns/op)
  await       `await q.write(8 bytes)` (rdmad.aio) p50, beside the C++
              Queue's p50 (Submit, Wait, Poll) plus a bare asyncio eventfd
              wake (a reader callback resolving the future a coroutine
              awaits) (target <= 1.2x that sum)
  bandwidth   1 MiB WRITEs, 8 in flight, from Python (Queue.submit and
              poll) beside C++ (target >= 0.95x)

  bench/python_ops.py [BUILD_DIR]

Exits 3 when a target is missed (BENCH_NO_TARGETS=1: only print).
Environment: BENCH_RUNS (3), BENCH_ITERS (3000 latency samples),
BENCH_SECONDS (2, per bandwidth run).
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                        os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))

import numpy as np  # noqa: E402

import rdmad  # noqa: E402
import rdmad.aio  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
ITERS = int(os.environ.get("BENCH_ITERS", "3000"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "2"))
BATCH = 1024
ROUNDS = 300
SIZE = 1 << 20
QD = 8
CXX = os.path.join(BUILD, "bench", "rdmad_queue_ops_bench")


class Daemon:
    def __init__(self, directory, name):
        self.socket = os.path.join(directory, f"{name}.sock")
        self.log = open(os.path.join(directory, f"{name}.log"), "wb")
        self.process = subprocess.Popen(
            [os.path.join(BUILD, "daemon", "rdmad"), "--socket", self.socket,
             "--peer_listen", "127.0.0.1:0", "--transport", "tcp",
             "--log_level", "warn"], stdout=self.log, stderr=self.log)
        for _ in range(400):
            try:
                status = rdmad.Client.connect(self.socket, timeout=2).status()
                if status["pid"] == self.process.pid:
                    self.peer = status["peer_address"]
                    return
            except rdmad.Error:
                pass
            time.sleep(0.05)
        raise SystemExit(f"rdmad {name} did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait()


def cxx(mode, socket, target, **flags):
    args = [CXX, "--socket", socket, "--target", target, "--mode", mode]
    for key, value in flags.items():
        args += [f"--{key}", str(value)]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def py_submit(client, kv):
    buf = client.allocate(BATCH * 8)
    q = client.open_queue(depth=BATCH, completion_depth=2 * BATCH)
    ops = rdmad.make_ops(rdmad.WRITE, buf, np.arange(BATCH) * 8, kv,
                         np.arange(BATCH) * 8, 8)
    per_op = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        n = q.submit(ops)
        took = time.perf_counter_ns() - start
        assert n == BATCH
        per_op.append(took / BATCH)
        got = 0
        while got < BATCH:
            done = q.poll()
            if not done.ok:
                done.check()
            got += len(done)
            if not len(done):
                q.wait(10)
    q.close()
    buf.free()
    return statistics.median(per_op)


def py_await(client, kv):
    buf = client.allocate(4096)

    async def run():
        q = rdmad.aio.open_queue(client)
        lat = []
        for _ in range(ITERS):
            start = time.perf_counter_ns()
            await q.write(buf, 0, kv, 0, 8)
            lat.append(time.perf_counter_ns() - start)
        q.close()
        return statistics.median(lat) / 1000

    p50 = asyncio.run(run())
    buf.free()
    return p50


def bare_wake():
    """A coroutine awaiting a future that a reader callback on an eventfd
    resolves: what one wake of the event loop costs."""
    async def run():
        loop = asyncio.get_running_loop()
        fd = os.eventfd(0, os.EFD_NONBLOCK)
        waiter = None

        def readable():
            os.eventfd_read(fd)
            waiter.set_result(None)

        loop.add_reader(fd, readable)
        lat = []
        for _ in range(ITERS):
            waiter = loop.create_future()
            start = time.perf_counter_ns()
            os.eventfd_write(fd, 1)
            await waiter
            lat.append(time.perf_counter_ns() - start)
        loop.remove_reader(fd)
        os.close(fd)
        return statistics.median(lat) / 1000

    return asyncio.run(run())


def py_bandwidth(client, kv):
    buf = client.allocate(SIZE * QD)
    np.frombuffer(buf, np.uint8)[:] = 1
    q = client.open_queue()
    ops = rdmad.make_ops(rdmad.WRITE, buf, np.arange(QD) * SIZE, kv,
                         np.arange(QD) * SIZE, SIZE)
    assert q.submit(ops) == QD
    moved = 0
    start = time.perf_counter()
    end = start + SECONDS
    while time.perf_counter() < end:
        done = q.poll()
        if len(done):
            if not done.ok:
                done.check()
            q.submit(ops[done["tag"]])
            moved += len(done)
        else:
            q.wait(10)
    took = time.perf_counter() - start
    while q.in_flight:
        q.wait(10)
        q.poll()
    q.close()
    buf.free()
    return moved * SIZE / took / 1e9


def spread(values, unit, digits=1):
    return (f"{statistics.median(values):.{digits}f} {unit} "
            f"[{min(values):.{digits}f}..{max(values):.{digits}f}]")


def main():
    if not os.path.exists(CXX):
        subprocess.run(["cmake", "--build", BUILD, "--target",
                        "rdmad_queue_ops_bench", "rdmad_python", "rdmad"],
                       check=True, stdout=subprocess.DEVNULL)
    with tempfile.TemporaryDirectory(prefix="rdmad-pybench-") as tmp:
        a, b = Daemon(tmp, "a"), Daemon(tmp, "b")
        try:
            owner = rdmad.Client.connect(b.socket)
            region = owner.allocate(max(BATCH * 8, SIZE * QD), name="bench",
                                    export="rw")
            target = f"{b.peer}/bench"
            client = rdmad.Client.connect(a.socket)
            kv = client.open_remote(target)
            rows = {k: [] for k in ("cxx_submit", "py_submit", "cxx_lat",
                                    "wake", "await", "cxx_bw", "py_bw")}
            for _ in range(RUNS):
                rows["cxx_submit"].append(cxx(
                    "submit", a.socket, target, batch=BATCH,
                    iters=ROUNDS)["ns_per_op"])
                rows["py_submit"].append(py_submit(client, kv))
                rows["cxx_lat"].append(cxx("latency", a.socket, target,
                                           iters=ITERS)["p50_us"])
                rows["wake"].append(bare_wake())
                rows["await"].append(py_await(client, kv))
                rows["cxx_bw"].append(cxx(
                    "bandwidth", a.socket, target, size=SIZE, qd=QD,
                    seconds=SECONDS)["gbytes_per_s"])
                rows["py_bw"].append(py_bandwidth(client, kv))
            del region
        finally:
            a.stop()
            b.stop()

    overhead = [p - c for p, c in zip(rows["py_submit"], rows["cxx_submit"])]
    budget = [c + w for c, w in zip(rows["cxx_lat"], rows["wake"])]
    await_ratio = [p / s for p, s in zip(rows["await"], budget)]
    bw_ratio = [p / c for p, c in zip(rows["py_bw"], rows["cxx_bw"])]
    print(f"rdmad Python vs C++ queue, two daemons over TCP on 127.0.0.1, "
          f"{RUNS} runs: median [min..max]")
    print(f"  submit, batches of {BATCH}: C++ {spread(rows['cxx_submit'], 'ns/op')}"
          f", Python {spread(rows['py_submit'], 'ns/op')}")
    print(f"    Python overhead per op: {spread(overhead, 'ns')}"
          f" (target <= 50 ns)")
    print(f"  8 B WRITE p50: C++ queue {spread(rows['cxx_lat'], 'us')}, "
          f"bare asyncio eventfd wake {spread(rows['wake'], 'us')}")
    print(f"    await q.write p50 {spread(rows['await'], 'us')}: "
          f"{spread(await_ratio, 'x', 2)} of C++ + wake (target <= 1.2x)")
    print(f"  1 MiB WRITE, {QD} in flight: C++ {spread(rows['cxx_bw'], 'GB/s', 2)}"
          f", Python {spread(rows['py_bw'], 'GB/s', 2)}: "
          f"{spread(bw_ratio, 'x', 2)} (target >= 0.95x)")
    missed = []
    if statistics.median(overhead) > 50:
        missed.append("submit overhead")
    if statistics.median(await_ratio) > 1.2:
        missed.append("await latency")
    if statistics.median(bw_ratio) < 0.95:
        missed.append("bandwidth")
    if missed and not os.environ.get("BENCH_NO_TARGETS"):
        print("targets missed: " + ", ".join(missed))
        sys.exit(3)


if __name__ == "__main__":
    main()
