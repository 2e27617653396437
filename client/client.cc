// Implementation of include/rdmad/client.h.
#include "rdmad/client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/region_address.h"
#include "common/session_wire.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "common/queue_layout.h"
#include "common/queue_ring.h"
#include "client/queue_impl.h"
#include "client/shared_queue.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

v1::Access ToProto(Access access) {
  switch (access) {
    case Access::kRead:
      return v1::ACCESS_READ;
    case Access::kWrite:
      return v1::ACCESS_WRITE;
    case Access::kReadWrite:
      return v1::ACCESS_READ_WRITE;
    case Access::kNone:
      break;
  }
  return v1::ACCESS_NONE;
}

v1::RemoteRegion ToProto(const RemoteRegion& remote) {
  v1::RemoteRegion out;
  out.set_peer(remote.peer);
  if (!remote.descriptor.empty()) {
    out.set_encoded_descriptor(remote.descriptor);
  } else {
    out.set_name(remote.name);
  }
  return out;
}

absl::StatusOr<UniqueFd> ConnectSessionSocket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr),
                sizeof(addr)) != 0) {
    const int error = errno;
    return absl::UnavailableError(absl::StrCat(
        "cannot connect to rdmad at ", path, ": ", std::strerror(error),
        ". Is rdmad running (systemctl status rdmad)? Use --socket or "
        "RDMAD_SOCKET for a daemon on another socket"));
  }
  return fd;
}

}  // namespace

absl::StatusOr<Access> ParseAccess(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "r" || t == "read") return Access::kRead;
  if (t == "w" || t == "write") return Access::kWrite;
  if (t == "rw" || t == "wr" || t == "read-write") return Access::kReadWrite;
  if (t == "none" || t == "-") return Access::kNone;
  return absl::InvalidArgumentError(absl::StrCat(
      "access '", text, "' is not one of r, w, rw, none"));
}

absl::string_view AccessName(Access access) {
  switch (access) {
    case Access::kRead:
      return "r";
    case Access::kWrite:
      return "w";
    case Access::kReadWrite:
      return "rw";
    case Access::kNone:
      break;
  }
  return "none";
}

absl::StatusOr<RemoteRegion> RemoteRegion::Parse(absl::string_view text) {
  RemoteRegion remote;
  if (absl::StartsWith(text, "rdmad1:")) {
    remote.descriptor = std::string(text);
    return remote;
  }
  RDMAD_ASSIGN_OR_RETURN(RegionAddress address, ParseRegionAddress(text));
  remote.peer = std::move(address.peer);
  remote.name = std::move(address.name);
  remote.offset = address.offset;
  return remote;
}

// ---------------------------------------------------------------------------
// Buffer

Buffer::Buffer(Client* client, uint64_t id, std::string name, char* data,
               size_t size, size_t mapped_size, bool owned)
    : client_(client),
      id_(id),
      name_(std::move(name)),
      data_(data),
      size_(size),
      mapped_size_(mapped_size),
      owned_(owned) {}

Buffer::Buffer(Buffer&& other) noexcept { *this = std::move(other); }

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    (void)Release();
    client_ = std::exchange(other.client_, nullptr);
    id_ = std::exchange(other.id_, 0);
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_size_ = std::exchange(other.mapped_size_, 0);
    owned_ = std::exchange(other.owned_, false);
  }
  return *this;
}

Buffer::~Buffer() { (void)Release(); }

void Buffer::Unmap() {
  if (data_ != nullptr) ::munmap(data_, mapped_size_);
  data_ = nullptr;
}

absl::Status Buffer::Release() {
  if (client_ == nullptr) return absl::OkStatus();
  Unmap();
  absl::Status status;
  if (owned_) status = client_->FreeById(id_);
  client_ = nullptr;
  return status;
}

// ---------------------------------------------------------------------------
// Client

struct Client::Impl {
  ClientOptions options;
  std::unique_ptr<v1::Local::Stub> stub;
  UniqueFd session_socket;
  uint64_t session_id = 0;
  std::string token;
  // The session socket carries one request and its reply at a time.
  absl::Mutex session_mu;
  // The queue behind Write, Read and Batch (made with the Client).
  std::unique_ptr<SharedQueue> transfers;

