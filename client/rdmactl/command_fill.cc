#include "client/rdmactl/command_fill.h"

#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/region_address.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

// One command's arguments, as ParseArgs collected them.
struct CommandArgs {
  const std::vector<std::string>& pos;
  const std::map<std::string, std::string>& options;

  // The value of option `name`, or null when it was not given.
  const std::string* option(absl::string_view name) const {
    auto it = options.find(std::string(name));
    return it == options.end() ? nullptr : &it->second;
  }
};

// Parses option `name` with `parse` into `out` when it was given; the
// error names the option ("--export: ...").
template <typename T, typename Parse>
absl::Status ParseOption(const CommandArgs& args, absl::string_view name,
                         Parse parse, T& out) {
  const std::string* text = args.option(name);
  if (text == nullptr) return absl::OkStatus();
  auto parsed = parse(*text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": ", parsed.status().message()));
  }
  out = *std::move(parsed);
  return absl::OkStatus();
}

absl::Status SetName(const std::string& text, Invocation& inv) {
  absl::Status valid = ValidateRegionName(text);
  if (valid.ok()) inv.name = text;
  return valid;
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
  if (option("spin-when-preempted") != nullptr) {
    if (bench.path != BenchPath::kRing) {
      return absl::InvalidArgumentError(
          "--spin-when-preempted is about a queue's Wait: it applies to "
          "--path ring only");
    }
    bench.spin_when_preempted = true;
  }
  if (const std::string* window = option("window")) {
    auto parsed = ParseCount("--window", *window, "batches in flight");
    if (!parsed.ok()) return parsed.status();
    if (*parsed > static_cast<uint64_t>(kMaxBenchWindow)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--window ", *window, " is too wide: at most ", kMaxBenchWindow,
          " batches in flight per thread"));
    }
    if (bench.path != BenchPath::kRing) {
      return absl::InvalidArgumentError(
          "--window keeps batches in flight on a queue: it applies to "
          "--path ring only (a gRPC Batch call waits for its answer)");
    }
    if (*parsed * static_cast<uint64_t>(bench.batch) >
        static_cast<uint64_t>(kMaxBenchWindowOps)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--window ", *window, " of --batch ", bench.batch, " is ",
          *parsed * bench.batch, " operations in flight per thread: at most ",
          kMaxBenchWindowOps));
    }
    bench.window = static_cast<int>(*parsed);
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

// --- One function per command ----------------------------------------------

absl::Status FillHelp(const CommandArgs& args, Invocation& inv) {
  if (args.pos.empty()) return absl::OkStatus();
  if (FindCommand(args.pos[0]) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no command '", args.pos[0], "'"));
  }
  inv.help_topic = args.pos[0];
  return absl::OkStatus();
}

absl::Status FillRegions(const CommandArgs& args, Invocation& inv) {
  if (const std::string* peer = args.option("peer")) {
    if (absl::Status s = ValidatePeerAddress(*peer); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--peer: ", s.message()));
    }
    inv.peer = *peer;
  }
  return absl::OkStatus();
}

absl::Status FillStat(const CommandArgs& args, Invocation& inv) {
  auto src = ParseOperand("ADDRESS", args.pos[0]);
  if (!src.ok()) return src.status();
  inv.src = *std::move(src);
  return absl::OkStatus();
}

absl::Status FillChmod(const CommandArgs& args, Invocation& inv) {
  if (absl::Status s = SetName(args.pos[0], inv); !s.ok()) return s;
  auto mode = ParseRegionMode(args.pos[1]);
  if (!mode.ok()) return mode.status();
  inv.mode = *mode;
  return absl::OkStatus();
}

absl::Status FillChgrp(const CommandArgs& args, Invocation& inv) {
  if (absl::Status s = SetName(args.pos[0], inv); !s.ok()) return s;
  auto group = ParseGroup(args.pos[1]);
  if (!group.ok()) return group.status();
  inv.group = *group;
  return absl::OkStatus();
}

absl::Status FillLs(const CommandArgs& args, Invocation& inv) {
  if (args.pos.empty()) return absl::OkStatus();
  inv.prefix = args.pos[0];
  if (inv.prefix.size() > kMaxRegionNameLength ||
      inv.prefix.find_first_of(":@ ") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ls: '", inv.prefix, "' is not the start of a region name"));
  }
  return absl::OkStatus();
}

absl::Status FillLookup(const CommandArgs& args, Invocation& inv) {
  inv.fresh = args.option("fresh") != nullptr;
  return SetName(args.pos[0], inv);
}

