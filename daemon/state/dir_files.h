// Small-file chores inside a directory held open by descriptor, for the
// state directory (StateDirKeeper): every name is resolved against the
// directory's descriptor, never a path, so that a directory moved or
// replaced under the daemon is not followed.
//
// Thread-compatible: plain functions on descriptors the caller owns.
#ifndef RDMAD_DAEMON_STATE_DIR_FILES_H_
#define RDMAD_DAEMON_STATE_DIR_FILES_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::state {

// Writes all of `text` to `fd`, across short writes and EINTR.
absl::Status WriteAll(int fd, absl::string_view text);

// The names in a directory (without "." and ".."), sorted, read through a
// duplicate of `dir_fd` so that the caller's descriptor stays usable.
absl::StatusOr<std::vector<std::string>> ListDir(int dir_fd);

// The text of the regular file `name` in the directory, at most `most` + 1
// bytes (so that a caller sees a file too long for it). A symbolic link, a
// FIFO or a directory is DATA_LOSS or an errno status, never followed or
// waited on.
absl::StatusOr<std::string> ReadSmallFile(int dir_fd, const std::string& name,
                                          size_t most);

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_DIR_FILES_H_
