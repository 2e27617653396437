// Implementation of include/rdmad/client.h: the session, buffers and
// regions. Transfers and queues are in client_transfer.cc, inspection in
// client_inspect.cc.
#include "rdmad/client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/buffer_impl.h"
#include "client/client_impl.h"
#include "client/convert.h"
#include "client/session_link.h"
#include "client/shared_queue.h"
#include "common/region_address.h"
#include "common/session_wire.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"

namespace rdmad {

using client_internal::FreeRegionIn;
using client_internal::FromGrpc;
using client_internal::FromProto;
using client_internal::SessionLink;
using client_internal::ToProto;

namespace {

constexpr char kBuiltinSocket[] = "/run/rdmad/rdmad.sock";

// What a registration of client memory answered, and in which session.
template <typename Response>
struct Registered {
  Response response;
  uint64_t generation = 0;
};

// Passes `fd` on the session socket, then makes `rpc` with `request` naming
// it by the token the daemon answered (RegisterBuffer, RegisterDmabuf).
// The session is prepared first, so that a restarted daemon gets a new
// session before the descriptor is passed on it.
template <typename Request, typename Response>
absl::StatusOr<Registered<Response>> RegisterPassed(
    SessionLink& link, int fd, Request request,
    grpc::Status (v1::Local::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                         Response*)) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, link.Prepare(context));
  session_wire::Message pass;
  pass.type = session_wire::MessageType::kPassFd;
  RDMAD_ASSIGN_OR_RETURN(session_wire::Message ack,
                         link.Ask(pass, fd, call.generation));
  request.set_fd_token(ack.a);
  Registered<Response> out;
  out.generation = call.generation;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(((*call.stub).*rpc)(&context, request, &out.response)));
  return out;
}

}  // namespace

std::string DefaultSocketPath() {
  const char* env = std::getenv("RDMAD_SOCKET");
  return env != nullptr && *env != '\0' ? std::string(env) : kBuiltinSocket;
}

absl::StatusOr<RemoteRegion> RemoteRegion::Parse(absl::string_view text) {
  RemoteRegion remote;
  if (absl::StartsWith(text, "rdmad1:")) {
    // Descriptors are base64url, which has no '@': one after it starts an
    // offset, as for a name.
    const size_t at = text.find('@');
    remote.descriptor = std::string(text.substr(0, at));
    if (at != absl::string_view::npos) {
      auto offset = ParseSize(text.substr(at + 1));
      if (!offset.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "offset after '@' in '", text, "': ", offset.status().message()));
      }
      remote.offset = *offset;
    }
    return remote;
  }
  RDMAD_ASSIGN_OR_RETURN(RegionAddress address, ParseRegionAddress(text));
  remote.peer = std::move(address.peer);
  remote.name = std::move(address.name);
  remote.offset = address.offset;
  return remote;
}

// ---------------------------------------------------------------------------
// Client

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->transfers = std::make_unique<client_internal::SharedQueue>(this);
}
Client::~Client() {
  // Its queue closes through this client: first, while all of it lives.
  impl_->transfers.reset();
}

