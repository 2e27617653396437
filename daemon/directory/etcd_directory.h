// EtcdDirectory: this daemon's part of the cluster directory of exported
// regions on etcd v3 (docs/DIRECTORY.md).
//
//   * Publishing: one lease per daemon (TTL lease_ttl, kept alive), the
//     node record and one key per exported named region, all attached to
//     the lease. Export changes reach etcd at once (RegionObserver); a
//     daemon that dies disappears when its lease expires. A name is
//     claimed by a transaction (create if absent, or replace if the record
//     is this daemon's own, compared on its mod revision): never a
//     read-then-write race, so exactly one daemon holds a name. Records
//     name this daemon's certificate identity (core/holder_trust.h).
//   * Re-asserting: when the watch shows a key this daemon holds deleted
//     or overwritten by someone else, the session thread publishes it
//     again at once: re-created if absent, or replaced if the key is still
//     the one this daemon created (same create revision: only an intruder
//     writes over another daemon's key). A key someone created anew after
//     a deletion is another daemon's claim: this one yields (a conflict),
//     so two daemons never write over each other in a loop. Publishing
//     with a lease that has ended fails, so a daemon whose lease expired
//     re-asserts nothing: it reconnects and claims its names afresh.
//   * Resolving: a cache of every region entry, filled by a full read and
//     kept fresh by a watch on the prefix. Look-ups answer from it; a miss
//     asks etcd asynchronously with a deadline (RegionResolver). An entry
//     deleted while its holder's lease lives, or missing from etcd after
//     an outage, keeps answering until its holder publishes it again
//     (RegionCache, "vanished entries"); a deleted entry whose lease etcd
//     says has ended is dropped.
//   * Failures: etcd unreachable at start or later: the daemon keeps
//     running and retrying; cached entries keep answering; look-ups that
//     need etcd fail UNAVAILABLE naming it. On reconnection: a new lease,
//     everything exported re-published, the old lease revoked.
//
// Threads: a session thread (lease, keep-alive, publishing, in order) and
// a watch thread; look-ups run on gRPC's callback threads. Start() and
// Stop() from the owner's thread; everything else is thread-safe.
//
// Example:
//   DirectoryOptions options;  // etcd endpoints, prefix, identity...
//   auto directory = EtcdDirectory::Create(options, &regions);
//   regions.SetObserver(directory->get());
//   engine.SetDirectory(directory->get());
//   (*directory)->Start();
//   ...
//   (*directory)->Stop();  // revokes the lease: our keys go at once
#ifndef RDMAD_DAEMON_DIRECTORY_ETCD_DIRECTORY_H_
#define RDMAD_DAEMON_DIRECTORY_ETCD_DIRECTORY_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/region_observer.h"
#include "daemon/core/region_resolver.h"
#include "daemon/core/region_table.h"
#include "daemon/directory/cluster_directory.h"
#include "daemon/directory/directory_keys.h"
#include "daemon/directory/etcd_client.h"
#include "daemon/directory/region_cache.h"
#include "rdmad/v1/directory.pb.h"

namespace rdmad::directory {

struct DirectoryOptions {
  EtcdOptions etcd;
  std::string prefix = kDefaultPrefix;
  absl::Duration lease_ttl = absl::Seconds(10);
  // Deadline of each call to etcd made by the directory's own threads, and
  // the longest a look-up waits for etcd.
  absl::Duration rpc_timeout = absl::Seconds(5);
  // This daemon, as published in its node record. node_record.address is
  // the HOST:PORT region entries name.
  v1::DirectoryNodeRecord node_record;
  // This daemon's certificate identity (mutual TLS), named in its region
  // records; empty without mutual TLS.
  std::string identity;
};

class EtcdDirectory final : public ClusterDirectory {
 public:
  // Most entries one listing returns.
  static constexpr int kMaxListing = 10000;

  // Checks the options; connects nothing yet. `regions` (not owned) must
  // outlive the directory: it is read for what to publish.
  static absl::StatusOr<std::unique_ptr<EtcdDirectory>> Create(
      DirectoryOptions options, const core::RegionTable* regions);
  ~EtcdDirectory() override;  // Stop()

  // Starts the session and watch threads and returns at once: a daemon
  // starts whether or not etcd answers.
  void Start();
  // Revokes the lease (this daemon's keys disappear at once, bounded by
  // rpc_timeout), stops the threads, cancels look-ups in flight (they fail
  // UNAVAILABLE). Idempotent.
  void Stop();

  // core::RegionObserver: queues a publish or withdrawal of `name`.
  void OnRegionChanged(const std::string& name) override;

  // core::RegionResolver.
  void Resolve(const std::string& name, absl::Time deadline,
               core::DirectoryGeneration stale,
               core::ResolveDone done) override;
  std::string self_node() const override;

  // ClusterDirectory. Claim's `done` runs on the session thread (or
  // inline); Lookup's and List's on a gRPC thread (or inline).
  void Claim(const std::string& name, absl::Time deadline,
             std::function<void(absl::Status)> done) override;
  void Lookup(const std::string& name, absl::Time deadline, bool fresh,
              std::function<void(absl::StatusOr<core::DirectoryEntry>, bool)>
                  done) override;
  void List(const std::string& name_prefix, absl::Time deadline,
            std::function<void(absl::StatusOr<DirectoryListing>)> done)
      override;
  DirectoryState state() const override;
  const std::string& url() const { return etcd_.url(); }

