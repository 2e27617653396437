"""Queues: vectorized submit and poll, run, wait without the GIL, and
notifications."""

import os
import threading
import time

import numpy as np
import pytest

import rdmad
from conftest import Daemon, scaled

RECORD = 64  # bytes each op moves in the 100k-op test


@pytest.fixture
def pair(daemon_a, daemon_b, unique):
    """A client of daemon A, and a region of daemon B it may write and read
    (with B's client, which owns it)."""
    name = unique("q")
    owner = daemon_b.connect()
    client = daemon_a.connect()

    def target(size):
        region = owner.allocate(size, name=name, export="rw")
        return region, client.open_remote(f"{daemon_b.peer_address}/{name}")

    return client, owner, target


def submit_all(q, ops):
    """Submits `ops` with submit() and poll(), as room comes back; returns
    every completion in completion order."""
    results = []
    sent = 0
    while sent < len(ops):
        if q.in_flight < q.capacity:
            try:
                sent += q.submit(ops[sent:])
            except rdmad.ResourceExhausted:
                pass
        got = q.poll()
        if len(got):
            results.append(got)
        elif sent < len(ops) or q.in_flight:
            q.wait(10)
    while q.in_flight:
        assert q.wait(10)
        results.append(q.poll())
    done = np.concatenate(results)
    return done


def test_100k_vectorized_ops_are_byte_identical(pair):
    client, owner, target = pair
    n = scaled(100_000, 1000)
    rng = np.random.default_rng(7)
    src = client.allocate(n * RECORD)
    dst = client.allocate(n * RECORD)
    region, kv = target(n * RECORD)
    source = np.frombuffer(src, np.uint8).reshape(n, RECORD)
    source[:] = rng.integers(0, 256, size=(n, RECORD), dtype=np.uint8)

    # Record i goes to slot place[i] of the region: order matters.
    place = rng.permutation(n).astype(np.uint64)
    q = client.open_queue(depth=1024, completion_depth=4096)
    writes = rdmad.make_ops(rdmad.WRITE, src, np.arange(n) * RECORD, kv,
                            place * RECORD, RECORD)
    done = submit_all(q, writes)
    assert len(done) == n and not done["code"].any()
    assert np.array_equal(np.sort(done["tag"]), np.arange(n))
    assert (done["bytes"] == RECORD).all()
    landed = np.frombuffer(region, np.uint8).reshape(n, RECORD)
    assert np.array_equal(landed[place], source)

    # Read every slot back into its record's place with run().
    reads = rdmad.make_ops(rdmad.READ, dst, np.arange(n) * RECORD, kv,
                           place * RECORD, RECORD)
    back = q.run(reads)
    assert back.ok and np.array_equal(back["tag"], np.arange(n))
    assert np.array_equal(np.frombuffer(dst, np.uint8).reshape(n, RECORD),
                          source)


def test_submit_takes_what_fits(pair):
    client, _, target = pair
    _, kv = target(1 << 16)
    buf = client.allocate(1 << 16)
    q = client.open_queue(depth=8, completion_depth=16)
    assert q.capacity == 16
    ops = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 64, tag=np.arange(100))
    first = q.submit(ops)
    assert 0 < first <= 8 and q.in_flight == first
    # Until completions are polled, the queue fills up: first its
    # submission ring (8 entries, until the daemon takes them), then its
    # completion capacity (16), after which nothing more goes in.
    deadline = time.monotonic() + 10
    while q.in_flight < 16 and time.monotonic() < deadline:
        try:
            assert q.submit(ops[q.in_flight:]) <= 16
        except rdmad.ResourceExhausted:
            time.sleep(0.001)
    queued = q.in_flight
    assert queued == 16
    with pytest.raises(rdmad.ResourceExhausted,
                       match=r"\(16 operations in flight\): Poll completions"):
        q.submit(ops[queued:])
    got = []
    while sum(len(g) for g in got) < queued:
        q.wait(10)
        got.append(q.poll())
    assert np.array_equal(np.sort(np.concatenate(got)["tag"]),
                          np.arange(queued))
    assert q.in_flight == 0


@pytest.mark.parametrize("field,value,message", [
    ("kind", 9, "kind 9 is neither rdmad.WRITE"),
    ("flags", 0x80, "unknown flags 0x80"),
    ("local", 999_999, "local buffer #999999 is no live Buffer"),
    ("remote", 999_999, "remote handle 999999 is no open RemoteHandle"),
])
def test_a_bad_record_is_refused_by_its_index(pair, field, value, message):
    client, _, target = pair
    _, kv = target(4096)
    buf = client.allocate(4096)
    q = client.open_queue()
    ops = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 8, tag=np.arange(5) + 40)
    ops[3][field] = value
    with pytest.raises(rdmad.InvalidArgument) as refused:
        q.submit(ops)
    assert "operation 3 (tag 43) of 5, nothing submitted" in str(refused.value)
    assert message in str(refused.value)
    assert q.in_flight == 0


def test_a_queue_may_spin_through_preemptions(pair):
    client, _, target = pair
    region, kv = target(4096)
    buf = client.allocate(4096)
    memoryview(buf)[:8] = b"preempt!"
    q = client.open_queue(spin=1e-3, spin_when_preempted=True)
    done = q.run(rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 8))
    assert done.ok and bytes(memoryview(region)[:8]) == b"preempt!"
    with pytest.raises(TypeError):
        client.open_queue(spin_when_preempted="sometimes")


def test_records_of_another_size_are_refused(daemon_a):
    q = daemon_a.connect().open_queue()
    with pytest.raises(rdmad.InvalidArgument, match="64-byte records"):
        q.submit(b"\0" * 65)


