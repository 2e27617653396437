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
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/unique_fd.h"
#include "daemon/core/dmabuf_policy.h"

namespace rdmad::core {

// A file that held more than its region, before CutFileBackTo cut it.
struct FileExcess {
  uint64_t size = 0;       // st_size
  uint64_t allocated = 0;  // st_blocks * 512: the memory it held
};

// Keeps a state-directory file (which cannot be sealed) to `mapped_size`
// bytes: truncates whatever lies past them and frees memory allocated past
// them (fallocate with FALLOC_FL_KEEP_SIZE allocates past the end without
// growing the file; truncating to the same size frees it). Returns what
// the file held when it held more than `mapped_size` (size or memory), or
// nullopt when it did not, so nothing was done. Never touches the first
// `mapped_size` bytes: a mapping of the region is unaffected.
absl::StatusOr<std::optional<FileExcess>> CutFileBackTo(int fd,
                                                        uint64_t mapped_size);

// Move-only owner of a memfd (or a client's dma-buf) and the daemon's
// mapping of it.
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

  // Takes a dma-buf the client passed (dmabuf_segment.cc): `length` bytes
  // from `offset`. INVALID_ARGUMENT, saying what the descriptor is, for
  // anything but a dma-buf, and for a range outside it. The daemon maps the
  // range for the CPU where the exporter allows it (vgem, udmabuf); where
  // it does not (CUDA), data() is an address range reserved with no access,
  // which the devices use as the registration's iova, and cpu_map_error()
  // says why. Keeps the descriptor until destroyed.
  static absl::StatusOr<ShmSegment> AdoptDmabuf(UniqueFd dmabuf,
                                                uint64_t offset,
                                                uint64_t length);

  // Memory that outlives the daemon (see region_keeper.h).
  //
  // CreateFile makes a new file `name` in the directory `dir_fd` (a tmpfs
  // or hugetlbfs mount), mode 0600, allocates all its pages up front (so
  // that a full tmpfs fails here, with RESOURCE_EXHAUSTED, and never later
  // as SIGBUS on a page fault) and maps it. On error the file is removed.
  // Such a file cannot be sealed: see can_shrink().
  static absl::StatusOr<ShmSegment> CreateFile(int dir_fd,
                                               const std::string& name,
                                               uint64_t size);
  // OpenFile maps the first `size` bytes of a file CreateFile made in an
  // earlier run. Refuses a symlink, anything but a regular file owned by
  // this user with a single link, and a file shorter than the mapping
  // (truncated) with a message saying which. A file that grew past the
  // mapping, or holds memory past it, is cut back to it first
  // (CutFileBackTo); `cut` (if not null) then says what it held.
  static absl::StatusOr<ShmSegment> OpenFile(int dir_fd,
                                             const std::string& name,
                                             uint64_t size,
                                             std::string* cut = nullptr);
  // AdoptKept maps a memfd that Create() made in an earlier run and the
  // service manager kept: it must still be sealed against shrinking and
  // growing and hold at least the mapping.
  static absl::StatusOr<ShmSegment> AdoptKept(UniqueFd memfd, uint64_t size);

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
  // True when a process holding the descriptor could truncate the memory
  // under the daemon's mapping (a state-directory file: only memfds can be
  // sealed), or its exporter could take pages away (a dma-buf). The daemon
  // then touches it only through the kernel (see region_copy.h), where a
  // missing page is EFAULT, not SIGBUS.
  bool can_shrink() const { return can_shrink_; }

  // A client's dma-buf (AdoptDmabuf).
  bool is_dmabuf() const { return dmabuf_; }
  // Why the CPU cannot reach a dma-buf: empty when the daemon mapped it
  // (and always for memfds), else what mmap said. Without a mapping only
  // RDMA devices can move its bytes.
  const std::string& cpu_map_error() const { return cpu_map_error_; }
  bool cpu_mapped() const { return cpu_map_error_.empty(); }
  // The dma-buf range to register (fd, offset, length, iova = data()).
  // Meaningful only for a dma-buf.
  DmabufRange dmabuf_range() const;
  // DMA_BUF_IOCTL_SYNC: brackets a CPU access to a mapped dma-buf, so that
  // an exporter with caches to flush or invalidate sees it; nothing for a
  // memfd. Errors are ignored: the exporters that need no sync say so.
  void BeginCpuAccess() const;
  void EndCpuAccess() const;

 private:
  ShmSegment() = default;
  void Release();
  // Maps `size` bytes of `fd` (rounded up to its block size) after checking
  // that it holds them; `what` names it in messages.
  static absl::StatusOr<ShmSegment> MapExisting(UniqueFd fd, uint64_t size,
                                                const std::string& what);

  UniqueFd fd_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_size_ = 0;
  std::string backing_;
  bool can_shrink_ = false;
  // A dma-buf's mapping (map_length_ bytes from map_base_) starts at the
  // dma-buf's start; data_ points `dmabuf_offset_` into it. Null: the
  // mapping is mapped_size_ bytes from data_.
  void* map_base_ = nullptr;
  uint64_t map_length_ = 0;
  bool dmabuf_ = false;
  uint64_t dmabuf_offset_ = 0;
  std::string cpu_map_error_;
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_SHM_SEGMENT_H_
