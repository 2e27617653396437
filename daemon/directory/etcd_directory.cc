#include "daemon/directory/etcd_directory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/directory_url.h"
#include "common/region_address.h"
#include "common/status_macros.h"
#include "daemon/directory/directory_record.h"
#include "spdlog/spdlog.h"

namespace rdmad::directory {
namespace {

constexpr absl::Duration kBackoffFirst = absl::Milliseconds(100);
constexpr absl::Duration kBackoffMost = absl::Seconds(2);
// Bounds the lease revocation on the way out; after it the lease still
// expires by itself.
constexpr absl::Duration kRevokeTimeout = absl::Seconds(2);
constexpr int kPageSize = 1000;

const char* LinkName(int link) {
  static constexpr const char* kNames[] = {"connecting", "connected",
                                           "disconnected", "stopped"};
  return kNames[link];
}

etcdserverpb::Compare* AddCompare(etcdserverpb::TxnRequest& txn,
                                  const std::string& key,
                                  etcdserverpb::Compare::CompareTarget target) {
  etcdserverpb::Compare* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(target);
  compare->set_result(etcdserverpb::Compare::EQUAL);
  return compare;
}

void AddPut(google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>* ops,
            const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest* put = ops->Add()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdDirectory>> EtcdDirectory::Create(
    DirectoryOptions options, const core::RegionTable* regions) {
  if (options.etcd.endpoints.empty()) {
    return absl::InvalidArgumentError("the directory needs an etcd endpoint");
  }
  RDMAD_RETURN_IF_ERROR(ValidateDirectoryPrefix(options.prefix));
  if (options.lease_ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError(
        "the directory lease TTL must be at least 2 s");
  }
  if (absl::Status s = ValidatePeerAddress(options.node_record.address());
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the directory names this daemon by its Peer address: ", s.message(),
        " (set advertise_address)"));
  }
  if (options.node_record.incarnation() == 0) {
    return absl::InvalidArgumentError("the directory needs the incarnation");
  }
  return std::unique_ptr<EtcdDirectory>(
      new EtcdDirectory(std::move(options), regions));
}

EtcdDirectory::EtcdDirectory(DirectoryOptions options,
                             const core::RegionTable* regions)
    : options_(std::move(options)),
      keys_(options_.prefix),
      self_node_(options_.node_record.address()),
      incarnation_(options_.node_record.incarnation()),
      regions_(regions),
      etcd_(options_.etcd) {
  absl::MutexLock lock(&mu_);
  link_since_ = absl::Now();
}

EtcdDirectory::~EtcdDirectory() { Stop(); }

void EtcdDirectory::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  spdlog::info("cluster directory {} (prefix {}): connecting", etcd_.url(),
               options_.prefix);
  session_thread_ = std::thread([this] { SessionLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

void EtcdDirectory::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !session_thread_.joinable() &&
        !watch_thread_.joinable()) {
      return;
    }
    stopping_ = true;
  }
  // The session thread revokes the lease on its way out.
  if (session_thread_.joinable()) session_thread_.join();
  etcd_.Shutdown();  // ends the watch and look-ups in flight
  if (watch_thread_.joinable()) watch_thread_.join();
  std::deque<Work> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(queue_);
  }
  for (Work& work : left) {
    if (work.done) {
      work.done(absl::UnavailableError(absl::StrCat(
          "cluster directory ", etcd_.url(), ": this daemon is shutting down")));
    }
  }
  SetLink(Link::kStopped, absl::OkStatus());
}

std::string EtcdDirectory::self_node() const { return self_node_; }

absl::Time EtcdDirectory::CallDeadline(absl::Time deadline) const {
  return std::min(deadline, absl::Now() + options_.rpc_timeout);
}

bool EtcdDirectory::Sleep(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
  return !stopping_;
}

void EtcdDirectory::SetLink(Link link, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  if (!why.ok()) last_error_ = std::string(why.message());
  if (link_ == link) return;
  if (link == Link::kConnected) last_error_.clear();
  link_ = link;
  link_since_ = absl::Now();
}

// ---------------------------------------------------------------------------
// Publishing: the session thread
// ---------------------------------------------------------------------------

void EtcdDirectory::OnRegionChanged(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back({name, absl::InfiniteFuture(), nullptr});
}

void EtcdDirectory::Claim(const std::string& name, absl::Time deadline,
                          std::function<void(absl::Status)> done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back({name, deadline, std::move(done)});
      return;
    }
  }
  done(absl::UnavailableError(absl::StrCat(
      "cluster directory ", etcd_.url(), ": this daemon is shutting down")));
}

