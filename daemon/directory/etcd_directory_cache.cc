// EtcdDirectory, the read side: the cache of every daemon's region keys,
// filled by a full read and kept fresh by a watch (its own thread), and the
// look-ups and listings answered from it or from etcd (see
// etcd_directory.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/region_address.h"
#include "common/status_macros.h"
#include "daemon/directory/directory_record.h"
#include "daemon/directory/etcd_directory.h"
#include "spdlog/spdlog.h"

namespace rdmad::directory {
namespace {

constexpr int kPageSize = 1000;  // keys per range read

}  // namespace

absl::StatusOr<EtcdDirectory::Listing> EtcdDirectory::ReadAll() {
  Listing listing;
  const std::string end = RangeEnd(keys_.RegionsPrefix());
  std::string from = keys_.RegionsPrefix();
  for (;;) {
    etcdserverpb::RangeRequest request;
    request.set_key(from);
    request.set_range_end(end);
    request.set_limit(kPageSize);
    request.set_revision(listing.revision);  // 0 = now, then the first page's
    RDMAD_ASSIGN_OR_RETURN(
        const etcdserverpb::RangeResponse response,
        etcd_.Range(request, absl::Now() + options_.rpc_timeout));
    if (listing.revision == 0) listing.revision = response.header().revision();
    for (const mvccpb::KeyValue& kv : response.kvs()) {
      auto name = keys_.RegionName(kv.key());
      if (!name.has_value()) continue;
      listing.values[*name] = kv.value();
      auto record = DecodeRegionRecord(*name, kv.value());
      if (!record.ok()) continue;  // unreadable: not resolvable
      listing.entries.push_back(ToEntry(*record, kv.create_revision(),
                                        kv.mod_revision(), kv.lease()));
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
  }
  return listing;
}

bool EtcdDirectory::ChangedBySomeoneElse(
    const std::string& name, const std::optional<std::string>& value,
    int64_t lease) const {
  absl::MutexLock lock(&mu_);
  auto it = published_.find(name);
  if (it == published_.end()) return false;  // not ours to defend
  // Our own write, or our own delete (a withdrawal, which no longer holds
  // the name by the time the session thread looks), are told apart there.
  return !value.has_value() || *value != it->second.value || lease != lease_;
}

void EtcdDirectory::CheckLease(const std::string& name, int64_t lease) {
  auto answered = [this, name, lease](absl::StatusOr<int64_t> ttl) {
    // Unknown (etcd unreachable): kept until its time is up.
    if (ttl.ok() && *ttl < 0) cache_.DropVanished(name, lease);
  };
  etcd_.LeaseTimeToLiveAsync(lease, absl::Now() + options_.rpc_timeout,
                             std::move(answered));
}

bool EtcdDirectory::OnWatchResponse(
    const etcdserverpb::WatchResponse& response) {
  if (response.canceled()) {
    spdlog::info(
        "cluster directory: watch cancelled by etcd ({}{}); "
        "reading the directory again",
        response.cancel_reason(),
        response.compact_revision() != 0
            ? absl::StrCat(", compacted to ", response.compact_revision())
            : "");
    return false;
  }
  for (const mvccpb::Event& event : response.events()) {
    auto name = keys_.RegionName(event.kv().key());
    if (!name.has_value()) continue;
    const bool deleted = event.type() == mvccpb::Event::DELETE;
    if (ChangedBySomeoneElse(
            *name,
            deleted ? std::nullopt
                    : std::optional<std::string>(event.kv().value()),
            event.kv().lease())) {
      QueueReassert(*name);
    }
    auto record = deleted ? absl::StatusOr<v1::DirectoryRegionRecord>(
                                absl::NotFoundError("deleted"))
                          : DecodeRegionRecord(*name, event.kv().value());
    if (!record.ok()) {
      if (!deleted) {
        spdlog::debug("cluster directory: ignoring key {}: {}",
                      event.kv().key(), std::string(record.status().message()));
      }
      // Whatever it held before, the name now says nothing usable; but its
      // holder may still hold the region (the cache keeps the entry as
      // vanished): ask etcd whether the holder's lease lives.
      const int64_t lease =
          cache_.ApplyDelete(*name, event.kv().mod_revision());
      if (lease != 0) CheckLease(*name, lease);
      continue;
    }
    cache_.ApplyPut(ToEntry(*record, event.kv().create_revision(),
                            event.kv().mod_revision(), event.kv().lease()));
  }
  if (!response.events().empty()) {
    cache_.Advance(response.header().revision());
  }
  return true;
}

void EtcdDirectory::WatchLoop() {
  absl::Duration backoff = kBackoffFirst;
  absl::StatusCode logged_failure = absl::StatusCode::kOk;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    auto all = ReadAll();
    if (!all.ok()) {
      cache_.SetLive(false);
      // A refusal (no read permission on the prefix...) is said once; an
      // unreachable etcd is the session's to report.
      if (!IsUnreachable(all.status()) &&
          all.status().code() != logged_failure) {
        spdlog::error(
            "cluster directory: cannot read the directory, "
            "retrying: {}",
            std::string(all.status().message()));
      }
      logged_failure = all.status().code();
      if (!Sleep(backoff)) break;
      backoff = std::min(backoff * 2, kBackoffMost);
      continue;
    }
    logged_failure = absl::StatusCode::kOk;
    // Names this daemon holds that etcd no longer shows as ours (changed
    // while the watch was down: deleted, overwritten, or etcd restored
    // empty) are re-asserted.
    std::vector<std::string> changed;
    for (const auto& [name, held] : PublishedNow()) {
      auto it = all->values.find(name);
      if (it == all->values.end() || it->second != held) {
        changed.push_back(name);
      }
    }
    for (const std::string& name : changed) QueueReassert(name);
    cache_.Reset(std::move(all->entries), all->revision);
    backoff = kBackoffFirst;
    etcdserverpb::WatchCreateRequest create;
    create.set_key(keys_.RegionsPrefix());
    create.set_range_end(RangeEnd(keys_.RegionsPrefix()));
    create.set_start_revision(all->revision + 1);
    absl::Status ended = etcd_.Watch(
        create, [this](const etcdserverpb::WatchResponse& response) {
          return OnWatchResponse(response);
        });
    cache_.SetLive(false);
    if (!ended.ok()) {
      spdlog::debug("cluster directory: watch ended: {}",
                    std::string(ended.message()));
    }
    if (!Sleep(backoff)) break;
  }
}

// Look-ups

absl::Status EtcdDirectory::NotFound(const std::string& name) const {
  return absl::NotFoundError(
      absl::StrCat("no daemon exports a region named '", name,
                   "' (cluster directory ", etcd_.url(),
                   "): check the name (rdmactl ls) or export it on one "
                   "(rdmactl export NAME r|w|rw; from a program, "
                   "Client::Export or AllocateOptions::export_access)"));
}

void EtcdDirectory::Resolve(const std::string& name, absl::Time deadline,
                            core::DirectoryGeneration stale,
                            core::ResolveDone done) {
  auto hit = cache_.Find(name);
  if (hit.has_value() && (stale.empty() || hit->generation != stale)) {
    ++lookups_cached_;
    return done(*std::move(hit));
  }
  Lookup(name, deadline, /*fresh=*/true,
         [done = std::move(done)](absl::StatusOr<core::DirectoryEntry> entry,
                                  bool) { done(std::move(entry)); });
}

void EtcdDirectory::Lookup(
    const std::string& name, absl::Time deadline, bool fresh,
    std::function<void(absl::StatusOr<core::DirectoryEntry>, bool)> done) {
  if (absl::Status s = ValidateRegionName(name); !s.ok()) {
    ++lookups_failed_;
    return done(s, false);
  }
  if (!fresh) {
    if (auto hit = cache_.Find(name)) {
      ++lookups_cached_;
      return done(*std::move(hit), true);
    }
  }
  ++lookups_store_;
  etcdserverpb::RangeRequest request;
  request.set_key(keys_.Region(name));
  etcd_.RangeAsync(
      std::move(request), CallDeadline(deadline),
      [this, name, done = std::move(done)](
          absl::StatusOr<etcdserverpb::RangeResponse> response) {
        if (!response.ok()) {
          ++lookups_failed_;
          return done(response.status(), false);
        }
        const int64_t revision = response->header().revision();
        if (response->kvs_size() == 0) {
          cache_.Offer(name, std::nullopt, revision);
          ++lookups_failed_;
          return done(NotFound(name), false);
        }
        const mvccpb::KeyValue& kv = response->kvs(0);
        auto record = DecodeRegionRecord(name, kv.value());
        if (!record.ok()) {
          ++lookups_failed_;
          return done(absl::FailedPreconditionError(absl::StrCat(
                          "the cluster directory's entry for region '", name,
                          "' is unreadable (", record.status().message(),
                          "): it was not written by rdmad; remove key ",
                          kv.key(), " from ", etcd_.url())),
                      false);
        }
        core::DirectoryEntry entry = ToEntry(*record, kv.create_revision(),
                                             kv.mod_revision(), kv.lease());
        cache_.Offer(name, entry, revision);
        done(std::move(entry), false);
      });
}

void EtcdDirectory::List(
    const std::string& name_prefix, absl::Time deadline,
    std::function<void(absl::StatusOr<DirectoryListing>)> done) {
  if (name_prefix.size() > kMaxRegionNameLength ||
      std::any_of(name_prefix.begin(), name_prefix.end(),
                  [](char c) { return c <= ' ' || c > '~'; })) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        "name prefix '", name_prefix, "' is not the start of a region name")));
  }
  etcdserverpb::RangeRequest request;
  request.set_key(keys_.Region(name_prefix));
  request.set_range_end(RangeEnd(request.key()));
  request.set_limit(kMaxListing);
  etcd_.RangeAsync(std::move(request), CallDeadline(deadline),
                   [this, done = std::move(done)](
                       absl::StatusOr<etcdserverpb::RangeResponse> response) {
                     if (!response.ok()) return done(response.status());
                     DirectoryListing listing;
                     listing.revision = response->header().revision();
                     listing.truncated = response->more();
                     for (const mvccpb::KeyValue& kv : response->kvs()) {
                       auto name = keys_.RegionName(kv.key());
                       auto record =
                           name.has_value()
                               ? DecodeRegionRecord(*name, kv.value())
                               : absl::InvalidArgumentError("bad key");
                       if (!record.ok()) {
                         ++listing.unreadable;
                         continue;
                       }
                       listing.entries.push_back(
                           ToEntry(*record, kv.create_revision(),
                                   kv.mod_revision(), kv.lease()));
                     }
                     done(std::move(listing));
                   });
}

}  // namespace rdmad::directory
