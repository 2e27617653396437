// rdmad client library: what the daemon reports
// ----------------------------------------------
//
// Plain C++ values that describe the daemon and its resources, as
// rdmad::Client returns them (include "rdmad/client.h", which includes this
// header). They are the library's own types: an application never needs the
// generated protobuf classes of rdmad's gRPC API, and the API's wire format
// can evolve without breaking applications built against these.
//
// Example (`client` from rdmad::Client::Connect()):
//
//   auto status = (*client)->GetStatus();
//   if (status.ok() && status->transport == rdmad::Transport::kTcp) {
//     std::printf("no RDMA here: %s\n", status->transport_reason.c_str());
//   }
//   auto regions = (*client)->ListRegions();   // every page, in id order
//   if (!regions.ok()) return regions.status();
//   for (const rdmad::RegionInfo& r : *regions) {
//     std::printf("%s: %llu bytes, export %s\n", r.name.c_str(),
//                 static_cast<unsigned long long>(r.size),
//                 std::string(rdmad::AccessName(r.export_access)).c_str());
//   }
//
// All types are copyable values with no hidden state; thread-compatible.
#ifndef RDMAD_INFO_H_
#define RDMAD_INFO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rdmad {

// Remote access granted on an exported region.
enum class Access { kNone, kRead, kWrite, kReadWrite };

// Parses "r", "w", "rw" (also "none", "read", "write", "read-write").
absl::StatusOr<Access> ParseAccess(absl::string_view text);
absl::string_view AccessName(Access access);  // "none", "r", "w", "rw"

// What carries data: between two daemons, or within one.
enum class Transport {
  kNone,   // not reported, or nothing moved yet
  kVerbs,  // RDMA RC queue pairs
  kTcp,    // rdmad's framed TCP data channel
  kLocal,  // both regions on this daemon: a copy inside it
};
// "verbs", "tcp", "local"; "-" for kNone.
absl::string_view TransportName(Transport transport);

// Who keeps a region alive.
enum class RegionOwner {
  kUnspecified,
  kSession,  // freed when the client session that created it ends
  kDaemon,   // a named region kept until freed or the daemon exits
};
absl::string_view RegionOwnerName(RegionOwner owner);  // "session", "daemon"

// A daemon's link to the cluster directory (DirectoryStatus::state).
enum class DirectoryState {
  kUnknown,     // not reported (a daemon newer than this library)
  kConnecting,  // never reached etcd yet
  kConnected,
  kDisconnected,  // lost it: cached entries still answer, it keeps trying
  kStopped,
};
// "connecting", "connected", "disconnected", "stopped"; "unknown".
absl::string_view DirectoryStateName(DirectoryState state);

// An RDMA port's state as its device reports it (ibv_port_state).
enum class PortState {
  kUnknown,
  kNop,
  kDown,
  kInit,
  kArmed,
  kActive,
  kActiveDefer,
};
// "NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"; "UNKNOWN".
absl::string_view PortStateName(PortState state);

// Where this daemon stands with a remote daemon (PeerInfo::state).
enum class PeerState {
  kUnknown,
  kNew,         // known, not contacted yet
  kHello,       // asking it what it offers
  kConnecting,  // setting up the data transport
  kReady,       // every data connection up
  kDegraded,    // ready, some data connections down (being rebuilt)
  kError,       // ready once, no data connection up now
  kClosed,      // its data transport was closed
  kFailed,      // the last handshake failed (last_error); the next use retries
  kRetired,     // evicted or shut down: no new operations
};
// "NEW", "HELLO", "CONNECTING", "READY", "DEGRADED", "ERROR", "CLOSED",
// "FAILED", "RETIRED"; "UNKNOWN".
absl::string_view PeerStateName(PeerState state);

// A verbs queue pair's state (ibv_qp_state), or a TCP data connection's
// (QpInfo::state).
enum class QpState {
  kUnknown,
  // Verbs.
  kReset,
  kInit,
  kRtr,
  kRts,
  kSqd,
  kSqe,
  kErr,
  kDestroyed,  // gone with its device
  // TCP.
  kIdle,
  kConnecting,
  kReady,
  kError,
  kClosed,
};
// Verbs: "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "DESTROYED";
// TCP: "IDLE", "CONNECTING", "READY", "ERROR", "CLOSED"; "UNKNOWN".
absl::string_view QpStateName(QpState state);

