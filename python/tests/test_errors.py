"""Every status code raises its own rdmad.Error subclass with the daemon's
message; the common ones as the daemon and the library raise them."""

import os
import signal
import time

import numpy as np
import pytest

import rdmad
from rdmad import _rdmad

CLASSES = {
    1: rdmad.Cancelled, 2: rdmad.Unknown, 3: rdmad.InvalidArgument,
    4: rdmad.DeadlineExceeded, 5: rdmad.NotFound, 6: rdmad.AlreadyExists,
    7: rdmad.PermissionDenied, 8: rdmad.ResourceExhausted,
    9: rdmad.FailedPrecondition, 10: rdmad.Aborted, 11: rdmad.OutOfRange,
    12: rdmad.Unimplemented, 13: rdmad.Internal, 14: rdmad.Unavailable,
    15: rdmad.DataLoss, 16: rdmad.Unauthenticated,
}


@pytest.mark.parametrize("code", sorted(CLASSES))
def test_each_code_raises_its_class(code):
    with pytest.raises(CLASSES[code]) as raised:
        _rdmad._raise_status(code, f"message of {code}")
    error = raised.value
    assert type(error) is CLASSES[code]
    assert isinstance(error, rdmad.Error)
    assert error.code == code and error.message == f"message of {code}"
    assert str(error) == f"{CLASSES[code].code_name}: message of {code}"


def test_an_unknown_code_is_unknown():
    error = rdmad.errors.error_class(99)(99, "from a newer daemon")
    assert type(error) is rdmad.Unknown and error.code == 99


def test_unavailable_names_the_socket(workdir):
    missing = os.path.join(workdir, "nobody-listens.sock")
    with pytest.raises(rdmad.Unavailable, match="nobody-listens.sock"):
        rdmad.Client.connect(missing, timeout=2)


def test_not_found_and_already_exists(daemon_a, unique):
    client = daemon_a.connect()
    name = unique("dup")
    with pytest.raises(rdmad.NotFound, match=name):
        client.map_region(name)
    with pytest.raises(rdmad.NotFound):
        client.open_remote(f"{name}")
    first = client.allocate(4096, name=name)  # noqa: F841
    with pytest.raises(rdmad.AlreadyExists, match=name):
        client.allocate(4096, name=name)


def test_invalid_argument(daemon_a):
    client = daemon_a.connect()
    with pytest.raises(rdmad.InvalidArgument, match="bogus"):
        client.allocate(4096, name="x", export="bogus")


def test_permission_denied_and_out_of_range(daemon_a, daemon_b, unique):
    name = unique("read-only")
    owner = daemon_b.connect()
    region = owner.allocate(4096, name=name, export="r")  # noqa: F841
    client = daemon_a.connect()
    buf = client.allocate(8192)
    address = f"{daemon_b.peer_address}/{name}"
    with pytest.raises(rdmad.PermissionDenied, match="read-only"):
        client.write(buf, 0, address, 0, 64)
    with pytest.raises(rdmad.OutOfRange):
        client.read(buf, 0, address, 4000, 200)


def test_failed_precondition_and_resource_exhausted(daemon_a, unique):
    client = daemon_a.connect()
    name = unique("full")
    target = client.allocate(4096, name=name)
    kv = client.open_remote(name)
    q = client.open_queue(depth=8, completion_depth=8)
    ops = rdmad.make_ops(rdmad.WRITE, target, 0, kv, 0, 8, tag=np.arange(8))
    queued = 0
    while queued < 8:
        queued += q.submit(ops[queued:])
    with pytest.raises(rdmad.ResourceExhausted, match="full"):
        q.submit(ops)
    # run() needs a queue with nothing in flight.
    with pytest.raises(rdmad.FailedPrecondition, match="in flight"):
        q.run(ops)
    q.close()
    with pytest.raises(rdmad.FailedPrecondition, match="closed"):
        q.submit(ops)


def wait_stopped(pid):
    """Returns once every thread of `pid` is stopped (a signal takes a
    moment to reach threads running on other CPUs)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(state in ("T", "t") for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop")


def test_deadline_exceeded_from_a_stopped_peer(daemon_a, daemon_b, unique):
    name = unique("stopped")
    owner = daemon_b.connect()
    region = owner.allocate(4096, name=name, export="rw")  # noqa: F841
    client = daemon_a.connect()
    buf = client.allocate(4096)
    kv = client.open_remote(f"{daemon_b.peer_address}/{name}")
    q = client.open_queue()
    assert q.run(rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 8)).ok
    os.kill(daemon_b.pid, signal.SIGSTOP)
    try:
        wait_stopped(daemon_b.pid)
        assert q.submit(rdmad.make_ops(rdmad.READ, buf, 0, kv, 0, 8,
                                       timeout=0.3)) == 1
        assert q.wait(10)
        done = q.poll()
    finally:
        os.kill(daemon_b.pid, signal.SIGCONT)
    assert done["code"][0] == rdmad.DeadlineExceeded.code, (done, done.messages)
    with pytest.raises(rdmad.DeadlineExceeded):
        done.check()
