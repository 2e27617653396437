// The rdmactl commands. Each runs one validated Invocation against the
// daemon and returns OK or the status of the step that failed, already
// formatted by Failed() ("<what>: <CODE>: <message>").
//
// Files: commands_inspect.cc (status, devices, regions, peers, qps),
// commands_regions.cc (alloc, free, export, descriptor), commands_data.cc
// (put, get, copy), commands_bench.cc (bench).
#ifndef RDMAD_CLIENT_RDMACTL_COMMANDS_H_
#define RDMAD_CLIENT_RDMACTL_COMMANDS_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/rdmactl/args.h"
#include "google/protobuf/message.h"
#include "rdmad/client.h"

namespace rdmad::rdmactl {

// What a command runs with: its invocation, the daemon (connected on first
// use, so that `help` and usage errors never need one) and stdout for
// messages. One per process; not thread-safe.
class CommandContext {
 public:
  explicit CommandContext(const Invocation& invocation)
      : invocation_(invocation) {}

  const Invocation& invocation() const { return invocation_; }
  const GlobalOptions& global() const { return invocation_.global; }

  // The connected client; UNAVAILABLE (formatted) if no daemon answers.
  absl::StatusOr<Client*> client();

  // Writes `text` to stdout and flushes it.
  absl::Status Print(absl::string_view text);
  // Prints `message` as one JSON document on stdout.
  absl::Status PrintJson(const google::protobuf::Message& message);

 private:
  const Invocation& invocation_;  // Not owned.
  std::unique_ptr<Client> client_;
};

absl::Status RunStatus(CommandContext& context);
absl::Status RunDevices(CommandContext& context);
absl::Status RunRegions(CommandContext& context);
absl::Status RunPeers(CommandContext& context);
absl::Status RunQps(CommandContext& context);

absl::Status RunAlloc(CommandContext& context);
absl::Status RunFree(CommandContext& context);
absl::Status RunExport(CommandContext& context);
absl::Status RunDescriptor(CommandContext& context);

absl::Status RunPut(CommandContext& context);
absl::Status RunGet(CommandContext& context);
absl::Status RunCopy(CommandContext& context);

absl::Status RunBench(CommandContext& context);

absl::Status RunLs(CommandContext& context);
absl::Status RunLookup(CommandContext& context);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_COMMANDS_H_
