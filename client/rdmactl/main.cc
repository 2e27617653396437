// rdmactl: the command line of rdmad. See `rdmactl help`.
//
// Exit status: 0 done; 1 the operation failed ("rdmactl: <what failed>:
// <CODE>: <message>" on stderr); 2 the command line is wrong (one line on
// stderr saying what and where to look).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "client/rdmactl/args.h"
#include "client/rdmactl/commands.h"

namespace rdmad::rdmactl {
namespace {

absl::Status Dispatch(CommandContext& context) {
  switch (context.invocation().command) {
    case Command::kHelp:
      return context.Print(context.invocation().help_topic.empty()
                               ? Usage()
                               : CommandUsage(context.invocation().help_topic));
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
    case Command::kAlloc:
      return RunAlloc(context);
    case Command::kFree:
      return RunFree(context);
    case Command::kExport:
      return RunExport(context);
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

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto invocation = ParseCommandLine(args, std::getenv("RDMAD_SOCKET"));
  if (!invocation.ok()) {
    std::fprintf(stderr, "rdmactl: %s\n",
                 std::string(invocation.status().message()).c_str());
    return kExitUsage;
  }
  CommandContext context(*invocation);
  if (absl::Status status = Dispatch(context); !status.ok()) {
    std::fprintf(stderr, "rdmactl: %s\n",
                 std::string(status.message()).c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace
}  // namespace rdmad::rdmactl

int main(int argc, char** argv) { return rdmad::rdmactl::Main(argc, argv); }
