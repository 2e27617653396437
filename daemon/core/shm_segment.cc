#include "daemon/core/shm_segment.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"
#include "common/status_macros.h"

namespace rdmad::core {
namespace {

constexpr uint64_t kHugePageSize = 2ULL << 20;

uint64_t RoundUp(uint64_t value, uint64_t unit) {
  return (value + unit - 1) / unit * unit;
}

uint64_t PageSize() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

// Sizes a memfd. A size past the daemon's RLIMIT_FSIZE fails with EFBIG
// (the daemon ignores SIGXFSZ, see main.cc): that is a limit of this
// daemon, not a bad request, hence RESOURCE_EXHAUSTED.
absl::Status SizeMemfd(int fd, uint64_t size) {
  if (::ftruncate(fd, static_cast<off_t>(size)) == 0) return absl::OkStatus();
  if (errno == EFBIG) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a ", size,
        "-byte region is larger than rdmad may make a file "
        "(its RLIMIT_FSIZE; EFBIG): ask for less, or raise the limit "
        "(LimitFSIZE= in the unit, ulimit -f) and restart rdmad"));
  }
  return absl::ErrnoToStatus(
      errno, absl::StrCat("ftruncate of a ", size, "-byte memfd"));
}

// Huge pages help the NIC's translation cache, but only reserved ones can
// back a hugetlb memfd; with none reserved we fall back to normal pages.
bool HugePagesReserved() {
  UniqueFd fd(::open("/proc/sys/vm/nr_hugepages", O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  char buf[32] = {};
  const ssize_t n = ::read(fd.get(), buf, sizeof(buf) - 1);
  return n > 0 && std::atol(buf) > 0;
}

}  // namespace

absl::StatusOr<ShmSegment> ShmSegment::Create(absl::string_view debug_name,
                                              uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("segment size is zero");
  const std::string name = absl::StrCat("rdmad:", debug_name);
  ShmSegment segment;
  if (size >= kHugePageSize && HugePagesReserved()) {
    int fd = ::memfd_create(name.c_str(),
                            MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    if (fd >= 0) {
      UniqueFd owned(fd);
      const uint64_t mapped = RoundUp(size, kHugePageSize);
      if (SizeMemfd(fd, mapped).ok()) {
        void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                            MAP_SHARED, fd, 0);
        if (data != MAP_FAILED) {
          segment.fd_ = std::move(owned);
          segment.data_ = data;
          segment.mapped_size_ = mapped;
          segment.backing_ = "memfd-hugetlb";
        }
      }
    }
  }
  if (segment.data_ == nullptr) {
    const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return absl::ErrnoToStatus(errno, "memfd_create");
    segment.fd_.reset(fd);
    const uint64_t mapped = RoundUp(size, PageSize());
    if (absl::Status s = SizeMemfd(fd, mapped); !s.ok()) return s;
    void* data =
        ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("mmap of ", mapped, " bytes"));
    }
    segment.data_ = data;
    segment.mapped_size_ = mapped;
    segment.backing_ = "memfd";
  }
  segment.size_ = size;
  if (::fcntl(segment.fd_.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::ErrnoToStatus(errno, "sealing the region memfd");
  }
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::Adopt(UniqueFd memfd, uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("buffer size is zero");
  struct stat st;
  if (::fstat(memfd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "fstat of the client's descriptor");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        "the passed descriptor is not a memfd or regular file: create it "
        "with memfd_create(2)");
  }
  if (static_cast<uint64_t>(st.st_size) < size) {
    return absl::OutOfRangeError(absl::StrCat(
        "the passed memfd holds ", st.st_size, " bytes but ", size,
        " were asked for: ftruncate it first"));
  }
  const int seals = ::fcntl(memfd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::FailedPreconditionError(
        "the passed memfd is not sealed against shrinking: create it with "
        "MFD_ALLOW_SEALING and add F_SEAL_SHRINK, so it cannot be truncated "
        "under the daemon's mapping");
  }
  const uint64_t mapped = RoundUp(size, PageSize());
  if (mapped > static_cast<uint64_t>(st.st_size)) {
    return absl::OutOfRangeError(absl::StrCat(
        "the passed memfd must be a whole number of pages (", PageSize(),
        " bytes) long at least; size it to ", mapped, " bytes"));
  }
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED,
                      memfd.get(), 0);
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, "mmap of the client's memfd (is it "
                                      "opened read-write?)");
  }
  ShmSegment segment;
  segment.fd_ = std::move(memfd);
  segment.data_ = data;
  segment.size_ = size;
  segment.mapped_size_ = mapped;
  segment.backing_ = "client-memfd";
  return segment;
}

