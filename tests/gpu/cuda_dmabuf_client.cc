// A CUDA-free client for tests/gpu/cuda_dmabuf_check.sh: allocates GPU
// memory through the CUDA driver API loaded at run time (dlopen of
// libcuda.so.1: no CUDA headers or libraries at build time), exports the
// whole allocation as a dma-buf (cuMemGetAddressRange, then
// cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)
// and registers it with the rdmad at argv[1] (Client::RegisterDmabuf). It
// prints what it does at each step.
//
// Usage: rdmad_cuda_dmabuf_client SOCKET [BYTES]
// Exit status: 0 registered; 3 rdmad refused it with FAILED_PRECONDITION
// (the answer of a node without a dma-buf-capable RDMA NIC; the message is
// printed); 77 no usable GPU or CUDA driver here; 1 anything else.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rdmad/client.h"

namespace {

// The few CUDA driver API types and values used, as cuda.h declares them
// (CUDA 11.7 and later).
using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUdeviceptr = unsigned long long;
constexpr CUresult kCudaSuccess = 0;
constexpr int kAttributeDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_...
constexpr int kRangeHandleTypeDmaBufFd = 0x1;   // CU_MEM_RANGE_HANDLE_TYPE_...

struct Cuda {
  CUresult (*Init)(unsigned int flags);
  CUresult (*DriverGetVersion)(int* version);
  CUresult (*DeviceGet)(CUdevice* device, int ordinal);
  CUresult (*DeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*DeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*CtxSetCurrent)(CUcontext context);
  CUresult (*MemAlloc)(CUdeviceptr* pointer, size_t bytes);
  CUresult (*MemFree)(CUdeviceptr pointer);
  CUresult (*MemGetAddressRange)(CUdeviceptr* base, size_t* size,
                                 CUdeviceptr pointer);
  CUresult (*MemGetHandleForAddressRange)(void* handle, CUdeviceptr pointer,
                                          size_t size, int handle_type,
                                          unsigned long long flags);
  CUresult (*GetErrorString)(CUresult error, const char** text);
};

template <typename F>
bool Load(void* library, const char* name, F& out) {
  out = reinterpret_cast<F>(::dlsym(library, name));
  if (out == nullptr) std::printf("  libcuda.so.1 has no %s\n", name);
  return out != nullptr;
}

std::string Describe(const Cuda& cuda, CUresult result) {
  const char* text = nullptr;
  if (cuda.GetErrorString != nullptr) cuda.GetErrorString(result, &text);
  return std::to_string(result) + " (" + (text != nullptr ? text : "?") + ")";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s SOCKET [BYTES]\n", argv[0]);
    return 2;
  }
  const size_t bytes =
      argc == 3 ? std::strtoull(argv[2], nullptr, 10) : size_t{64} << 20;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  std::printf("step 1: dlopen libcuda.so.1\n");
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::printf("  no CUDA driver here: %s\n", ::dlerror());
    return 77;
  }
  Cuda cuda{};
  bool loaded = Load(library, "cuGetErrorString", cuda.GetErrorString);
  loaded &= Load(library, "cuInit", cuda.Init);
  loaded &= Load(library, "cuDriverGetVersion", cuda.DriverGetVersion);
  loaded &= Load(library, "cuDeviceGet", cuda.DeviceGet);
  loaded &= Load(library, "cuDeviceGetName", cuda.DeviceGetName);
  loaded &= Load(library, "cuDeviceGetAttribute", cuda.DeviceGetAttribute);
  loaded &=
      Load(library, "cuDevicePrimaryCtxRetain", cuda.DevicePrimaryCtxRetain);
  loaded &= Load(library, "cuCtxSetCurrent", cuda.CtxSetCurrent);
  loaded &= Load(library, "cuMemAlloc_v2", cuda.MemAlloc);
  loaded &= Load(library, "cuMemFree_v2", cuda.MemFree);
  loaded &= Load(library, "cuMemGetAddressRange_v2", cuda.MemGetAddressRange);
  loaded &= Load(library, "cuMemGetHandleForAddressRange",
                 cuda.MemGetHandleForAddressRange);
  if (!loaded) {
    std::printf("  the CUDA driver is older than 11.7 (no dma-buf export)\n");
    return 1;
  }

  std::printf("step 2: cuInit, device 0, its primary context\n");
  CUresult r = cuda.Init(0);
  if (r != kCudaSuccess) {
    std::printf("  cuInit: %s: no usable GPU\n", Describe(cuda, r).c_str());
    return 77;
  }
  int version = 0;
  cuda.DriverGetVersion(&version);
  CUdevice device = 0;
  if ((r = cuda.DeviceGet(&device, 0)) != kCudaSuccess) {
    std::printf("  cuDeviceGet(0): %s\n", Describe(cuda, r).c_str());
    return 77;
  }
  char name[256] = {};
  cuda.DeviceGetName(name, sizeof(name) - 1, device);
  int dmabuf = 0;
  cuda.DeviceGetAttribute(&dmabuf, kAttributeDmaBufSupported, device);
  std::printf("  %s, driver API %d, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED %d\n",
              name, version, dmabuf);
  if (dmabuf == 0) {
    std::printf(
        "  this driver exports no dma-bufs (the open kernel modules do)\n");
    return 1;
  }
  CUcontext context = nullptr;
  if ((r = cuda.DevicePrimaryCtxRetain(&context, device)) != kCudaSuccess ||
      (r = cuda.CtxSetCurrent(context)) != kCudaSuccess) {
    std::printf("  context: %s\n", Describe(cuda, r).c_str());
    return 1;
  }

  std::printf("step 3: cuMemAlloc %zu bytes\n", bytes);
  CUdeviceptr pointer = 0;
  if ((r = cuda.MemAlloc(&pointer, bytes)) != kCudaSuccess) {
    std::printf("  cuMemAlloc: %s\n", Describe(cuda, r).c_str());
    return 1;
  }
  CUdeviceptr base = 0;
  size_t size = 0;
  if ((r = cuda.MemGetAddressRange(&base, &size, pointer)) != kCudaSuccess) {
    std::printf("  cuMemGetAddressRange: %s\n", Describe(cuda, r).c_str());
    return 1;
  }
  std::printf("  allocation 0x%llx, %zu bytes\n", base, size);

  std::printf("step 4: cuMemGetHandleForAddressRange (DMA_BUF_FD)\n");
  int fd = -1;
  if ((r = cuda.MemGetHandleForAddressRange(
           &fd, base, size, kRangeHandleTypeDmaBufFd, 0)) != kCudaSuccess) {
    std::printf("  cuMemGetHandleForAddressRange: %s\n",
                Describe(cuda, r).c_str());
    return 1;
  }
  std::printf("  dma-buf descriptor %d\n", fd);

  std::printf("step 5: Client::RegisterDmabuf on %s\n", argv[1]);
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) {
    std::printf("  connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto region = (*client)->RegisterDmabuf(fd, 0, size);
  int status = 0;
  if (region.ok()) {
    std::printf("  registered: region #%llu, %zu bytes\n",
                static_cast<unsigned long long>(region->id()), region->size());
  } else if (absl::IsFailedPrecondition(region.status())) {
    std::printf("  refused: %s\n", region.status().ToString().c_str());
    status = 3;
  } else {
    std::printf("  failed: %s\n", region.status().ToString().c_str());
    status = 1;
  }
  if (region.ok()) (void)region->Release();
  ::close(fd);
  cuda.MemFree(pointer);
  return status;
}
