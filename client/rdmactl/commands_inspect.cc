// rdmactl status, devices, regions, peers, qps, stat; and CommandContext.
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/rdmactl/commands.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/render.h"
#include "common/size.h"

namespace rdmad::rdmactl {

CommandContext::CommandContext(const Invocation& invocation, absl::Time start)
    : invocation_(invocation),
      deadline_(invocation.global.timeout.has_value()
                    ? start + *invocation.global.timeout
                    : absl::InfiniteFuture()) {}

absl::StatusOr<Client*> CommandContext::client() {
  if (client_ == nullptr) {
    ClientOptions options;
    options.socket_path = global().socket_path;
    options.timeout = global().timeout.value_or(kDefaultCallTimeout);
    options.deadline = deadline_;
    auto client = Client::Connect(options);
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

absl::Status CommandContext::PrintJson(const Json& json) {
  return Print(json.Dump());
}

absl::Status CommandContext::Answer(const Json& answer, absl::string_view text) {
  return json() ? PrintJson(answer) : Print(text);
}

Json ErrorJson(const absl::Status& status) {
  Json error = Json::Object();
  error.Set("code", absl::StatusCodeToString(status.code()))
      .Set("message", status.message())
      .Set("exit_status", ExitStatusFor(status.code()));
  Json out = Json::Object();
  out.Set("error", std::move(error));
  return out;
}

absl::Status RunStatus(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto status = (*client)->GetStatus();
  if (!status.ok()) return Failed("get status", status.status());
  return context.Answer(StatusJson(*status), RenderStatus(*status));
}

absl::Status RunDevices(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto devices = (*client)->ListDevices();
  if (!devices.ok()) return Failed("list devices", devices.status());
  return context.Answer(DevicesJson(*devices), RenderDevices(*devices));
}

absl::Status RunRegions(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  const std::string& peer = context.invocation().peer;
  if (!peer.empty()) {
    auto regions = (*client)->ListRemoteRegions(peer);
    if (!regions.ok()) {
      return Failed(absl::StrCat("list the regions ", peer, " exports"),
                    regions.status());
    }
    return context.Answer(RemoteRegionsJson(peer, *regions),
                          RenderRemoteRegions(peer, *regions));
  }
  auto regions = (*client)->ListRegions();
  if (!regions.ok()) return Failed("list regions", regions.status());
  return context.Answer(RegionsJson(*regions), RenderRegions(*regions));
}

absl::Status RunPeers(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto peers = (*client)->ListPeers();
  if (!peers.ok()) return Failed("list peers", peers.status());
  return context.Answer(PeersJson(*peers), RenderPeers(*peers));
}

absl::Status RunQps(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto qps = (*client)->ListQps();
  if (!qps.ok()) return Failed("list queue pairs", qps.status());
  return context.Answer(QpsJson(*qps), RenderQps(*qps));
}

absl::Status RunQueues(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto queues = (*client)->ListQueues();
  if (!queues.ok()) return Failed("list queues", queues.status());
  const absl::Time now = absl::Now();
  return context.Answer(QueuesJson(*queues, now), RenderQueues(*queues, now));
}

absl::Status RunStat(CommandContext& context) {
  const RegionOperand& target = context.invocation().src;
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto info = (*client)->StatRegion(target.region);
  if (!info.ok()) return Failed(absl::StrCat("stat ", target.text), info.status());
  // ADDRESS@OFFSET: where that is, and what follows it; an offset past
  // the end is an error, not a size shown as if it were not there.
  const uint64_t offset = target.region.offset;
  if (offset > info->size) {
    return Failed(absl::StrCat("stat ", target.text),
                  absl::OutOfRangeError(absl::StrCat(
                      "offset ", ByteCount(offset), " is past the end of the "
                      "region (", ByteCount(info->size), ")")));
  }
  return context.Answer(StatJson(*info, offset), RenderStat(*info, offset));
}

absl::Status RunLs(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  auto list = (*client)->ListClusterRegions(context.invocation().prefix);
  if (!list.ok()) return Failed("list the cluster's regions", list.status());
  const absl::Time now = absl::Now();
  return context.Answer(ClusterRegionsJson(*list, now),
                        RenderClusterRegions(*list, now));
}

absl::Status RunLookup(CommandContext& context) {
  auto client = context.client();
  if (!client.ok()) return client.status();
  const Invocation& inv = context.invocation();
  auto lookup = (*client)->LookupRegion(inv.name, inv.fresh);
  if (!lookup.ok()) {
    return Failed(absl::StrCat("look up ", inv.name), lookup.status());
  }
  return context.Answer(LookupJson(*lookup), RenderLookup(*lookup));
}

}  // namespace rdmad::rdmactl
