"""Buffers: zero copy through the buffer protocol, and views that never
outlive the memory they point into."""

import gc
import os

import numpy as np
import pytest

import rdmad
from conftest import run_python


def region_ids(client):
    return {r["id"] for r in client.regions()}


def test_a_numpy_write_is_what_the_peer_reads(daemon_a, daemon_b, unique):
    name = unique("zero-copy")
    owner = daemon_b.connect()
    target = owner.allocate(1 << 16, name=name, export="rw")
    client = daemon_a.connect()
    buf = client.allocate(1 << 16)
    kv = client.open_remote(f"{daemon_b.peer_address}/{name}")
    assert kv.size == 1 << 16
    assert kv.access == "rw"
    assert kv.transport == os.environ.get("RDMAD_TEST_TRANSPORT", "tcp")

    # Written through numpy, sent from the same memory: no copy between.
    data = np.frombuffer(buf, np.uint32)
    data[:] = np.arange(data.size, dtype=np.uint32) * 2654435761
    assert client.write(buf, 0, f"{daemon_b.peer_address}/{name}", 0,
                        1 << 16) == 1 << 16
    # What landed is what the owner's numpy view sees.
    assert np.array_equal(np.frombuffer(target, np.uint32), data)

    # And the other way: the owner changes its memory, a READ lands it in
    # the same numpy array, and memoryview sees it too.
    np.frombuffer(target, np.uint8)[:4096] = 0xAB
    q = client.open_queue()
    done = q.run(rdmad.make_ops(rdmad.READ, buf, 0, kv, 0, 4096))
    assert done.ok and done["bytes"][0] == 4096
    assert (data.view(np.uint8)[:4096] == 0xAB).all()
    assert bytes(memoryview(buf)[:4]) == b"\xab" * 4


def test_memoryview_is_writable_and_shares_memory(daemon_a):
    client = daemon_a.connect()
    buf = client.allocate(4096)
    view = memoryview(buf)
    assert not view.readonly and view.nbytes == 4096
    view[10:14] = b"rdma"
    assert bytes(np.frombuffer(buf, np.uint8)[10:14]) == b"rdma"
    assert buf.views == 1
    view.release()
    assert buf.views == 0


READ_ONLY_CHILD = """
import sys, numpy as np, rdmad
buf = rdmad.Client.connect(sys.argv[1]).map_region(sys.argv[2])
view = memoryview(buf)
try:
    np.frombuffer(buf, np.uint8)[0] = 1
    print("written")
except ValueError:
    print("refused", buf.writable, view.readonly, bytes(view[:5]).decode())
"""


def test_a_read_only_mapping_has_read_only_views(daemon_a, unique):
    # A process that may only read a region maps it read-only: its views
    # must be read-only too, or a numpy write would fault. Such a process
    # is another user's (its owner and root may always write).
    if os.getuid() != 0:
        pytest.skip("needs root to run a client as nobody; run as root")
    name = unique("world-readable")
    owner = daemon_a.connect()
    owner.create_region(name, 8192, mode=0o644)
    mapped = owner.map_region(name)
    memoryview(mapped)[:5] = b"hello"
    os.chmod(os.path.dirname(daemon_a.socket), 0o755)
    child = run_python(READ_ONLY_CHILD, daemon_a.socket, name,
                       user=65534, group=65534)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["refused", "False", "True", "hello"]
    mapped.free()
    owner.free_region(name)


def test_free_with_live_views_is_refused(daemon_a):
    client = daemon_a.connect()
    buf = client.allocate(4096)
    array = np.frombuffer(buf, np.uint8)
    view = memoryview(buf)
    with pytest.raises(rdmad.BufferInUse) as refused:
        buf.free()
    assert isinstance(refused.value, rdmad.FailedPrecondition)
    assert isinstance(refused.value, BufferError)
    assert "2 live view(s)" in str(refused.value)
    # Still mapped and usable.
    array[:] = 5
    assert view[100] == 5
    del array
    view.release()
    buf.free()
    assert buf.freed
    assert buf.id not in region_ids(client)
    with pytest.raises(BufferError, match="was freed"):
        memoryview(buf)
    buf.free()  # twice is harmless


def test_a_dropped_buffer_lives_until_its_last_view(daemon_a):
    client = daemon_a.connect()
    buf = client.allocate(1 << 20)
    region = buf.id
    array = np.frombuffer(buf, np.uint8)
    array[:] = 42
    del buf
    gc.collect()
    # The view keeps the Buffer, and so the mapping and the region.
    assert region in region_ids(client)
    assert int(array.sum()) == 42 * (1 << 20)
    del array
    gc.collect()
    assert region not in region_ids(client)


def test_context_manager_frees(daemon_a):
    client = daemon_a.connect()
    with client.allocate(4096) as buf:
        region = buf.id
        assert region in region_ids(client)
    assert buf.freed
    assert region not in region_ids(client)


def test_register_a_memfd(daemon_a):
    client = daemon_a.connect()
    fd = os.memfd_create("py-register", os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 8192)
        os.pwrite(fd, b"from the memfd", 0)
        buf = client.register(fd, 8192)
        assert buf.size == 8192 and buf.owned
        assert bytes(memoryview(buf)[:14]) == b"from the memfd"
        buf.free()
    finally:
        os.close(fd)