// A daemon's link to the cluster directory on etcd (DaemonStatus).
struct DirectoryStatus {
  std::string url;       // "etcd://HOST:PORT[,...]" as configured
  std::string endpoint;  // the endpoint in use now
  std::string prefix;    // key prefix of the cluster, e.g. "/rdmad"
  DirectoryState state = DirectoryState::kUnknown;
  std::string last_error;  // why it is not connected, or the last failure
  absl::Time state_since;
  int64_t lease_id = 0;  // the daemon's lease; 0 while not connected
  absl::Duration lease_ttl;
  uint64_t published_regions = 0;  // region keys the daemon holds in etcd
  // Regions exported here whose name another daemon holds in the
  // directory: "NAME (held by HOST:PORT)".
  std::vector<std::string> conflicts;
  uint64_t cached_regions = 0;  // entries in the daemon's cache
  bool watch_live = false;      // the cache is kept fresh by a watch
  int64_t revision = 0;         // etcd revision the cache has reached
  uint64_t reconnects = 0;      // new etcd sessions after losing etcd
  uint64_t lookups_cached = 0;  // look-ups answered by the cache
  uint64_t lookups_store = 0;   // look-ups that asked etcd
  uint64_t lookups_failed = 0;  // look-ups that failed
};

// The daemon as a whole (Client::GetStatus).
struct DaemonStatus {
  std::string version;         // e.g. "0.1.0"
  uint64_t incarnation = 0;    // random per daemon start; changes on restart
  Transport transport = Transport::kNone;  // preferred
  std::string transport_reason;  // why that transport
  std::string local_socket;      // the Unix socket of the Local service
  std::string peer_address;      // HOST:PORT other daemons reach it at
  uint32_t device_count = 0;     // usable RDMA devices
  uint64_t region_count = 0;     // regions of all owners
  uint64_t region_bytes = 0;     // sum of their sizes
  uint64_t session_count = 0;    // client sessions
  uint64_t peer_count = 0;       // remote daemons known
  absl::Duration uptime;
  uint32_t pid = 0;
  // RLIMIT_MEMLOCK of the daemon; nullopt = unlimited.
  std::optional<uint64_t> memlock_limit;
  // The cap on bytes all regions together may hold, as enforced; nullopt =
  // no cap. On a verbs daemon regions are pinned and this is the locked-
  // memory limit (or config max_pinned_bytes); on a TCP-only daemon nothing
  // is pinned and only max_pinned_bytes (if set) applies.
  std::optional<uint64_t> max_pinned_bytes;
  std::string max_pinned_bytes_source;  // where the cap comes from, in words
  uint64_t pinned_bytes = 0;            // held now, counted against the cap
  // The cluster directory; nullopt when the daemon has none.
  std::optional<DirectoryStatus> directory;
  std::string data_listen;  // HOST:PORT of its TCP data listener
  std::string metrics_url;  // its Prometheus endpoint; "" when off
  std::string config_file;  // the config file it read; "" for none
  // Devices that register dma-bufs (Client::RegisterDmabuf), as probed at
  // start; empty on a TCP-only daemon, which serves only dma-bufs its CPU
  // can map.
  std::vector<std::string> dmabuf_devices;
};

struct GidInfo {
  uint32_t index = 0;
  std::string gid;     // textual IPv6 form, e.g. "::ffff:192.0.2.1"
  std::string type;    // "IB/RoCEv1" or "RoCEv2"
  std::string netdev;  // network device it belongs to, if any
};

struct PortInfo {
  uint32_t port = 0;        // 1-based
  PortState state = PortState::kUnknown;
  std::string link_layer;   // "InfiniBand" or "Ethernet"
  uint32_t active_mtu = 0;  // bytes
  uint32_t max_mtu = 0;     // bytes
  uint32_t lid = 0;         // InfiniBand LID; 0 on RoCE
  uint32_t max_msg_size = 0;
  std::vector<GidInfo> gids;
};

struct DeviceLimits {
  uint64_t max_mr_size = 0;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cq = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
  uint32_t max_pd = 0;
  uint32_t max_qp_rd_atom = 0;
  uint32_t max_qp_init_rd_atom = 0;
};

struct DeviceInfo {
  std::string name;       // e.g. "mlx5_0", "rxe0"
  std::string node_guid;  // hex, colon-separated
  std::string transport;  // "InfiniBand", "iWARP", ...
  std::vector<PortInfo> ports;
  std::optional<DeviceLimits> limits;
  std::string driver;  // "mlx5_core", "efa", "rxe"; empty when unknown
  // Whether it registers dma-bufs (GPU memory, Client::RegisterDmabuf),
  // and what the daemon's probe at start saw.
  bool dmabuf = false;
  std::string dmabuf_probe;
  // The shared receive queue notices from peers arrive on; unset where the
  // daemon serves no verbs or the device has none (receives per QP then).
  struct NoticeReceives {
    uint32_t depth = 0;    // receives it holds when full
    uint64_t posted = 0;   // posted now; near 0, notices wait for retries
    uint64_t reposts = 0;  // posted again after a notice, since start
  };
  std::optional<NoticeReceives> notice_receives;
};

