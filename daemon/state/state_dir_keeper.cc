#include "daemon/state/state_dir_keeper.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/size.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"
#include "daemon/state/dir_files.h"
#include "daemon/state/recorded_region.h"
#include "daemon/state/region_record.h"
#include "daemon/state/slot_recovery.h"
#include "daemon/state/state_file_guard.h"
#include "spdlog/spdlog.h"

namespace rdmad::state {
namespace {

constexpr char kMemSuffix[] = ".mem";
constexpr char kRecSuffix[] = ".rec";
constexpr char kTmpSuffix[] = ".rec.tmp";
constexpr char kDamaged[] = "damaged";

std::string MemFile(const std::string& slot) { return slot + kMemSuffix; }
std::string RecFile(const std::string& slot) { return slot + kRecSuffix; }

}  // namespace

struct StateDirKeeper::Dir {
  std::string path;
  UniqueFd fd;     // holds the flock
  absl::Mutex mu;  // serializes moves into damaged/
  // Keeps live regions' files at their sizes; declared after `fd`, so that
  // it stops before the directory is closed.
  std::unique_ptr<StateFileGuard> guard;

  // Cuts the memory file `name` back to `mapped_size` bytes, if it grew
  // (see StateFileGuard); logs what it held.
  void CutBack(const std::string& name, uint64_t mapped_size) {
    UniqueFd file(::openat(fd.get(), name.c_str(),
                           O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!file) return;
    auto excess = core::CutFileBackTo(file.get(), mapped_size);
    if (!excess.ok()) {
      spdlog::warn("state directory {}: {}: {}", path, name,
                   std::string(excess.status().message()));
    } else if (excess->has_value()) {
      spdlog::warn(
          "state directory {}: {} had grown to {} holding {} of memory; cut "
          "back to its region's {}",
          path, name, HumanSize((*excess)->size),
          HumanSize((*excess)->allocated), HumanSize(mapped_size));
    }
  }

  // Writes a record: a temporary file, fsync, rename over the old one,
  // fsync of the directory. The record is either the old one or the new
  // one whatever happens.
  absl::Status WriteRecord(const RegionRecord& record) {
    const std::string tmp = record.slot + kTmpSuffix;
    UniqueFd out(::openat(fd.get(), tmp.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                          0600));
    if (!out) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("writing the record of region '",
                                              record.info.name, "' in ", path));
    }
    absl::Status status = WriteAll(out.get(), EncodeRegionRecord(record));
    if (status.ok() && ::fsync(out.get()) != 0) {
      status = absl::ErrnoToStatus(errno, "fsync");
    }
    out.reset();
    if (status.ok() && ::renameat(fd.get(), tmp.c_str(), fd.get(),
                                  RecFile(record.slot).c_str()) != 0) {
      status = absl::ErrnoToStatus(errno, "rename");
    }
    if (!status.ok()) {
      ::unlinkat(fd.get(), tmp.c_str(), 0);
      return absl::Status(
          status.code(),
          absl::StrCat("writing the record of region '", record.info.name,
                       "' in ", path, ": ", status.message()));
    }
    ::fsync(fd.get());
    return absl::OkStatus();
  }

