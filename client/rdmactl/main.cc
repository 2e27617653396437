// rdmactl: the command line of rdmad. See `rdmactl help`.
//
// Exit status: 0 done; 2 the command line is wrong (one line on stderr
// saying what and where to look); otherwise the class of the failure
// (ExitStatusFor in format.h: 3 unreachable, 4 not found, 5 permission...),
// with "rdmactl: <what failed>: <CODE>: <message>" on stderr and, with
// --json, the same as a JSON document on stdout.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/rdmactl/args.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"

namespace rdmad::rdmactl {
namespace {

// Help is an answer like any other: with --json, one document, so that a
// script that always passes --json can read it too.
absl::Status RunHelp(CommandContext& context) {
  const std::string& topic = context.invocation().help_topic;
  const std::string usage = topic.empty() ? Usage() : CommandUsage(topic);
  Json json = Json::Object();
  if (!topic.empty()) json.Set("command", topic);
  json.Set("usage", usage);
  return context.Answer(json, usage);
}

absl::Status Dispatch(CommandContext& context) {
  switch (context.invocation().command) {
    case Command::kHelp:
      return RunHelp(context);
    case Command::kVersion: {
      Json json = Json::Object();
      json.Set("version", RDMACTL_VERSION);
      return context.Answer(json, absl::StrCat("rdmactl ", RDMACTL_VERSION,
                                               "\n"));
    }
    case Command::kStatus:
      return RunStatus(context);
    case Command::kDevices:
      return RunDevices(context);
    case Command::kRegions:
      return RunRegions(context);
    case Command::kPeers:
      return RunPeers(context);
    case Command::kQps:
      return RunQps(context);
    case Command::kQueues:
      return RunQueues(context);
    case Command::kStat:
      return RunStat(context);
    case Command::kAlloc:
      return RunAlloc(context);
    case Command::kFree:
      return RunFree(context);
    case Command::kExport:
      return RunExport(context);
    case Command::kChmod:
      return RunChmod(context);
    case Command::kChgrp:
      return RunChgrp(context);
    case Command::kDescriptor:
      return RunDescriptor(context);
    case Command::kPut:
      return RunPut(context);
    case Command::kGet:
      return RunGet(context);
    case Command::kCopy:
      return RunCopy(context);
    case Command::kBench:
      return RunBench(context);
    case Command::kLs:
      return RunLs(context);
    case Command::kLookup:
      return RunLookup(context);
  }
  return absl::InternalError("unknown command");
}

// True if --json appears before a "--" (for usage errors, which stop the
// parser before it could say).
bool WantsJson(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--json") return true;
  }
  return false;
}

int Main(int argc, char** argv) {
  const absl::Time start = absl::Now();
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto invocation = ParseCommandLine(args, std::getenv("RDMAD_SOCKET"));
  if (!invocation.ok()) {
    std::fprintf(stderr, "rdmactl: %s\n",
                 std::string(invocation.status().message()).c_str());
    if (WantsJson(args)) {
      Json error = Json::Object();
      error.Set("code", "USAGE")
          .Set("message", invocation.status().message())
          .Set("exit_status", kExitUsage);
      std::fputs(Json::Object().Set("error", std::move(error)).Dump().c_str(),
                 stdout);
    }
    return kExitUsage;
  }
  CommandContext context(*invocation, start);
  if (absl::Status status = Dispatch(context); !status.ok()) {
    std::fprintf(stderr, "rdmactl: %s\n",
                 std::string(status.message()).c_str());
    if (context.json()) {
      std::fputs(ErrorJson(status).Dump().c_str(), stdout);
      std::fflush(stdout);
    }
    return ExitStatusFor(status.code());
  }
  return kExitOk;
}

}  // namespace
}  // namespace rdmad::rdmactl

int main(int argc, char** argv) { return rdmad::rdmactl::Main(argc, argv); }