// Client::ListDevices.
struct DeviceList {
  std::vector<DeviceInfo> devices;
  // Set when there are none: says so plainly and names the fallback.
  std::string note;
};

// One registration of a region on one RDMA device.
struct DeviceKey {
  std::string device;
  uint32_t lkey = 0;
  uint32_t rkey = 0;  // 0 while not exported, or not shown to this caller
};

// One remote principal an export admits (Client::Export): a peer daemon
// and, optionally, the uid that daemon acts for. `peer` is "*" (any), the
// IP address or CIDR block its connections come from ("10.0.0.2",
// "10.0.0.0/8"), or "cert:NAME" for a daemon whose verified mutual-TLS
// certificate carries NAME. The text form (rdmactl export --allow) is
// "[UID@]PEER"; see docs/SECURITY.md.
struct ExportGrant {
  std::string peer;
  std::optional<uint32_t> uid;

  // Parses "[UID@]PEER", e.g. "1000@10.0.0.2" or "cert:node-b".
  static absl::StatusOr<ExportGrant> Parse(absl::string_view text);
};

// A region of the local daemon (Client::ListRegions, CreateRegion...).
struct RegionInfo {
  uint64_t id = 0;     // unique for the daemon's life, never reused
  std::string name;    // empty for anonymous session buffers
  uint64_t size = 0;   // bytes usable
  uint64_t mapped_size = 0;  // bytes mapped (size rounded up to the page)
  RegionOwner owner = RegionOwner::kUnspecified;
  uint64_t session_id = 0;  // the owning session, for kSession
  uint32_t owner_uid = 0;
  uint32_t owner_gid = 0;  // the region's group
  // Local permissions of a named region, like a file's (e.g. 0640).
  uint32_t mode = 0;
  Access export_access = Access::kNone;  // remote access granted
  // Who the export admits (Client::Export's `allow`); empty: every peer
  // that may reach the daemon, any uid.
  std::vector<ExportGrant> export_allow;
  std::vector<DeviceKey> keys;           // empty on TCP-only daemons
  // "memfd", "memfd-hugetlb", "client-memfd" or "dmabuf"
  std::string backing;
  absl::Time created;
};

// A region another daemon exports, as that daemon describes it to this
// node (Client::ListRemoteRegions, Client::StatRegion).
struct RemoteRegionInfo {
  std::string peer;  // HOST:PORT of the daemon holding it; "" = this one
  std::string name;
  uint64_t size = 0;
  Access access = Access::kNone;  // what peers may do with it
};

// A rail of a verbs data channel (RailInfo::state).
enum class RailState {
  kUnknown,
  kActive,      // carries operations
  kProbing,     // back from a pause: one operation at a time until one works
  kPaused,      // failed (its QPs or its port): rests, carries nothing
  kRebuilding,  // its QPs failed through no fault of its own: new ones come
                // with the next connection set-up
};
// "ACTIVE", "PROBING", "PAUSED", "REBUILDING"; "UNKNOWN".
absl::string_view RailStateName(RailState state);

// One rail of a verbs data channel (PeerInfo::rails): a local RDMA port
// paired with one of the peer's, with its own queue pairs. Operations up to
// the stripe threshold go whole to one rail; larger ones are split over the
// rails by their measured bandwidth; a failing rail is paused and its work
// goes to the others.
struct RailInfo {
  uint32_t index = 0;         // QpInfo::rail of its queue pairs
  std::string device;         // local RDMA device
  uint32_t port = 0;
  std::string remote_device;  // the peer's device
  RailState state = RailState::kUnknown;
  bool port_active = true;
  uint64_t bytes = 0;   // moved by operations (or their pieces) completed on it
  uint64_t ops = 0;     // operations or pieces completed on it
  uint64_t errors = 0;  // failed on it
  uint64_t pauses = 0;
  uint64_t outstanding_bytes = 0;
  uint64_t bandwidth_bytes_per_second = 0;  // measured (EWMA); 0 unknown
  absl::Duration paused_left;  // kPaused: how long it still rests
  int32_t numa_node = -1;      // of the device; -1 unknown
  std::string last_error;      // why it was last paused
};

