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

// Bounds the lease revocation on the way out; after it the lease still
// expires by itself.
constexpr absl::Duration kRevokeTimeout = absl::Seconds(2);

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
  options.etcd.prefix = options.prefix;  // named in permission errors
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
      etcd_(options_.etcd),
      cache_(options_.lease_ttl) {
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

void EtcdDirectory::QueueReassert(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back({name, absl::InfiniteFuture(), nullptr, /*reassert=*/true});
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
  absl::StatusCode logged_failure = absl::StatusCode::kOk;
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
        } else if (item.reassert) {
          s = Reassert(item.name, CallDeadline(item.deadline));
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
      // Connect() re-publishes everything (and re-asserts it).
      if (!item.done) continue;
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
        logged_failure = absl::StatusCode::kOk;
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
        SetLink(ever_connected ? Link::kDisconnected : Link::kConnecting, s);
        // Once per kind of failure: an unreachable etcd is retried quietly,
        // but a refusal (wrong password, no permission) is worth saying as
        // soon as it is the reason.
        if (s.code() != logged_failure) {
          logged_failure = s.code();
          if (IsUnreachable(s)) {
            spdlog::warn(
                "cluster directory not reachable, retrying in the "
                "background: {}",
                std::string(s.message()));
          } else {
            spdlog::error(
                "cluster directory refused this daemon, retrying in "
                "the background: {}",
                std::string(s.message()));
          }
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

absl::flat_hash_map<std::string, std::string> EtcdDirectory::PublishedNow()
    const {
  absl::flat_hash_map<std::string, std::string> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, held] : published_) out[name] = held.value;
  return out;
}

DirectoryState EtcdDirectory::state() const {
  DirectoryState s;
  s.url = etcd_.url();
  s.endpoint = etcd_.endpoint();
  s.prefix = options_.prefix;
  {
    absl::MutexLock lock(&mu_);
    s.state = link_;
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
