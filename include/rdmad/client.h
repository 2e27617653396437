// rdmad client library
// --------------------
//
// The only header an application includes to use rdmad. A `rdmad::Client`
// talks to the rdmad daemon on this node: it opens a session (the daemon
// learns this process's uid/gid/pid from the kernel and frees everything the
// session owns when the process exits), gets registered shared-memory
// buffers that are mapped into this process, and moves data between them and
// regions that other daemons export, with one-sided RDMA WRITE/READ (or the
// TCP transport where there is no RDMA device). What the daemon reports
// comes back as the plain types of "rdmad/info.h".
//
// Example:
//
//   auto client = rdmad::Client::Connect();           // $RDMAD_SOCKET, else
//   if (!client.ok()) return client.status();         // /run/rdmad/rdmad.sock
//   auto buf = (*client)->Allocate(1 << 20);           // 1 MiB, registered
//   if (!buf.ok()) return buf.status();
//   std::memcpy(buf->data(), payload, n);              // zero-copy to the NIC
//   auto dst = rdmad::RemoteRegion::Parse("10.0.0.2:7471/kv@4096");
//   if (!dst.ok()) return dst.status();
//   auto done = (*client)->Write(*buf, 0, *dst, 0, n);  // one-sided WRITE
//   if (!done.ok()) return done.status();
//
// Daemon restarts: the next call after rdmad restarted opens a new session
// by itself. Buffers of the old session are gone from the daemon: using one
// fails FAILED_PRECONDITION (allocate a new one); a Buffer from MapRegion is
// mapped again onto the region of the same name, if it exists again. Write,
// Read and Batch open a new queue by themselves; a Queue or RemoteHandle of
// the application's own fails FAILED_PRECONDITION (open a new one).
//
// Write, Read and Batch travel on a shared-memory queue (rdmad/queue.h);
// for many operations in flight at once, use a Queue of your own.
//
// Thread-safety: a Client may be used from many threads at once. A Buffer is
// a value owned by one thread at a time; its memory may be shared as the
// application sees fit. Every call has a deadline (ClientOptions::timeout).
//
// fork(): a Client, its Queues and Buffers belong to the process that
// connected. In a child it forked, every call fails FAILED_PRECONDITION and
// destroying them frees and closes nothing of the parent's (the child's
// mappings of buffer memory stay readable): Connect a new Client there.
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
#include "rdmad/info.h"
#include "rdmad/queue.h"

namespace rdmad {

// The daemon's Local socket when none is given: $RDMAD_SOCKET if set and
// not empty, else /run/rdmad/rdmad.sock.
std::string DefaultSocketPath();

struct ClientOptions {
  // The daemon's Local socket; the session socket is this path + ".session".
  std::string socket_path = DefaultSocketPath();
  // Deadline of each call to the daemon, transfers included.
  absl::Duration timeout = absl::Seconds(30);
  // QueueOptions::spin of the queue that Write, Read and Batch use:
  // how long a caller busy-polls for its completion before it sleeps.
  absl::Duration queue_spin = kDefaultQueueSpin;
  // No call runs past this time, whatever `timeout` says: a bound on
  // everything done with this Client (a command line's --timeout).
  absl::Time deadline = absl::InfiniteFuture();
};

// A region on another daemon (or on the local one when `peer` is empty),
// named by its exported name or by an encoded descriptor.
struct RemoteRegion {
  std::string peer;        // "HOST:PORT" of the daemon's Peer service
  std::string name;        // exported region name, or
  std::string descriptor;  // "rdmad1:..." from Client::GetDescriptor
  uint64_t offset = 0;     // added to every transfer's remote offset

