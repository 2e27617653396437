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
#include "client/rdmactl/command_fill.h"
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
