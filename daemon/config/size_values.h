// Sizes in the config file: every integer field with the word "bytes" in
// its name (max_pinned_bytes, quota_pinned_bytes_per_uid, ...) takes a
// plain number of bytes or a size string ("4G", "512Mi", "1.5G", quoted or
// not), as rdmactl does on its command line.
//
// Text-format protobuf has no such type: `max_pinned_bytes: 4G` reads as
// the number 4 followed by a field named "G". So the text is rewritten
// before it is parsed, size strings of those fields turned into numbers;
// nothing else in the text changes, and line numbers stay as they were.
//
// Example:
//   auto text = config::ExpandSizeValues("max_pinned_bytes: 4G\n",
//                                        *v1::DaemonConfig::descriptor(),
//                                        "rdmad.conf");
//   // *text == "max_pinned_bytes: 4294967296\n"
#ifndef RDMAD_DAEMON_CONFIG_SIZE_VALUES_H_
#define RDMAD_DAEMON_CONFIG_SIZE_VALUES_H_

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"

namespace rdmad::config {

// True for the fields that take sizes: integers with the word "bytes" in
// their name.
bool IsSizeField(const google::protobuf::FieldDescriptor& field);

// Returns `text` with the size strings of `message`'s size fields replaced
// by their number of bytes. INVALID_ARGUMENT "SOURCE:LINE:COLUMN: field
// 'NAME': ..." for a value that is not a size.
absl::StatusOr<std::string> ExpandSizeValues(
    const std::string& text, const google::protobuf::Descriptor& message,
    const std::string& source);

}  // namespace rdmad::config

#endif  // RDMAD_DAEMON_CONFIG_SIZE_VALUES_H_
