#include "client/rdmactl/json.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rdmad::rdmactl {

Json Json::Object() {
  Json json;
  json.kind_ = Kind::kObject;
  return json;
}

Json Json::Array() {
  Json json;
  json.kind_ = Kind::kArray;
  return json;
}

Json& Json::Set(std::string key, Json value) {
  keys_.push_back(std::move(key));
  items_.push_back(std::move(value));
  return *this;
}

Json& Json::Push(Json value) {
  items_.push_back(std::move(value));
  return *this;
}

std::string Json::Dump() const {
  std::string out;
  DumpTo(out, 0);
  out += '\n';
  return out;
}

void Json::DumpTo(std::string& out, int depth) const {
  const std::string indent(2 * (depth + 1), ' ');
  switch (kind_) {
    case Kind::kNull:
      out += "null";
      return;
    case Kind::kBool:
      out += bool_ ? "true" : "false";
      return;
    case Kind::kInt:
      absl::StrAppend(&out, int_);
      return;
    case Kind::kUint:
      absl::StrAppend(&out, uint_);
      return;
    case Kind::kDouble:
      if (!std::isfinite(double_)) {
        out += "null";
      } else {
        // Fixed point (no exponent, which some readers mishandle), six
        // decimals at most: plenty for seconds, rates and latencies.
        std::string text = absl::StrFormat("%.6f", double_);
        while (text.back() == '0') text.pop_back();
        if (text.back() == '.') text.pop_back();
        if (text == "-0") text.erase(0, 1);  // "0"
        out += text;
      }
      return;
    case Kind::kString:
      out += JsonQuote(text_);
      return;
    case Kind::kArray:
    case Kind::kObject: {
      const bool object = kind_ == Kind::kObject;
      if (items_.empty()) {
        out += object ? "{}" : "[]";
        return;
      }
      out += object ? "{\n" : "[\n";
      for (size_t i = 0; i < items_.size(); ++i) {
        out += indent;
        if (object) absl::StrAppend(&out, JsonQuote(keys_[i]), ": ");
        items_[i].DumpTo(out, depth + 1);
        out += i + 1 < items_.size() ? ",\n" : "\n";
      }
      out += std::string(2 * depth, ' ');
      out += object ? '}' : ']';
      return;
    }
  }
}

std::string JsonQuote(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace rdmad::rdmactl