void EtcdDirectory::SessionLoop() {
  bool connected = false;
  bool ever_connected = false;
  absl::Duration backoff = kBackoffFirst;
  absl::Time next_attempt = absl::Now();
  absl::Time next_keepalive = absl::InfiniteFuture();
  absl::Duration keepalive_every = options_.lease_ttl / 3;
  for (;;) {
    std::deque<Work> work;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time wake = connected ? next_keepalive : next_attempt;
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), wake);
      if (stopping_) break;
      work.swap(queue_);
    }
    for (Work& item : work) {
      if (connected) {
        absl::Status s = absl::OkStatus();
        if (absl::Now() >= item.deadline) {
          s = absl::DeadlineExceededError(absl::StrCat(
              "the call's deadline passed before the cluster directory ",
              etcd_.url(), " could confirm region '", item.name, "'"));
        } else {
          s = Sync(item.name, CallDeadline(item.deadline));
        }
        if (IsUnreachable(s)) {
          connected = false;
          SetLink(Link::kDisconnected, s);
          spdlog::warn("cluster directory lost: {}", std::string(s.message()));
          absl::MutexLock lock(&mu_);
          if (lease_ != 0) old_lease_ = lease_;
          lease_ = 0;
        }
        if (!item.done) continue;
        if (!s.ok() && IsUnreachable(s)) {
          absl::MutexLock lock(&mu_);
          if (published_.contains(item.name)) s = absl::OkStatus();
        }
        item.done(std::move(s));
        continue;
      }
      if (!item.done) continue;  // Connect() re-publishes everything
      absl::Status answer;
      {
        absl::MutexLock lock(&mu_);
        if (published_.contains(item.name)) {
          // Ours already: uniqueness was decided; re-published later.
          answer = absl::OkStatus();
        } else {
          answer = absl::UnavailableError(absl::StrCat(
              "cannot make sure no other daemon exports a region named '",
              item.name, "', so it is not exported; export it again once "
              "etcd is back: ",
              last_error_.empty()
                  ? absl::StrCat("cluster directory ", etcd_.url(),
                                 " is not connected yet")
                  : last_error_));
        }
      }
      item.done(std::move(answer));
    }
    const absl::Time now = absl::Now();
    if (!connected && now >= next_attempt) {
      absl::Status s = Connect();
      if (s.ok()) {
        connected = true;
        backoff = kBackoffFirst;
        int64_t ttl;
        size_t published;
        {
          absl::MutexLock lock(&mu_);
          ttl = lease_ttl_;
          published = published_.size();
          if (ever_connected) ++reconnects_;
        }
        keepalive_every = absl::Seconds(std::max<int64_t>(ttl, 1)) / 3;
        next_keepalive = absl::Now() + keepalive_every;
        SetLink(Link::kConnected, absl::OkStatus());
        spdlog::info("cluster directory {} connected (via {}): lease TTL {} s, "
                     "{} region(s) published",
                     etcd_.url(), etcd_.endpoint(), ttl, published);
        ever_connected = true;
      } else {
        {
          absl::MutexLock lock(&mu_);
          if (lease_ != 0) old_lease_ = lease_;
          lease_ = 0;
        }
        bool first = false;
        {
          absl::MutexLock lock(&mu_);
          first = last_error_.empty();
        }
        SetLink(ever_connected ? Link::kDisconnected : Link::kConnecting, s);
        if (first) {
          spdlog::warn("cluster directory not reachable, retrying in the "
                       "background: {}", std::string(s.message()));
        }
        etcd_.Rotate();
        next_attempt = absl::Now() + backoff;
        backoff = std::min(backoff * 2, kBackoffMost);
      }
      continue;
    }
    if (connected && now >= next_keepalive) {
      absl::Status s = KeepAlive();
      if (s.ok()) {
        next_keepalive = absl::Now() + keepalive_every;
      } else {
        connected = false;
        SetLink(Link::kDisconnected, s);
        spdlog::warn("cluster directory lost: {}", std::string(s.message()));
        absl::MutexLock lock(&mu_);
        if (lease_ != 0) old_lease_ = lease_;
        lease_ = 0;
        next_attempt = absl::Now();
      }
    }
    if (!connected && next_attempt < absl::Now()) next_attempt = absl::Now();
  }
  // Stopping: revoking the lease deletes every key of this daemon at once.
  int64_t lease;
  int64_t old_lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
    old_lease = old_lease_;
    lease_ = 0;
    old_lease_ = 0;
    published_.clear();
  }
  for (int64_t id : {lease, old_lease}) {
    if (id == 0) continue;
    absl::Status s = etcd_.LeaseRevoke(id, absl::Now() + kRevokeTimeout);
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
      spdlog::warn("cluster directory: could not revoke lease {:x} on the way "
                   "out ({}); its keys expire within the TTL", id, std::string(s.message()));
    }
  }
}

