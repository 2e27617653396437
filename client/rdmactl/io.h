// Files for rdmactl's data commands: a path, or "-" for stdin/stdout.
//
// Example:
//   auto in = File::OpenForRead("-");           // stdin
//   auto n = in->ReadFull(buffer, sizeof(buffer));
//
// A File is move-only and used by one thread. Errors carry errno's code and
// name the file.
#ifndef RDMAD_CLIENT_RDMACTL_IO_H_
#define RDMAD_CLIENT_RDMACTL_IO_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rdmad::rdmactl {

class File {
 public:
  // "-" is stdin. Fails (naming the path) if the file cannot be opened.
  static absl::StatusOr<File> OpenForRead(const std::string& path);
  // "-" is stdout; otherwise creates or truncates the file (mode 0644).
  static absl::StatusOr<File> OpenForWrite(const std::string& path);

  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();  // closes a file rdmactl opened (never stdin/stdout)

  // "stdin", "stdout" or the path.
  const std::string& name() const { return name_; }
  // The size of a regular file; nullopt for pipes, terminals, sockets.
  std::optional<uint64_t> RegularSize() const;

  // Reads until `size` bytes or end of file; returns the bytes read.
  absl::StatusOr<size_t> ReadFull(char* data, size_t size);
  absl::Status WriteAll(const char* data, size_t size);
  // Closes now, reporting errors (a full disk may only show here). For
  // stdout, flushes nothing (writes are unbuffered) and keeps it open.
  absl::Status Close();

 private:
  File(int fd, std::string name, bool owned)
      : fd_(fd), name_(std::move(name)), owned_(owned) {}

  int fd_ = -1;
  std::string name_;
  bool owned_ = false;
};

// Reads `file` until end of file or until more than `limit` bytes came in.
// Returns what was read (at most limit + 1 bytes, so the caller can tell
// "exactly limit" from "too much").
absl::StatusOr<std::string> ReadAtMost(File& file, uint64_t limit);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_IO_H_
