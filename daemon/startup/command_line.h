// rdmad's command line, checked before absl parses it.
//
// absl::ParseCommandLine exits with status 1 on an unknown flag or a flag
// without its value, and its --help lists only flags of files it deems the
// program's own ("No flags matched" for rdmad). But systemd's unit and the
// man page promise exit status 2 for a wrong command line, a status
// systemd does not restart on (RestartPreventExitStatus=2). So rdmad checks
// the arguments here first, and answers --help and --version itself.
//
// Example:
//   auto action = CheckCommandLine(args, [](absl::string_view name) {
//     return absl::FindCommandLineFlag(name) != nullptr;
//   });
//   if (!action.ok()) { print action.status().message(); return 2; }
#ifndef RDMAD_DAEMON_STARTUP_COMMAND_LINE_H_
#define RDMAD_DAEMON_STARTUP_COMMAND_LINE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdmad::startup {

enum class CommandLineAction {
  kRun,      // flags look right: hand them to absl and start
  kHelp,     // --help, -h, --helpfull, --helpshort
  kVersion,  // --version
};

// Checks `args` (argv without argv[0]) against the flags `is_flag` knows
// (every flag takes a value: --name=VALUE or --name VALUE). INVALID_ARGUMENT
// with one line naming what is wrong for an unknown flag (with the closest
// known one when it is a likely typo), a flag without a value, or an
// argument that is not a flag.
absl::StatusOr<CommandLineAction> CheckCommandLine(
    const std::vector<std::string>& args,
    const std::function<bool(absl::string_view)>& is_flag,
    const std::vector<std::string>& known_names);

// One flag for the help text.
struct FlagHelp {
  std::string name;
  std::string help;
};

// "usage\n\nFlags:\n  --name\n      help\n..." sorted by name.
std::string HelpText(absl::string_view usage, std::vector<FlagHelp> flags);

}  // namespace rdmad::startup

#endif  // RDMAD_DAEMON_STARTUP_COMMAND_LINE_H_
