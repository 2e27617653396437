#include "daemon/core/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

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

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_size_ = std::exchange(other.mapped_size_, 0);
    backing_ = std::move(other.backing_);
  }
  return *this;
}

ShmSegment::~ShmSegment() { Release(); }

void ShmSegment::Release() {
  if (data_ != nullptr) ::munmap(data_, mapped_size_);
  data_ = nullptr;
  fd_.reset();
}

}  // namespace rdmad::core