  void Prepare(grpc::ClientContext& context) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout));
    context.AddMetadata(session_wire::kSessionMetadataKey, token);
  }

  // Sends a request on the session socket and waits for its reply.
  absl::StatusOr<session_wire::Message> Ask(const session_wire::Message& request,
                                            int fd_to_send)
      ABSL_LOCKS_EXCLUDED(session_mu) {
    absl::MutexLock lock(&session_mu);
    RDMAD_RETURN_IF_ERROR(
        session_wire::Send(session_socket.get(), request, fd_to_send));
    auto reply = session_wire::Receive(session_socket.get(), options.timeout);
    if (!reply.ok()) {
      if (absl::IsUnavailable(reply.status())) {
        return absl::UnavailableError(
            "rdmad closed this client's session (did the daemon restart?); "
            "connect again");
      }
      return reply.status();
    }
    if (reply->type == session_wire::MessageType::kError) {
      return session_wire::StatusFromError(*reply);
    }
    return reply;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->transfers = std::make_unique<SharedQueue>(this);
}
Client::~Client() {
  // Its queue closes through this client: first, while all of it lives.
  impl_->transfers.reset();
}

uint64_t Client::session_id() const { return impl_->session_id; }
const ClientOptions& Client::options() const { return impl_->options; }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  RDMAD_ASSIGN_OR_RETURN(
      impl->session_socket,
      ConnectSessionSocket(
          session_wire::SessionSocketPath(impl->options.socket_path)));
  RDMAD_ASSIGN_OR_RETURN(
      session_wire::Message hello,
      session_wire::Receive(impl->session_socket.get(), impl->options.timeout));
  if (hello.type != session_wire::MessageType::kHello || hello.text.empty()) {
    return absl::InternalError(
        "rdmad did not greet this client with a session: version mismatch?");
  }
  impl->session_id = hello.a;
  impl->token = std::move(hello.text);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  impl->stub = v1::Local::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("unix:", impl->options.socket_path),
      grpc::InsecureChannelCredentials(), args));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<Buffer> Client::MapById(const v1::RegionInfo& region,
                                       bool owned) {
  session_wire::Message request;
  request.type = session_wire::MessageType::kGetFd;
  request.a = region.id();
  auto reply = impl_->Ask(request, -1);
  if (!reply.ok() || reply->type != session_wire::MessageType::kFd ||
      !reply->fd.valid() || reply->a != region.id()) {
    if (owned) (void)FreeById(region.id());
    return reply.ok() ? absl::InternalError(
                            "rdmad answered the descriptor request without "
                            "the region's memory")
                      : reply.status();
  }
  const size_t mapped = reply->b;
  void* data = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED,
                      reply->fd.get(), 0);
  if (data == MAP_FAILED) {
    const absl::Status status =
        absl::ErrnoToStatus(errno, "mmap of the region's shared memory");
    if (owned) (void)FreeById(region.id());
    return status;
  }
  return Buffer(this, region.id(), region.name(), static_cast<char*>(data),
                region.size(), mapped, owned);
}

absl::Status Client::FreeById(uint64_t id) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::FreeRegionRequest request;
  request.mutable_region()->set_id(id);
  v1::FreeRegionResponse response;
  return FromGrpc(impl_->stub->FreeRegion(&context, request, &response));
}

absl::StatusOr<Buffer> Client::Allocate(uint64_t size,
                                        AllocateOptions options) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::AllocateBufferRequest request;
  request.set_size(size);
  request.set_name(options.name);
  request.set_export_access(ToProto(options.export_access));
  v1::AllocateBufferResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->AllocateBuffer(&context, request, &response)));
  return MapById(response.region(), /*owned=*/true);
}

absl::StatusOr<Buffer> Client::Register(int memfd, uint64_t size,
                                        AllocateOptions options) {
  // The daemon refuses memory that could be truncated under its mapping.
  if (::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot seal the memfd against shrinking (", std::strerror(errno),
        "): create it with memfd_create(..., MFD_ALLOW_SEALING)"));
  }
  session_wire::Message pass;
  pass.type = session_wire::MessageType::kPassFd;
  RDMAD_ASSIGN_OR_RETURN(session_wire::Message ack, impl_->Ask(pass, memfd));
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::RegisterBufferRequest request;
  request.set_fd_token(ack.a);
  request.set_size(size);
  request.set_name(options.name);
  request.set_export_access(ToProto(options.export_access));
  v1::RegisterBufferResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->RegisterBuffer(&context, request, &response)));
  return MapById(response.region(), /*owned=*/true);
}

