#include "client/rdmactl/args.h"

#include <grp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/region_address.h"
#include "common/size.h"

namespace rdmad::rdmactl {
namespace {

// Options rdmactl knows. Global ones are accepted anywhere on the line;
// command options only by the commands that list them.
struct OptionSpec {
  absl::string_view name;  // long name, without "--"
  char short_name;         // 0 if none
  bool takes_value;
  bool global;
};

constexpr OptionSpec kOptions[] = {
    {"socket", 0, true, true},      {"timeout", 0, true, true},
    {"json", 0, false, true},       {"help", 'h', false, true},
    {"export", 0, true, false},     {"length", 0, true, false},
    {"output", 'o', true, false},   {"peer", 0, true, false},
    {"region", 0, true, false},     {"create-region", 0, false, false},
    {"op", 0, true, false},         {"sizes", 0, true, false},
    {"qd", 0, true, false},         {"iters", 0, true, false},
    {"duration", 0, true, false},   {"batch", 0, true, false},   {"mode", 0, true, false},
    {"group", 0, true, false},      {"fresh", 0, false, false},
    {"path", 0, true, false},       {"local", 0, false, false},
    {"allow", 0, true, false},      {"spin", 0, true, false},
};

struct CommandSpec {
  absl::string_view name;
  Command command;
  absl::string_view synopsis;  // after "rdmactl NAME"
  absl::string_view summary;   // one line for the overview
  absl::string_view details;   // the rest of `rdmactl NAME --help`
  size_t min_args;
  size_t max_args;
  std::array<absl::string_view, 12> options;  // command options accepted
};

constexpr CommandSpec kCommands[] = {
    {"status",
     Command::kStatus,
     "",
     "daemon identity, transport and totals",
     "Prints the daemon's version, incarnation, pid, uptime, data transport\n"
     "and why it was chosen, its sockets, and counts of devices, regions,\n"
     "sessions and peers.\n",
     0,
     0,
     {}},
    {"devices",
     Command::kDevices,
     "",
     "RDMA devices: ports, GIDs and limits",
     "Prints each RDMA device with its node GUID, ports (state, link layer,\n"
     "MTU, GID table) and limits. On a node without RDMA devices, says so\n"
     "and names the fallback transport.\n",
     0, 0, {}},
    {"regions", Command::kRegions, "[--peer HOST:PORT]",
     "regions: local ones, or those a peer exports",
     "Prints every region of the daemon: session buffers and daemon-owned\n"
     "named regions, with owner, size, mode, export and keys.\n"
     "With --peer HOST:PORT, prints instead the regions the daemon at that\n"
     "address exports to this node (name, size, export), asked from it\n"
     "through this daemon.\n",
     0, 0, {"peer"}},
    {"peers", Command::kPeers, "", "remote daemons and their transports",
     "Prints the remote daemons this daemon knows, with their state,\n"
     "transport and traffic counters.\n",
     0,
     0,
     {}},
    {"qps",
     Command::kQps,
     "",
     "queue pairs (or TCP connections) per peer",
     "Prints the RC queue pairs (verbs) or data connections (TCP) to each\n"
     "peer with their state and counters.\n",
     0, 0, {}},
    {"stat", Command::kStat, "ADDRESS",
     "size and export of one region (local or remote)",
     "Prints the size and export of the region at ADDRESS: a local region\n"
     "(NAME), one a peer exports (HOST:PORT/NAME; asked from that daemon),\n"
     "or the one a descriptor names (\"rdmad1:...\").\n",
     1, 1, {}},
    {"alloc", Command::kAlloc,
     "NAME SIZE [--export r|w|rw] [--mode MODE] [--group GROUP]",
     "create a daemon-owned named region",
     "Creates a region that the daemon keeps until 'rdmactl free' (or until\n"
     "it exits). SIZE takes suffixes: 4096, 4K, 1M, 1Gi (x1024), 1GB (x1000).\n"
     "--export grants remote access at once (default: local only).\n"
     "--mode sets who on this node may use it, like a file mode (octal, read\n"
     "and write bits only; default 0600); --group its group (a name or gid\n"
     "you belong to; default your primary group).\n",
     2,
     2,
     {"export", "mode", "group"}},
    {"free",
     Command::kFree,
     "NAME",
     "free a daemon-owned region",
     "Deregisters and frees a named region.\n",
     1,
     1,
     {}},
    {"export",
     Command::kExport,
     "NAME r|w|rw|none [--allow [UID@]PEER,...]",
     "grant (or with none revoke) remote access",
     "Sets the remote access of a region: r lets peers READ it, w lets them\n"
     "WRITE it, rw both; none makes it local-only again. When it returns, no\n"
     "peer operation under the previous export touches the region any more.\n"
     "--allow limits who: comma-separated PEERs, each '*', an address or\n"
     "CIDR block peers connect from (10.0.0.2, 10.0.0.0/8), or cert:NAME (a\n"
     "peer whose mutual-TLS certificate names NAME), optionally prefixed by\n"
     "the uid that peer acts for (1000@10.0.0.2). Default: any peer, any "
     "uid.\n",
     2, 2, {"allow"}},
    {"chmod", Command::kChmod, "NAME MODE",
     "change who on this node may use a named region",
     "Sets the local permissions of a daemon-owned region, like chmod(1) of\n"
     "a file: MODE is octal read (4) and write (2) bits for owner, group\n"
     "and others, e.g. 0640. Only its owner or root may. Mappings made\n"
     "before keep the access they had.\n",
     2, 2, {}},
    {"chgrp", Command::kChgrp, "NAME GROUP",
     "change the group of a named region",
     "Sets the group of a daemon-owned region, like chgrp(1): a group name or\n"
     "gid you belong to (root: any). Only its owner or root may.\n",
     2, 2, {}},
    {"descriptor", Command::kDescriptor, "NAME",
     "print an exported region's descriptor",
     "Prints the encoded descriptor (\"rdmad1:...\") of an exported region, "
     "to\n"
     "pass to another node, where it is accepted wherever a region address "
     "is.\n",
     1,
     1,
     {}},
    {"put",
     Command::kPut,
     "FILE|- DEST",
     "write a file (or stdin) into a region",
     "Writes the contents of FILE (\"-\": stdin) into region DEST at its offset.\n"
     "A local DEST is mapped and written directly; a remote DEST is written\n"
     "with one-sided WRITEs through a staging buffer (at most 64 MiB at a\n"
     "time). The region's size is checked first: data that does not fit is\n"
     "refused before anything is written (from a pipe larger than 64 MiB,\n"
     "the error says how much was written). On a terminal, progress and\n"
     "rate are shown on stderr.\n",
     2, 2, {}},
    {"get", Command::kGet, "SRC [--length N] [-o FILE|-]",
     "read a region into a file (or stdout)",
     "Reads N bytes of region SRC from its offset into FILE (default and\n"
     "\"-\": stdout). Without --length, reads to the end of the region, local\n"
     "or remote (a remote region's size is asked from its daemon). With\n"
     "--json, give -o FILE: the report goes to stdout. On a terminal,\n"
     "progress and rate are shown on stderr.\n",
     1, 1, {"length", "output"}},
    {"copy", Command::kCopy, "SRC DEST [--length N]",
     "copy between a local region and a region address",
     "Copies N bytes from SRC to DEST through the daemon. One side must be a\n"
     "local region (NAME[@OFFSET]); the other may be local or remote. Between\n"
     "two local regions, you need read on SRC and write on DEST (see chmod);\n"
     "a remote target must be exported for the access the copy needs (w to\n"
     "write into it, r to read from it). Without --length, copies from SRC's\n"
     "offset to its end.\n",
     2, 2, {"length"}},
    {"bench", Command::kBench,
     // Continuation lines line up under "usage: rdmactl bench ".
     "[--peer HOST:PORT | --local] [--op write|read] [--sizes LIST]\n"
     "                     [--qd N] [--batch N] [--iters N | --duration S]\n"
     "                     [--region NAME] [--create-region] [--path ring|grpc]\n"
     "                     [--spin TIME]",
     "measure one-sided transfer bandwidth and latency",
     "Measures one-sided transfers between a buffer that rdmactl allocates\n"
     "through this daemon and region NAME (default rdmad-bench) that the\n"
     "daemon at --peer HOST:PORT exports: --op write (default) sends to it,\n"
     "--op read fetches from it. For each size, after one warm-up transfer\n"
     "that is not counted, it runs --iters N operations, or as many as fit\n"
     "in --duration S seconds (default 2; also 500ms, 1m), with --qd N\n"
     "operations in flight (default 1; one thread each, doing one\n"
     "transfer, or one batch, at a time). A failed transfer stops the run.\n"
     "--path ring (default) puts operations on a shared-memory queue of\n"
     "each thread's own; --path grpc sends each as a Local gRPC call, to\n"
     "compare. With --batch N, each thread submits N operations at once\n"
     "(one Batch call with --path grpc) and waits for all of them; latency\n"
     "is then that of a whole batch.\n"
     "--spin T (ring only; e.g. 200us, 0) is how long a thread busy-polls\n"
     "for its completions before it sleeps (default 30us; QueueOptions::spin).\n"
     "\n"
     "Per size it prints the operations done, MB/s (10^6 bytes/s), Gb/s,\n"
     "operations/s, the latency of one operation as rdmactl sees it (the call\n"
     "to the daemon included) at p50, p99 and p99.9 in microseconds, and the\n"
     "transport that carried it. --json prints one JSON object instead. On a\n"
     "terminal, a progress line is shown on stderr.\n"
     "\n"
     "--sizes is a comma-separated list with size suffixes (default\n"
     "8,4K,64K,1M,16M). All operations use the same local buffer, as large as\n"
     "the largest size, and the same remote range at offset 0: the region\n"
     "must hold the largest size and be exported w (write) or r (read). On\n"
     "the peer's node, e.g.: rdmactl alloc rdmad-bench 16M --export rw\n"
     "\n"
     "Without --peer, bench targets this daemon's own peer address (the\n"
     "'peer listen' of 'rdmactl status'): a loopback through its transport,\n"
     "not a local copy. --create-region then creates the region on this\n"
     "daemon (exported rw, as large as the largest size) if it does not\n"
     "exist, and frees it when done; an existing region is used as it is.\n"
     "rdmactl talks only to this daemon, so it cannot create a region on\n"
     "another one: --create-region and --peer do not go together. With\n"
     "--local the region is this daemon's and the daemon copies to or from\n"
     "it directly: the cost of the path from this process to the daemon. As\n"
     "for a copy between local regions, it need not be exported; your\n"
     "permissions on it apply (see chmod).\n",
     0, 0,
     {"peer", "region", "create-region", "op", "sizes", "qd", "batch", "iters",
      "duration", "path", "local", "spin"}},
    {"ls", Command::kLs, "[PREFIX]",
     "exported regions of the whole cluster (directory)",
     "Lists the regions every daemon of the cluster exports, from the\n"
     "cluster directory on etcd (daemons started with --directory): name,\n"
     "the daemon that holds it, size, access, age and generation. PREFIX\n"
     "keeps the names that start with it (\"kv/\").\n",
     0, 1, {}},
    {"lookup", Command::kLookup, "NAME [--fresh]",
     "which daemon of the cluster holds a region",
     "Looks NAME up in the cluster directory, as a transfer to NAME would:\n"
     "from the daemon's watch-fed cache, or with --fresh from etcd.\n",
     1, 1, {"fresh"}},
    {"help", Command::kHelp, "[COMMAND]", "print help (of one command)", "", 0,
     1, {}},
};

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& spec : kCommands) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindLongOption(absl::string_view name) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindShortOption(char name) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.short_name != 0 && spec.short_name == name) return &spec;
  }
  return nullptr;
}

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
    case Command::kStatus:
    case Command::kDevices:
    case Command::kPeers:
    case Command::kQps:
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
    } else {
      // A command option; checked against the command once it is known
      // (it may come before the command on the line). Flags store "".
      command_options[name] = value.value_or("");
    }
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