def test_a_freed_buffer_and_a_closed_handle_are_no_longer_named(pair):
    client, _, target = pair
    _, kv = target(4096)
    buf = client.allocate(4096)
    q = client.open_queue()
    ops = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 8)
    buf.free()
    with pytest.raises(rdmad.InvalidArgument, match="no live Buffer"):
        q.submit(ops)
    other = client.allocate(4096)
    kv.close()
    with pytest.raises(rdmad.InvalidArgument, match="no open RemoteHandle"):
        q.submit(rdmad.make_ops(rdmad.WRITE, other, 0, kv, 0, 8))


def test_poll_carries_the_failures_messages(pair):
    client, _, target = pair
    _, kv = target(4096)
    buf = client.allocate(8192)
    q = client.open_queue()
    ops = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, [0, 8192, 64], 64)
    assert q.submit(ops) == 3
    done = submit_all(q, ops[:0])
    done = done[np.argsort(done["tag"])]
    assert list(done["code"]) == [0, rdmad.OutOfRange.code, 0]
    with pytest.raises(rdmad.OutOfRange, match="does not fit"):
        q.run(ops)


def test_wait_releases_the_gil(pair):
    client, _, _ = pair
    # A queue that takes notifications waits for them with nothing in
    # flight (one that does not refuses: see below).
    q = client.open_queue(notifications=True)
    waiter = threading.Thread(target=q.wait, args=(0.6,))
    start = time.monotonic()
    waiter.start()
    # Python work in this thread while the other waits: it would stall for
    # the whole second if wait() held the GIL.
    spins = 0
    while time.monotonic() - start < 0.2:
        spins += 1
    elapsed = time.monotonic() - start
    waiter.join()
    assert elapsed < 0.5, f"the main thread stalled {elapsed:.2f} s"
    assert spins > 1000
    assert q.wait(0.05) is False  # no notification came: it timed out


def test_wait_with_nothing_in_flight_says_so_at_once(pair):
    client, _, _ = pair
    q = client.open_queue()
    start = time.monotonic()
    with pytest.raises(rdmad.FailedPrecondition,
                       match="nothing is in flight"):
        q.wait(5)
    assert time.monotonic() - start < 1


def test_notifications(pair, daemon_a, daemon_b):
    client, owner, target = pair
    region, kv = target(1 << 16)
    inbox = owner.open_queue(notifications=True, completion_depth=256)
    buf = client.allocate(4096)
    q = client.open_queue()
    offsets = np.arange(10) * 512
    writes = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, offsets, 100,
                            immediate=np.arange(10) + 70)
    assert q.run(writes).ok
    notes = []
    deadline = time.monotonic() + 10
    while len(notes) < 10 and time.monotonic() < deadline:
        inbox.wait(1)
        notes.extend(inbox.poll_notifications())
    assert len(notes) == 10
    notes = np.array(notes)
    assert (notes["region"] == region.id).all()
    assert np.array_equal(np.sort(notes["offset"]), offsets)
    assert (notes["bytes"] == 100).all()
    assert np.array_equal(np.sort(notes["immediate"]), np.arange(10) + 70)
    # Who wrote: daemon A's node; a remote writer has no uid here.
    assert (notes["writer"] == daemon_a.peer_address.encode()).all()
    assert (notes["writer_uid"] == -1).all()
    assert (notes["lost"] == 0).all()
    assert len(inbox.poll()) == 0  # nothing of them among completions


def test_notifications_past_the_backlog_are_reported_lost(workdir):
    # A backlog of 16 for the owner's uid, and no queue open while 40
    # WRITEs with an immediate land: 16 are held, 24 lost, and the queue
    # opened afterwards gets the 16 and then one record saying 24 were lost.
    daemon = Daemon(workdir, "backlog", config="notification_backlog: 16\n")
    try:
        owner = daemon.connect()
        writer = daemon.connect()
        name = f"inbox-{os.getpid()}"
        # A daemon-owned region: its notifications go to the owner's uid,
        # and a writer on this node is a local writer.
        owner.create_region(name, 1 << 16, export="rw")
        kv = writer.open_remote(name)
        buf = writer.allocate(4096)
        q = writer.open_queue()
        assert q.run(rdmad.make_ops(rdmad.WRITE, buf, 0, kv,
                                    np.arange(40) * 64, 8,
                                    immediate=np.arange(40))).ok
        inbox = owner.open_queue(notifications=True, completion_depth=256)
        notes = []
        deadline = time.monotonic() + 10
        while len(notes) < 17 and time.monotonic() < deadline:
            inbox.wait(1)
            notes.extend(inbox.poll_notifications())
        assert len(notes) == 17
        notes = np.array(notes)
        held, last = notes[:16], notes[16]
        # The first 16 to land (a batch's WRITEs may land in any order).
        assert len(set(held["immediate"].tolist())) == 16
        assert (held["immediate"] < 40).all()
        assert (held["lost"] == 0).all()
        # A local writer: this daemon's address and the writer's uid.
        assert (held["writer"] == daemon.peer_address.encode()).all()
        assert (held["writer_uid"] == os.getuid()).all()
        assert last["lost"] == 24 and last["region"] == 0
    finally:
        daemon.stop()


def test_an_immediate_only_rides_a_write(pair):
    client, _, target = pair
    _, kv = target(4096)
    buf = client.allocate(4096)
    q = client.open_queue()
    with pytest.raises(rdmad.InvalidArgument, match="only a WRITE"):
        q.submit(rdmad.make_ops(rdmad.READ, buf, 0, kv, 0, 8, immediate=1))