absl::StatusOr<v1::RegionInfo> Client::CreateRegion(absl::string_view name,
                                                    uint64_t size,
                                                    Access export_access) {
  return CreateRegion(name, size, export_access, RegionOptions{});
}

absl::StatusOr<v1::RegionInfo> Client::CreateRegion(
    absl::string_view name, uint64_t size, Access export_access,
    const RegionOptions& options) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::AllocateBufferRequest request;
  request.set_size(size);
  request.set_name(std::string(name));
  request.set_daemon_owned(true);
  request.set_export_access(ToProto(export_access));
  request.set_mode(options.mode);
  if (options.group.has_value()) request.set_group(*options.group);
  v1::AllocateBufferResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->AllocateBuffer(&context, request, &response)));
  return response.region();
}

absl::Status Client::FreeRegion(absl::string_view name) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::FreeRegionRequest request;
  request.mutable_region()->set_name(std::string(name));
  v1::FreeRegionResponse response;
  return FromGrpc(impl_->stub->FreeRegion(&context, request, &response));
}

absl::StatusOr<Buffer> Client::MapRegion(absl::string_view name) {
  RDMAD_ASSIGN_OR_RETURN(v1::ListRegionsResponse regions, ListRegions());
  for (const v1::RegionInfo& region : regions.regions()) {
    if (region.name() == name) return MapById(region, /*owned=*/false);
  }
  return absl::NotFoundError(absl::StrCat(
      "no region named '", name, "' on this daemon (see rdmactl regions)"));
}

absl::StatusOr<ExportGrant> ExportGrant::Parse(absl::string_view text) {
  ExportGrant grant;
  const size_t at = text.find('@');
  if (at != absl::string_view::npos) {
    uint32_t uid = 0;
    const absl::string_view number = text.substr(0, at);
    if (number.empty() ||
        number.find_first_not_of("0123456789") != absl::string_view::npos ||
        !absl::SimpleAtoi(number, &uid)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", text,
                       "': the part before '@' must be a numeric uid, as in "
                       "1000@10.0.0.2"));
    }
    grant.uid = uid;
    text = text.substr(at + 1);
  }
  if (text.empty()) {
    return absl::InvalidArgumentError(
        "an allowed principal needs a peer: '*', an address or CIDR block, "
        "or cert:NAME");
  }
  grant.peer = std::string(text);
  return grant;
}

absl::StatusOr<v1::RegionInfo> Client::Export(absl::string_view name,
                                              Access access) {
  return Export(name, access, {});
}

absl::StatusOr<v1::RegionInfo> Client::Export(
    absl::string_view name, Access access,
    const std::vector<ExportGrant>& allow) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::ExportRegionRequest request;
  request.mutable_region()->set_name(std::string(name));
  request.set_access(ToProto(access));
  for (const ExportGrant& grant : allow) {
    v1::ExportGrant* g = request.add_allow();
    g->set_peer(grant.peer);
    if (grant.uid.has_value()) g->set_uid(*grant.uid);
  }
  v1::ExportRegionResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->ExportRegion(&context, request, &response)));
  return response.region();
}

absl::StatusOr<std::string> Client::GetDescriptor(absl::string_view name) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::GetDescriptorRequest request;
  request.mutable_region()->set_name(std::string(name));
  v1::GetDescriptorResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->GetDescriptor(&context, request, &response)));
  return response.encoded();
}