uint64_t Client::session_id() const { return impl_->link->session_id(); }
const ClientOptions& Client::options() const {
  return impl_->link->options();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  RDMAD_ASSIGN_OR_RETURN(impl->link, SessionLink::Open(std::move(options)));
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<Buffer> Client::MapById(uint64_t id, const std::string& name,
                                       uint64_t size, bool owned,
                                       uint64_t generation) {
  session_wire::Message request;
  request.type = session_wire::MessageType::kGetFd;
  request.a = id;
  auto reply = impl_->link->Ask(request, -1, generation);
  if (!reply.ok() || reply->type != session_wire::MessageType::kFd ||
      !reply->fd.valid() || reply->a != id) {
    if (owned) (void)FreeById(id, generation);
    return reply.ok() ? absl::InternalError(
                            "rdmad answered the descriptor request without "
                            "the region's memory")
                      : reply.status();
  }
  const size_t mapped = reply->b;
  // "r": this process may read the region but not write it; the daemon
  // sent a read-only descriptor, which cannot be mapped writable.
  const bool writable = reply->text != "r";
  void* data =
      ::mmap(nullptr, mapped, writable ? PROT_READ | PROT_WRITE : PROT_READ,
             MAP_SHARED, reply->fd.get(), 0);
  if (data == MAP_FAILED) {
    const absl::Status status =
        absl::ErrnoToStatus(errno, "mmap of the region's shared memory");
    if (owned) (void)FreeById(id, generation);
    return status;
  }
  auto buffer = std::make_unique<Buffer::Impl>();
  buffer->client = this;
  buffer->link = impl_->link;
  buffer->id = id;
  buffer->name = name;
  buffer->data = static_cast<char*>(data);
  buffer->size = size;
  buffer->mapped_size = mapped;
  buffer->owned = owned;
  buffer->writable = writable;
  buffer->generation = generation;
  return Buffer(std::move(buffer));
}

absl::Status Client::FreeById(uint64_t id, uint64_t generation) {
  return FreeRegionIn(*impl_->link, id, generation);
}

absl::Status client_internal::FreeRegionIn(SessionLink& link, uint64_t id,
                                           uint64_t generation) {
  grpc::ClientContext context;
  auto call = link.PrepareIn(context, generation);
  if (absl::IsFailedPrecondition(call.status())) return absl::OkStatus();
  if (!call.ok()) return call.status();
  v1::FreeRegionRequest request;
  request.mutable_region()->set_id(id);
  v1::FreeRegionResponse response;
  return FromGrpc(call->stub->FreeRegion(&context, request, &response));
}

absl::Status Client::Usable(const Buffer& buffer) {
  Buffer::Impl* const b = buffer.impl_.get();
  if (b == nullptr || b->client != this) {
    return absl::InvalidArgumentError(
        "the local buffer does not belong to this client (or was released)");
  }
  const uint64_t generation = impl_->link->generation();
  if (b->generation == generation) return absl::OkStatus();
  if (b->owned) {
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer #", b->id, " (", FormatSize(b->size),
        ") belonged to this client's session before rdmad restarted: its "
        "memory in the daemon is gone. Allocate a new buffer and fill it "
        "again (this one stays readable here until released)"));
  }
  // A view of a named region: map the region of that name in the new
  // daemon, in place, so that data() stays valid.
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListRegionsRequest request;
  request.set_name(b->name);
  v1::ListRegionsResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->ListRegions(&context, request, &response)));
  if (response.regions().empty()) {
    return absl::NotFoundError(absl::StrCat(
        "region '", b->name,
        "' is gone: rdmad restarted, and no region "
        "of that name exists now. Create it again (rdmactl alloc) and map it"));
  }
  const v1::RegionInfo& region = response.regions(0);
  if (region.size() != b->size || region.mapped_size() != b->mapped_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("region '", b->name,
                     "' was recreated after rdmad restarted with "
                     "another size (",
                     FormatSize(region.size()), ", this mapping has ",
                     FormatSize(b->size), "): map it again with MapRegion"));
  }
  session_wire::Message ask;
  ask.type = session_wire::MessageType::kGetFd;
  ask.a = region.id();
  RDMAD_ASSIGN_OR_RETURN(session_wire::Message reply,
                         impl_->link->Ask(ask, -1, call.generation));
  if (reply.type != session_wire::MessageType::kFd || !reply.fd.valid() ||
      reply.b != b->mapped_size) {
    return absl::InternalError(
        "rdmad answered the descriptor request without the region's memory");
  }
  const bool writable = reply.text != "r";
  // MAP_FIXED replaces the old pages at the same address in one step.
  void* data = ::mmap(b->data, b->mapped_size,
                      writable ? PROT_READ | PROT_WRITE : PROT_READ,
                      MAP_SHARED | MAP_FIXED, reply.fd.get(), 0);
  if (data == MAP_FAILED) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("mapping region '", b->name, "' again"));
  }
  b->id = region.id();
  b->writable = writable;
  b->generation = call.generation;
  return absl::OkStatus();
}

absl::StatusOr<Buffer> Client::Allocate(uint64_t size,
                                        AllocateOptions options) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::AllocateBufferRequest request;
  request.set_size(size);
  request.set_name(options.name);
  request.set_export_access(ToProto(options.export_access));
  v1::AllocateBufferResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->AllocateBuffer(&context, request, &response)));
  return MapById(response.region().id(), response.region().name(),
                 response.region().size(), /*owned=*/true, call.generation);
}

absl::StatusOr<Buffer> Client::Register(int memfd, uint64_t size,
                                        AllocateOptions options) {
  // The daemon refuses memory that could be truncated under its mapping.
  if (::fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot seal the memfd against shrinking (", std::strerror(errno),
        "): create it with memfd_create(..., MFD_ALLOW_SEALING)"));
  }
  v1::RegisterBufferRequest request;
  request.set_size(size);
  request.set_name(options.name);
  request.set_export_access(ToProto(options.export_access));
  RDMAD_ASSIGN_OR_RETURN(auto registered,
                         RegisterPassed(*impl_->link, memfd, std::move(request),
                                        &v1::Local::Stub::RegisterBuffer));
  const v1::RegionInfo& region = registered.response.region();
  return MapById(region.id(), region.name(), region.size(), /*owned=*/true,
                 registered.generation);
}