  void Remove(const std::string& name) {
    if (::unlinkat(fd.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
      spdlog::warn("state directory {}: cannot remove {}: {}", path, name,
                   std::strerror(errno));
    }
  }

  // Moves the slot's files into damaged/, with a SLOT.why saying why.
  void PutAside(const std::string& slot, const std::string& why) {
    absl::MutexLock lock(&mu);
    if (::mkdirat(fd.get(), kDamaged, 0700) != 0 && errno != EEXIST) {
      spdlog::warn(
          "state directory {}: cannot create {}/: {}; removing the "
          "files of slot {} instead",
          path, kDamaged, std::strerror(errno), slot);
      Remove(RecFile(slot));
      Remove(MemFile(slot));
      return;
    }
    UniqueFd damaged(::openat(fd.get(), kDamaged,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    for (const std::string& name : {RecFile(slot), MemFile(slot)}) {
      if (!damaged || ::renameat(fd.get(), name.c_str(), damaged.get(),
                                 name.c_str()) != 0) {
        if (errno != ENOENT) Remove(name);
      }
    }
    if (damaged) {
      UniqueFd note(::openat(
          damaged.get(), (slot + ".why").c_str(),
          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (note) (void)WriteAll(note.get(), why + "\n");
    }
  }
};

namespace {

// One region's kept state in the directory.
class StateDirRegion final : public RecordedRegion {
 public:
  // `mapped_size`: the bytes of the memory file the region is (its size
  // rounded up to the file's blocks). From now on the file is kept to them.
  StateDirRegion(std::shared_ptr<StateDirKeeper::Dir> dir, RegionRecord record,
                 uint64_t mapped_size)
      : RecordedRegion(record),
        dir_(std::move(dir)),
        mapped_size_(mapped_size) {
    dir_->guard->Watch(MemFile(record.slot), mapped_size_,
                       absl::StrCat("region '", record.info.name, "'"));
  }

 private:
  absl::Status Rewrite(const RegionRecord& next, absl::string_view) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return dir_->WriteRecord(next);
  }

  void Remove() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Record first: a crash in between leaves a memory file without a
    // record, which the next start removes. The memory as it was made:
    // whatever a client's descriptor added goes before the file does.
    LetGo();
    dir_->Remove(RecFile(record().slot));
    dir_->Remove(MemFile(record().slot));
  }

  void PutAside(const std::string& why) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    LetGo();
    dir_->PutAside(record().slot,
                   absl::StrCat("region '", record().info.name, "': ", why));
  }

  // The file stops being watched, cut back to its region's size.
  void LetGo() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    dir_->guard->Unwatch(MemFile(record().slot));
    dir_->CutBack(MemFile(record().slot), mapped_size_);
  }

  const std::shared_ptr<StateDirKeeper::Dir> dir_;
  const uint64_t mapped_size_;
};

// The slots' files in the directory, for RecoverSlots.
class DirSlots final : public SlotStorage {
 public:
  explicit DirSlots(std::shared_ptr<StateDirKeeper::Dir> dir)
      : dir_(std::move(dir)) {}

  absl::StatusOr<std::string> ReadRecord(const std::string& slot) override {
    return ReadSmallFile(dir_->fd.get(), RecFile(slot), kMaxRecordBytes);
  }

  absl::StatusOr<core::ShmSegment> MapMemory(const std::string& slot,
                                             uint64_t size,
                                             std::string* warning) override {
    return core::ShmSegment::OpenFile(dir_->fd.get(), MemFile(slot), size,
                                      warning);
  }

  std::string MissingMemory(const std::string& slot) const override {
    return absl::StrCat("its memory file ", MemFile(slot), " is missing");
  }

  std::unique_ptr<core::KeptRegion> Keep(
      const RegionRecord& record, const core::ShmSegment& segment) override {
    return std::make_unique<StateDirRegion>(dir_, record,
                                            segment.mapped_size());
  }

  void Discard(const std::string& slot, const std::string& region,
               const std::string& why) override {
    dir_->PutAside(slot, absl::StrCat(region, ": ", why));
  }

  std::string RemoveMemory(const std::string& slot) override {
    dir_->Remove(MemFile(slot));
    return absl::StrCat(dir_->path, "/", MemFile(slot));
  }

 private:
  const std::shared_ptr<StateDirKeeper::Dir> dir_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StateDirKeeper>> StateDirKeeper::Open(
    const std::string& path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("state_dir '", path, "' must be an absolute path"));
  }
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create state_dir ", path, ": ", std::strerror(errno),
        " (its parent must exist and be writable by rdmad)"));
  }
  auto dir = std::make_shared<Dir>();
  dir->path = path;
  dir->fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir->fd) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open state_dir ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(dir->fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fstat of ", path));
  }
  // Its records say who may use each region: whoever could write here
  // could grant themselves any region after the next restart.
  if (st.st_uid != ::geteuid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("state_dir ", path, " belongs to uid ", st.st_uid,
                     ", not to rdmad's "
                     "uid ",
                     ::geteuid(),
                     ": use a directory of rdmad's own (it is "
                     "created if missing)"));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "state_dir %s has mode %04o: others can write to it, and its records "
        "say who may use each region; chmod 700 %s",
        path, st.st_mode & 07777, path));
  }
  if (::flock(dir->fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::AlreadyExistsError(
          absl::StrCat("state_dir ", path,
                       " is in use by another running rdmad: give "
                       "each daemon a state_dir of its own"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("flock of ", path));
  }
  RDMAD_ASSIGN_OR_RETURN(dir->guard,
                         StateFileGuard::Start(dir->fd.get(), path));
  return std::unique_ptr<StateDirKeeper>(new StateDirKeeper(std::move(dir)));
}

StateDirKeeper::StateDirKeeper(std::shared_ptr<Dir> dir)
    : dir_(std::move(dir)) {}

StateDirKeeper::~StateDirKeeper() = default;

const std::string& StateDirKeeper::path() const { return dir_->path; }

std::string StateDirKeeper::Describe() const {
  return absl::StrCat("state directory ", dir_->path);
}

std::string StateDirKeeper::DiscardedTo() const {
  return absl::StrCat("moved to ", dir_->path, "/", kDamaged, "/");
}

std::string StateDirKeeper::filesystem() const {
  struct statfs fs;
  if (::fstatfs(dir_->fd.get(), &fs) != 0) return "an unknown filesystem";
  switch (static_cast<uint64_t>(fs.f_type)) {
    case TMPFS_MAGIC:
      return "tmpfs";
    case HUGETLBFS_MAGIC:
      return "hugetlbfs";
    case RAMFS_MAGIC:
      return "ramfs";
    default:
      return absl::StrFormat("a disk filesystem (type 0x%x)",
                             static_cast<uint64_t>(fs.f_type));
  }
}

bool StateDirKeeper::in_memory() const {
  return !absl::StartsWith(filesystem(), "a ");
}

absl::StatusOr<core::KeptMemory> StateDirKeeper::Create(
    const core::KeptRegionInfo& info) {
  const RegionRecord record = NewRecord(info);
  // Memory first, then the record: until the record exists, the memory
  // file is an orphan that the next start removes.
  RDMAD_ASSIGN_OR_RETURN(core::ShmSegment segment,
                         core::ShmSegment::CreateFile(
                             dir_->fd.get(), MemFile(record.slot), info.size));
  if (absl::Status s = dir_->WriteRecord(record); !s.ok()) {
    dir_->Remove(MemFile(record.slot));
    return s;
  }
  const uint64_t mapped_size = segment.mapped_size();
  return core::KeptMemory{std::move(segment), std::make_unique<StateDirRegion>(
                                                  dir_, record, mapped_size)};
}

Recovery StateDirKeeper::Recover() {
  Recovery found;
  auto names = ListDir(dir_->fd.get());
  if (!names.ok()) {
    found.notes.push_back(absl::StrCat("cannot list ", dir_->path, ": ",
                                       names.status().message(),
                                       "; nothing adopted"));
    return found;
  }
  std::set<std::string> records;  // slots with a record
  std::set<std::string> mems;     // slots with a memory file
  for (const std::string& name : *names) {
    if (name == kDamaged) {
      auto damaged = ListDir(
          UniqueFd(::openat(dir_->fd.get(), kDamaged,
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))
              .get());
      if (damaged.ok() && !damaged->empty()) {
        found.notes.push_back(absl::StrCat(
            dir_->path, "/", kDamaged, "/ holds ", damaged->size(),
            " file(s) put aside by earlier starts (SLOT.why says why): look "
            "at them, then delete them to free their memory"));
      }
      continue;
    }
    absl::string_view stem = name;
    if (absl::ConsumeSuffix(&stem, kTmpSuffix) && IsValidSlot(stem)) {
      // A record write that a crash interrupted; the old record stands.
      dir_->Remove(name);
      continue;
    }
    stem = name;
    if (absl::ConsumeSuffix(&stem, kRecSuffix) && IsValidSlot(stem)) {
      records.insert(std::string(stem));
      continue;
    }
    stem = name;
    if (absl::ConsumeSuffix(&stem, kMemSuffix) && IsValidSlot(stem)) {
      mems.insert(std::string(stem));
      continue;
    }
    found.notes.push_back(
        absl::StrCat("unknown file ", dir_->path, "/", name, " left alone"));
  }
  DirSlots storage(dir_);
  RecoverSlots(records, mems, storage, found);
  return found;
}

size_t StateDirKeeper::DiscardAll() {
  auto names = ListDir(dir_->fd.get());
  if (!names.ok()) return 0;
  size_t regions = 0;
  for (const std::string& name : *names) {
    absl::string_view stem = name;
    const bool ours = (absl::ConsumeSuffix(&stem, kTmpSuffix) ||
                       absl::ConsumeSuffix(&stem, kRecSuffix) ||
                       absl::ConsumeSuffix(&stem, kMemSuffix)) &&
                      IsValidSlot(stem);
    if (!ours) continue;
    if (absl::EndsWith(name, kRecSuffix)) ++regions;
    dir_->Remove(name);
  }
  return regions;
}

}  // namespace rdmad::state
