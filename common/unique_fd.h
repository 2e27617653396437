// UniqueFd: the single owner of a file descriptor.
#ifndef RDMAD_COMMON_UNIQUE_FD_H_
#define RDMAD_COMMON_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace rdmad {

// Move-only owner of a file descriptor; closes it on destruction.
// Not thread-safe: like any value, one thread at a time.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }

  // Closes the current descriptor (if any) and takes ownership of `fd`.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace rdmad

#endif  // RDMAD_COMMON_UNIQUE_FD_H_