absl::StatusOr<TransferResult> Client::Transfer(bool write, const Buffer& local,
                                                uint64_t local_offset,
                                                const RemoteRegion& remote,
                                                uint64_t remote_offset,
                                                uint64_t length) {
  if (local.client_ != this) {
    return absl::InvalidArgumentError(
        "the local buffer does not belong to this client (or was released)");
  }
  TransferOp op;
  op.kind = write ? TransferOp::Kind::kWrite : TransferOp::Kind::kRead;
  op.local = &local;
  op.local_offset = local_offset;
  op.remote = remote;
  op.remote_offset = remote_offset;
  op.length = length;
  auto results = impl_->options.transfer_path == TransferPath::kRpc
                     ? RunRpc({op})
                     : impl_->transfers->Run({op}, impl_->options.timeout);
  if (!results.ok()) return results.status();
  return std::move((*results)[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<TransferResult>>> Client::RunRpc(
    const std::vector<TransferOp>& ops) {
  auto fill = [](const TransferOp& op, v1::TransferOp* out) {
    out->set_op(op.kind == TransferOp::Kind::kWrite ? v1::OP_WRITE
                                                    : v1::OP_READ);
    out->mutable_local()->set_id(op.local->id());
    out->set_local_offset(op.local_offset);
    *out->mutable_remote() = ToProto(op.remote);
    out->set_remote_offset(op.remote.offset + op.remote_offset);
    out->set_length(op.length);
  };
  grpc::ClientContext context;
  impl_->Prepare(context);
  std::vector<absl::StatusOr<TransferResult>> results;
  if (ops.size() == 1) {
    v1::TransferRequest request;
    fill(ops[0], request.mutable_op());
    v1::TransferResponse response;
    const bool write = ops[0].kind == TransferOp::Kind::kWrite;
    absl::Status status = FromGrpc(
        write ? impl_->stub->Write(&context, request, &response)
              : impl_->stub->Read(&context, request, &response));
    if (status.ok()) {
      results.push_back(TransferResult{response.bytes(), response.transport(),
                                       absl::Nanoseconds(response.latency_ns())});
    } else {
      results.push_back(status);
    }
    return results;
  }
  v1::BatchRequest request;
  for (const TransferOp& op : ops) fill(op, request.add_ops());
  v1::BatchResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->Batch(&context, request, &response)));
  for (const v1::OpStatus& result : response.results()) {
    if (result.code() == 0) {
      results.push_back(TransferResult{});
    } else {
      results.push_back(absl::Status(
          static_cast<absl::StatusCode>(result.code()), result.message()));
    }
  }
  return results;
}

absl::StatusOr<TransferResult> Client::Write(const Buffer& local,
                                             uint64_t local_offset,
                                             const RemoteRegion& remote,
                                             uint64_t remote_offset,
                                             uint64_t length) {
  return Transfer(true, local, local_offset, remote, remote_offset, length);
}

absl::StatusOr<TransferResult> Client::Read(const Buffer& local,
                                            uint64_t local_offset,
                                            const RemoteRegion& remote,
                                            uint64_t remote_offset,
                                            uint64_t length) {
  return Transfer(false, local, local_offset, remote, remote_offset, length);
}

absl::StatusOr<std::vector<absl::Status>> Client::Batch(
    const std::vector<TransferOp>& ops) {
  for (const TransferOp& op : ops) {
    if (op.local == nullptr || op.local->client_ != this) {
      return absl::InvalidArgumentError(
          "a batch operation has no local buffer of this client");
    }
  }
  auto results = impl_->options.transfer_path == TransferPath::kRpc
                     ? RunRpc(ops)
                     : impl_->transfers->Run(ops, impl_->options.timeout);
  if (!results.ok()) return results.status();
  std::vector<absl::Status> statuses;
  statuses.reserve(results->size());
  for (const auto& r : *results) statuses.push_back(r.status());
  return statuses;
}

absl::StatusOr<std::unique_ptr<Queue>> Client::OpenQueue(QueueOptions options) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::OpenQueueRequest request;
  request.set_submission_entries(options.depth);
  request.set_completion_entries(options.completion_depth);
  request.set_default_timeout_ms(static_cast<uint32_t>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(options.default_timeout),
                          1, int64_t{3600} * 1000)));
  request.set_notifications(options.notifications);
  v1::OpenQueueResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->OpenQueue(&context, request, &response)));
  const uint64_t id = response.queue_id();
  // The segment and the two eventfds come on the session socket.
  UniqueFd fds[3];
  uint64_t size = 0;
  for (uint64_t which = 0; which < 3; ++which) {
    session_wire::Message ask;
    ask.type = session_wire::MessageType::kGetQueueFd;
    ask.a = id;
    ask.b = which;
    auto reply = impl_->Ask(ask, -1);
    if (!reply.ok() || reply->type != session_wire::MessageType::kFd ||
        !reply->fd.valid() || reply->a != id) {
      (void)CloseQueue(id);
      return reply.ok() ? absl::InternalError(
                              "rdmad answered without the queue's descriptor")
                        : reply.status();
    }
    if (which == 0) size = reply->b;
    fds[which] = std::move(reply->fd);
  }
  if (size != response.segment_size() || size < queue::kHeaderSize) {
    (void)CloseQueue(id);
    return absl::InternalError("rdmad gave a queue segment of the wrong size");
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      fds[0].get(), 0);
  if (base == MAP_FAILED) {
    const absl::Status status =
        absl::ErrnoToStatus(errno, "mmap of the queue's shared memory");
    (void)CloseQueue(id);
    return status;
  }
  if (absl::Status s = queue::CheckSegment(base, size); !s.ok()) {
    ::munmap(base, size);
    (void)CloseQueue(id);
    return s;
  }
  auto impl = std::make_unique<Queue::Impl>(this, id, base, size,
                                            std::move(fds[1]),
                                            std::move(fds[2]));
  return std::unique_ptr<Queue>(new Queue(std::move(impl)));
}

