// ShmSegment::AdoptDmabuf: a client's dma-buf as the memory of a region.
//
// The descriptor arrived on the session socket from another process: it is
// checked before use (a dma-buf, by its filesystem; the range inside its
// size, with no overflow), then mapped for the CPU where its exporter
// allows that. Nothing here trusts a size or offset the client gave.
#include <fcntl.h>
#include <linux/dma-buf.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/core/shm_segment.h"

namespace rdmad::core {
namespace {

uint64_t PageSize() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

// DMA_BUF_IOCTL_SYNC, again when a signal or a busy exporter interrupted it.
void SyncDmabuf(int fd, uint64_t flags) {
  dma_buf_sync sync{};
  sync.flags = flags;
  for (int tries = 0; tries < 8; ++tries) {
    if (::ioctl(fd, DMA_BUF_IOCTL_SYNC, &sync) == 0) return;
    if (errno != EINTR && errno != EAGAIN) return;
  }
}

// What a descriptor that is not a dma-buf is, for the message: "a regular
// file (/tmp/x)", "a socket"...
std::string DescribeDescriptor(int fd, const struct stat& st) {
  const char* kind = "a descriptor of another kind";
  switch (st.st_mode & S_IFMT) {
    case S_IFREG:
      kind = "a regular file";
      break;
    case S_IFSOCK:
      kind = "a socket";
      break;
    case S_IFIFO:
      kind = "a pipe";
      break;
    case S_IFCHR:
      kind = "a character device";
      break;
    case S_IFBLK:
      kind = "a block device";
      break;
    case S_IFDIR:
      kind = "a directory";
      break;
    default:
      break;
  }
  char target[256] = {};
  const std::string link = absl::StrCat("/proc/self/fd/", fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n <= 0) return kind;
  return absl::StrCat(kind, " (", absl::string_view(target, n), ")");
}

}  // namespace

absl::StatusOr<ShmSegment> ShmSegment::AdoptDmabuf(UniqueFd dmabuf,
                                                   uint64_t offset,
                                                   uint64_t length) {
  if (length == 0) {
    return absl::InvalidArgumentError(
        "length is 0: register at least one byte of the dma-buf");
  }
  struct stat st;
  struct statfs fs;
  if (::fstat(dmabuf.get(), &st) != 0 || ::fstatfs(dmabuf.get(), &fs) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the passed descriptor cannot be inspected (", std::strerror(errno),
        "): pass the dma-buf's file descriptor"));
  }
  if (static_cast<uint64_t>(fs.f_type) != DMA_BUF_MAGIC) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the passed descriptor is not a dma-buf: it is ",
        DescribeDescriptor(dmabuf.get(), st),
        ". Export the memory as a dma-buf first (CUDA: "
        "cuMemGetHandleForAddressRange with "
        "CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD; DRM: PRIME export); for a "
        "memfd use RegisterBuffer"));
  }
  // The dma-buf's inode carries its size (and lseek(SEEK_END) says the
  // same), fixed for its life.
  const uint64_t size = st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (offset >= size || length > size - offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("the range of ", length, " bytes at offset ", offset,
                     " lies outside the dma-buf, which holds ", size,
                     " bytes: give an offset and length inside it"));
  }
  const uint64_t page = PageSize();
  // From the dma-buf's start, whatever the offset: some exporters ignore
  // the offset of a mapping (DRM's shmem helpers, vgem's, fault in the
  // object's pages counting from the mapping's start), so a mapping at an
  // offset would show the wrong bytes. What it costs is address space.
  const uint64_t map_length = (offset + length + page - 1) / page * page;

  ShmSegment segment;
  void* base = ::mmap(nullptr, map_length, PROT_READ | PROT_WRITE, MAP_SHARED,
                      dmabuf.get(), 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    segment.cpu_map_error_ =
        absl::StrCat("mmap of the dma-buf: ", std::strerror(error));
    // No CPU access: an address range of the same size that nothing can
    // touch gives the registration a unique iova with the page offset of
    // `offset`, as ibv_reg_dmabuf_mr wants, at no cost in memory.
    base = ::mmap(nullptr, map_length, PROT_NONE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("reserving ", map_length,
                       " bytes of address space for the "
                       "dma-buf: ",
                       std::strerror(errno)));
    }
  }
  segment.fd_ = std::move(dmabuf);
  segment.map_base_ = base;
  segment.map_length_ = map_length;
  segment.data_ = static_cast<char*>(base) + offset;
  segment.size_ = length;
  // What the region holds, for the budgets: its own pages.
  segment.mapped_size_ =
      (offset + length + page - 1) / page * page - offset / page * page;
  segment.backing_ = "dmabuf";
  segment.dmabuf_ = true;
  segment.dmabuf_offset_ = offset;
  // The exporter owns the pages: the CPU reaches them only through the
  // kernel (region_copy.h), where a page taken away is EFAULT, not SIGBUS.
  segment.can_shrink_ = true;
  return segment;
}

DmabufRange ShmSegment::dmabuf_range() const {
  return DmabufRange{fd_.get(), dmabuf_offset_, size_,
                     reinterpret_cast<uint64_t>(data_)};
}

void ShmSegment::BeginCpuAccess() const {
  if (dmabuf_ && cpu_map_error_.empty()) {
    SyncDmabuf(fd_.get(), DMA_BUF_SYNC_START | DMA_BUF_SYNC_RW);
  }
}

void ShmSegment::EndCpuAccess() const {
  if (dmabuf_ && cpu_map_error_.empty()) {
    SyncDmabuf(fd_.get(), DMA_BUF_SYNC_END | DMA_BUF_SYNC_RW);
  }
}

}  // namespace rdmad::core