absl::Status EtcdDirectory::Connect() {
  const absl::Time deadline = absl::Now() + options_.rpc_timeout;
  RDMAD_RETURN_IF_ERROR(etcd_.Authenticate(deadline));
  RDMAD_ASSIGN_OR_RETURN(
      const etcdserverpb::LeaseGrantResponse grant,
      etcd_.LeaseGrant(absl::ToInt64Seconds(options_.lease_ttl), deadline));
  int64_t old_lease;
  {
    absl::MutexLock lock(&mu_);
    lease_ = grant.id();
    lease_ttl_ = grant.ttl();
    old_lease = old_lease_;
    published_.clear();
    conflicts_.clear();
  }
  v1::DirectoryNodeRecord node = options_.node_record;
  etcdserverpb::PutRequest put;
  put.set_key(keys_.Node(self_node_));
  put.set_value(EncodeNodeRecord(node));
  put.set_lease(grant.id());
  RDMAD_RETURN_IF_ERROR(
      etcd_.Put(put, absl::Now() + options_.rpc_timeout).status());
  for (const core::RegionSnapshot& region : regions_->List()) {
    if (region.name.empty() ||
        region.exported.access == core::RemoteAccess::kNone) {
      continue;
    }
    absl::Status s = Publish(region.name, RecordOf(region),
                             absl::Now() + options_.rpc_timeout);
    if (IsUnreachable(s)) return s;
  }
  if (old_lease != 0) {
    // Keys of the previous session that were not re-published (regions
    // freed meanwhile) go with it. Failure is harmless: it expires.
    (void)etcd_.LeaseRevoke(old_lease, absl::Now() + options_.rpc_timeout);
    absl::MutexLock lock(&mu_);
    if (old_lease_ == old_lease) old_lease_ = 0;
  }
  return absl::OkStatus();
}

absl::Status EtcdDirectory::KeepAlive() {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease = lease_;
  }
  RDMAD_ASSIGN_OR_RETURN(
      const int64_t ttl,
      etcd_.LeaseKeepAlive(lease, absl::Now() + std::min(options_.rpc_timeout,
                                                         options_.lease_ttl / 2)));
  if (ttl <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "cluster directory ", etcd_.url(), ": lease ", absl::Hex(lease),
        " expired (etcd did not hear from this daemon within the TTL); "
        "publishing again under a new lease"));
  }
  return absl::OkStatus();
}

v1::DirectoryRegionRecord EtcdDirectory::RecordOf(
    const core::RegionSnapshot& region) const {
  v1::DirectoryRegionRecord record;
  record.set_name(region.name);
  record.set_node(self_node_);
  record.set_size(region.size);
  record.set_access(static_cast<v1::Access>(region.exported.access));
  record.set_region_id(region.id);
  record.set_incarnation(incarnation_);
  // The region's creation stands for its export: regions are mostly
  // exported when made, and a re-export keeps the entry's age honest
  // enough for `rdmactl ls`.
  record.set_exported_unix_ms(absl::ToUnixMillis(region.created));
  return record;
}

absl::Status EtcdDirectory::Sync(const std::string& name,
                                 absl::Time deadline) {
  auto region = regions_->FindExported(name);
  if (region.ok()) {
    return Publish(name, RecordOf((*region)->Snapshot()), deadline);
  }
  return Withdraw(name, deadline);
}

