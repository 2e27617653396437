// How rdmactl shows the daemon's answers: as text for people, or as JSON
// for scripts, from the client library's types (rdmad/info.h).
//
// Text: Render* turn one answer into the lines `rdmactl status` ... print.
// JSON: *Json build the same answer in rdmactl's one JSON dialect
// (json.h): the keys are the table's column names in lower case with '_'
// for spaces ("last_error", "local_socket"), numbers are numbers, enums use
// the tables' short names. docs/man/rdmactl.8 lists every key.
//
// All functions are pure and thread-compatible.
#ifndef RDMAD_CLIENT_RDMACTL_RENDER_H_
#define RDMAD_CLIENT_RDMACTL_RENDER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/rdmactl/json.h"
#include "rdmad/info.h"

namespace rdmad::rdmactl {

std::string OwnerText(const RegionInfo& region);  // "session 3", "daemon"
std::string ModeText(uint32_t mode);              // "0640"
std::string IncarnationText(uint64_t incarnation);  // "0x00c0ffee..."

std::string RenderStatus(const DaemonStatus& status);
std::string RenderDevices(const DeviceList& devices);
std::string RenderRegions(const std::vector<RegionInfo>& regions);
// The exports of the daemon at `peer`.
std::string RenderRemoteRegions(const std::string& peer,
                                const std::vector<RemoteRegionInfo>& regions);
// One region as `rdmactl stat` shows it; an `offset` (ADDRESS@OFFSET) adds
// where it is and how many bytes follow it.
std::string RenderStat(const RemoteRegionInfo& region, uint64_t offset = 0);
std::string RenderPeers(const std::vector<PeerInfo>& peers);
// Verbs QPs and TCP connections, each in a table of their own columns.
std::string RenderQps(const std::vector<QpInfo>& qps);
// Clients' queues (render_queues.cc); ages against `now`.
std::string RenderQueues(const std::vector<QueueInfo>& queues, absl::Time now);
// The cluster directory (render_cluster.cc): one line on it for `status`,
// `rdmactl ls` (ages against `now`) and `lookup`.
std::string DirectoryText(const std::optional<DirectoryStatus>& directory);
std::string RenderClusterRegions(const ClusterRegionList& list, absl::Time now);
std::string RenderLookup(const ClusterLookup& lookup);

Json StatusJson(const DaemonStatus& status);
Json DevicesJson(const DeviceList& devices);
Json RegionJson(const RegionInfo& region);
Json RegionsJson(const std::vector<RegionInfo>& regions);
Json RemoteRegionJson(const RemoteRegionInfo& region);
// RemoteRegionJson with "offset" and "bytes_from_offset".
Json StatJson(const RemoteRegionInfo& region, uint64_t offset);
Json RemoteRegionsJson(const std::string& peer,
                       const std::vector<RemoteRegionInfo>& regions);
Json PeersJson(const std::vector<PeerInfo>& peers);
Json QpsJson(const std::vector<QpInfo>& qps);
Json QueuesJson(const std::vector<QueueInfo>& queues, absl::Time now);
// null without a directory.
Json DirectoryJson(const std::optional<DirectoryStatus>& directory);
Json ClusterRegionsJson(const ClusterRegionList& list, absl::Time now);
Json LookupJson(const ClusterLookup& lookup);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_RENDER_H_