 private:
  // Retries after etcd failed: from the first, doubling up to the most.
  static constexpr absl::Duration kBackoffFirst = absl::Milliseconds(100);
  static constexpr absl::Duration kBackoffMost = absl::Seconds(2);

  struct Work {
    std::string name;
    absl::Time deadline;
    std::function<void(absl::Status)> done;  // may be empty
    // The watch saw the key changed by someone else: publish it again.
    bool reassert = false;
  };
  // A name this daemon holds in etcd: the value it wrote, and the create
  // revision of the key it wrote it to (only this daemon writes to a key
  // it created, so anything else there is an intruder's).
  struct Held {
    std::string value;
    int64_t create_revision = 0;
  };
  // A full read of the regions prefix.
  struct Listing {
    std::vector<core::DirectoryEntry> entries;
    absl::flat_hash_map<std::string, std::string> values;  // name -> raw
    int64_t revision = 0;
  };
  using Link = DirectoryLink;

  EtcdDirectory(DirectoryOptions options, const core::RegionTable* regions);

  void SessionLoop();
  void WatchLoop();
  // Authenticates, takes a new lease, publishes the node record and every
  // exported region, then revokes the previous lease.
  absl::Status Connect();
  absl::Status KeepAlive();
  void Process(Work work);
  // Publishes or withdraws `name` as the region table has it now.
  absl::Status Sync(const std::string& name, absl::Time deadline);
  // Publishes `name` again if this daemon still holds and exports it.
  absl::Status Reassert(const std::string& name, absl::Time deadline);
  // `reassert`: write even if the value is what was written last (the
  // key may have changed since).
  absl::Status Publish(const std::string& name,
                       const v1::DirectoryRegionRecord& record,
                       absl::Time deadline, bool reassert = false);
  // Publish's transaction rounds, with the lease and the create revision
  // of the key this daemon holds for `name` (0: none) read before.
  absl::Status PublishRounds(const std::string& name, const std::string& key,
                             const std::string& value, int64_t lease,
                             int64_t held_key, bool reassert,
                             absl::Time deadline);
  // Queues a Reassert of `name` for the session thread.
  void QueueReassert(const std::string& name);
  // Whether a watched change to `name`'s key (the new value, or nullopt
  // when deleted) is not this daemon's own, for a name it holds.
  bool ChangedBySomeoneElse(const std::string& name,
                            const std::optional<std::string>& value,
                            int64_t lease) const;
  // The names this daemon holds now, with the values it wrote.
  absl::flat_hash_map<std::string, std::string> PublishedNow() const;
  // Asks etcd whether `lease` still lives; if not, drops the vanished
  // cache entry of `name` that hung on it.
  void CheckLease(const std::string& name, int64_t lease);
  absl::Status Withdraw(const std::string& name, absl::Time deadline);
  v1::DirectoryRegionRecord RecordOf(const core::RegionSnapshot& region) const;
  void SetLink(Link link, const absl::Status& why);
  // Full read of the regions prefix at one revision, page by page.
  absl::StatusOr<Listing> ReadAll();
  bool OnWatchResponse(const etcdserverpb::WatchResponse& response);
  // Sleeps up to `d` or until Stop(). False when stopping.
  bool Sleep(absl::Duration d);
  absl::Time CallDeadline(absl::Time deadline) const;
  absl::Status NotFound(const std::string& name) const;

  const DirectoryOptions options_;
  const DirectoryKeys keys_;
  const std::string self_node_;
  const uint64_t incarnation_;
  const core::RegionTable* const regions_;  // Not owned.
  EtcdClient etcd_;
  RegionCache cache_;

  // Session state: written by the session thread only; read under mu_ by
  // state() and Claim().
  mutable absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  Link link_ ABSL_GUARDED_BY(mu_) = Link::kConnecting;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time link_since_ ABSL_GUARDED_BY(mu_);
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lease_ttl_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t old_lease_ ABSL_GUARDED_BY(mu_) = 0;  // to revoke once re-published
  // Names this daemon holds in etcd now.
  absl::flat_hash_map<std::string, Held> published_ ABSL_GUARDED_BY(mu_);
  // Names exported here but held by another daemon: name -> its node.
  absl::flat_hash_map<std::string, std::string> conflicts_
      ABSL_GUARDED_BY(mu_);
  uint64_t reconnects_ ABSL_GUARDED_BY(mu_) = 0;

  // Records this daemon published again after someone else changed them
  // (written by the session thread; read for the log).
  std::atomic<uint64_t> reassertions_{0};
  std::atomic<uint64_t> lookups_cached_{0};
  std::atomic<uint64_t> lookups_store_{0};
  std::atomic<uint64_t> lookups_failed_{0};

  std::thread session_thread_;
  std::thread watch_thread_;
};

}  // namespace rdmad::directory

#endif  // RDMAD_DAEMON_DIRECTORY_ETCD_DIRECTORY_H_