absl::Status Client::CloseQueue(uint64_t id) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::CloseQueueRequest request;
  request.set_queue_id(id);
  v1::CloseQueueResponse response;
  return FromGrpc(impl_->stub->CloseQueue(&context, request, &response));
}

absl::StatusOr<RemoteHandle> Client::OpenRemote(const RemoteRegion& remote) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::OpenRemoteRequest request;
  *request.mutable_remote() = ToProto(remote);
  v1::OpenRemoteResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->OpenRemote(&context, request, &response)));
  RemoteHandle handle;
  handle.id = response.handle();
  handle.size = response.size();
  handle.readable = (response.access() & v1::ACCESS_READ) != 0;
  handle.writable = (response.access() & v1::ACCESS_WRITE) != 0;
  handle.transport = response.transport() == v1::TRANSPORT_VERBS
                         ? Transport::kVerbs
                     : response.transport() == v1::TRANSPORT_TCP
                         ? Transport::kTcp
                         : Transport::kLocal;
  handle.peer = response.peer();
  handle.name = response.name();
  return handle;
}

absl::Status Client::CloseRemote(const RemoteHandle& handle) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::CloseRemoteRequest request;
  request.set_handle(handle.id);
  v1::CloseRemoteResponse response;
  return FromGrpc(impl_->stub->CloseRemote(&context, request, &response));
}

#define RDMAD_CLIENT_INSPECT(Method, Request, Response)                 \
  absl::StatusOr<v1::Response> Client::Method() {                       \
    grpc::ClientContext context;                                        \
    impl_->Prepare(context);                                            \
    v1::Response response;                                              \
    RDMAD_RETURN_IF_ERROR(                                              \
        FromGrpc(impl_->stub->Method(&context, v1::Request(), &response))); \
    return response;                                                    \
  }

RDMAD_CLIENT_INSPECT(GetStatus, GetStatusRequest, GetStatusResponse)
RDMAD_CLIENT_INSPECT(ListDevices, ListDevicesRequest, ListDevicesResponse)
RDMAD_CLIENT_INSPECT(ListRegions, ListRegionsRequest, ListRegionsResponse)
RDMAD_CLIENT_INSPECT(ListPeers, ListPeersRequest, ListPeersResponse)
RDMAD_CLIENT_INSPECT(ListQps, ListQpsRequest, ListQpsResponse)

#undef RDMAD_CLIENT_INSPECT

absl::StatusOr<v1::ListClusterRegionsResponse> Client::ListClusterRegions(
    absl::string_view prefix) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::ListClusterRegionsRequest request;
  request.set_prefix(std::string(prefix));
  v1::ListClusterRegionsResponse response;
  RDMAD_RETURN_IF_ERROR(FromGrpc(
      impl_->stub->ListClusterRegions(&context, request, &response)));
  return response;
}

absl::StatusOr<v1::LookupRegionResponse> Client::LookupRegion(
    absl::string_view name, bool fresh) {
  grpc::ClientContext context;
  impl_->Prepare(context);
  v1::LookupRegionRequest request;
  request.set_name(std::string(name));
  request.set_fresh(fresh);
  v1::LookupRegionResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(impl_->stub->LookupRegion(&context, request, &response)));
  return response;
}

}  // namespace rdmad
