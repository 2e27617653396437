#include "client/rdmactl/args.h"

#include <grp.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/rdmactl/command_specs.h"
#include "common/region_address.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

std::string Hint(const CommandSpec* spec) {
  return spec == nullptr || spec->command == Command::kHelp
             ? std::string(" (see 'rdmactl help')")
             : absl::StrCat(" (see 'rdmactl ", spec->name, " --help')");
}

absl::Status UsageError(const CommandSpec* spec, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      spec != nullptr && spec->command != Command::kHelp
          ? absl::StrCat(spec->name, ": ")
          : std::string(),
      what, Hint(spec)));
}

// A positive whole number for option `name` (e.g. "--qd").
absl::StatusOr<uint64_t> ParseCount(absl::string_view name,
                                    absl::string_view text,
                                    absl::string_view unit) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || absl::StartsWith(text, "+")) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " '", text, "' is not a whole number: give the number of ", unit,
        ", e.g. ", name, " 4"));
  }
  if (value == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be at least 1 (the number of ", unit, ")"));
  }
  return value;
}

// Comma-separated sizes, each at least 1 byte.
absl::StatusOr<std::vector<uint64_t>> ParseSizeList(absl::string_view text) {
  std::vector<uint64_t> sizes;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sizes '", text,
          "' has an empty entry: give sizes separated by commas, e.g. "
          "8,4K,1M"));
    }
    auto size = ParseSize(item);
    if (!size.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sizes: ", size.status().message()));
    }
    if (*size == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sizes: '", item,
                       "' is 0 bytes; every transfer moves at least 1 byte"));
    }
    sizes.push_back(*size);
  }
  return sizes;
}

// "2" (seconds), "0.5" (seconds), or a Go-style duration ("500ms", "1m").
absl::StatusOr<absl::Duration> ParseBenchDuration(absl::string_view text) {
  absl::Duration duration;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    duration = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &duration)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--duration '", text,
        "' is not a duration: give seconds (2, 0.5) or e.g. 500ms, 1m"));
  }
  if (duration <= absl::ZeroDuration() ||
      duration == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--duration '", text, "' must be a positive, finite time"));
  }
  return duration;
}

absl::Status FillBench(
    const std::function<const std::string*(absl::string_view)>& option,
    BenchOptions& bench) {
  if (const std::string* peer = option("peer")) {
    if (absl::Status s = ValidatePeerAddress(*peer); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--peer: ", s.message()));
    }
    bench.peer = *peer;
  }
  if (const std::string* region = option("region")) {
    if (absl::Status s = ValidateRegionName(*region); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--region: ", s.message()));
    }
    bench.region = *region;
  }
  if (const std::string* op = option("op")) {
    const std::string lower = absl::AsciiStrToLower(*op);
    if (lower == "write") {
      bench.op = BenchOp::kWrite;
    } else if (lower == "read") {
      bench.op = BenchOp::kRead;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--op '", *op, "' is not an operation: use write or read"));
    }
  }
  if (const std::string* sizes = option("sizes")) {
    auto parsed = ParseSizeList(*sizes);
    if (!parsed.ok()) return parsed.status();
    bench.sizes = *std::move(parsed);
  }
  if (const std::string* qd = option("qd")) {
    auto parsed = ParseCount("--qd", *qd, "operations in flight");
    if (!parsed.ok()) return parsed.status();
    if (*parsed > static_cast<uint64_t>(kMaxBenchQueueDepth)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--qd ", *qd, " is too deep: at most ", kMaxBenchQueueDepth,
          " operations in flight (one thread each)"));
    }
    bench.queue_depth = static_cast<int>(*parsed);
  }
  if (const std::string* batch = option("batch")) {
    auto parsed = ParseCount("--batch", *batch, "operations per call");
    if (!parsed.ok()) return parsed.status();
    if (*parsed > static_cast<uint64_t>(kMaxBenchBatch)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--batch ", *batch, " is too large: at most ", kMaxBenchBatch,
          " operations per call"));
    }
    bench.batch = static_cast<int>(*parsed);
  }
  if (const std::string* path = option("path")) {
    if (*path == "ring") {
      bench.path = BenchPath::kRing;
    } else if (*path == "grpc") {
      bench.path = BenchPath::kGrpc;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--path '", *path, "' is not a path: use ring or grpc"));
    }
  }
  if (option("local") != nullptr) {
    if (!bench.peer.empty()) {
      return absl::InvalidArgumentError(
          "--local and --peer do not go together: --local measures this "
          "daemon's own region, without a transport");
    }
    bench.local = true;
  }
  const std::string* iters = option("iters");
  const std::string* duration = option("duration");
  if (iters != nullptr && duration != nullptr) {
    return absl::InvalidArgumentError(
        "--iters and --duration both bound a run: give one of them");
  }
  if (iters != nullptr) {
    auto parsed = ParseCount("--iters", *iters, "operations per size");
    if (!parsed.ok()) return parsed.status();
    bench.iterations = *parsed;
  }
  if (duration != nullptr) {
    auto parsed = ParseBenchDuration(*duration);
    if (!parsed.ok()) return parsed.status();
    bench.duration = *parsed;
  }
  if (const std::string* spin = option("spin")) {
    absl::Duration parsed;
    // ParseDuration takes a bare "0" (no unit) too.
    if (!absl::ParseDuration(*spin, &parsed) || parsed < absl::ZeroDuration() ||
        parsed > kMaxQueueSpin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--spin '", *spin, "' is not a spin time: give a duration from 0 to ",
          absl::FormatDuration(kMaxQueueSpin), ", e.g. 200us"));
    }
    if (bench.path != BenchPath::kRing) {
      return absl::InvalidArgumentError(
          "--spin sets how long a queue's Wait busy-polls: it applies to "
          "--path ring only");
    }
    bench.spin = parsed;
  }
  if (option("create-region") != nullptr) {
    if (!bench.peer.empty()) {
      uint64_t largest = 0;
      for (uint64_t size : bench.sizes) largest = std::max(largest, size);
      return absl::InvalidArgumentError(absl::StrCat(
          "--create-region creates the region on this daemon, so it works "
          "only without --peer; on the node of ",
          bench.peer, " run 'rdmactl alloc ", bench.region, " ",
          FormatSize(largest), " --export rw'"));
    }
    bench.create_region = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> ParseTimeout(absl::string_view text) {
  absl::Duration timeout;
  int64_t seconds = 0;
  // A bare number means seconds; otherwise Go-style durations ("500ms").
  if (absl::SimpleAtoi(text, &seconds)) {
    timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &timeout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout '", text, "' is not a duration: use e.g. 30s, 500ms, 2m"));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--timeout '", text, "' must be positive"));
  }
  return timeout;
}

