// The rdmactl commands. Each runs one validated Invocation against the
// daemon and returns OK or the status of the step that failed, already
// formatted by Failed() ("<what>: <CODE>: <message>"); main() turns that
// into an exit status (ExitStatusFor) and, with --json, a JSON error.
//
// Files: commands_inspect.cc (status, devices, regions, peers, qps, stat),
// commands_regions.cc (alloc, free, export, chmod, chgrp, descriptor),
// commands_data.cc (put, get, copy), commands_bench.cc (bench).
#ifndef RDMAD_CLIENT_RDMACTL_COMMANDS_H_
#define RDMAD_CLIENT_RDMACTL_COMMANDS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/rdmactl/args.h"
#include "client/rdmactl/json.h"
#include "rdmad/client.h"

namespace rdmad::rdmactl {

// What a command runs with: its invocation, the daemon (connected on first
// use, so that `help` and usage errors never need one) and stdout for
// messages. One per process; not thread-safe.
class CommandContext {
 public:
  // `start` is when the command began: an explicit --timeout counts from
  // there.
  CommandContext(const Invocation& invocation, absl::Time start);

  const Invocation& invocation() const { return invocation_; }
  const GlobalOptions& global() const { return invocation_.global; }
  bool json() const { return invocation_.global.json; }

  // When the whole command must be done: start + --timeout, or never.
  absl::Time deadline() const { return deadline_; }

  // The connected client; UNAVAILABLE (formatted) if no daemon answers. Its
  // calls each get --timeout (30s by default) and none runs past
  // deadline().
  absl::StatusOr<Client*> client();

  // Writes `text` to stdout and flushes it.
  absl::Status Print(absl::string_view text);
  // Prints `json` (one document) on stdout.
  absl::Status PrintJson(const Json& json);
  // Prints `json` with --json, else `text`.
  absl::Status Answer(const Json& json, absl::string_view text);

 private:
  const Invocation& invocation_;  // Not owned.
  const absl::Time deadline_;
  std::unique_ptr<Client> client_;
};

// The JSON document of a failed command: {"error": {"code": "NOT_FOUND",
// "message": "...", "exit_status": 4}}.
Json ErrorJson(const absl::Status& status);

absl::Status RunStatus(CommandContext& context);
absl::Status RunDevices(CommandContext& context);
absl::Status RunRegions(CommandContext& context);
absl::Status RunPeers(CommandContext& context);
absl::Status RunQps(CommandContext& context);
absl::Status RunQueues(CommandContext& context);
absl::Status RunStat(CommandContext& context);

absl::Status RunAlloc(CommandContext& context);
absl::Status RunFree(CommandContext& context);
absl::Status RunExport(CommandContext& context);
absl::Status RunChmod(CommandContext& context);
absl::Status RunChgrp(CommandContext& context);
absl::Status RunDescriptor(CommandContext& context);

absl::Status RunPut(CommandContext& context);
absl::Status RunGet(CommandContext& context);
absl::Status RunCopy(CommandContext& context);

absl::Status RunBench(CommandContext& context);

absl::Status RunLs(CommandContext& context);
absl::Status RunLookup(CommandContext& context);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_COMMANDS_H_
