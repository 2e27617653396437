// Human-readable byte sizes: "4K", "1M", "1Gi", "64KiB", "1MB", "1.5G", "4096".
//
// Binary suffixes (K, M, G, T, with or without "i" and "B") are powers of
// 1024, as in dd(1) and truncate(1); the SI forms "KB", "MB", "GB", "TB" are
// powers of 1000, also as in dd(1). Suffixes are case-insensitive.
#ifndef RDMAD_COMMON_SIZE_H_
#define RDMAD_COMMON_SIZE_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace rdmad {

// Parses a non-negative size; a decimal fraction is accepted where it makes
// a whole number of bytes ("1.5M", "0.5K"; not "1.5" or "0.3K"). Errors
// (INVALID_ARGUMENT) for empty input, signs, fractions of a byte, unknown
// suffixes and values that overflow 64 bits.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// Formats bytes with a binary suffix when exact ("64Ki", "1Mi"), else bytes:
// a size ParseSize reads back exactly (for command lines in messages).
std::string FormatSize(uint64_t bytes);

// Binary units with at most one decimal, for people: "0 B", "512 B",
// "4 KiB", "1.5 MiB", "16 EiB". Exact multiples print without a decimal.
std::string HumanSize(uint64_t bytes);

// A count of bytes for messages, exact and in one style: "1 B", "512 B",
// "4 KiB", "1.5 MiB" where the binary unit says it exactly (at most one
// decimal), else the bytes ("1048577 B").
std::string ByteCount(uint64_t bytes);

// Checks that [offset, offset+length) lies inside a region of `size` bytes
// without computing offset+length (which may overflow). Zero length is
// rejected: every transfer moves at least one byte.
// Inline: the data path checks two ranges per operation.
inline bool RangeInside(uint64_t size, uint64_t offset, uint64_t length) {
  return length > 0 && offset <= size && length <= size - offset;
}

}  // namespace rdmad

#endif  // RDMAD_COMMON_SIZE_H_
