#include "daemon/startup/command_line.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rdmad::startup {
namespace {

// Edit distance, to suggest the flag meant by a typo.
size_t Distance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Suggestion(absl::string_view name,
                       const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = 3;  // at most two edits away
  for (const std::string& candidate : known) {
    const size_t d = Distance(name, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean --", best, "?)");
}

}  // namespace

absl::StatusOr<CommandLineAction> CheckCommandLine(
    const std::vector<std::string>& args,
    const std::function<bool(absl::string_view)>& is_flag,
    const std::vector<std::string>& known_names) {
  bool help = false;
  bool version = false;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") {
      if (i + 1 < args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "rdmad takes no arguments, only flags: '", args[i + 1],
            "' (see rdmad --help)"));
      }
      break;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      return absl::InvalidArgumentError(absl::StrCat(
          "rdmad takes no arguments, only flags: '", arg,
          "' (see rdmad --help)"));
    }
    absl::string_view body = absl::StripPrefix(absl::StripPrefix(arg, "-"), "-");
    const size_t eq = body.find('=');
    const absl::string_view name = body.substr(0, eq);
    if (name == "help" || name == "h" || name == "helpfull" ||
        name == "helpshort" || name == "?") {
      help = true;
      continue;
    }
    if (name == "version") {
      version = true;
      continue;
    }
    if (name.empty() || !is_flag(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown flag '--", name, "'", Suggestion(name, known_names),
          "; see rdmad --help"));
    }
    if (eq == absl::string_view::npos) {
      // The value is the next argument.
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --", name, " needs a value: --", name,
            "=VALUE (see rdmad --help)"));
      }
      ++i;
    }
  }
  if (help) return CommandLineAction::kHelp;
  if (version) return CommandLineAction::kVersion;
  return CommandLineAction::kRun;
}

std::string HelpText(absl::string_view usage, std::vector<FlagHelp> flags) {
  std::sort(flags.begin(), flags.end(),
            [](const FlagHelp& a, const FlagHelp& b) { return a.name < b.name; });
  std::string text = absl::StrCat(usage, "\n\nFlags:\n");
  for (const FlagHelp& flag : flags) {
    absl::StrAppend(&text, "  --", flag.name, "\n");
    // The help, wrapped at 78 columns under a 6-space indent.
    std::string line;
    for (absl::string_view word : absl::StrSplit(flag.help, ' ',
                                                 absl::SkipEmpty())) {
      if (!line.empty() && line.size() + 1 + word.size() > 72) {
        absl::StrAppend(&text, "      ", line, "\n");
        line.clear();
      }
      absl::StrAppend(&line, line.empty() ? "" : " ", word);
    }
    if (!line.empty()) absl::StrAppend(&text, "      ", line, "\n");
  }
  absl::StrAppend(&text,
                  "\n  --help     print this and exit\n"
                  "  --version  print the version and exit\n"
                  "\nExit status: 0 after a clean stop; 1 a failure at run "
                  "time; 2 a wrong command\nline or configuration, or a "
                  "taken port (see rdmad(8)).\n");
  return text;
}

}  // namespace rdmad::startup