namespace {

// Larger sizes are mistakes (or damage) and would overflow the rounding.
constexpr uint64_t kMaxSegmentSize = 1ULL << 50;

bool OnHugetlbfs(int fd) {
  struct statfs fs;
  return ::fstatfs(fd, &fs) == 0 &&
         static_cast<uint64_t>(fs.f_type) == HUGETLBFS_MAGIC;
}

}  // namespace

absl::StatusOr<ShmSegment> ShmSegment::CreateFile(int dir_fd,
                                                  const std::string& name,
                                                  uint64_t size) {
  if (size == 0) return absl::InvalidArgumentError("segment size is zero");
  if (size > kMaxSegmentSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("segment size ", size, " bytes is too large"));
  }
  UniqueFd fd(::openat(dir_fd, name.c_str(),
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0600));
  if (!fd) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("creating ", name, " in the state directory"));
  }
  // Every error from here on removes the file again.
  auto fail = [&](absl::Status status) {
    ::unlinkat(dir_fd, name.c_str(), 0);
    return status;
  };
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return fail(absl::ErrnoToStatus(errno, absl::StrCat("fstat of ", name)));
  }
  // The block size is the huge page size on hugetlbfs, where mappings and
  // file sizes must be whole huge pages.
  const uint64_t unit =
      st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : PageSize();
  const uint64_t mapped = RoundUp(size, unit);
  if (::fallocate(fd.get(), 0, 0, static_cast<off_t>(mapped)) != 0) {
    const int error = errno;
    if (error == ENOSPC) {
      return fail(absl::ResourceExhaustedError(absl::StrCat(
          "the state directory has no room for ", mapped,
          " more bytes (its tmpfs is full, or its hugetlbfs has too few free "
          "huge pages): free regions, or make it larger")));
    }
    // Filesystems without fallocate (ramfs): a plain size, pages on use.
    if (error != EOPNOTSUPP ||
        ::ftruncate(fd.get(), static_cast<off_t>(mapped)) != 0) {
      return fail(absl::ErrnoToStatus(
          error != EOPNOTSUPP ? error : errno,
          absl::StrCat("allocating ", mapped, " bytes for ", name)));
    }
  }
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd.get(), 0);
  if (data == MAP_FAILED) {
    return fail(absl::ErrnoToStatus(
        errno, absl::StrCat("mmap of ", mapped, " bytes of ", name)));
  }
  ShmSegment segment;
  segment.backing_ = OnHugetlbfs(fd.get()) ? "state-file-hugetlb" : "state-file";
  segment.fd_ = std::move(fd);
  segment.data_ = data;
  segment.size_ = size;
  segment.mapped_size_ = mapped;
  segment.can_shrink_ = true;
  return segment;
}

absl::StatusOr<std::optional<FileExcess>> CutFileBackTo(int fd,
                                                        uint64_t mapped_size) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, "fstat");
  const FileExcess held{static_cast<uint64_t>(std::max<off_t>(st.st_size, 0)),
                        static_cast<uint64_t>(st.st_blocks) * 512};
  if (held.size <= mapped_size && held.allocated <= mapped_size) {
    return std::nullopt;
  }
  // Also when the size is right: truncating to the same size frees what
  // was allocated past the end.
  if (::ftruncate(fd, static_cast<off_t>(mapped_size)) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cutting a ", held.size, "-byte file back to ",
                            mapped_size, " bytes"));
  }
  if (::fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, "fstat");
  if (static_cast<uint64_t>(st.st_size) != mapped_size ||
      static_cast<uint64_t>(st.st_blocks) * 512 > mapped_size) {
    return absl::InternalError(absl::StrCat(
        "a file cut back to ", mapped_size, " bytes still holds ", st.st_size,
        " bytes (", static_cast<uint64_t>(st.st_blocks) * 512, " allocated)"));
  }
  return held;
}

