#include "daemon/service/directory_calls.h"

#include <utility>

#include "daemon/service/call_helpers.h"
#include "daemon/service/grpc_status.h"
#include "daemon/service/proto_convert.h"

namespace rdmad::service {
namespace {

// Export changes wait this long at most for etcd to confirm a name.
constexpr absl::Duration kClaimTimeout = absl::Seconds(10);

absl::Status NoDirectory() {
  return absl::FailedPreconditionError(
      "this daemon has no cluster directory: set `directory: "
      "\"etcd://HOST:PORT\"` in its config (or --directory) and restart it");
}

}  // namespace

void DirectoryCalls::FinishAfterClaim(grpc::ServerUnaryReactor* reactor,
                                      const std::string& name,
                                      absl::Time deadline,
                                      std::function<void()> undo) const {
  if (directory_ == nullptr || name.empty()) {
    reactor->Finish(grpc::Status::OK);
    return;
  }
  directory_->Claim(
      name, std::min(deadline, absl::Now() + kClaimTimeout),
      [reactor, undo = std::move(undo)](absl::Status status) {
        if (!status.ok()) undo();
        reactor->Finish(ToGrpcStatus(status));
      });
}

void ToProto(const directory::DirectoryState& state,
             v1::DirectoryStatus* out) {
  out->set_url(state.url);
  out->set_endpoint(state.endpoint);
  out->set_prefix(state.prefix);
  out->set_state(std::string(directory::DirectoryLinkName(state.state)));
  out->set_last_error(state.last_error);
  out->set_state_since_unix_ms(absl::ToUnixMillis(state.state_since));
  out->set_lease_id(state.lease_id);
  out->set_lease_ttl_seconds(state.lease_ttl_seconds);
  out->set_published_regions(state.published_regions);
  for (const std::string& c : state.conflicts) out->add_conflicts(c);
  out->set_cached_regions(state.cached_regions);
  out->set_watch_live(state.watch_live);
  out->set_revision(state.revision);
  out->set_reconnects(state.reconnects);
  out->set_lookups_cached(state.lookups_cached);
  out->set_lookups_store(state.lookups_store);
  out->set_lookups_failed(state.lookups_failed);
}

void ToProto(const core::DirectoryEntry& entry, v1::ClusterRegion* out) {
  out->set_name(entry.name);
  out->set_node(entry.node);
  out->set_size(entry.size);
  out->set_access(ToProto(entry.access));
  out->set_region_id(entry.region_id);
  out->set_incarnation(entry.generation.incarnation);
  out->set_revision(entry.generation.revision);
  out->set_exported_unix_ms(absl::ToUnixMillis(entry.exported));
}

grpc::ServerUnaryReactor* DirectoryCalls::ListClusterRegions(
    grpc::CallbackServerContext* context,
    const v1::ListClusterRegionsRequest* request,
    v1::ListClusterRegionsResponse* response) const {
  if (directory_ == nullptr) return Done(context, NoDirectory());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  directory_->List(
      request->prefix(), DeadlineOf(context),
      [reactor, response](absl::StatusOr<directory::DirectoryListing> listing) {
        if (listing.ok()) {
          for (const core::DirectoryEntry& entry : listing->entries) {
            ToProto(entry, response->add_regions());
          }
          response->set_revision(listing->revision);
          response->set_truncated(listing->truncated);
          response->set_unreadable(listing->unreadable);
        }
        reactor->Finish(ToGrpcStatus(listing.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* DirectoryCalls::LookupRegion(
    grpc::CallbackServerContext* context,
    const v1::LookupRegionRequest* request,
    v1::LookupRegionResponse* response) const {
  if (directory_ == nullptr) return Done(context, NoDirectory());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  directory_->Lookup(
      request->name(), DeadlineOf(context), request->fresh(),
      [reactor, response, start](absl::StatusOr<core::DirectoryEntry> entry,
                                 bool from_cache) {
        if (entry.ok()) {
          ToProto(*entry, response->mutable_region());
          response->set_from_cache(from_cache);
          response->set_latency_ns(
              absl::ToInt64Nanoseconds(absl::Now() - start));
        }
        reactor->Finish(ToGrpcStatus(entry.status()));
      });
  return reactor;
}

}  // namespace rdmad::service
