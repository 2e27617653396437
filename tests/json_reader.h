// JsonReader: a small JSON parser for tests that check what rdmactl prints.
//
// Why not protobuf's google.protobuf.Struct: its map lookups crash in the
// ThreadSanitizer build (the Debian protobuf library is not instrumented and
// its inline Map code disagrees with it), and the checks here care about
// exactly what JSON says: a number is a number, a string a string.
//
// Example:
//   auto json = JsonValue::Parse(R"({"size": 4096, "export": "rw"})");
//   ASSERT_TRUE(json.ok());
//   EXPECT_TRUE((*json)["size"].is_number());
//   EXPECT_EQ((*json)["export"].string(), "rw");
//
// Header-only; a value type.
#ifndef RDMAD_TESTS_JSON_READER_H_
#define RDMAD_TESTS_JSON_READER_H_

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rdmad::testing {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  static absl::StatusOr<JsonValue> Parse(absl::string_view text) {
    size_t at = 0;
    JsonValue value;
    if (!Read(text, at, value, 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("not JSON at byte ", at, ": ", text.substr(0, 200)));
    }
    SkipSpace(text, at);
    if (at != text.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("trailing text at byte ", at));
    }
    return value;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  double number() const { return number_; }
  bool boolean() const { return boolean_; }
  const std::string& string() const { return text_; }
  const std::vector<JsonValue>& array() const { return items_; }
  const std::map<std::string, JsonValue>& object() const { return fields_; }
  bool has(const std::string& key) const { return fields_.count(key) > 0; }

  // The field `key` of an object; null if there is none.
  const JsonValue& operator[](const std::string& key) const {
    static const JsonValue kNull;
    auto it = fields_.find(key);
    return it == fields_.end() ? kNull : it->second;
  }
  // Element `i` of an array; null if there is none.
  const JsonValue& operator[](size_t i) const {
    static const JsonValue kNull;
    return i < items_.size() ? items_[i] : kNull;
  }

 private:
  static void SkipSpace(absl::string_view s, size_t& at) {
    while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) {
      ++at;
    }
  }

  static bool ReadString(absl::string_view s, size_t& at, std::string& out) {
    if (at >= s.size() || s[at] != '"') return false;
    ++at;
    while (at < s.size() && s[at] != '"') {
      char c = s[at++];
      if (c == '\\') {
        if (at >= s.size()) return false;
        const char e = s[at++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'u': {
            if (at + 4 > s.size()) return false;
            const long code =
                std::strtol(std::string(s.substr(at, 4)).c_str(), nullptr, 16);
            at += 4;
            // Tests see ASCII; anything else stands as '?'.
            c = code < 0x80 ? static_cast<char>(code) : '?';
            break;
          }
          default: c = e;  // \" \\ \/
        }
      }
      out += c;
    }
    if (at >= s.size()) return false;
    ++at;  // closing quote
    return true;
  }

  static bool Read(absl::string_view s, size_t& at, JsonValue& out,
                   int depth) {
    if (depth > 64) return false;
    SkipSpace(s, at);
    if (at >= s.size()) return false;
    const char c = s[at];
    if (c == '{') {
      out.kind_ = Kind::kObject;
      ++at;
      SkipSpace(s, at);
      if (at < s.size() && s[at] == '}') return ++at, true;
      for (;;) {
        SkipSpace(s, at);
        std::string key;
        if (!ReadString(s, at, key)) return false;
        SkipSpace(s, at);
        if (at >= s.size() || s[at++] != ':') return false;
        JsonValue value;
        if (!Read(s, at, value, depth + 1)) return false;
        out.fields_[key] = std::move(value);
        SkipSpace(s, at);
        if (at >= s.size()) return false;
        if (s[at] == '}') return ++at, true;
        if (s[at++] != ',') return false;
      }
    }
    if (c == '[') {
      out.kind_ = Kind::kArray;
      ++at;
      SkipSpace(s, at);
      if (at < s.size() && s[at] == ']') return ++at, true;
      for (;;) {
        JsonValue value;
        if (!Read(s, at, value, depth + 1)) return false;
        out.items_.push_back(std::move(value));
        SkipSpace(s, at);
        if (at >= s.size()) return false;
        if (s[at] == ']') return ++at, true;
        if (s[at++] != ',') return false;
      }
    }
    if (c == '"') {
      out.kind_ = Kind::kString;
      return ReadString(s, at, out.text_);
    }
    for (const auto& [word, kind, value] :
         {std::tuple{"null", Kind::kNull, false},
          std::tuple{"true", Kind::kBool, true},
          std::tuple{"false", Kind::kBool, false}}) {
      if (s.substr(at, std::strlen(word)) == word) {
        out.kind_ = kind;
        out.boolean_ = value;
        at += std::strlen(word);
        return true;
      }
    }
    // A number: what strtod takes, starting with a digit or '-'.
    if (c != '-' && !std::isdigit(static_cast<unsigned char>(c))) return false;
    const std::string rest(s.substr(at, 64));
    char* end = nullptr;
    out.number_ = std::strtod(rest.c_str(), &end);
    if (end == rest.c_str()) return false;
    out.kind_ = Kind::kNumber;
    at += static_cast<size_t>(end - rest.c_str());
    return true;
  }

  Kind kind_ = Kind::kNull;
  bool boolean_ = false;
  double number_ = 0;
  std::string text_;
  std::vector<JsonValue> items_;
  std::map<std::string, JsonValue> fields_;
};

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_JSON_READER_H_
