#include "client/rdmactl/args.h"

#include <array>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
    {"output", 'o', true, false},
};

struct CommandSpec {
  absl::string_view name;
  Command command;
  absl::string_view synopsis;  // after "rdmactl NAME"
  absl::string_view summary;   // one line for the overview
  absl::string_view details;   // the rest of `rdmactl NAME --help`
  size_t min_args;
  size_t max_args;
  std::array<absl::string_view, 2> options;  // command options accepted
};

constexpr CommandSpec kCommands[] = {
    {"status", Command::kStatus, "", "daemon identity, transport and totals",
     "Prints the daemon's version, incarnation, pid, uptime, data transport\n"
     "and why it was chosen, its sockets, and counts of devices, regions,\n"
     "sessions and peers.\n",
     0, 0, {}},
    {"devices", Command::kDevices, "",
     "RDMA devices: ports, GIDs and limits",
     "Prints each RDMA device with its node GUID, ports (state, link layer,\n"
     "MTU, GID table) and limits. On a node without RDMA devices, says so\n"
     "and names the fallback transport.\n",
     0, 0, {}},
    {"regions", Command::kRegions, "",
     "local regions: owner, size, export, keys",
     "Prints every region of the daemon: session buffers and daemon-owned\n"
     "named regions.\n",
     0, 0, {}},
    {"peers", Command::kPeers, "", "remote daemons and their transports",
     "Prints the remote daemons this daemon knows, with their state,\n"
     "transport and traffic counters.\n",
     0, 0, {}},
    {"qps", Command::kQps, "", "queue pairs (or TCP connections) per peer",
     "Prints the RC queue pairs (verbs) or data connections (TCP) to each\n"
     "peer with their state and counters.\n",
     0, 0, {}},
    {"alloc", Command::kAlloc, "NAME SIZE [--export r|w|rw]",
     "create a daemon-owned named region",
     "Creates a region that the daemon keeps until 'rdmactl free' (or until\n"
     "it exits). SIZE takes suffixes: 4096, 4K, 1M, 1Gi (x1024), 1GB (x1000).\n"
     "--export grants remote access at once (default: local only).\n",
     2, 2, {"export"}},
    {"free", Command::kFree, "NAME", "free a daemon-owned region",
     "Deregisters and frees a named region.\n", 1, 1, {}},
    {"export", Command::kExport, "NAME r|w|rw|none",
     "grant (or with none revoke) remote access",
     "Sets the remote access of a region: r lets peers READ it, w lets them\n"
     "WRITE it, rw both; none makes it local-only again.\n",
     2, 2, {}},
    {"descriptor", Command::kDescriptor, "NAME",
     "print an exported region's descriptor",
     "Prints the encoded descriptor (\"rdmad1:...\") of an exported region, to\n"
     "pass to another node, where it is accepted wherever a region address is.\n",
     1, 1, {}},
    {"put", Command::kPut, "FILE|- DEST",
     "write a file (or stdin) into a region",
     "Writes the contents of FILE (\"-\": stdin) into region DEST at its offset.\n"
     "A local DEST is mapped and written directly, after checking that the\n"
     "data fits; a remote DEST is written with one-sided WRITEs through a\n"
     "staging buffer (at most 64 MiB at a time).\n",
     2, 2, {}},
    {"get", Command::kGet, "SRC [--length N] [-o FILE|-]",
     "read a region into a file (or stdout)",
     "Reads N bytes of region SRC from its offset into FILE (default and\n"
     "\"-\": stdout). Without --length, reads to the end of a local region;\n"
     "a remote SRC needs --length.\n",
     1, 1, {"length", "output"}},
    {"copy", Command::kCopy, "SRC DEST [--length N]",
     "copy between a local region and a region address",
     "Copies N bytes from SRC to DEST through the daemon. One side must be a\n"
     "local region (NAME[@OFFSET]); the other may be local or remote. The\n"
     "target must be exported for the access the copy needs (w to write\n"
     "into it, r to read from it). Without --length, copies from SRC's offset\n"
     "to its end (SRC must then be local).\n",
     2, 2, {"length"}},
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
    case Command::kRegions:
    case Command::kPeers:
    case Command::kQps:
      return absl::OkStatus();
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
      if (!inv.src.is_local() && !inv.length.has_value()) {
        return absl::InvalidArgumentError(
            "reading a remote region needs --length: its size is not known "
            "here");
      }
      const std::string* output = option("output");
      inv.file = output != nullptr ? *output : "-";
      if (inv.file.empty()) {
        return absl::InvalidArgumentError("-o needs a file name (or -)");
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
      if (!inv.src.is_local() && !inv.length.has_value()) {
        return absl::InvalidArgumentError(
            "copying from a remote region needs --length");
      }
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unhandled command");
}

std::string Plural(size_t n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

}  // namespace

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
      // (it may come before the command on the line).
      command_options[name] = *value;
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
        spec, absl::StrCat(
                  "expected ",
                  spec->synopsis.empty() ? "no arguments"
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
    if (!spec.synopsis.empty()) absl::StrAppend(&line, " ", spec.synopsis);
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
      "printed by 'rdmactl descriptor' (\"rdmad1:...\"). No HOST:PORT: this "
      "daemon.\n"
      "\n"
      "Options (anywhere on the line):\n"
      "  --socket PATH       the daemon's socket (default: $RDMAD_SOCKET, "
      "else\n"
      "                      ",
      kDefaultSocket,
      ")\n"
      "  --timeout DURATION  deadline of each call: 30s, 500ms, 2m (default "
      "30s)\n"
      "  --json              print the daemon's answer as JSON (status, "
      "devices,\n"
      "                      regions, peers, qps, alloc, export)\n"
      "  -h, --help          print help; 'rdmactl COMMAND --help' for one "
      "command\n"
      "\n"
      "Exit status: 0 done, 1 the operation failed, 2 usage error.\n");
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