absl::Status EtcdDirectory::Publish(const std::string& name,
                                    const v1::DirectoryRegionRecord& record,
                                    absl::Time deadline) {
  const std::string key = keys_.Region(name);
  const std::string value = EncodeRegionRecord(record);
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    auto it = published_.find(name);
    if (it != published_.end() && it->second == value) return absl::OkStatus();
    lease = lease_;
  }
  // A few rounds at most: each one loses only to a concurrent writer.
  for (int round = 0; round < 4; ++round) {
    // Create the key if nobody has it...
    etcdserverpb::TxnRequest create;
    AddCompare(create, key, etcdserverpb::Compare::CREATE)
        ->set_create_revision(0);
    AddPut(create.mutable_success(), key, value, lease);
    create.add_failure()->mutable_request_range()->set_key(key);
    RDMAD_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse created,
                           etcd_.Txn(create, deadline));
    if (!created.succeeded()) {
      // ...else replace it only if it is this daemon's own record, and
      // only if it is still the record just read (its mod revision).
      if (created.responses_size() == 0 ||
          created.responses(0).response_range().kvs_size() == 0) {
        continue;  // deleted in between: try to create it again
      }
      const mvccpb::KeyValue& kv =
          created.responses(0).response_range().kvs(0);
      auto existing = DecodeRegionRecord(name, kv.value());
      const bool ours = existing.ok() &&
                        existing->incarnation() == incarnation_ &&
                        existing->node() == self_node_;
      if (!ours) {
        const std::string holder =
            existing.ok() ? existing->node()
                          : absl::StrCat("an unreadable record (",
                                         existing.status().message(), ")");
        bool first;
        {
          absl::MutexLock lock(&mu_);
          published_.erase(name);
          first = conflicts_.insert_or_assign(name, holder).second;
        }
        if (first) {
          spdlog::warn("cluster directory: region '{}' is exported here, but "
                       "{} holds the name in the directory: not listed",
                       name, holder);
        }
        return absl::AlreadyExistsError(absl::StrCat(
            "region name '", name, "' is already exported in the cluster by ",
            existing.ok() ? absl::StrCat("the daemon at ", holder) : holder,
            " (cluster directory ", etcd_.url(),
            "): names are unique in the cluster; pick another name, or free "
            "it there first"));
      }
      etcdserverpb::TxnRequest replace;
      AddCompare(replace, key, etcdserverpb::Compare::MOD)
          ->set_mod_revision(kv.mod_revision());
      AddPut(replace.mutable_success(), key, value, lease);
      RDMAD_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse replaced,
                             etcd_.Txn(replace, deadline));
      if (!replaced.succeeded()) continue;
    }
    absl::MutexLock lock(&mu_);
    published_[name] = value;
    conflicts_.erase(name);
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrCat(
      "cluster directory ", etcd_.url(), ": the key of region '", name,
      "' kept changing while publishing it; try again"));
}

absl::Status EtcdDirectory::Withdraw(const std::string& name,
                                     absl::Time deadline) {
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    conflicts_.erase(name);
    if (!published_.contains(name)) return absl::OkStatus();
    lease = lease_;
  }
  // Delete only our own key: one on this session's lease.
  const std::string key = keys_.Region(name);
  etcdserverpb::TxnRequest txn;
  AddCompare(txn, key, etcdserverpb::Compare::LEASE)->set_lease(lease);
  etcdserverpb::DeleteRangeRequest* del =
      txn.add_success()->mutable_request_delete_range();
  del->set_key(key);
  RDMAD_RETURN_IF_ERROR(etcd_.Txn(txn, deadline).status());
  absl::MutexLock lock(&mu_);
  published_.erase(name);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The cache: full read + watch
// ---------------------------------------------------------------------------

