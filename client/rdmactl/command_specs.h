// The commands and options rdmactl knows (the tables the parser in args.cc
// checks a command line against) and the help text made from them.
// Internal to rdmactl_lib.
#ifndef RDMAD_CLIENT_RDMACTL_COMMAND_SPECS_H_
#define RDMAD_CLIENT_RDMACTL_COMMAND_SPECS_H_

#include <array>
#include <cstddef>

#include "absl/strings/string_view.h"
#include "client/rdmactl/args.h"

namespace rdmad::rdmactl {

// Options rdmactl knows. Global ones are accepted anywhere on the line;
// command options only by the commands that list them.
struct OptionSpec {
  absl::string_view name;  // long name, without "--"
  char short_name;         // 0 if none
  bool takes_value;
  bool global;
};

struct CommandSpec {
  absl::string_view name;
  Command command;
  absl::string_view synopsis;  // after "rdmactl NAME"
  absl::string_view summary;   // one line for the overview
  absl::string_view details;   // the rest of `rdmactl NAME --help`
  size_t min_args;
  size_t max_args;
  std::array<absl::string_view, 14> options;  // command options accepted
};

// Null when rdmactl has no such command or option.
const CommandSpec* FindCommand(absl::string_view name);
const OptionSpec* FindLongOption(absl::string_view name);
const OptionSpec* FindShortOption(char name);

// Usage() and CommandUsage() (args.h) are defined with the tables they
// render, in command_specs.cc.

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_COMMAND_SPECS_H_
