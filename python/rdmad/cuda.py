"""GPU memory through rdmad: CUDA allocations registered as dma-bufs.

``register(client, tensor_or_pointer)`` exports the CUDA allocation that
holds the memory as a dma-buf (``cuMemGetAddressRange``, then
``cuMemGetHandleForAddressRange`` with ``CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD``
on the whole allocation) and registers it with the daemon
(``Client.register_dmabuf``), which registers it on every RDMA device that
supports dma-bufs (docs/GPU.md). The CUDA driver (``libcuda.so.1``) is
loaded at run time with ctypes: nothing here needs CUDA to build, and where
there is no driver or no GPU, ``register`` raises ``rdmad.cuda.NoCuda``
saying which.

Example::

    import torch, rdmad, rdmad.cuda
    client = rdmad.Client.connect()
    kv = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    reg = rdmad.cuda.register(client, kv)     # whole allocation, cached
    q.run(rdmad.make_ops(rdmad.WRITE, reg.buffer, reg.offset, remote, 0,
                         kv.nbytes))

Registrations are cached per client, keyed by the allocation's base, size
and generation (``CU_POINTER_ATTRIBUTE_BUFFER_ID``, unique for the
process's life): registering any pointer inside an allocation registered
before costs three driver queries, and an address that the allocator freed
and handed out again (a recycled pointer) has a new generation, so it
never finds the stale region; the stale one is freed then.
"""

import ctypes
import os
import threading

import rdmad

# The CUDA driver API's values used here, as cuda.h (11.7+) declares them.
CUDA_SUCCESS = 0
CU_POINTER_ATTRIBUTE_CONTEXT = 1
CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2
CU_POINTER_ATTRIBUTE_BUFFER_ID = 7
CU_MEMORYTYPE_DEVICE = 2
CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1


class NoCuda(rdmad.FailedPrecondition):
    """No CUDA driver, no GPU, or a driver without dma-buf export here."""


class CudaError(rdmad.Internal):
    """A CUDA driver call failed: ``result`` is its CUresult."""

    def __init__(self, call, result, name):
        super().__init__(rdmad.Internal.code,
                         f"{call} failed: {name} ({result})")
        self.result = result


