// rdmad client library
// --------------------
//
// The only header an application includes to use rdmad. A `rdmad::Client`
// talks to the rdmad daemon on this node: it opens a session (the daemon
// learns this process's uid/gid/pid from the kernel and frees everything the
// session owns when the process exits), gets registered shared-memory
// buffers that are mapped into this process, and moves data between them and
// regions that other daemons export, with one-sided RDMA WRITE/READ (or the
// TCP transport where there is no RDMA device).
//
// Example:
//
//   auto client = rdmad::Client::Connect();           // /run/rdmad/rdmad.sock
//   if (!client.ok()) return client.status();
//   auto buf = (*client)->Allocate(1 << 20);           // 1 MiB, registered
//   std::memcpy(buf->data(), payload, n);              // zero-copy to the NIC
//   auto dst = rdmad::RemoteRegion::Parse("10.0.0.2:7471/kv@4096");
//   auto done = (*client)->Write(*buf, 0, *dst, 0, n); // one-sided WRITE
//
// Write, Read and Batch travel on a shared-memory queue (rdmad/queue.h);
// for many operations in flight at once, use a Queue of your own.
//
// Thread-safety: a Client may be used from many threads at once. A Buffer is
// a value owned by one thread at a time; its memory may be shared as the
// application sees fit. Every call has a deadline (ClientOptions::timeout).
#ifndef RDMAD_CLIENT_H_
#define RDMAD_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rdmad/queue.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad {

// Remote access granted on an exported region.
enum class Access { kNone, kRead, kWrite, kReadWrite };

// Parses "r", "w", "rw" (also "none", "read", "write", "read-write").
absl::StatusOr<Access> ParseAccess(absl::string_view text);
absl::string_view AccessName(Access access);  // "none", "r", "w", "rw"

// How Client::Write, Read and Batch reach the daemon.
enum class TransferPath {
  kQueue,  // a shared-memory queue (the default: no system call per op)
  kRpc,    // one Local gRPC call per Write/Read/Batch (for comparison)
};

struct ClientOptions {
  // The daemon's Local socket; the session socket is this path + ".session".
  std::string socket_path = "/run/rdmad/rdmad.sock";
  // Deadline of each call to the daemon, transfers included.
  absl::Duration timeout = absl::Seconds(30);
  TransferPath transfer_path = TransferPath::kQueue;
};

// A region on another daemon (or on the local one when `peer` is empty),
// named by its exported name or by an encoded descriptor.
struct RemoteRegion {
  std::string peer;        // "HOST:PORT" of the daemon's Peer service
  std::string name;        // exported region name, or
  std::string descriptor;  // "rdmad1:..." from Client::GetDescriptor
  uint64_t offset = 0;     // added to every transfer's remote offset

  // Parses "[PEER/]NAME[@OFFSET]" (see rdmactl) or an "rdmad1:" descriptor.
  static absl::StatusOr<RemoteRegion> Parse(absl::string_view text);
};

class Client;

// A region mapped into this process. Move-only.
//
// A Buffer from Allocate/Register belongs to the session: destroying it
// frees the region in the daemon (and unmaps it here). A Buffer from
// MapRegion is a view of a daemon-owned named region: destroying it only
// unmaps it. The Client must outlive its Buffers.
class Buffer {
 public:
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  // Start of the mapping: writes here are what the daemon sends, and reads
  // see what it received. Valid while the Buffer lives.
  char* data() const { return data_; }
  size_t size() const { return size_; }
  uint64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  bool owned() const { return owned_; }

  // Frees (owned) or unmaps (view) now, reporting errors that the
  // destructor would have to ignore.
  absl::Status Release();

 private:
  friend class Client;
  friend class Queue;
  Buffer(Client* client, uint64_t id, std::string name, char* data,
         size_t size, size_t mapped_size, bool owned);
  void Unmap();

  Client* client_ = nullptr;  // Not owned.
  uint64_t id_ = 0;
  std::string name_;
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_size_ = 0;
  bool owned_ = false;
};

struct AllocateOptions {
  std::string name;                // optional unique name
  Access export_access = Access::kNone;
};

// Local permissions of a daemon-owned named region, like a file's: read
// (4) and write (2) bits for owner, group and others. Sending from a region
// needs read, receiving into it write, mapping it both; freeing and
// exporting need its owner (or root).
struct RegionOptions {
  uint32_t mode = 0;              // 0 = 0600 (owner only)
  std::optional<uint32_t> group;  // one of the caller's groups; unset = its gid
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

struct TransferResult {
  uint64_t bytes = 0;
  v1::TransportKind transport = v1::TRANSPORT_UNSPECIFIED;
  absl::Duration daemon_latency;  // post-to-completion inside the daemon
};

// One operation of a Batch call.
struct TransferOp {
  enum class Kind { kWrite, kRead } kind = Kind::kWrite;
  const Buffer* local = nullptr;  // Not owned.
  uint64_t local_offset = 0;
  RemoteRegion remote;
  uint64_t remote_offset = 0;
  uint64_t length = 0;
};

class Client {
 public:
  // Connects to the daemon and opens a session. UNAVAILABLE, naming the
  // socket, when no daemon answers there.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      ClientOptions options = {});

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // A new registered buffer of `size` bytes owned by this session.
  absl::StatusOr<Buffer> Allocate(uint64_t size, AllocateOptions options = {});