  // Parses "[PEER/]NAME[@OFFSET]" (see rdmactl), or an "rdmad1:"
  // descriptor with an optional "@OFFSET".
  static absl::StatusOr<RemoteRegion> Parse(absl::string_view text);
};

class Client;

// A region mapped into this process. Move-only.
//
// A Buffer from Allocate/Register belongs to the session: destroying it
// frees the region in the daemon (and unmaps it here). A Buffer from
// MapRegion is a view of a daemon-owned named region: destroying it only
// unmaps it; it is mapped read-only when the region's mode grants this
// process read but not write. A Buffer may outlive its Client: it shares
// the Client's session, which stays open (and the region with it) until
// the last Buffer and Queue of the Client are gone.
class Buffer {
 public:
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  // Start of the mapping: writes here are what the daemon sends, and reads
  // see what it received. Valid while the Buffer lives; null once it was
  // released or moved from (as are size() and id()), and null for a dma-buf
  // (Client::RegisterDmabuf), which this process reaches through the
  // allocator that made it.
  char* data() const;
  size_t size() const;
  uint64_t id() const;
  const std::string& name() const;
  bool owned() const;
  // False for a read-only view: writing to data() would fault.
  bool writable() const;

  // Frees (owned) or unmaps (view) now, reporting errors that the
  // destructor would have to ignore.
  absl::Status Release();