absl::StatusOr<RegionOperand> ParseOperand(absl::string_view role,
                                           absl::string_view text) {
  auto region = RemoteRegion::Parse(text);
  if (!region.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(role, ": ", region.status().message()));
  }
  return RegionOperand{std::string(text), *std::move(region)};
}

absl::StatusOr<uint64_t> ParseLength(absl::string_view text) {
  auto length = ParseSize(text);
  if (!length.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--length: ", length.status().message()));
  }
  if (*length == 0) {
    return absl::InvalidArgumentError("--length must be at least 1 byte");
  }
  return *length;
}

// Fills the command-specific fields of `inv` from positional arguments and
// command options (already checked against the command's spec).
absl::Status FillCommand(const CommandSpec& spec,
                         const std::vector<std::string>& pos,
                         const std::map<std::string, std::string>& options,
                         Invocation& inv) {
  auto option = [&options](absl::string_view name) -> const std::string* {
    auto it = options.find(std::string(name));
    return it == options.end() ? nullptr : &it->second;
  };
  auto name_arg = [&inv](const std::string& text) -> absl::Status {
    absl::Status valid = ValidateRegionName(text);
    if (valid.ok()) inv.name = text;
    return valid;
  };
  switch (spec.command) {
    case Command::kHelp:
      if (!pos.empty()) {
        if (FindCommand(pos[0]) == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("no command '", pos[0], "'"));
        }
        inv.help_topic = pos[0];
      }
      return absl::OkStatus();
    case Command::kVersion:  // a global option, not a command of its own
    case Command::kStatus:
    case Command::kDevices:
    case Command::kPeers:
    case Command::kQps:
    case Command::kQueues:
      return absl::OkStatus();
    case Command::kRegions:
      if (const std::string* peer = option("peer")) {
        if (absl::Status s = ValidatePeerAddress(*peer); !s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--peer: ", s.message()));
        }
        inv.peer = *peer;
      }
      return absl::OkStatus();
    case Command::kStat: {
      auto src = ParseOperand("ADDRESS", pos[0]);
      if (!src.ok()) return src.status();
      inv.src = *std::move(src);
      return absl::OkStatus();
    }
    case Command::kChmod: {
      if (absl::Status s = name_arg(pos[0]); !s.ok()) return s;
      auto mode = ParseRegionMode(pos[1]);
      if (!mode.ok()) return mode.status();
      inv.mode = *mode;
      return absl::OkStatus();
    }
    case Command::kChgrp: {
      if (absl::Status s = name_arg(pos[0]); !s.ok()) return s;
      auto group = ParseGroup(pos[1]);
      if (!group.ok()) return group.status();
      inv.group = *group;
      return absl::OkStatus();
    }
    case Command::kLs:
      if (!pos.empty()) {
        inv.prefix = pos[0];
        if (inv.prefix.size() > kMaxRegionNameLength ||
            inv.prefix.find_first_of(":@ ") != std::string::npos) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ls: '", inv.prefix, "' is not the start of a region name"));
        }
      }
      return absl::OkStatus();
    case Command::kLookup:
      inv.fresh = option("fresh") != nullptr;
      return name_arg(pos[0]);
    case Command::kAlloc: {
      if (absl::Status s = name_arg(pos[0]); !s.ok()) return s;
      auto size = ParseSize(pos[1]);
      if (!size.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("SIZE: ", size.status().message()));
      }
      inv.size = *size;
      if (const std::string* access = option("export")) {
        auto parsed = ParseAccess(*access);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--export: ", parsed.status().message()));
        }
        inv.access = *parsed;
      }
      if (const std::string* mode = option("mode")) {
        auto bits = ParseRegionMode(*mode);
        if (!bits.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--mode: ", bits.status().message()));
        }
        inv.region_options.mode = *bits;
      }
      if (const std::string* group = option("group")) {
        auto gid = ParseGroup(*group);
        if (!gid.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--group: ", gid.status().message()));
        }
        inv.region_options.group = *gid;
      }
      return absl::OkStatus();
    }
    case Command::kFree:
    case Command::kDescriptor:
      return name_arg(pos[0]);
    case Command::kExport: {
      if (absl::Status s = name_arg(pos[0]); !s.ok()) return s;
      auto parsed = ParseAccess(pos[1]);
      if (!parsed.ok()) return parsed.status();
      inv.access = *parsed;
      if (const std::string* allow = option("allow")) {
        for (absl::string_view part : absl::StrSplit(*allow, ',')) {
          auto grant = ExportGrant::Parse(part);
          if (!grant.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("--allow: ", grant.status().message()));
          }
          inv.allow.push_back(*std::move(grant));
        }
        if (inv.access == Access::kNone) {
          return absl::InvalidArgumentError(
              "--allow needs an access to grant (r, w or rw), not none");
        }
      }
      return absl::OkStatus();
    }
    case Command::kPut: {
      inv.file = pos[0];
      auto dest = ParseOperand("DEST", pos[1]);
      if (!dest.ok()) return dest.status();
      inv.dest = *std::move(dest);
      return absl::OkStatus();
    }
    case Command::kGet: {
      auto src = ParseOperand("SRC", pos[0]);
      if (!src.ok()) return src.status();
      inv.src = *std::move(src);
      if (const std::string* length = option("length")) {
        auto parsed = ParseLength(*length);
        if (!parsed.ok()) return parsed.status();
        inv.length = *parsed;
      }
      const std::string* output = option("output");
      inv.file = output != nullptr ? *output : "-";
      if (inv.file.empty()) {
        return absl::InvalidArgumentError("-o needs a file name (or -)");
      }
      if (inv.global.json && inv.file == "-") {
        return absl::InvalidArgumentError(
            "with --json the report goes to stdout: write the data to a file "
            "with -o FILE");
      }
      return absl::OkStatus();
    }
    case Command::kCopy: {
      auto src = ParseOperand("SRC", pos[0]);
      if (!src.ok()) return src.status();
      auto dest = ParseOperand("DEST", pos[1]);
      if (!dest.ok()) return dest.status();
      inv.src = *std::move(src);
      inv.dest = *std::move(dest);
      if (!inv.src.is_local() && !inv.dest.is_local()) {
        return absl::InvalidArgumentError(
            "SRC or DEST must be a local region (NAME[@OFFSET]): rdmactl "
            "copies through a region of this daemon");
      }
      if (const std::string* length = option("length")) {
        auto parsed = ParseLength(*length);
        if (!parsed.ok()) return parsed.status();
        inv.length = *parsed;
      }
      return absl::OkStatus();
    }
    case Command::kBench:
      return FillBench(option, inv.bench);
  }
  return absl::InternalError("unhandled command");
}

