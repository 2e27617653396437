#include "client/rdmactl/progress.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"

namespace rdmad::rdmactl {

bool ProgressLine::StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

void ProgressLine::Show(absl::string_view text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%.*s", static_cast<int>(text.size()),
               text.data());
  std::fflush(stderr);
  shown_ = true;
}

void ProgressLine::Clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  shown_ = false;
}

std::string TransferProgressText(absl::string_view label, uint64_t done,
                                 std::optional<uint64_t> total,
                                 absl::Duration elapsed) {
  std::string text = absl::StrCat(label, ": ", HumanSize(done));
  if (total.has_value()) {
    const double percent =
        *total == 0 ? 100.0
                    : 100.0 * static_cast<double>(done) /
                          static_cast<double>(*total);
    absl::StrAppend(&text, " of ", HumanSize(*total),
                    absl::StrFormat(" (%.0f%%)", percent));
  }
  const double seconds = absl::ToDoubleSeconds(elapsed);
  if (seconds > 0) {
    absl::StrAppend(&text, absl::StrFormat(", %.1f MB/s",
                                           static_cast<double>(done) /
                                               seconds / 1e6));
  }
  return text;
}

}  // namespace rdmad::rdmactl
