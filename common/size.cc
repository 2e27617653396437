#include "common/size.h"

#include <cstdio>
#include <iterator>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

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
        "': expected a number with an optional suffix, e.g. 4096, 64K, 1Mi, "
        "1.5G"));
  }
  // The number as an exact fraction, whole / scale: "1.5" is 15 / 10. The
  // whole part fits in 64 bits and there are at most 18 decimals, so 128
  // bits hold it; the multiplication by the suffix is checked below.
  using Wide = unsigned __int128;
  Wide whole = 0;
  Wide scale = 1;
  size_t end = digits;
  for (size_t i = 0; i < digits; ++i) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > std::numeric_limits<uint64_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", original, "' does not fit in 64 bits"));
    }
  }
  if (end < text.size() && text[end] == '.') {
    ++end;
    const size_t first = end;
    while (end < text.size() && absl::ascii_isdigit(text[end])) {
      if (end - first >= 18) {
        return absl::InvalidArgumentError(absl::StrCat(
            "size '", original, "' has too many decimals (at most 18)"));
      }
      whole = whole * 10 + static_cast<unsigned>(text[end] - '0');
      scale *= 10;
      ++end;
    }
    if (end == first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "invalid size '", original, "': no digits after the decimal point"));
    }
  }
  const std::string suffix = absl::AsciiStrToLower(text.substr(end));
  for (const Suffix& s : kSuffixes) {
    if (suffix != s.text) continue;
    if (whole > ~Wide{0} / s.multiplier) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", original, "' does not fit in 64 bits"));
    }
    const Wide scaled = whole * s.multiplier;
    if (scaled % scale != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "size '", original, "' is not a whole number of bytes"));
    }
    const Wide bytes = scaled / scale;
    if (bytes > std::numeric_limits<uint64_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("size '", original, "' does not fit in 64 bits"));
    }
    return static_cast<uint64_t>(bytes);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid size suffix '", text.substr(end), "' in '", original,
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

std::string ByteCount(uint64_t bytes) {
  const std::string human = HumanSize(bytes);
  // HumanSize rounds to one decimal; keep it only where it is exact.
  auto parsed = ParseSize(absl::StrReplaceAll(human, {{" ", ""}}));
  if (parsed.ok() && *parsed == bytes) return human;
  return absl::StrCat(bytes, " B");
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
