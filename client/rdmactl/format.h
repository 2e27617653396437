// Text building blocks of rdmactl's output: aligned tables, "key: value"
// blocks, human-readable sizes and durations, and the one error format.
//
// Example:
//   Table table({"ID", "NAME", "SIZE"});
//   table.AddRow({"1", "cache", HumanSize(1 << 20)});
//   std::fputs(table.Render().c_str(), stdout);
//   //  ID  NAME   SIZE
//   //  1   cache  1 MiB
//
// All functions are pure and thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_FORMAT_H_
#define RDMAD_CLIENT_RDMACTL_FORMAT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/size.h"

namespace rdmad::rdmactl {

// A table of left-aligned text columns separated by two spaces, with a
// header row. Rows shorter than the header are padded with empty cells;
// extra cells are dropped. Lines carry no trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> headers);

  void AddRow(std::vector<std::string> cells);
  // Right-aligns column `column` (for numbers).
  void AlignRight(size_t column);
  bool empty() const { return rows_.empty(); }

  // Every line is prefixed with `indent`.
  std::string Render(absl::string_view indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// "key: value" lines with the values aligned, e.g. for `rdmactl status`.
std::string RenderFields(
    const std::vector<std::pair<std::string, std::string>>& fields,
    absl::string_view indent = "");

// HumanSize (common/size.h): "4 KiB", "1.5 MiB".
using ::rdmad::HumanSize;

// "450ms", "12s", "5m 3s", "2h 0m 7s", "3d 4h 5m"; negative as "0s".
std::string HumanDuration(absl::Duration duration);

// The status of a failed step, as rdmactl reports it: same code, message
// "<what>: <CODE>: <message>", e.g. "alloc r1: ALREADY_EXISTS: region 'r1'
// exists". main() prints it as "rdmactl: " + message.
absl::Status Failed(absl::string_view what, const absl::Status& cause);

// rdmactl's exit status for a failure with `code`, one per class of error
// so that scripts can tell them apart (docs/man/rdmactl.8, EXIT STATUS):
//   0 OK; 1 other failure (internal, unknown...); 2 usage error;
//   3 UNAVAILABLE (the daemon or a peer cannot be reached);
//   4 NOT_FOUND; 5 PERMISSION_DENIED or UNAUTHENTICATED;
//   6 ALREADY_EXISTS; 7 INVALID_ARGUMENT or OUT_OF_RANGE;
//   8 RESOURCE_EXHAUSTED; 9 DEADLINE_EXCEEDED (--timeout passed);
//   10 FAILED_PRECONDITION or ABORTED (the state forbids it now, e.g. not
//   exported, or the daemon restarted).
int ExitStatusFor(absl::StatusCode code);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_FORMAT_H_
