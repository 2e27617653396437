// VgemBuffer: a real dma-buf for tests, from the kernel's virtual GEM
// driver (vgem): a DRM dumb buffer exported with PRIME, which the CPU can
// map. It stands in for GPU memory where there is no GPU (the lab VM loads
// vgem; see docs/GPU.md). The DRM ioctls are called directly, with the
// kernel's uapi structures declared here (Debian ships no drm/ headers in
// linux-libc-dev).
//
// Example:
//   auto buffer = VgemBuffer::Create(1 << 20);
//   ASSERT_TRUE(buffer.ok()) << buffer.status();
//   std::memset(buffer->data(), 7, buffer->size());
//   auto region = client->RegisterDmabuf(buffer->fd(), 0, buffer->size());
#ifndef RDMAD_TESTS_INTEGRATION_VGEM_BUFFER_H_
#define RDMAD_TESTS_INTEGRATION_VGEM_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace rdmad::testing {

// The /dev/dri/card* node of the vgem driver, or NOT_FOUND saying how to
// get one (modprobe vgem).
absl::StatusOr<std::string> FindVgemCard();

// A vgem dumb buffer exported as a dma-buf, mapped here. Move-only; closes
// and unmaps on destruction.
class VgemBuffer {
 public:
  // A buffer of at least `size` bytes (the driver rounds it up to whole
  // pages).
  static absl::StatusOr<VgemBuffer> Create(uint64_t size);

  VgemBuffer(VgemBuffer&& other) noexcept;
  VgemBuffer& operator=(VgemBuffer&& other) noexcept;
  VgemBuffer(const VgemBuffer&) = delete;
  VgemBuffer& operator=(const VgemBuffer&) = delete;
  ~VgemBuffer();

  // The dma-buf descriptor.
  int fd() const { return dmabuf_.get(); }
  // This process's mapping of the whole buffer.
  char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  VgemBuffer() = default;

  UniqueFd card_;
  UniqueFd dmabuf_;
  char* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_VGEM_BUFFER_H_
