#include "client/rdmactl/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rdmad::rdmactl {

absl::StatusOr<File> File::OpenForRead(const std::string& path) {
  if (path == "-") return File(STDIN_FILENO, "stdin", false);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  File file(fd, path, true);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a directory, not a file"));
  }
  return file;
}

absl::StatusOr<File> File::OpenForWrite(const std::string& path) {
  if (path == "-") return File(STDOUT_FILENO, "stdout", false);
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  return File(fd, path, true);
}

File::File(File&& other) noexcept { *this = std::move(other); }

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    (void)Close();
    fd_ = std::exchange(other.fd_, -1);
    name_ = std::move(other.name_);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

File::~File() { (void)Close(); }

std::optional<uint64_t> File::RegularSize() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::StatusOr<size_t> File::ReadFull(char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd_, data + done, size - done);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", name_));
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

absl::Status File::WriteAll(const char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("write ", name_));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status File::Close() {
  if (fd_ < 0) return absl::OkStatus();
  const int fd = std::exchange(fd_, -1);
  if (!owned_) return absl::OkStatus();
  if (::close(fd) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("close ", name_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAtMost(File& file, uint64_t limit) {
  constexpr size_t kPiece = 1 << 20;
  std::string data;
  for (;;) {
    if (data.size() > limit) return data;
    // One byte past the limit, written without overflowing limit + 1.
    const uint64_t left = limit - data.size();
    const size_t want = left >= kPiece ? kPiece : static_cast<size_t>(left) + 1;
    const size_t old = data.size();
    data.resize(old + want);
    auto n = file.ReadFull(data.data() + old, want);
    if (!n.ok()) return n.status();
    data.resize(old + *n);
    if (*n < want) return data;
  }
}

}  // namespace rdmad::rdmactl
