"""rdmad.cuda without a GPU: it says precisely what is missing, passes a
CUDA allocation's dma-buf to the daemon, and caches registrations by
(allocation base, size, generation) so a recycled pointer never finds a
stale region. FAKE_LIBCUDA (CTest sets it) is tests/fake_libcuda.c built:
pretend device memory, a memfd for a dma-buf."""

import ctypes
import ctypes.util
import os

import numpy as np
import pytest

import rdmad
import rdmad.cuda
from rdmad.compat.mooncake import TransferEngine

FAKE = os.environ.get("FAKE_LIBCUDA", "")
DEVICE = 0x7E0000000000  # the fake's device memory, in 1 MiB allocations
MIB = 1 << 20


def libcuda_here():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def test_no_driver_is_said_precisely(daemon_a):
    with pytest.raises(rdmad.cuda.NoCuda) as missing:
        rdmad.cuda.Driver("libcuda-not-here.so.1")
    assert isinstance(missing.value, rdmad.FailedPrecondition)
    assert "no CUDA driver here: libcuda-not-here.so.1 cannot be loaded" in \
        missing.value.message
    assert "needs an NVIDIA GPU and its driver" in missing.value.message
    # And through register() on this machine, with its own libcuda.so.1.
    client = daemon_a.connect()
    if libcuda_here():
        expected = (rdmad.cuda.NoCuda, rdmad.InvalidArgument)
    else:
        expected = rdmad.cuda.NoCuda
    with pytest.raises(expected) as raised:
        rdmad.cuda.register(client, DEVICE, 4096)
    if not libcuda_here():
        assert "no CUDA driver here: libcuda.so.1 cannot be loaded" in \
            raised.value.message


def test_no_gpu_is_said_precisely(monkeypatch):
    monkeypatch.setenv("FAKE_CUDA_INIT", "100")
    with pytest.raises(rdmad.cuda.NoCuda) as raised:
        rdmad.cuda.Driver(FAKE)
    assert raised.value.message.startswith(
        "no usable GPU here: cuInit failed with CUDA_ERROR_NO_DEVICE (100)")


def test_the_dmabuf_goes_to_the_daemon(daemon_a):
    cuda = rdmad.cuda.Driver(FAKE)
    client = daemon_a.connect()
    cache = rdmad.cuda.RegistrationCache(client, cuda=cuda)
    # The fake's "dma-buf" is a memfd: the daemon says what it got instead.
    with pytest.raises(rdmad.InvalidArgument, match="not a dma-buf"):
        cache.register(DEVICE + 100, 4096)
    # Each export's descriptor is closed once the daemon has its own.
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(rdmad.InvalidArgument):
            cache.register(DEVICE + 100, 4096)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert len(cache) == 0
    host = np.zeros(64, np.uint8)
    with pytest.raises(rdmad.InvalidArgument, match="not CUDA device memory"):
        cache.register(host.ctypes.data, 64)
    with pytest.raises(rdmad.OutOfRange, match="runs past its CUDA"):
        cache.register(DEVICE + MIB - 8, 64)


class FakeBuffer:
    def __init__(self, size):
        self.size = size
        self.freed = False

    def free(self):
        self.freed = True


class FakeClient:
    """Takes the dma-buf as the daemon would, and records it."""

    def __init__(self):
        self.registered = []

    def register_dmabuf(self, fd, offset, length, name=None, export=None):
        assert os.fstat(fd).st_size == length and offset == 0
        self.registered.append(FakeBuffer(length))
        return self.registered[-1]


def test_the_cache_is_keyed_by_base_size_and_generation():
    cuda = rdmad.cuda.Driver(FAKE)
    client = FakeClient()
    cache = rdmad.cuda.RegistrationCache(client, cuda=cuda)

    first = cache.register(DEVICE + 4096, 8192)
    assert (first.base, first.size, first.offset) == (DEVICE, MIB, 4096)
    # Anywhere in the same allocation: the same registration.
    again = cache.register(DEVICE + 65536, 100)
    assert again.buffer is first.buffer and again.offset == 65536
    other = cache.register(DEVICE + 3 * MIB, 64)
    assert other.buffer is not first.buffer
    assert len(client.registered) == 2 and len(cache) == 2

    # The allocator frees the first allocation and hands its address out
    # again: a new generation, a new registration, the stale one freed.
    cuda._lib.fake_cuda_free(ctypes.c_ulonglong(DEVICE))
    recycled = cache.register(DEVICE + 4096, 8192)
    assert recycled.generation != first.generation
    assert recycled.buffer is not first.buffer
    assert first.buffer.freed and not other.buffer.freed
    assert len(client.registered) == 3 and len(cache) == 2

    cache.unregister(DEVICE + 3 * MIB + 5)
    assert other.buffer.freed and len(cache) == 1
    cache.clear()
    assert recycled.buffer.freed and len(cache) == 0


def test_the_mooncake_engine_registers_gpu_memory_through_rdmad_cuda(
        daemon_a, monkeypatch):
    monkeypatch.setattr(rdmad.cuda, "_driver", rdmad.cuda.Driver(FAKE))
    monkeypatch.setenv("RDMAD_SOCKET", daemon_a.socket)
    engine = TransferEngine()
    assert engine.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == 0
    try:
        # The dma-buf reaches the daemon, which refuses the fake's memfd:
        # the engine says why and what to do.
        code = engine.register_memory(DEVICE, 4096)
        assert code == -rdmad.InvalidArgument.code
        assert "not a dma-buf" in engine.last_error
        assert "allocate_managed_buffer" in engine.last_error
    finally:
        engine.close()
