/* A stand-in for libcuda.so.1 in the tests of rdmad.cuda, on machines with
 * no GPU: the driver API calls rdmad.cuda makes, over pretend allocations.
 *
 *   FAKE_CUDA_INIT=N     cuInit returns N (100: CUDA_ERROR_NO_DEVICE)
 *
 * Device memory is [0x7e0000000000, +1 GiB), in allocations of 1 MiB each;
 * fake_cuda_free(base) makes the next query of that address a new
 * allocation (a new buffer id), as an allocator reusing an address does.
 * cuMemGetHandleForAddressRange hands out a memfd of the allocation's size:
 * not a dma-buf, which rdmad refuses, precisely. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEVICE_BASE 0x7e0000000000ULL
#define DEVICE_SIZE (1ULL << 30)
#define ALLOCATION (1ULL << 20)

static unsigned long long generations[DEVICE_SIZE / ALLOCATION];
static unsigned long long next_generation = 1;

static int device(unsigned long long p) {
  return p >= DEVICE_BASE && p < DEVICE_BASE + DEVICE_SIZE;
}

static unsigned long long* generation_of(unsigned long long p) {
  unsigned long long* g = &generations[(p - DEVICE_BASE) / ALLOCATION];
  if (*g == 0) *g = next_generation++;
  return g;
}

int cuInit(unsigned flags) {
  (void)flags;
  const char* result = getenv("FAKE_CUDA_INIT");
  return result != NULL ? atoi(result) : 0;
}

int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case 0:
      *name = "CUDA_SUCCESS";
      return 0;
    case 1:
      *name = "CUDA_ERROR_INVALID_VALUE";
      return 0;
    case 100:
      *name = "CUDA_ERROR_NO_DEVICE";
      return 0;
    default:
      return 1;
  }
}

int cuPointerGetAttribute(void* data, int attribute, unsigned long long p) {
  if (!device(p)) return 1;
  switch (attribute) {
    case 1:
      *(void**)data = (void*)0x1;
      return 0; /* CONTEXT */
    case 2:
      *(unsigned*)data = 2;
      return 0; /* MEMORY_TYPE */
    case 7:
      *(unsigned long long*)data = *generation_of(p);
      return 0;
    default:
      return 1;
  }
}

int cuCtxPushCurrent_v2(void* context) { return context != NULL ? 0 : 1; }
int cuCtxPopCurrent_v2(void** context) {
  *context = (void*)0x1;
  return 0;
}

int cuMemGetAddressRange_v2(unsigned long long* base, size_t* size,
                            unsigned long long p) {
  if (!device(p)) return 1;
  *base = p - (p - DEVICE_BASE) % ALLOCATION;
  *size = ALLOCATION;
  return 0;
}

int cuMemGetHandleForAddressRange(void* handle, unsigned long long p,
                                  size_t size, int type,
                                  unsigned long long flags) {
  if (!device(p) || type != 1 || flags != 0) return 1;
  int fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)size) != 0) return 1;
  *(int*)handle = fd;
  return 0;
}

void fake_cuda_free(unsigned long long base) {
  if (device(base)) generations[(base - DEVICE_BASE) / ALLOCATION] = 0;
}