// A remote daemon this daemon knows (Client::ListPeers).
struct PeerInfo {
  std::string address;  // HOST:PORT of its Peer service
  uint64_t incarnation = 0;
  Transport transport = Transport::kNone;
  std::string transport_reason;
  PeerState state = PeerState::kUnknown;
  std::string last_error;  // the last failure seen with this peer, if any
  uint64_t bytes_written = 0;
  uint64_t bytes_read = 0;
  uint64_t ops_completed = 0;
  uint64_t ops_failed = 0;
  std::vector<RailInfo> rails;  // verbs: in rail order; empty on TCP
};

// One verbs queue pair or one TCP data connection (Client::ListQps). The
// fields that mean something depend on `transport`.
struct QpInfo {
  std::string peer;
  Transport transport = Transport::kNone;
  // "initiator": opened by this daemon to reach `peer`; "responder": a
  // verbs QP this daemon created to serve `peer`'s operations (the NIC
  // serves them, so its counters stay 0).
  std::string role;
  QpState state = QpState::kUnknown;  // verbs: kRts, kErr...; TCP: kReady...
  uint64_t posted = 0;     // work requests (verbs) or frames (TCP) sent
  uint64_t completed = 0;  // completed successfully
  uint64_t errors = 0;     // failed
  uint32_t outstanding = 0;  // in flight now
  uint64_t generation = 0;   // verbs: handshake; TCP: times (re)connected
  // Verbs only.
  std::string device;
  uint32_t local_qpn = 0;
  uint32_t remote_qpn = 0;
  uint32_t path_mtu = 0;
  uint64_t post_calls = 0;  // ibv_post_send calls (one per chain)
  uint32_t rail = 0;        // the rail it belongs to (RailInfo::index)
  // TCP only.
  uint32_t connection = 0;     // index of the connection in its channel
  std::string local_address;   // HOST:PORT of this end of the socket
  std::string remote_address;  // HOST:PORT of the peer's end
};

// One shared-memory queue open on the daemon (Client::ListQueues): who
// opened it and what went through it since. A stopped queue stays listed
// until its client closes it or its session ends.
struct QueueInfo {
  uint64_t id = 0;
  uint64_t session_id = 0;
  int32_t pid = 0;  // the process whose session opened it
  uint32_t uid = 0;
  uint32_t submission_entries = 0;
  uint32_t completion_entries = 0;
  bool notifications = false;  // the session's notification queue
  std::string engine;          // the daemon's engine loop that polls it
  absl::Time opened;
  uint32_t in_flight = 0;  // taken by the daemon, completion not yet out
  uint64_t submitted = 0;  // operations the daemon took
  uint64_t completed = 0;  // completions it published
  uint64_t failed = 0;     // of those, not OK
  uint64_t notified = 0;   // notifications delivered on it
  // Completions that had to wake the client asleep on the queue (each
  // costs a wake-up: close to `completed` means Wait's spin is shorter
  // than the operations take), and doorbells that woke the daemon.
  uint64_t client_wakeups = 0;
  uint64_t doorbells = 0;
  // OK while it runs; once stopped, why (the status Queue::status() says).
  absl::Status stop_reason;
  // A notification queue: notifications the daemon holds for it (its
  // completion ring has no room to spare: its client is behind), and
  // those it lost for it past its uid's notification_backlog.
  uint64_t notifications_held = 0;
  uint64_t notifications_lost = 0;
};

// One exported region of the cluster, as the directory lists it
// (Client::ListClusterRegions, Client::LookupRegion).
struct ClusterRegion {
  std::string name;
  std::string node;  // HOST:PORT of the daemon that holds it
  uint64_t size = 0;
  Access access = Access::kNone;
  uint64_t region_id = 0;  // the holder's id of the region
  // Generation of the entry: the holder's incarnation and the etcd
  // revision of the entry.
  uint64_t incarnation = 0;
  int64_t revision = 0;
  absl::Time exported;  // when the holder exported it (its clock)
};

// Client::ListClusterRegions.
struct ClusterRegionList {
  std::vector<ClusterRegion> regions;  // sorted by name
  int64_t revision = 0;                // etcd revision of the listing
  bool truncated = false;   // more matched than the listing limit (10000)
  uint32_t unreadable = 0;  // keys whose record was not rdmad's
};

// Client::LookupRegion.
struct ClusterLookup {
  ClusterRegion region;
  bool from_cache = false;  // answered from the daemon's cache, not etcd
  absl::Duration latency;   // daemon-side time of the look-up
};

}  // namespace rdmad

#endif  // RDMAD_INFO_H_