absl::StatusOr<ShmSegment> ShmSegment::OpenFile(int dir_fd,
                                                const std::string& name,
                                                uint64_t size,
                                                std::string* cut) {
  // O_NONBLOCK: opening a FIFO or device someone put there must not hang.
  UniqueFd fd(::openat(dir_fd, name.c_str(),
                       O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", name));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat of ", name));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, " is not a regular file"));
  }
  if (st.st_uid != ::geteuid() || st.st_nlink != 1 ||
      (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is not as rdmad made it (owner uid %d, %d links, mode %04o; "
        "expected uid %d, 1 link, mode 0600)",
        name, st.st_uid, st.st_nlink, st.st_mode & 07777, ::geteuid()));
  }
  RDMAD_ASSIGN_OR_RETURN(ShmSegment segment,
                         MapExisting(std::move(fd), size, name));
  // Whoever held the descriptor could make the file larger than the region
  // (a state-directory file cannot be sealed): what lies past the mapping
  // is no part of the region, and nobody is charged for it.
  auto excess = CutFileBackTo(segment.fd(), segment.mapped_size());
  if (!excess.ok()) {
    return absl::Status(excess.status().code(),
                        absl::StrCat(name, ": ", excess.status().message()));
  }
  if (excess->has_value() && cut != nullptr) {
    *cut = absl::StrCat(name, " had grown to ", HumanSize((*excess)->size),
                        " holding ", HumanSize((*excess)->allocated),
                        " of memory; cut back to the region's ",
                        HumanSize(segment.mapped_size()));
  }
  segment.backing_ =
      OnHugetlbfs(segment.fd()) ? "state-file-hugetlb" : "state-file";
  segment.can_shrink_ = true;
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::AdoptKept(UniqueFd memfd,
                                                 uint64_t size) {
  struct stat st;
  if (::fstat(memfd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "fstat of a kept memfd");
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError("the kept descriptor is not a memfd");
  }
  const int seals = ::fcntl(memfd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) !=
                       (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return absl::FailedPreconditionError(
        "the kept descriptor is not a memfd sealed against shrinking and "
        "growing, as rdmad makes them");
  }
  RDMAD_ASSIGN_OR_RETURN(ShmSegment segment,
                         MapExisting(std::move(memfd), size, "the kept memfd"));
  segment.backing_ = OnHugetlbfs(segment.fd()) ? "memfd-hugetlb" : "memfd";
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::MapExisting(UniqueFd fd, uint64_t size,
                                                   const std::string& what) {
  if (size == 0 || size > kMaxSegmentSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("size ", size, " of ", what, " is out of range"));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat of ", what));
  }
  const uint64_t unit =
      st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : PageSize();
  const uint64_t mapped = RoundUp(size, unit);
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) < mapped) {
    return absl::DataLossError(absl::StrCat(
        what, " holds ", st.st_size, " bytes but the region needs ", mapped,
        " (", size, " rounded up to ", unit, "): it was truncated"));
  }
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fd.get(), 0);
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("mmap of ", mapped, " bytes of ",
                                            what));
  }
  ShmSegment segment;
  segment.fd_ = std::move(fd);
  segment.data_ = data;
  segment.size_ = size;
  segment.mapped_size_ = mapped;
  return segment;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_size_ = std::exchange(other.mapped_size_, 0);
    backing_ = std::move(other.backing_);
    can_shrink_ = std::exchange(other.can_shrink_, false);
    map_base_ = std::exchange(other.map_base_, nullptr);
    map_length_ = std::exchange(other.map_length_, 0);
    dmabuf_ = std::exchange(other.dmabuf_, false);
    dmabuf_offset_ = std::exchange(other.dmabuf_offset_, 0);
    cpu_map_error_ = std::move(other.cpu_map_error_);
    other.cpu_map_error_.clear();
  }
  return *this;
}

ShmSegment::~ShmSegment() { Release(); }

void ShmSegment::Release() {
  if (map_base_ != nullptr) {
    ::munmap(map_base_, map_length_);
  } else if (data_ != nullptr) {
    ::munmap(data_, mapped_size_);
  }
  data_ = nullptr;
  map_base_ = nullptr;
  fd_.reset();
}

}  // namespace rdmad::core