std::string Usage() {
  std::string text =
      "usage: rdmactl [--socket PATH] [--timeout DURATION] [--json] COMMAND "
      "[ARGS...]\n"
      "\n"
      "Inspect an rdmad daemon and move data through it.\n"
      "\n"
      "Commands:\n";
  for (const CommandSpec& spec : kCommands) {
    std::string line = absl::StrCat("  ", spec.name);
    // A synopsis of several lines shows its first one here.
    const size_t newline = spec.synopsis.find('\n');
    if (newline != absl::string_view::npos) {
      absl::StrAppend(&line, " ", spec.synopsis.substr(0, newline), " ...");
    } else if (!spec.synopsis.empty()) {
      absl::StrAppend(&line, " ", spec.synopsis);
    }
    if (line.size() < 42) {
      line.resize(42, ' ');
    } else {
      absl::StrAppend(&line, "\n", std::string(42, ' '));
    }
    absl::StrAppend(&text, line, spec.summary, "\n");
  }
  absl::StrAppend(
      &text,
      "\n"
      "Region addresses: [HOST:PORT/]NAME[@OFFSET] (OFFSET takes size "
      "suffixes),\n"
      "e.g. cache, cache@4K, 10.0.0.2:7471/kv@1M, [::1]:7471/kv; or a "
      "descriptor\n"
      "printed by 'rdmactl descriptor' (\"rdmad1:...\", also with @OFFSET). "
      "No\n"
      "HOST:PORT: this daemon.\n"
      "\n"
      "Options (anywhere on the line):\n"
      "  --socket PATH       the daemon's socket (default: $RDMAD_SOCKET, "
      "else\n"
      "                      ",
      kDefaultSocket,
      ")\n"
      "  --timeout DURATION  the whole command must finish within it: 30s, "
      "500ms,\n"
      "                      2m (default: no bound; each call to the daemon "
      "30s)\n"
      "  --json              print the answer as JSON, errors included (every "
      "command)\n"
      "  -h, --help          print help; 'rdmactl COMMAND --help' for one "
      "command\n"
      "\n"
      "Exit status: 0 done; 1 other failure; 2 usage error; 3 unavailable\n"
      "(daemon or peer unreachable); 4 not found; 5 permission denied; 6 "
      "already\n"
      "exists; 7 invalid argument or out of range; 8 resource exhausted; 9 "
      "timed\n"
      "out; 10 failed precondition (e.g. not exported, daemon restarted).\n");
  return text;
}

std::string CommandUsage(absl::string_view command) {
  const CommandSpec* spec = FindCommand(command);
  if (spec == nullptr || spec->command == Command::kHelp) return Usage();
  std::string text = absl::StrCat("usage: rdmactl ", spec->name);
  if (!spec->synopsis.empty()) absl::StrAppend(&text, " ", spec->synopsis);
  absl::StrAppend(&text, "\n\n", spec->summary, ".\n\n", spec->details,
                  "\nGlobal options: --socket PATH, --timeout DURATION, "
                  "--json (see 'rdmactl help').\n");
  return text;
}

}  // namespace rdmad::rdmactl