  // Registers memory this process created: `memfd` (from memfd_create with
  // MFD_ALLOW_SEALING; sealed here against shrinking) is passed to the
  // daemon, which maps and registers its first `size` bytes. The caller
  // keeps its own descriptor.
  absl::StatusOr<Buffer> Register(int memfd, uint64_t size,
                                  AllocateOptions options = {});

  // Daemon-owned named regions: they outlive this session (rdmactl alloc).
  absl::StatusOr<v1::RegionInfo> CreateRegion(absl::string_view name,
                                              uint64_t size,
                                              Access export_access);
  absl::StatusOr<v1::RegionInfo> CreateRegion(absl::string_view name,
                                              uint64_t size,
                                              Access export_access,
                                              const RegionOptions& options);
  absl::Status FreeRegion(absl::string_view name);
  // Maps a region this process may use (its uid's named regions; root: all).
  absl::StatusOr<Buffer> MapRegion(absl::string_view name);

  // Grants (or with kNone revokes) remote access to a named region. With
  // `allow`, only those principals may reach it (empty: every peer that
  // may reach this daemon). When it returns, no peer operation under the
  // previous export touches the region any more.
  absl::StatusOr<v1::RegionInfo> Export(absl::string_view name, Access access);
  absl::StatusOr<v1::RegionInfo> Export(absl::string_view name, Access access,
                                        const std::vector<ExportGrant>& allow);
  // An exported region's descriptor, to hand to another node out of band.
  absl::StatusOr<std::string> GetDescriptor(absl::string_view name);

  // One-sided transfers between `local` and a remote region. WRITE: local
  // -> remote; READ: remote -> local. Completes when the data is in place
  // at the destination (for WRITE: acknowledged by the remote side).
  absl::StatusOr<TransferResult> Write(const Buffer& local,
                                       uint64_t local_offset,
                                       const RemoteRegion& remote,
                                       uint64_t remote_offset, uint64_t length);
  absl::StatusOr<TransferResult> Read(const Buffer& local,
                                      uint64_t local_offset,
                                      const RemoteRegion& remote,
                                      uint64_t remote_offset, uint64_t length);
  // Many independent operations in one call; result i belongs to ops[i].
  absl::StatusOr<std::vector<absl::Status>> Batch(
      const std::vector<TransferOp>& ops);

  // The asynchronous data path (rdmad/queue.h): a queue in memory shared
  // with the daemon, and remote regions opened once for it. Write, Read and
  // Batch above run on a queue of their own.
  absl::StatusOr<std::unique_ptr<Queue>> OpenQueue(QueueOptions options = {});
  // Resolves `remote` (its offset is ignored) and returns its handle.
  absl::StatusOr<RemoteHandle> OpenRemote(const RemoteRegion& remote);
  absl::Status CloseRemote(const RemoteHandle& handle);

  // Inspection.
  absl::StatusOr<v1::GetStatusResponse> GetStatus();
  absl::StatusOr<v1::ListDevicesResponse> ListDevices();
  absl::StatusOr<v1::ListRegionsResponse> ListRegions();
  absl::StatusOr<v1::ListPeersResponse> ListPeers();
  absl::StatusOr<v1::ListQpsResponse> ListQps();
  // The cluster directory (daemons configured with `directory`): regions
  // exported anywhere in the cluster whose name starts with `prefix`, and
  // which daemon holds one by name (`fresh`: ask etcd, not the cache).
  // FAILED_PRECONDITION if the daemon has no directory.
  absl::StatusOr<v1::ListClusterRegionsResponse> ListClusterRegions(
      absl::string_view prefix = "");
  absl::StatusOr<v1::LookupRegionResponse> LookupRegion(absl::string_view name,
                                                        bool fresh = false);

  uint64_t session_id() const;
  const ClientOptions& options() const;

 private:
  friend class Buffer;
  friend class Queue;
  absl::Status CloseQueue(uint64_t id);
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  absl::StatusOr<Buffer> MapById(const v1::RegionInfo& region, bool owned);
  absl::Status FreeById(uint64_t id);
  absl::StatusOr<std::vector<absl::StatusOr<TransferResult>>> RunRpc(
      const std::vector<TransferOp>& ops);
  absl::StatusOr<TransferResult> Transfer(bool write, const Buffer& local,
                                          uint64_t local_offset,
                                          const RemoteRegion& remote,
                                          uint64_t remote_offset,
                                          uint64_t length);

  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_CLIENT_H_
