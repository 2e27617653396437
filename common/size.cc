#include "common/size.h"

#include <cstdio>
#include <iterator>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace rdmad {
namespace {

struct Suffix {
  absl::string_view text;
  uint64_t multiplier;
};

constexpr uint64_t kKi = 1024;
constexpr Suffix kSuffixes[] = {
    {"", 1},
    {"b", 1},
    {"k", kKi},
    {"ki", kKi},
    {"kib", kKi},
    {"m", kKi * kKi},
    {"mi", kKi * kKi},
    {"mib", kKi * kKi},
    {"g", kKi * kKi * kKi},
    {"gi", kKi * kKi * kKi},
    {"gib", kKi * kKi * kKi},
    {"t", kKi * kKi * kKi * kKi},
    {"ti", kKi * kKi * kKi * kKi},
    {"tib", kKi * kKi * kKi * kKi},
    {"kb", 1000ULL},
    {"mb", 1000ULL * 1000},
    {"gb", 1000ULL * 1000 * 1000},
    {"tb", 1000ULL * 1000 * 1000 * 1000},
};

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  const absl::string_view original = text;
  text = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < text.size() && absl::ascii_isdigit(text[digits])) ++digits;
  if (digits == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid size '", original,
        "': expected a number with an optional suffix, e.g. 4096, 64K, 1Mi, 1G"));
  }
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", original, "' does not fit in 64 bits"));
    }
    value = value * 10 + digit;
  }
  const std::string suffix = absl::AsciiStrToLower(text.substr(digits));
  for (const Suffix& s : kSuffixes) {
    if (suffix != s.text) continue;
    if (value > std::numeric_limits<uint64_t>::max() / s.multiplier) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", original, "' does not fit in 64 bits"));
    }
    return value * s.multiplier;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid size suffix '", text.substr(digits), "' in '", original,
      "': use K, M, G, T (x1024, also Ki/KiB) or KB, MB, GB, TB (x1000)"));
}

std::string FormatSize(uint64_t bytes) {
  constexpr absl::string_view kNames[] = {"Ti", "Gi", "Mi", "Ki"};
  constexpr uint64_t kUnits[] = {kKi * kKi * kKi * kKi, kKi * kKi * kKi,
                                 kKi * kKi, kKi};
  for (size_t i = 0; i < 4; ++i) {
    if (bytes >= kUnits[i] && bytes % kUnits[i] == 0) {
      return absl::StrCat(bytes / kUnits[i], kNames[i]);
    }
  }
  return absl::StrCat(bytes);
}

std::string HumanSize(uint64_t bytes) {
  constexpr absl::string_view kUnits[] = {"KiB", "MiB", "GiB",
                                          "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  size_t unit = 0;
  uint64_t scale = 1024;
  while (unit + 1 < std::size(kUnits) && bytes / 1024 >= scale) {
    scale *= 1024;
    ++unit;
  }
  if (bytes % scale == 0) return absl::StrCat(bytes / scale, " ", kUnits[unit]);
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f",
                static_cast<double>(bytes) / static_cast<double>(scale));
  return absl::StrCat(text, " ", kUnits[unit]);
}

}  // namespace rdmad