class Driver:
    """The few driver API calls rdmad.cuda makes, from libcuda.so.1."""

    def __init__(self, library="libcuda.so.1"):
        try:
            lib = ctypes.CDLL(library)
        except OSError as e:
            raise NoCuda(rdmad.FailedPrecondition.code,
                         f"no CUDA driver here: {library} cannot be loaded "
                         f"({e}); rdmad.cuda needs an NVIDIA GPU and its "
                         "driver (CUDA 11.7 or later)") from None
        u64 = ctypes.c_ulonglong
        self._lib = lib
        self._init = self._function("cuInit", [ctypes.c_uint])
        self._error_name = self._function(
            "cuGetErrorName", [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])
        self._attribute = self._function(
            "cuPointerGetAttribute", [ctypes.c_void_p, ctypes.c_int, u64])
        self._range = self._function(
            "cuMemGetAddressRange_v2",
            [ctypes.POINTER(u64), ctypes.POINTER(ctypes.c_size_t), u64])
        self._push = self._function("cuCtxPushCurrent_v2", [ctypes.c_void_p])
        self._pop = self._function("cuCtxPopCurrent_v2",
                                   [ctypes.POINTER(ctypes.c_void_p)])
        self._handle = self._function(
            "cuMemGetHandleForAddressRange",
            [ctypes.c_void_p, u64, ctypes.c_size_t, ctypes.c_int, u64],
            missing="the CUDA driver is older than 11.7: it exports no "
                    "dma-bufs (cuMemGetHandleForAddressRange)")
        result = self._init(0)
        if result != CUDA_SUCCESS:
            raise NoCuda(rdmad.FailedPrecondition.code,
                         f"no usable GPU here: cuInit failed with "
                         f"{self.error_name(result)} ({result}), though the "
                         "CUDA driver is installed")

    def _function(self, name, argtypes, missing=None):
        try:
            function = getattr(self._lib, name)
        except AttributeError:
            raise NoCuda(rdmad.FailedPrecondition.code,
                         missing or f"libcuda.so.1 has no {name}") from None
        function.argtypes = argtypes
        function.restype = ctypes.c_int
        return function

    def error_name(self, result):
        name = ctypes.c_char_p()
        if self._error_name(result, ctypes.byref(name)) != CUDA_SUCCESS:
            return "CUDA_ERROR_UNKNOWN"
        return name.value.decode()

    def _check(self, call, result):
        if result != CUDA_SUCCESS:
            raise CudaError(call, result, self.error_name(result))

    def allocation(self, pointer):
        """(base, size, generation) of the device allocation at
        `pointer`."""
        memory_type = ctypes.c_uint()
        result = self._attribute(ctypes.byref(memory_type),
                                 CU_POINTER_ATTRIBUTE_MEMORY_TYPE, pointer)
        if result != CUDA_SUCCESS or memory_type.value != CU_MEMORYTYPE_DEVICE:
            raise rdmad.InvalidArgument(
                rdmad.InvalidArgument.code,
                f"{pointer:#x} is not CUDA device memory (cuPointerGetAttribute:"
                f" {self.error_name(result)}, memory type "
                f"{memory_type.value}): host memory comes from "
                "Client.allocate")
        context = ctypes.c_void_p()
        self._check("cuPointerGetAttribute(CONTEXT)", self._attribute(
            ctypes.byref(context), CU_POINTER_ATTRIBUTE_CONTEXT, pointer))
        generation = ctypes.c_ulonglong()
        self._check("cuPointerGetAttribute(BUFFER_ID)", self._attribute(
            ctypes.byref(generation), CU_POINTER_ATTRIBUTE_BUFFER_ID,
            pointer))
        base = ctypes.c_ulonglong()
        size = ctypes.c_size_t()
        # The range query needs the allocation's context current.
        self._check("cuCtxPushCurrent", self._push(context))
        try:
            self._check("cuMemGetAddressRange", self._range(
                ctypes.byref(base), ctypes.byref(size), pointer))
        finally:
            self._pop(ctypes.byref(ctypes.c_void_p()))
        return base.value, size.value, generation.value

    def export_dmabuf(self, base, size):
        """A new dma-buf descriptor of [base, base + size) (the caller
        closes it)."""
        fd = ctypes.c_int(-1)
        result = self._handle(ctypes.byref(fd), base, size,
                              CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
        if result != CUDA_SUCCESS:
            raise NoCuda(rdmad.FailedPrecondition.code,
                         f"cuMemGetHandleForAddressRange(DMA_BUF_FD) failed: "
                         f"{self.error_name(result)} ({result}): this GPU "
                         "driver exports no dma-bufs (the open kernel "
                         "modules do)")
        return fd.value


_driver = None
_driver_lock = threading.Lock()


def driver():
    """The process's Driver (loaded at the first call); raises NoCuda."""
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = Driver()
        return _driver


class Registration:
    """A CUDA allocation registered with rdmad: `buffer` (an rdmad.Buffer
    that operations name; no CPU mapping), the allocation's `base`, `size`
    and `generation`, and `offset`/`length` of the memory asked for."""

    __slots__ = ("buffer", "base", "size", "generation", "offset", "length")

    def __init__(self, buffer, base, size, generation, offset, length):
        self.buffer = buffer
        self.base = base
        self.size = size
        self.generation = generation
        self.offset = offset
        self.length = length

    def __repr__(self):
        return (f"<rdmad.cuda.Registration {self.base:#x} +{self.size} "
                f"(generation {self.generation}), offset {self.offset}, "
                f"{self.buffer!r}>")


class RegistrationCache:
    """A client's registrations of CUDA allocations, keyed by (base, size,
    generation). Thread-safe."""

    def __init__(self, client, cuda=None):
        self._client = client
        self._cuda = cuda
        self._lock = threading.Lock()
        self._entries = {}  # (base, size, generation) -> Buffer

    def register(self, pointer, length, name=None, export=None):
        cuda = self._cuda if self._cuda is not None else driver()
        base, size, generation = cuda.allocation(pointer)
        if pointer + length > base + size:
            raise rdmad.OutOfRange(
                rdmad.OutOfRange.code,
                f"{pointer:#x} +{length} runs past its CUDA allocation "
                f"{base:#x} +{size}")
        key = (base, size, generation)
        with self._lock:
            buffer = self._entries.get(key)
            if buffer is None:
                self._evict_overlapping(base, size)
                fd = cuda.export_dmabuf(base, size)
                try:
                    buffer = self._client.register_dmabuf(
                        fd, 0, size, name=name, export=export)
                finally:
                    os.close(fd)  # the daemon keeps its own descriptor
                self._entries[key] = buffer
        return Registration(buffer, base, size, generation, pointer - base,
                            length)

    def _evict_overlapping(self, base, size):
        """Frees registrations of allocations that overlapped this one:
        those allocations are gone (a recycled address)."""
        for key in [k for k in self._entries
                    if k[0] < base + size and base < k[0] + k[1]]:
            self._entries.pop(key).free()

    def unregister(self, pointer):
        """Frees the registration holding `pointer`, if there is one."""
        with self._lock:
            for key in [k for k in self._entries
                        if k[0] <= pointer < k[0] + k[1]]:
                self._entries.pop(key).free()

    def clear(self):
        with self._lock:
            entries, self._entries = self._entries, {}
        for buffer in entries.values():
            buffer.free()

    def __len__(self):
        return len(self._entries)


def _pointer_and_length(memory, length):
    """A device pointer and byte count from a torch tensor, an object with
    __cuda_array_interface__ (CuPy, Numba), or an int."""
    if isinstance(memory, int):
        if length is None:
            raise rdmad.InvalidArgument(rdmad.InvalidArgument.code,
                                        "a pointer needs its length")
        return memory, length
    if hasattr(memory, "data_ptr"):  # torch.Tensor
        nbytes = memory.numel() * memory.element_size()
        return memory.data_ptr(), nbytes if length is None else length
    interface = getattr(memory, "__cuda_array_interface__", None)
    if interface is not None:
        count = 1
        for extent in interface["shape"]:
            count *= extent
        itemsize = int(interface["typestr"][2:])
        nbytes = count * itemsize
        return interface["data"][0], nbytes if length is None else length
    raise rdmad.InvalidArgument(
        rdmad.InvalidArgument.code,
        f"{type(memory).__name__} is not CUDA memory: pass a torch tensor, "
        "an object with __cuda_array_interface__ or a device pointer")


def cache(client):
    """The RegistrationCache of `client` (made at the first call)."""
    found = getattr(client, "_rdmad_cuda_cache", None)
    if found is None:
        found = RegistrationCache(client)
        client._rdmad_cuda_cache = found
    return found


def register(client, tensor_or_pointer, length=None, *, name=None,
             export=None):
    """Registers the CUDA allocation holding `tensor_or_pointer` (a torch
    tensor, a __cuda_array_interface__ object, or a device pointer with its
    `length`) with `client`'s daemon, or finds it registered already;
    returns a Registration. `name` and `export` ('r', 'w', 'rw') as for
    Client.allocate. Raises NoCuda where there is no GPU or driver."""
    pointer, nbytes = _pointer_and_length(tensor_or_pointer, length)
    return cache(client).register(pointer, nbytes, name=name, export=export)