 private:
  friend class Client;
  friend class Queue;
  friend struct client_internal::RpcPath;
  struct Impl;
  explicit Buffer(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;  // null once released or moved from
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

  // Registers GPU memory (or any dma-buf): `length` bytes from `offset` of
  // the dma-buf `dmabuf_fd` (CUDA: cuMemGetHandleForAddressRange with
  // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD; DRM: a PRIME export). The daemon
  // registers it on every RDMA device whose driver supports dma-buf, or,
  // with no RDMA device, serves it over TCP if it can map it for the CPU;
  // FAILED_PRECONDITION, naming the devices and what would work, when it
  // can do neither. The Buffer names the region in transfers like any
  // other; its data() is null (the memory is the device's: reach it
  // through its allocator). The daemon keeps its own copy of the descriptor
  // until the Buffer is released; the caller keeps `dmabuf_fd`. See
  // docs/GPU.md.
  absl::StatusOr<Buffer> RegisterDmabuf(int dmabuf_fd, uint64_t offset,
                                        uint64_t length,
                                        AllocateOptions options = {});

  // Daemon-owned named regions: they outlive this session (rdmactl alloc).
  absl::StatusOr<RegionInfo> CreateRegion(absl::string_view name,
                                          uint64_t size, Access export_access);
  absl::StatusOr<RegionInfo> CreateRegion(absl::string_view name,
                                          uint64_t size, Access export_access,
                                          const RegionOptions& options);
  absl::Status FreeRegion(absl::string_view name);
  // Maps a named region this process may use (see RegionOptions): read-write
  // where its mode grants read and write, read-only where only read.
  absl::StatusOr<Buffer> MapRegion(absl::string_view name);
  // Changes a named region's mode and/or group, like chmod/chgrp (its owner
  // or root). Mappings made before keep the access they had.
  absl::StatusOr<RegionInfo> SetRegionPermissions(
      absl::string_view name, std::optional<uint32_t> mode,
      std::optional<uint32_t> group);

  // Grants (or with kNone revokes) remote access to a named region. With
  // `allow`, only those principals may reach it (empty: every peer that
  // may reach this daemon). When it returns, no peer operation under the
  // previous export touches the region any more.
  absl::StatusOr<RegionInfo> Export(absl::string_view name, Access access);
  absl::StatusOr<RegionInfo> Export(absl::string_view name, Access access,
                                    const std::vector<ExportGrant>& allow);
  // An exported region's descriptor, to hand to another node out of band.
  absl::StatusOr<std::string> GetDescriptor(absl::string_view name);

  // One-sided transfers between `local` and a remote region. WRITE: local
  // -> remote; READ: remote -> local. Completes when the data is in place
  // at the destination (for WRITE: acknowledged by the remote side). The
  // Completion says how many bytes moved and how; a failed transfer is the
  // call's status.
  absl::StatusOr<Completion> Write(const Buffer& local, uint64_t local_offset,
                                   const RemoteRegion& remote,
                                   uint64_t remote_offset, uint64_t length);
  absl::StatusOr<Completion> Read(const Buffer& local, uint64_t local_offset,
                                  const RemoteRegion& remote,
                                  uint64_t remote_offset, uint64_t length);
  // Many independent operations in one call, each named by RemoteRegion or
  // by RemoteHandle (of this client's session), with their tags,
  // immediates and timeouts (a timeout longer than what is left of the
  // call's is cut to it). Result i belongs to ops[i] and carries its tag
  // and its own status: one failed op fails none of the others. The call
  // fails as a whole (INVALID_ARGUMENT, naming the op) only for an op
  // without a buffer of this client or a remote region, and when the
  // daemon cannot be reached.
  absl::StatusOr<std::vector<Completion>> Batch(absl::Span<const Op> ops);

  // The asynchronous data path (rdmad/queue.h): a queue in memory shared
  // with the daemon, and remote regions opened once for it. Write, Read and
  // Batch above run on a queue of their own.
  absl::StatusOr<std::unique_ptr<Queue>> OpenQueue(QueueOptions options = {});
  // Resolves `remote` (its offset is ignored) and returns its handle.
  absl::StatusOr<RemoteHandle> OpenRemote(const RemoteRegion& remote);
  absl::Status CloseRemote(const RemoteHandle& handle);

  // Inspection.
  absl::StatusOr<DaemonStatus> GetStatus();
  absl::StatusOr<DeviceList> ListDevices();
  // Every region, in id order (fetched a page at a time).
  absl::StatusOr<std::vector<RegionInfo>> ListRegions();
  absl::StatusOr<std::vector<PeerInfo>> ListPeers();
  absl::StatusOr<std::vector<QpInfo>> ListQps();
  // The daemon's open queues, in id order (fetched a page at a time): all
  // for root, this uid's otherwise.
  absl::StatusOr<std::vector<QueueInfo>> ListQueues();
  // The regions the daemon at `peer` ("HOST:PORT") exports to this node.
  absl::StatusOr<std::vector<RemoteRegionInfo>> ListRemoteRegions(
      absl::string_view peer);
  // Size and access of one region: a local one (no peer), a peer's exported
  // one, or the one a descriptor names (asked of its daemon). NOT_FOUND if
  // there is none; FAILED_PRECONDITION for a descriptor that a re-export
  // revoked.
  absl::StatusOr<RemoteRegionInfo> StatRegion(const RemoteRegion& region);
  // The cluster directory (daemons configured with `directory`): regions
  // exported anywhere in the cluster whose name starts with `prefix`, and
  // which daemon holds one by name (`fresh`: ask etcd, not the cache).
  // FAILED_PRECONDITION if the daemon has no directory.
  absl::StatusOr<ClusterRegionList> ListClusterRegions(
      absl::string_view prefix = "");
  absl::StatusOr<ClusterLookup> LookupRegion(absl::string_view name,
                                             bool fresh = false);

  uint64_t session_id() const;
  const ClientOptions& options() const;

 private:
  friend class Buffer;
  friend class Queue;
  friend class client_internal::SharedQueue;
  friend struct client_internal::RpcPath;
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  // Maps region `id` of session `generation` (the one that made or found
  // it).
  absl::StatusOr<Buffer> MapById(uint64_t id, const std::string& name,
                                 uint64_t size, bool owned,
                                 uint64_t generation);
  // Frees region `id` of session `generation`; nothing (OK) if that
  // session is over: its buffers went with it, and the id may name another
  // region now.
  absl::Status FreeById(uint64_t id, uint64_t generation);
  // OK if `buffer` may be named in a transfer now: it belongs to this
  // client and to the current session. A view of a named region from before
  // a daemon restart is mapped again in place first; an owned buffer from
  // then fails FAILED_PRECONDITION.
  absl::Status Usable(const Buffer& buffer);
  // What Write, Read and Batch do before they run `ops`: opens a new
  // session first if the daemon restarted, then checks that every op has a
  // remote region and a buffer that may be used now (Usable).
  absl::Status PrepareToRun(absl::Span<const Op> ops);
  absl::StatusOr<Completion> Transfer(Op::Kind kind, const Buffer& local,
                                      uint64_t local_offset,
                                      const RemoteRegion& remote,
                                      uint64_t remote_offset, uint64_t length);

  std::unique_ptr<Impl> impl_;
};

}  // namespace rdmad

#endif  // RDMAD_CLIENT_H_