absl::Status FillAlloc(const CommandArgs& args, Invocation& inv) {
  if (absl::Status s = SetName(args.pos[0], inv); !s.ok()) return s;
  auto size = ParseSize(args.pos[1]);
  if (!size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SIZE: ", size.status().message()));
  }
  inv.size = *size;
  if (absl::Status s = ParseOption(args, "export", ParseAccess, inv.access);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseOption(args, "mode", ParseRegionMode,
                                   inv.region_options.mode);
      !s.ok()) {
    return s;
  }
  return ParseOption(args, "group", ParseGroup, inv.region_options.group);
}

// free and descriptor: a region name.
absl::Status FillNamed(const CommandArgs& args, Invocation& inv) {
  return SetName(args.pos[0], inv);
}

absl::Status FillExport(const CommandArgs& args, Invocation& inv) {
  if (absl::Status s = SetName(args.pos[0], inv); !s.ok()) return s;
  auto parsed = ParseAccess(args.pos[1]);
  if (!parsed.ok()) return parsed.status();
  inv.access = *parsed;
  const std::string* allow = args.option("allow");
  if (allow == nullptr) return absl::OkStatus();
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
  return absl::OkStatus();
}

absl::Status FillPut(const CommandArgs& args, Invocation& inv) {
  inv.file = args.pos[0];
  auto dest = ParseOperand("DEST", args.pos[1]);
  if (!dest.ok()) return dest.status();
  inv.dest = *std::move(dest);
  return absl::OkStatus();
}

// --length of get and copy: ParseLength's own errors name the option.
absl::Status FillLength(const CommandArgs& args, Invocation& inv) {
  const std::string* length = args.option("length");
  if (length == nullptr) return absl::OkStatus();
  auto parsed = ParseLength(*length);
  if (!parsed.ok()) return parsed.status();
  inv.length = *parsed;
  return absl::OkStatus();
}

absl::Status FillGet(const CommandArgs& args, Invocation& inv) {
  auto src = ParseOperand("SRC", args.pos[0]);
  if (!src.ok()) return src.status();
  inv.src = *std::move(src);
  if (absl::Status s = FillLength(args, inv); !s.ok()) return s;
  const std::string* output = args.option("output");
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

absl::Status FillCopy(const CommandArgs& args, Invocation& inv) {
  auto src = ParseOperand("SRC", args.pos[0]);
  if (!src.ok()) return src.status();
  auto dest = ParseOperand("DEST", args.pos[1]);
  if (!dest.ok()) return dest.status();
  inv.src = *std::move(src);
  inv.dest = *std::move(dest);
  if (!inv.src.is_local() && !inv.dest.is_local()) {
    return absl::InvalidArgumentError(
        "SRC or DEST must be a local region (NAME[@OFFSET]): rdmactl "
        "copies through a region of this daemon");
  }
  return FillLength(args, inv);
}

}  // namespace

absl::Status FillCommand(const CommandSpec& spec,
                         const std::vector<std::string>& positional,
                         const std::map<std::string, std::string>& options,
                         Invocation& inv) {
  const CommandArgs args{positional, options};
  switch (spec.command) {
    case Command::kHelp:
      return FillHelp(args, inv);
    case Command::kVersion:  // a global option, not a command of its own
    case Command::kStatus:
    case Command::kDevices:
    case Command::kPeers:
    case Command::kQps:
    case Command::kQueues:
      return absl::OkStatus();
    case Command::kRegions:
      return FillRegions(args, inv);
    case Command::kStat:
      return FillStat(args, inv);
    case Command::kChmod:
      return FillChmod(args, inv);
    case Command::kChgrp:
      return FillChgrp(args, inv);
    case Command::kLs:
      return FillLs(args, inv);
    case Command::kLookup:
      return FillLookup(args, inv);
    case Command::kAlloc:
      return FillAlloc(args, inv);
    case Command::kFree:
    case Command::kDescriptor:
      return FillNamed(args, inv);
    case Command::kExport:
      return FillExport(args, inv);
    case Command::kPut:
      return FillPut(args, inv);
    case Command::kGet:
      return FillGet(args, inv);
    case Command::kCopy:
      return FillCopy(args, inv);
    case Command::kBench:
      return FillBench(
          [&args](absl::string_view name) { return args.option(name); },
          inv.bench);
  }
  return absl::InternalError("unhandled command");
}

}  // namespace rdmad::rdmactl