absl::StatusOr<std::pair<std::vector<core::DirectoryEntry>, int64_t>>
EtcdDirectory::ReadAll() {
  std::vector<core::DirectoryEntry> entries;
  const std::string end = RangeEnd(keys_.RegionsPrefix());
  std::string from = keys_.RegionsPrefix();
  int64_t revision = 0;
  for (;;) {
    etcdserverpb::RangeRequest request;
    request.set_key(from);
    request.set_range_end(end);
    request.set_limit(kPageSize);
    request.set_revision(revision);  // 0 = now, then the first page's
    RDMAD_ASSIGN_OR_RETURN(
        const etcdserverpb::RangeResponse response,
        etcd_.Range(request, absl::Now() + options_.rpc_timeout));
    if (revision == 0) revision = response.header().revision();
    for (const mvccpb::KeyValue& kv : response.kvs()) {
      auto name = keys_.RegionName(kv.key());
      if (!name.has_value()) continue;
      auto record = DecodeRegionRecord(*name, kv.value());
      if (!record.ok()) continue;  // unreadable: not resolvable
      entries.push_back(
          ToEntry(*record, kv.create_revision(), kv.mod_revision()));
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + std::string(1, '\0');
  }
  return std::make_pair(std::move(entries), revision);
}

bool EtcdDirectory::OnWatchResponse(
    const etcdserverpb::WatchResponse& response) {
  if (response.canceled()) {
    spdlog::info("cluster directory: watch cancelled by etcd ({}{}); "
                 "reading the directory again",
                 response.cancel_reason(),
                 response.compact_revision() != 0
                     ? absl::StrCat(", compacted to ",
                                    response.compact_revision())
                     : "");
    return false;
  }
  for (const mvccpb::Event& event : response.events()) {
    auto name = keys_.RegionName(event.kv().key());
    if (!name.has_value()) continue;
    if (event.type() == mvccpb::Event::DELETE) {
      cache_.ApplyDelete(*name, event.kv().mod_revision());
      continue;
    }
    auto record = DecodeRegionRecord(*name, event.kv().value());
    if (!record.ok()) {
      // Whatever it held before, the name now says nothing usable.
      spdlog::debug("cluster directory: ignoring key {}: {}", event.kv().key(),
                    std::string(record.status().message()));
      cache_.ApplyDelete(*name, event.kv().mod_revision());
      continue;
    }
    cache_.ApplyPut(ToEntry(*record, event.kv().create_revision(),
                            event.kv().mod_revision()));
  }
  if (!response.events().empty()) {
    cache_.Advance(response.header().revision());
  }
  return true;
}

void EtcdDirectory::WatchLoop() {
  absl::Duration backoff = kBackoffFirst;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    auto all = ReadAll();
    if (!all.ok()) {
      cache_.SetLive(false);
      if (!Sleep(backoff)) break;
      backoff = std::min(backoff * 2, kBackoffMost);
      continue;
    }
    cache_.Reset(std::move(all->first), all->second);
    backoff = kBackoffFirst;
    etcdserverpb::WatchCreateRequest create;
    create.set_key(keys_.RegionsPrefix());
    create.set_range_end(RangeEnd(keys_.RegionsPrefix()));
    create.set_start_revision(all->second + 1);
    absl::Status ended = etcd_.Watch(
        create, [this](const etcdserverpb::WatchResponse& response) {
          return OnWatchResponse(response);
        });
    cache_.SetLive(false);
    if (!ended.ok()) {
      spdlog::debug("cluster directory: watch ended: {}", std::string(ended.message()));
    }
    if (!Sleep(backoff)) break;
  }
}

// ---------------------------------------------------------------------------
// Look-ups
// ---------------------------------------------------------------------------

absl::Status EtcdDirectory::NotFound(const std::string& name) const {
  return absl::NotFoundError(absl::StrCat(
      "no daemon exports a region named '", name, "' (cluster directory ",
      etcd_.url(), "): check the name (rdmactl ls) or export it on one "
      "(rdmactl export NAME r|w|rw)"));
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
        core::DirectoryEntry entry =
            ToEntry(*record, kv.create_revision(), kv.mod_revision());
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
        "name prefix '", name_prefix,
        "' is not the start of a region name")));
  }
  etcdserverpb::RangeRequest request;
  request.set_key(keys_.Region(name_prefix));
  request.set_range_end(RangeEnd(request.key()));
  request.set_limit(kMaxListing);
  etcd_.RangeAsync(
      std::move(request), CallDeadline(deadline),
      [this, done = std::move(done)](
          absl::StatusOr<etcdserverpb::RangeResponse> response) {
        if (!response.ok()) return done(response.status());
        DirectoryListing listing;
        listing.revision = response->header().revision();
        listing.truncated = response->more();
        for (const mvccpb::KeyValue& kv : response->kvs()) {
          auto name = keys_.RegionName(kv.key());
          auto record = name.has_value()
                            ? DecodeRegionRecord(*name, kv.value())
                            : absl::InvalidArgumentError("bad key");
          if (!record.ok()) {
            ++listing.unreadable;
            continue;
          }
          listing.entries.push_back(
              ToEntry(*record, kv.create_revision(), kv.mod_revision()));
        }
        done(std::move(listing));
      });
}

DirectoryState EtcdDirectory::state() const {
  DirectoryState s;
  s.url = etcd_.url();
  s.endpoint = etcd_.endpoint();
  s.prefix = options_.prefix;
  {
    absl::MutexLock lock(&mu_);
    s.state = LinkName(static_cast<int>(link_));
    s.last_error = last_error_;
    s.state_since = link_since_;
    s.lease_id = lease_;
    s.lease_ttl_seconds = lease_ != 0 ? lease_ttl_ : 0;
    s.published_regions = published_.size();
    for (const auto& [name, holder] : conflicts_) {
      s.conflicts.push_back(absl::StrCat(name, " (held by ", holder, ")"));
    }
    s.reconnects = reconnects_;
  }
  std::sort(s.conflicts.begin(), s.conflicts.end());
  s.cached_regions = cache_.size();
  s.watch_live = cache_.live();
  s.revision = cache_.revision();
  s.lookups_cached = lookups_cached_.load();
  s.lookups_store = lookups_store_.load();
  s.lookups_failed = lookups_failed_.load();
  return s;
}

}  // namespace rdmad::directory
