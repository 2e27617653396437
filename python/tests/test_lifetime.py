"""A Python client killed in the middle of a batch leaves nothing behind in
its daemon: no session, region, queue or descriptor."""

import signal
import subprocess
import sys
import time

import numpy as np

import rdmad

CHILD = """
import sys, numpy as np, rdmad
client = rdmad.Client.connect(sys.argv[1])
kv = client.open_remote(sys.argv[2])
buf = client.allocate(16 << 20)
np.frombuffer(buf, np.uint8)[:] = 1
q = client.open_queue(depth=256)
n = 2048
ops = rdmad.make_ops(rdmad.WRITE, buf, (np.arange(n) % 16) << 20, kv,
                     (np.arange(n) % 4) << 20, 1 << 20)
print("running", flush=True)
while True:   # batches of 1 MiB WRITEs, until killed
    sent = 0
    while sent < n:
        try:
            sent += q.submit(ops[sent:])
        except rdmad.ResourceExhausted:
            pass
        q.poll()
        if q.in_flight:   # with nothing in flight, wait() refuses
            q.wait(1)
"""


def footprint(client, daemon):
    status = client.status()
    return {"sessions": status["session_count"],
            "regions": status["region_count"],
            "queues": len(client.queues()),
            "fds": daemon.open_fds()}


def test_a_client_killed_mid_batch_leaves_nothing(daemon_a, daemon_b,
                                                  unique):
    name = unique("killed")
    owner = daemon_b.connect()
    target = owner.allocate(4 << 20, name=name, export="rw")
    observer = daemon_a.connect()
    # The daemon's links to B (gRPC and every data connection) outlive the
    # child: open them all first with a batch spread over the connections.
    kv = observer.open_remote(f"{daemon_b.peer_address}/{name}")
    with observer.allocate(4 << 20) as warm_up:
        warm = rdmad.make_ops(rdmad.WRITE, warm_up, np.arange(64) << 16, kv,
                              np.arange(64) << 16, 1 << 16)
        assert observer.open_queue().run(warm).ok
    before = footprint(observer, daemon_a)

    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, daemon_a.socket,
         f"{daemon_b.peer_address}/{name}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "running", \
            child.stderr.read()
        during = footprint(observer, daemon_a)
        assert during["sessions"] == before["sessions"] + 1
        assert during["regions"] == before["regions"] + 1
        time.sleep(0.3)  # batches in flight
        assert child.poll() is None, child.stderr.read()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    # The kernel closes the session socket; the daemon ends the session and
    # frees what it owned, in-flight operations included.
    def settled(now):
        return now["fds"] <= before["fds"] and all(
            now[key] == before[key] for key in ("sessions", "regions",
                                                "queues"))

    deadline = time.monotonic() + 30
    after = footprint(observer, daemon_a)
    while not settled(after) and time.monotonic() < deadline:
        time.sleep(0.05)
        after = footprint(observer, daemon_a)
    assert settled(after), (before, after)
    # The target was written and its owner still has it.
    assert target.size == 4 << 20
    assert memoryview(target)[0] == 1
