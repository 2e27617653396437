// rdmactl status, devices, regions, peers, qps; and CommandContext.
#include <cerrno>
#include <cstdio>

#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/render.h"

namespace rdmad::rdmactl {
namespace {

// Asks the daemon with `call` and prints the answer as text or JSON.
template <typename Response>
absl::Status Inspect(CommandContext& context, absl::string_view what,
                     absl::StatusOr<Response> (Client::*call)(),
                     std::string (*render)(const Response&)) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  absl::StatusOr<Response> response = ((*client)->*call)();
  if (!response.ok()) return Failed(what, response.status());
  if (context.global().json) return context.PrintJson(*response);
  return context.Print(render(*response));
}

}  // namespace

absl::StatusOr<Client*> CommandContext::client() {
  if (client_ == nullptr) {
    const bool rpc = invocation_.command == Command::kBench &&
                     invocation_.bench.path == BenchPath::kGrpc;
    auto client = Client::Connect(
        {.socket_path = global().socket_path,
         .timeout = global().timeout,
         .transfer_path = rpc ? TransferPath::kRpc : TransferPath::kQueue});
    if (!client.ok()) return Failed("connect", client.status());
    client_ = *std::move(client);
  }
  return client_.get();
}

absl::Status CommandContext::Print(absl::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
      std::fflush(stdout) != 0) {
    return Failed("write to stdout",
                  absl::ErrnoToStatus(errno, "fwrite(stdout)"));
  }
  return absl::OkStatus();
}

absl::Status CommandContext::PrintJson(
    const google::protobuf::Message& message) {
  auto json = ToJson(message);
  if (!json.ok()) return Failed("print JSON", json.status());
  return Print(*json);
}

absl::Status RunStatus(CommandContext& context) {
  return Inspect(context, "get status", &Client::GetStatus, &RenderStatus);
}

absl::Status RunDevices(CommandContext& context) {
  return Inspect(context, "list devices", &Client::ListDevices,
                 &RenderDevices);
}

absl::Status RunRegions(CommandContext& context) {
  return Inspect(context, "list regions", &Client::ListRegions,
                 &RenderRegions);
}

absl::Status RunPeers(CommandContext& context) {
  return Inspect(context, "list peers", &Client::ListPeers, &RenderPeers);
}

absl::Status RunQps(CommandContext& context) {
  return Inspect(context, "list queue pairs", &Client::ListQps, &RenderQps);
}

absl::Status RunLs(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto response = (*client)->ListClusterRegions(context.invocation().prefix);
  if (!response.ok()) {
    return Failed("list the cluster's regions", response.status());
  }
  if (context.global().json) return context.PrintJson(*response);
  return context.Print(RenderClusterRegions(*response, absl::Now()));
}

absl::Status RunLookup(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  const Invocation& inv = context.invocation();
  auto response = (*client)->LookupRegion(inv.name, inv.fresh);
  if (!response.ok()) {
    return Failed(absl::StrCat("look up ", inv.name), response.status());
  }
  if (context.global().json) return context.PrintJson(*response);
  return context.Print(RenderLookup(*response));
}

}  // namespace rdmad::rdmactl
