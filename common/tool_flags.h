// ToolFlags: the command line of a benchmark or test-support program:
// "--name VALUE" options and bare switches, each bound to a variable that
// holds its default. Parse() fills them; on anything it cannot take it
// prints what was wrong and the usage line to stderr and exits 2.
//
//   Options o;
//   ToolFlags flags("rdmad_shm_pingpong", "[--iters N] [--json]");
//   flags.Number("--iters", &o.iters, 1).Switch("--json", &o.json);
//   flags.Parse(argc, argv);
//
// Header-only, for programs that link nothing else of rdmad (Bytes() alone
// needs rdmad_common, for ParseSize). rdmactl has its own parser: it
// documents and completes its commands.
#ifndef RDMAD_COMMON_TOOL_FLAGS_H_
#define RDMAD_COMMON_TOOL_FLAGS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/size.h"

namespace rdmad {

class ToolFlags {
 public:
  // `usage`: what follows the program's name on its usage line.
  ToolFlags(std::string program, std::string usage)
      : program_(std::move(program)), usage_(std::move(usage)) {}

  // --name TEXT.
  ToolFlags& Text(std::string name, std::string* out) {
    return Custom(std::move(name), [out](const std::string& value) {
      *out = value;
      return true;
    });
  }
  // --name A,B,C (empty items skipped).
  ToolFlags& List(std::string name, std::vector<std::string>* out) {
    return Custom(std::move(name), [out](const std::string& value) {
      *out = absl::StrSplit(value, ',', absl::SkipEmpty());
      return true;
    });
  }
  // --name N, an integer in [min, max].
  template <typename Int>
  ToolFlags& Number(std::string name, Int* out, Int min = 0,
                    Int max = std::numeric_limits<Int>::max()) {
    return Custom(std::move(name), [out, min, max](const std::string& value) {
      Int n{};
      if (!absl::SimpleAtoi(value, &n) || n < min || n > max) return false;
      *out = n;
      return true;
    });
  }
  // --name SIZE ("4096", "64K", "1G"), above 0.
  ToolFlags& Bytes(std::string name, uint64_t* out) {
    return Custom(std::move(name), [out](const std::string& value) {
      absl::StatusOr<uint64_t> size = ParseSize(value);
      if (!size.ok() || *size == 0) return false;
      *out = *size;
      return true;
    });
  }
  // --name VALUE read by `take`, which returns false for a bad value.
  ToolFlags& Custom(std::string name,
                    std::function<bool(const std::string&)> take) {
    options_.push_back({std::move(name), std::move(take)});
    return *this;
  }
  // --name, no value: sets `*out` to `value`.
  ToolFlags& Switch(std::string name, bool* out, bool value = true) {
    switches_.push_back({std::move(name), [out, value] { *out = value; }});
    return *this;
  }

  // Reads argv[first..argc).
  void Parse(int argc, char** argv, int first = 1) const {
    for (int i = first; i < argc; ++i) {
      const std::string flag = argv[i];
      if (const Switchable* s = FindSwitch(flag)) {
        s->set();
        continue;
      }
      const Option* option = FindOption(flag);
      if (option == nullptr) Fail("unknown argument " + flag);
      if (i + 1 >= argc) Fail(flag + " needs a value");
      const std::string value = argv[++i];
      if (!option->take(value)) Fail("bad value for " + flag + ": " + value);
    }
  }

  [[noreturn]] void Fail(const std::string& why) const {
    std::fprintf(stderr, "%s: %s\nusage: %s %s\n", program_.c_str(),
                 why.c_str(), program_.c_str(), usage_.c_str());
    std::exit(2);
  }

 private:
  struct Option {
    std::string name;
    std::function<bool(const std::string&)> take;
  };
  struct Switchable {
    std::string name;
    std::function<void()> set;
  };
  const Option* FindOption(const std::string& name) const {
    for (const Option& o : options_) {
      if (o.name == name) return &o;
    }
    return nullptr;
  }
  const Switchable* FindSwitch(const std::string& name) const {
    for (const Switchable& s : switches_) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  std::string program_;
  std::string usage_;
  std::vector<Option> options_;
  std::vector<Switchable> switches_;
};

}  // namespace rdmad

#endif  // RDMAD_COMMON_TOOL_FLAGS_H_
