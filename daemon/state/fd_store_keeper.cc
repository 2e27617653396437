#include "daemon/state/fd_store_keeper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/state/region_record.h"
#include "spdlog/spdlog.h"

namespace rdmad::state {
namespace {

constexpr char kPrefix[] = "rdmad-";
constexpr char kMemPrefix[] = "rdmad-mem-";
constexpr char kRecPrefix[] = "rdmad-rec-";

// A sealed memfd holding `text`: nobody, rdmad included, can change it.
absl::StatusOr<UniqueFd> RecordMemfd(const std::string& text) {
  UniqueFd fd(::memfd_create("rdmad:record", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return absl::ErrnoToStatus(errno, "memfd_create for a record");
  absl::string_view left = text;
  while (!left.empty()) {
    const ssize_t n = ::write(fd.get(), left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::ErrnoToStatus(errno, "writing a record memfd");
    left.remove_prefix(static_cast<size_t>(n));
  }
  if (::fcntl(fd.get(), F_ADD_SEALS,
              F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return absl::ErrnoToStatus(errno, "sealing a record memfd");
  }
  return fd;
}

absl::StatusOr<std::string> ReadRecordFd(int fd) {
  std::string text(kMaxRecordBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + got, text.size() - got,
                              static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "reading a kept record");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

// "rdmad-rec-SLOT-GEN" -> SLOT and GEN.
bool ParseRecordName(absl::string_view name, std::string* slot,
                     uint64_t* generation) {
  if (!absl::ConsumePrefix(&name, kRecPrefix) || name.size() < 18 ||
      name[16] != '-') {
    return false;
  }
  const absl::string_view gen = name.substr(17);
  if (gen.empty() || gen.front() == '0' || gen.size() > 19 ||
      !absl::SimpleAtoi(gen, generation)) {
    return false;
  }
  for (char c : gen) {
    if (c < '0' || c > '9') return false;
  }
  *slot = std::string(name.substr(0, 16));
  return IsValidSlot(*slot);
}

// One region's kept state in the store.
class FdStoreRegion final : public core::KeptRegion {
 public:
  FdStoreRegion(std::shared_ptr<FdStore> store, RegionRecord record,
                uint64_t generation)
      : store_(std::move(store)),
        record_(std::move(record)),
        generation_(generation) {}

  absl::Status SetExportAccess(
      core::RemoteAccess access,
      const std::vector<core::ExportGrant>& allow) override {
    absl::MutexLock lock(&mu_);
    if (gone_ || (record_.info.export_access == access &&
                  record_.info.export_allow == allow)) {
      return absl::OkStatus();
    }
    RegionRecord next = record_;
    next.info.export_access = access;
    next.info.export_allow = allow;
    return RewriteLocked(std::move(next), "export");
  }

  absl::Status SetAcl(const core::RegionAcl& acl) override {
    absl::MutexLock lock(&mu_);
    const core::RegionAcl& now = record_.info.acl;
    if (gone_ || (now.uid == acl.uid && now.gid == acl.gid &&
                  now.mode == acl.mode)) {
      return absl::OkStatus();
    }
    RegionRecord next = record_;
    next.info.acl = acl;
    return RewriteLocked(std::move(next), "permissions");
  }

  void Forget() override {
    absl::MutexLock lock(&mu_);
    if (std::exchange(gone_, true)) return;
    // Record first: memory without a record is removed at the next start.
    for (const std::string& name : {RecordFdName(record_.slot, generation_),
                                    MemoryFdName(record_.slot)}) {
      if (absl::Status s = store_->Remove(name); !s.ok()) {
        spdlog::warn("fd store: {}", s.ToString());
      }
    }
  }

  // The store has no place to put things aside: the state is removed (the
  // caller logs why).
  void Discard(const std::string&) override { Forget(); }

 private:
  // Stores `next` as the record's next generation, then drops the current
  // one. `what` names the change for the error.
  absl::Status RewriteLocked(RegionRecord next, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RDMAD_ASSIGN_OR_RETURN(UniqueFd fd, RecordMemfd(EncodeRegionRecord(next)));
    // The new record is in the store before the old one goes.
    if (absl::Status s = store_->Store(
            RecordFdName(record_.slot, generation_ + 1), fd.get());
        !s.ok()) {
      return absl::Status(
          s.code(), absl::StrCat("recording the ", what, " of region '",
                                 record_.info.name, "' in the fd store: ",
                                 s.message()));
    }
    if (absl::Status s =
            store_->Remove(RecordFdName(record_.slot, generation_));
        !s.ok()) {
      spdlog::warn("fd store: {} (the next start removes the old record)",
                   s.ToString());
    }
    ++generation_;
    record_ = std::move(next);
    return absl::OkStatus();
  }

  const std::shared_ptr<FdStore> store_;
  absl::Mutex mu_;
  RegionRecord record_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_);
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

std::string MemoryFdName(const std::string& slot) {
  return absl::StrCat(kMemPrefix, slot);
}

std::string RecordFdName(const std::string& slot, uint64_t generation) {
  return absl::StrCat(kRecPrefix, slot, "-", generation);
}

FdStoreKeeper::FdStoreKeeper(std::unique_ptr<FdStore> store,
                             std::vector<NamedFd> received)
    : store_(std::move(store)), received_(std::move(received)) {}

FdStoreKeeper::~FdStoreKeeper() = default;

std::string FdStoreKeeper::Describe() const {
  return "the service manager's file descriptor store";
}

std::string FdStoreKeeper::DiscardedTo() const {
  return "removed from the fd store";
}

absl::StatusOr<core::KeptMemory> FdStoreKeeper::Create(
    const core::KeptRegionInfo& info) {
  RegionRecord record;
  record.slot = NewSlot();
  record.info = info;
  RDMAD_ASSIGN_OR_RETURN(core::ShmSegment segment,
                         core::ShmSegment::Create(info.name, info.size));
  RDMAD_ASSIGN_OR_RETURN(UniqueFd record_fd,
                         RecordMemfd(EncodeRegionRecord(record)));
  const std::string mem_name = MemoryFdName(record.slot);
  if (absl::Status s = store_->Store(mem_name, segment.fd()); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot hand the memory of region '", info.name,
                     "' to the service manager's fd store: ", s.message()));
  }
  if (absl::Status s =
          store_->Store(RecordFdName(record.slot, 1), record_fd.get());
      !s.ok()) {
    (void)store_->Remove(mem_name);
    return absl::UnavailableError(
        absl::StrCat("cannot hand the record of region '", info.name,
                     "' to the service manager's fd store: ", s.message()));
  }
  return core::KeptMemory{
      std::move(segment),
      std::make_unique<FdStoreRegion>(store_, std::move(record), 1)};
}

Recovery FdStoreKeeper::Recover() {
  std::vector<NamedFd> received;
  {
    absl::MutexLock lock(&mu_);
    received = std::move(received_);
    received_.clear();
  }
  Recovery found;
  struct Slot {
    UniqueFd memory;
    std::map<uint64_t, UniqueFd> records;  // by generation
  };
  std::map<std::string, Slot> slots;
  auto remove = [this, &found](const std::string& name) {
    if (absl::Status s = store_->Remove(name); !s.ok()) {
      found.notes.push_back(std::string(s.message()));
    }
  };
  for (NamedFd& passed : received) {
    absl::string_view name = passed.name;
    std::string slot;
    uint64_t generation = 0;
    if (absl::ConsumePrefix(&name, kMemPrefix) && IsValidSlot(name)) {
      Slot& entry = slots[std::string(name)];
      if (entry.memory) {
        found.notes.push_back(absl::StrCat("a second descriptor named ",
                                           passed.name, " was closed"));
      } else {
        entry.memory = std::move(passed.fd);
      }
    } else if (ParseRecordName(passed.name, &slot, &generation)) {
      slots[slot].records[generation] = std::move(passed.fd);
    } else if (absl::StartsWith(passed.name, kPrefix)) {
      remove(passed.name);
      found.notes.push_back(
          absl::StrCat("removed descriptor '", passed.name,
                       "' from the fd store: not a name this rdmad writes"));
    } else {
      // Not ours (socket activation, another tool): closed here, left in
      // the store.
      found.notes.push_back(absl::StrCat("closed descriptor '", passed.name,
                                         "' passed at start: not rdmad's"));
    }
  }
  // Not a structured binding: lambdas below capture the slot (clang 14
  // cannot capture bindings).
  for (auto& item : slots) {
    const std::string& slot = item.first;
    Slot& entry = item.second;
    SkippedRegion skip;
    skip.region = absl::StrCat("slot ", slot);
    if (entry.records.empty()) {
      remove(MemoryFdName(slot));
      found.notes.push_back(absl::StrCat(
          "removed ", MemoryFdName(slot),
          " from the fd store: memory without "
          "a record (a crash while a region was created or freed)"));
      continue;
    }
    // The newest record counts; older ones are left by an export change
    // that a crash interrupted.
    const uint64_t generation = entry.records.rbegin()->first;
    const UniqueFd record_fd = std::move(entry.records.rbegin()->second);
    for (const auto& [older, fd] : entry.records) {
      if (older != generation) remove(RecordFdName(slot, older));
    }
    auto skipped = [&](std::string why) {
      skip.why = std::move(why);
      remove(RecordFdName(slot, generation));
      remove(MemoryFdName(slot));
      found.skipped.push_back(skip);
    };
    auto text = ReadRecordFd(record_fd.get());
    if (!text.ok()) {
      skipped(std::string(text.status().message()));
      continue;
    }
    auto record = ParseRegionRecord(*text);
    if (!record.ok()) {
      skipped(std::string(record.status().message()));
      continue;
    }
    skip.region =
        absl::StrCat("region '", record->info.name, "' (slot ", slot, ")");
    skip.bytes = record->info.size;
    if (record->slot != slot) {
      skipped(absl::StrCat("damaged record: it names slot ", record->slot,
                           " but was stored as slot ", slot));
      continue;
    }
    if (!entry.memory) {
      skipped("its memory is missing from the fd store");
      continue;
    }
    auto segment =
        core::ShmSegment::AdoptKept(std::move(entry.memory), record->info.size);
    if (!segment.ok()) {
      skipped(absl::StrCat("its memory: ", segment.status().message()));
      continue;
    }
    found.regions.push_back(RecoveredRegion{
        record->info, *std::move(segment),
        std::make_unique<FdStoreRegion>(store_, *record, generation)});
  }
  return found;
}

size_t FdStoreKeeper::DiscardAll() {
  std::vector<NamedFd> received;
  {
    absl::MutexLock lock(&mu_);
    received = std::move(received_);
    received_.clear();
  }
  size_t regions = 0;
  for (const NamedFd& passed : received) {
    if (!absl::StartsWith(passed.name, kPrefix)) continue;
    if (absl::StartsWith(passed.name, kMemPrefix)) ++regions;
    if (absl::Status s = store_->Remove(passed.name); !s.ok()) {
      spdlog::warn("fd store: {}", s.ToString());
    }
  }
  return regions;
}

}  // namespace rdmad::state
