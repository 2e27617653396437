// EtcdDirectory, the write side: this daemon's exports as region keys in
// etcd under its lease, created and replaced in transactions so that a name
// stays unique in the cluster (see etcd_directory.h).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/directory/directory_record.h"
#include "daemon/directory/etcd_directory.h"
#include "spdlog/spdlog.h"

namespace rdmad::directory {
namespace {

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
  record.set_identity(options_.identity);
  record.set_lease_ttl_seconds(
      static_cast<uint32_t>(absl::ToInt64Seconds(options_.lease_ttl)));
  return record;
}

absl::Status EtcdDirectory::Sync(const std::string& name, absl::Time deadline) {
  auto region = regions_->FindExported(name);
  if (region.ok()) {
    return Publish(name, RecordOf((*region)->Snapshot()), deadline);
  }
  return Withdraw(name, deadline);
}

absl::Status EtcdDirectory::Reassert(const std::string& name,
                                     absl::Time deadline) {
  {
    absl::MutexLock lock(&mu_);
    // Withdrawn meanwhile (the watch showed our own delete), or yielded.
    if (!published_.contains(name)) return absl::OkStatus();
  }
  auto region = regions_->FindExported(name);
  if (!region.ok()) return absl::OkStatus();  // its withdrawal is queued
  return Publish(name, RecordOf((*region)->Snapshot()), deadline,
                 /*reassert=*/true);
}

absl::Status EtcdDirectory::Publish(const std::string& name,
                                    const v1::DirectoryRegionRecord& record,
                                    absl::Time deadline, bool reassert) {
  const std::string key = keys_.Region(name);
  const std::string value = EncodeRegionRecord(record);
  int64_t lease;
  int64_t held_key = 0;  // create revision of the key we wrote, if any
  {
    absl::MutexLock lock(&mu_);
    auto it = published_.find(name);
    if (it != published_.end()) {
      if (!reassert && it->second.value == value) return absl::OkStatus();
      held_key = it->second.create_revision;
    }
    lease = lease_;
  }
  absl::Status published =
      PublishRounds(name, key, value, lease, held_key, reassert, deadline);
  if (IsLeaseNotFound(published)) {
    // Our lease ended (expired, or etcd lost its data): nothing of ours is
    // in etcd any more. A new session claims every name afresh.
    return absl::UnavailableError(absl::StrCat(
        "cluster directory ", etcd_.url(), ": this daemon's lease ",
        absl::Hex(lease), " has ended; publishing again under a new one"));
  }
  return published;
}

absl::Status EtcdDirectory::PublishRounds(const std::string& name,
                                          const std::string& key,
                                          const std::string& value,
                                          int64_t lease, int64_t held_key,
                                          bool reassert, absl::Time deadline) {
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
    int64_t create_revision = created.header().revision();
    std::string replaced;  // what a replace wrote over, for the log
    if (!created.succeeded()) {
      // ...else replace it only if it is this daemon's own, and only if it
      // is still the record just read (its mod revision).
      if (created.responses_size() == 0 ||
          created.responses(0).response_range().kvs_size() == 0) {
        continue;  // deleted in between: try to create it again
      }
      const mvccpb::KeyValue& kv = created.responses(0).response_range().kvs(0);
      create_revision = kv.create_revision();
      if (kv.value() == value && kv.lease() == lease) {
        // Already what we would write (our own write, seen by the watch
        // before we noted it).
        absl::MutexLock lock(&mu_);
        published_[name] = Held{value, create_revision};
        conflicts_.erase(name);
        return absl::OkStatus();
      }
      auto existing = DecodeRegionRecord(name, kv.value());
      const bool our_record = existing.ok() &&
                              existing->incarnation() == incarnation_ &&
                              existing->node() == self_node_;
      // A key we created and someone else wrote over: still ours.
      const bool our_key = held_key != 0 && kv.create_revision() == held_key;
      if (!our_record && !our_key) {
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
          spdlog::warn(
              "cluster directory: region '{}' is exported here, but "
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
      replaced = existing.ok()
                     ? absl::StrCat("a record naming ", existing->node())
                     : std::string("an unreadable record");
      etcdserverpb::TxnRequest replace;
      AddCompare(replace, key, etcdserverpb::Compare::MOD)
          ->set_mod_revision(kv.mod_revision());
      AddPut(replace.mutable_success(), key, value, lease);
      RDMAD_ASSIGN_OR_RETURN(const etcdserverpb::TxnResponse replaced,
                             etcd_.Txn(replace, deadline));
      if (!replaced.succeeded()) continue;
    }
    {
      absl::MutexLock lock(&mu_);
      published_[name] = Held{value, create_revision};
      conflicts_.erase(name);
    }
    // Said first and every 1000th time: someone who keeps overwriting a
    // record must not flood the log.
    if (const uint64_t n = reassert ? ++reassertions_ : 0;
        n == 1 || (n != 0 && n % 1000 == 0)) {
      spdlog::warn(
          "cluster directory: the record of region '{}' was {} by "
          "someone else; this daemon holds the name and published "
          "it again ({} time(s) since it started)",
          name,
          created.succeeded() ? std::string("deleted")
                              : absl::StrCat("overwritten with ", replaced),
          n);
    }
    return absl::OkStatus();
  }
  return absl::AbortedError(
      absl::StrCat("cluster directory ", etcd_.url(), ": the key of region '",
                   name, "' kept changing while publishing it; try again"));
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

}  // namespace rdmad::directory
