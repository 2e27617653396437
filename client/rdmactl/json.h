// Json: the one JSON dialect of rdmactl --json.
//
// Every command builds its answer as a Json value and prints it with Dump(),
// so all of them agree: counts, sizes and ids are JSON numbers (never
// strings), enumerations use the short names of the tables ("tcp", "rw",
// "daemon"), missing values are null, and objects keep their keys in the
// order they were set. A 64-bit random identifier (an incarnation) is not a
// count: it is a "0x..." string, because JSON readers hold numbers as
// doubles and would round it.
//
// Example:
//   Json region = Json::Object();
//   region.Set("name", "kv").Set("size", uint64_t{4096}).Set("export", "rw");
//   std::fputs(region.Dump().c_str(), stdout);
//   // {
//   //   "name": "kv",
//   //   "size": 4096,
//   //   "export": "rw"
//   // }
//
// A value type; thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_JSON_H_
#define RDMAD_CLIENT_RDMACTL_JSON_H_

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace rdmad::rdmactl {

class Json {
 public:
  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : kind_(Kind::kBool), bool_(value) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Json(T value) {
    if constexpr (std::is_signed_v<T>) {
      kind_ = Kind::kInt;
      int_ = value;
    } else {
      kind_ = Kind::kUint;
      uint_ = value;
    }
  }
  // Non-finite values are printed as null.
  Json(double value) : kind_(Kind::kDouble), double_(value) {}
  Json(std::string value) : kind_(Kind::kString), text_(std::move(value)) {}
  Json(absl::string_view value) : Json(std::string(value)) {}
  Json(const char* value) : Json(std::string(value)) {}
  template <typename T>
  Json(const std::optional<T>& value) {
    if (value.has_value()) *this = Json(*value);
  }

  static Json Object();
  static Json Array();

  // Objects: sets `key` (appended; set each key once). Returns *this.
  Json& Set(std::string key, Json value);
  // Arrays: appends. Returns *this.
  Json& Push(Json value);

  // Indented by two spaces, ending in a newline.
  std::string Dump() const;

 private:
  enum class Kind { kNull, kBool, kInt, kUint, kDouble, kString, kArray,
                    kObject };
  void DumpTo(std::string& out, int depth) const;

  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  uint64_t uint_ = 0;
  double double_ = 0;
  std::string text_;
  std::vector<Json> items_;          // kArray; kObject values
  std::vector<std::string> keys_;    // kObject
};

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_JSON_H_
