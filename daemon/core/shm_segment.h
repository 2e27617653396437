// ShmSegment: shared memory that the daemon and a client both map.
//
// A daemon cannot register another process's virtual memory, so every
// region lives in a memfd: the daemon maps it (and registers that mapping
// with each RDMA device), and the client maps the same pages after receiving
// the descriptor over its session socket. Writes by either side are visible
// to the other and to the NIC with no copies.
#ifndef RDMAD_DAEMON_CORE_SHM_SEGMENT_H_
#define RDMAD_DAEMON_CORE_SHM_SEGMENT_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace rdmad::core {

// Move-only owner of a memfd and the daemon's mapping of it.
class ShmSegment {
 public:
  // Creates a sealed memfd of `size` bytes (huge pages when the system has
  // them reserved and the size is at least one huge page) and maps it.
  // Sealing (no shrink/grow) means no client can ftruncate the memory away
  // under the daemon's mapping, which would crash the daemon with SIGBUS.
  static absl::StatusOr<ShmSegment> Create(absl::string_view debug_name,
                                           uint64_t size);

  // Maps the first `size` bytes of a memfd the client created. The memfd
  // must be a regular file of at least `size` bytes sealed against
  // shrinking (F_SEAL_SHRINK), for the same SIGBUS reason.
  static absl::StatusOr<ShmSegment> Adopt(UniqueFd memfd, uint64_t size);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  void* data() const { return data_; }
  uint64_t size() const { return size_; }
  uint64_t mapped_size() const { return mapped_size_; }
  int fd() const { return fd_.get(); }
  const std::string& backing() const { return backing_; }

 private:
  ShmSegment() = default;
  void Release();

  UniqueFd fd_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_size_ = 0;
  std::string backing_;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_SHM_SEGMENT_H_