absl::StatusOr<Buffer> Client::RegisterDmabuf(int dmabuf_fd, uint64_t offset,
                                              uint64_t length,
                                              AllocateOptions options) {
  if (dmabuf_fd < 0 || ::fcntl(dmabuf_fd, F_GETFD) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("descriptor ", dmabuf_fd,
                     " is not open: pass the dma-buf's file "
                     "descriptor (e.g. from cuMemGetHandleForAddressRange)"));
  }
  if (length == 0) {
    // Refused before the descriptor is passed, which the daemon would keep
    // pending for this session.
    return absl::InvalidArgumentError(
        "length is 0: register at least one byte of the dma-buf");
  }
  v1::RegisterDmabufRequest request;
  request.set_offset(offset);
  request.set_length(length);
  request.set_name(options.name);
  request.set_export_access(ToProto(options.export_access));
  RDMAD_ASSIGN_OR_RETURN(
      auto registered,
      RegisterPassed(*impl_->link, dmabuf_fd, std::move(request),
                     &v1::Local::Stub::RegisterDmabuf));
  // Nothing to map: the client holds the memory already.
  const v1::RegionInfo& region = registered.response.region();
  auto buffer = std::make_unique<Buffer::Impl>();
  buffer->client = this;
  buffer->link = impl_->link;
  buffer->id = region.id();
  buffer->name = region.name();
  buffer->size = region.size();
  buffer->owned = true;
  buffer->generation = registered.generation;
  return Buffer(std::move(buffer));
}

absl::StatusOr<RegionInfo> Client::CreateRegion(absl::string_view name,
                                                uint64_t size,
                                                Access export_access) {
  return CreateRegion(name, size, export_access, RegionOptions{});
}

absl::StatusOr<RegionInfo> Client::CreateRegion(absl::string_view name,
                                                uint64_t size,
                                                Access export_access,
                                                const RegionOptions& options) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::AllocateBufferRequest request;
  request.set_size(size);
  request.set_name(std::string(name));
  request.set_daemon_owned(true);
  request.set_export_access(ToProto(export_access));
  request.set_mode(options.mode);
  if (options.group.has_value()) request.set_group(*options.group);
  v1::AllocateBufferResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->AllocateBuffer(&context, request, &response)));
  return FromProto(response.region());
}

absl::Status Client::FreeRegion(absl::string_view name) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::FreeRegionRequest request;
  request.mutable_region()->set_name(std::string(name));
  v1::FreeRegionResponse response;
  return FromGrpc(call.stub->FreeRegion(&context, request, &response));
}

absl::StatusOr<Buffer> Client::MapRegion(absl::string_view name) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::ListRegionsRequest request;
  request.set_name(std::string(name));
  v1::ListRegionsResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->ListRegions(&context, request, &response)));
  for (const v1::RegionInfo& region : response.regions()) {
    if (region.name() == name) {
      return MapById(region.id(), region.name(), region.size(),
                     /*owned=*/false, call.generation);
    }
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

absl::StatusOr<RegionInfo> Client::SetRegionPermissions(
    absl::string_view name, std::optional<uint32_t> mode,
    std::optional<uint32_t> group) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::SetRegionPermissionsRequest request;
  request.mutable_region()->set_name(std::string(name));
  if (mode.has_value()) request.set_mode(*mode);
  if (group.has_value()) request.set_group(*group);
  v1::SetRegionPermissionsResponse response;
  RDMAD_RETURN_IF_ERROR(FromGrpc(
      call.stub->SetRegionPermissions(&context, request, &response)));
  return FromProto(response.region());
}

absl::StatusOr<RegionInfo> Client::Export(absl::string_view name,
                                          Access access) {
  return Export(name, access, {});
}

absl::StatusOr<RegionInfo> Client::Export(
    absl::string_view name, Access access,
    const std::vector<ExportGrant>& allow) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
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
      FromGrpc(call.stub->ExportRegion(&context, request, &response)));
  return FromProto(response.region());
}

absl::StatusOr<std::string> Client::GetDescriptor(absl::string_view name) {
  grpc::ClientContext context;
  RDMAD_ASSIGN_OR_RETURN(SessionLink::Call call, impl_->link->Prepare(context));
  v1::GetDescriptorRequest request;
  request.mutable_region()->set_name(std::string(name));
  v1::GetDescriptorResponse response;
  RDMAD_RETURN_IF_ERROR(
      FromGrpc(call.stub->GetDescriptor(&context, request, &response)));
  return response.encoded();
}

}  // namespace rdmad