std::string Plural(size_t n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

absl::StatusOr<uint32_t> ParseRegionMode(absl::string_view text) {
  uint32_t bits = 0;
  bool ok = !text.empty() && text.size() <= 4;
  for (char c : text) {
    if (c < '0' || c > '7') ok = false;
    bits = bits * 8 + static_cast<uint32_t>(c - '0');
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("mode '", text, "' must be octal, e.g. 0640"));
  }
  if ((bits & ~0666u) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mode '", text,
        "' has bits other than read (4) and write (2) per class: use e.g. "
        "0600, 0640 or 0660"));
  }
  return bits;
}

absl::StatusOr<uint32_t> ParseGroup(absl::string_view text) {
  uint32_t gid = 0;
  if (absl::SimpleAtoi(text, &gid)) return gid;
  const std::string name(text);
  if (const ::group* entry = ::getgrnam(name.c_str())) return entry->gr_gid;
  return absl::InvalidArgumentError(
      absl::StrCat("group '", text, "' is not a group on this host"));
}

absl::StatusOr<Invocation> ParseCommandLine(
    const std::vector<std::string>& args, const char* env_socket) {
  Invocation inv;
  if (env_socket != nullptr && *env_socket != '\0') {
    inv.global.socket_path = env_socket;
  }
  const CommandSpec* spec = nullptr;
  std::vector<std::string> positional;
  std::map<std::string, std::string> command_options;
  bool help = false;
  bool version = false;
  bool options_done = false;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const bool is_option = !options_done && arg.size() > 1 && arg[0] == '-';
    if (!is_option) {
      if (spec == nullptr) {
        spec = FindCommand(arg);
        if (spec == nullptr) {
          return UsageError(nullptr, absl::StrCat("unknown command '", arg, "'"));
        }
      } else {
        positional.push_back(arg);
      }
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    // Split "--name=value", "--name", "-x", "-xVALUE".
    const OptionSpec* option = nullptr;
    std::optional<std::string> value;
    std::string shown;  // the option as the user wrote it, for messages
    if (absl::StartsWith(arg, "--")) {
      const size_t eq = arg.find('=');
      const std::string name = arg.substr(2, eq == std::string::npos
                                                 ? std::string::npos
                                                 : eq - 2);
      shown = "--" + name;
      if (eq != std::string::npos) value = arg.substr(eq + 1);
      option = FindLongOption(name);
    } else {
      shown = arg.substr(0, 2);
      option = FindShortOption(arg[1]);
      if (arg.size() > 2) value = arg.substr(arg[2] == '=' ? 3 : 2);
    }
    if (option == nullptr) {
      return UsageError(spec, absl::StrCat("unknown option '", shown, "'"));
    }
    if (!option->takes_value && value.has_value()) {
      return UsageError(spec, absl::StrCat(shown, " takes no value"));
    }
    if (option->takes_value && !value.has_value()) {
      if (i + 1 >= args.size()) {
        return UsageError(spec, absl::StrCat(shown, " needs a value"));
      }
      value = args[++i];
    }
    const std::string name(option->name);
    if (name == "socket") {
      if (value->empty()) return UsageError(spec, "--socket needs a path");
      inv.global.socket_path = *value;
    } else if (name == "timeout") {
      auto timeout = ParseTimeout(*value);
      if (!timeout.ok()) return UsageError(spec, timeout.status().message());
      inv.global.timeout = *timeout;
    } else if (name == "json") {
      inv.global.json = true;
    } else if (name == "help") {
      help = true;
    } else if (name == "version") {
      version = true;
    } else {
      // A command option; checked against the command once it is known
      // (it may come before the command on the line). Flags store "".
      command_options[name] = value.value_or("");
    }
  }

  if (version && !help) {
    inv.command = Command::kVersion;
    return inv;
  }
  if (help || spec == nullptr) {
    // `rdmactl`, `rdmactl --help`, `rdmactl COMMAND --help`.
    if (spec == nullptr && !help) {
      return UsageError(nullptr, "no command given");
    }
    inv.command = Command::kHelp;
    if (spec != nullptr && spec->command != Command::kHelp) {
      inv.help_topic = std::string(spec->name);
    } else if (spec != nullptr && !positional.empty() &&
               FindCommand(positional[0]) != nullptr) {
      inv.help_topic = positional[0];
    }
    return inv;
  }

  for (const auto& [name, value] : command_options) {
    bool allowed = false;
    for (absl::string_view accepted : spec->options) {
      allowed = allowed || accepted == name;
    }
    if (!allowed) {
      const OptionSpec* option = FindLongOption(name);
      return UsageError(
          spec, absl::StrCat(spec->name, " takes no option --", name,
                             option != nullptr && option->short_name != 0
                                 ? absl::StrCat(" (-", std::string(1, option->short_name), ")")
                                 : std::string()));
    }
  }
  if (positional.size() < spec->min_args || positional.size() > spec->max_args) {
    return UsageError(
        spec, absl::StrCat("expected ",
                           spec->synopsis.empty() || spec->max_args == 0
                               ? "no arguments"
                               : std::string(spec->synopsis),
                           ", got ", Plural(positional.size(), "argument")));
  }
  inv.command = spec->command;
  if (absl::Status s = FillCommand(*spec, positional, command_options, inv);
      !s.ok()) {
    return UsageError(spec, s.message());
  }
  return inv;
}

}  // namespace rdmad::rdmactl
