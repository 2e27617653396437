#include "daemon/state/fd_store_keeper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/state/recorded_region.h"
#include "daemon/state/region_record.h"
#include "daemon/state/slot_recovery.h"
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
class FdStoreRegion final : public RecordedRegion {
 public:
  FdStoreRegion(std::shared_ptr<FdStore> store, RegionRecord record,
                uint64_t generation)
      : RecordedRegion(std::move(record)),
        store_(std::move(store)),
        generation_(generation) {}

 private:
  // Stores `next` as the record's next generation, then drops the current
  // one.
  absl::Status Rewrite(const RegionRecord& next,
                       absl::string_view what) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    RDMAD_ASSIGN_OR_RETURN(UniqueFd fd, RecordMemfd(EncodeRegionRecord(next)));
    // The new record is in the store before the old one goes.
    if (absl::Status s =
            store_->Store(RecordFdName(next.slot, generation_ + 1), fd.get());
        !s.ok()) {
      return absl::Status(
          s.code(),
          absl::StrCat("recording the ", what, " of region '", next.info.name,
                       "' in the fd store: ", s.message()));
    }
    if (absl::Status s = store_->Remove(RecordFdName(next.slot, generation_));
        !s.ok()) {
      spdlog::warn("fd store: {} (the next start removes the old record)",
                   s.ToString());
    }
    ++generation_;
    return absl::OkStatus();
  }

  void Remove() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Record first: memory without a record is removed at the next start.
    for (const std::string& name : {RecordFdName(record().slot, generation_),
                                    MemoryFdName(record().slot)}) {
      if (absl::Status s = store_->Remove(name); !s.ok()) {
        spdlog::warn("fd store: {}", s.ToString());
      }
    }
  }

  // The store has no place to put things aside: the state is removed (the
  // caller logs why).
  void PutAside(const std::string&) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Remove();
  }

  const std::shared_ptr<FdStore> store_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_);
};

// The descriptors the store passed back, by slot, for RecoverSlots.
class StoreSlots final : public SlotStorage {
 public:
  // `notes`: where failures to remove something from the store go.
  StoreSlots(std::shared_ptr<FdStore> store, std::vector<std::string>* notes)
      : store_(std::move(store)), notes_(notes) {}

  // False (and `fd` closed) if the slot has memory already.
  bool AddMemory(const std::string& slot, UniqueFd fd) {
    UniqueFd& memory = memory_[slot];
    if (memory) return false;
    memory = std::move(fd);
    return true;
  }
  void AddRecord(const std::string& slot, uint64_t generation, UniqueFd fd) {
    records_[slot][generation] = std::move(fd);
  }
  // Removes every record but the newest of each slot.
  void RemoveOlderRecords() {
    for (auto& [slot, by_generation] : records_) {
      while (by_generation.size() > 1) {
        Remove(RecordFdName(slot, by_generation.begin()->first));
        by_generation.erase(by_generation.begin());
      }
    }
  }
  std::set<std::string> records() const { return SlotsOf(records_); }
  std::set<std::string> memories() const { return SlotsOf(memory_); }

  void Remove(const std::string& name) {
    if (absl::Status s = store_->Remove(name); !s.ok()) {
      notes_->push_back(std::string(s.message()));
    }
  }

  absl::StatusOr<std::string> ReadRecord(const std::string& slot) override {
    return ReadRecordFd(records_[slot].rbegin()->second.get());
  }

  absl::StatusOr<core::ShmSegment> MapMemory(const std::string& slot,
                                             uint64_t size,
                                             std::string*) override {
    return core::ShmSegment::AdoptKept(std::move(memory_[slot]), size);
  }

  std::string MissingMemory(const std::string&) const override {
    return "its memory is missing from the fd store";
  }

  std::unique_ptr<core::KeptRegion> Keep(const RegionRecord& record,
                                         const core::ShmSegment&) override {
    return std::make_unique<FdStoreRegion>(store_, record,
                                           Generation(record.slot));
  }

  // The store has no place to put things aside: the slot is removed.
  void Discard(const std::string& slot, const std::string&,
               const std::string&) override {
    Remove(RecordFdName(slot, Generation(slot)));
    Remove(MemoryFdName(slot));
  }

  std::string RemoveMemory(const std::string& slot) override {
    Remove(MemoryFdName(slot));
    return absl::StrCat(MemoryFdName(slot), " from the fd store");
  }

 private:
  template <typename Map>
  static std::set<std::string> SlotsOf(const Map& map) {
    std::set<std::string> slots;
    for (const auto& entry : map) slots.insert(entry.first);
    return slots;
  }
  uint64_t Generation(const std::string& slot) {
    return records_[slot].rbegin()->first;
  }

  const std::shared_ptr<FdStore> store_;
  std::vector<std::string>* const notes_;
  std::map<std::string, UniqueFd> memory_;
  // By slot, then by generation.
  std::map<std::string, std::map<uint64_t, UniqueFd>> records_;
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
  const RegionRecord record = NewRecord(info);
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
  return core::KeptMemory{std::move(segment),
                          std::make_unique<FdStoreRegion>(store_, record, 1)};
}

Recovery FdStoreKeeper::Recover() {
  std::vector<NamedFd> received;
  {
    absl::MutexLock lock(&mu_);
    received = std::move(received_);
    received_.clear();
  }
  Recovery found;
  StoreSlots storage(store_, &found.notes);
  for (NamedFd& passed : received) {
    absl::string_view name = passed.name;
    std::string slot;
    uint64_t generation = 0;
    if (absl::ConsumePrefix(&name, kMemPrefix) && IsValidSlot(name)) {
      if (!storage.AddMemory(std::string(name), std::move(passed.fd))) {
        found.notes.push_back(absl::StrCat("a second descriptor named ",
                                           passed.name, " was closed"));
      }
    } else if (ParseRecordName(passed.name, &slot, &generation)) {
      storage.AddRecord(slot, generation, std::move(passed.fd));
    } else if (absl::StartsWith(passed.name, kPrefix)) {
      storage.Remove(passed.name);
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
  // The newest record of a slot counts; older ones are left by an export
  // change that a crash interrupted.
  storage.RemoveOlderRecords();
  RecoverSlots(storage.records(), storage.memories(), storage, found);
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
