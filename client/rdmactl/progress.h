// Progress of a long rdmactl command: one line on stderr, redrawn in place,
// only when stderr is a terminal, so that scripts and logs see nothing.
//
// Example:
//   ProgressLine progress(ProgressLine::StderrIsTerminal());
//   progress.Show(TransferProgressText("put kv", done, total, elapsed));
//   ...
//   progress.Clear();  // also done by the destructor
//
// Not thread-safe: one thread shows it.
#ifndef RDMAD_CLIENT_RDMACTL_PROGRESS_H_
#define RDMAD_CLIENT_RDMACTL_PROGRESS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rdmad::rdmactl {

class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  static bool StderrIsTerminal();

  bool enabled() const { return enabled_; }
  // Replaces the line with `text`; nothing when not enabled.
  void Show(absl::string_view text);
  // Erases the line, so that what follows starts on a clean one.
  void Clear();

 private:
  const bool enabled_;
  bool shown_ = false;
};

// "put kv: 640 MiB of 1.5 GiB (41%), 210.3 MB/s" (MB = 10^6 bytes), or
// without a known total "get kv: 640 MiB, 210.3 MB/s".
std::string TransferProgressText(absl::string_view label, uint64_t done,
                                 std::optional<uint64_t> total,
                                 absl::Duration elapsed);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_PROGRESS_H_
