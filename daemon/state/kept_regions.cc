#include "daemon/state/kept_regions.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/size.h"
#include "daemon/state/fd_store.h"
#include "daemon/state/fd_store_keeper.h"
#include "daemon/state/region_record.h"
#include "daemon/state/state_dir_keeper.h"
#include "spdlog/spdlog.h"

namespace rdmad::state {
namespace {

bool AnyOfRdmad(const std::vector<NamedFd>& passed) {
  for (const NamedFd& fd : passed) {
    if (absl::StartsWith(fd.name, "rdmad-")) return true;
  }
  return false;
}

}  // namespace

KeptRegions::KeptRegions(std::unique_ptr<RecoveringKeeper> keeper)
    : keeper_(std::move(keeper)) {}

absl::StatusOr<std::unique_ptr<KeptRegions>> KeptRegions::Open(
    const v1::DaemonConfig& config) {
  const bool keep =
      !config.has_keep_regions_on_restart() || config.keep_regions_on_restart();
  std::vector<NamedFd> passed = TakeListenFds();
  std::unique_ptr<RecoveringKeeper> keeper;
  std::string unkept_why;
  if (!config.state_dir().empty()) {
    auto dir = StateDirKeeper::Open(config.state_dir());
    if (!dir.ok()) return dir.status();
    if (!(*dir)->in_memory()) {
      spdlog::warn(
          "state_dir {} is on {}: the memory of kept regions is written back "
          "to that disk and survives reboots there; put state_dir on a tmpfs "
          "(e.g. under /dev/shm or /run) or a hugetlbfs mount",
          config.state_dir(), (*dir)->filesystem());
    }
    keeper = *std::move(dir);
    if (AnyOfRdmad(passed)) {
      // An earlier run without state_dir kept regions in the fd store;
      // this one keeps them in the directory. Two places would be adopted
      // twice: the store's are let go.
      FdStoreKeeper store(std::make_unique<SystemdFdStore>(),
                          std::move(passed));
      spdlog::warn(
          "discarded {} region(s) an earlier run kept in the fd "
          "store: state_dir is set now, and regions are kept there",
          store.DiscardAll());
    }
  } else if (std::string why; SystemdFdStoreAvailable(&why)) {
    keeper = std::make_unique<FdStoreKeeper>(std::make_unique<SystemdFdStore>(),
                                             std::move(passed));
  } else {
    unkept_why = why;
  }
  if (keeper != nullptr && !keep) {
    const size_t discarded = keeper->DiscardAll();
    spdlog::info(
        "keep_regions_on_restart is false: named regions end with "
        "this daemon; discarded {} region(s) an earlier run kept in "
        "{}",
        discarded, keeper->Describe());
    keeper.reset();
  } else if (keeper != nullptr) {
    spdlog::info("named regions are kept across restarts in {}",
                 keeper->Describe());
  } else if (keep) {
    spdlog::info(
        "named regions end with this daemon ({}): set state_dir to "
        "a tmpfs directory, or run rdmad under systemd, to keep them "
        "across restarts",
        unkept_why);
  }
  return std::unique_ptr<KeptRegions>(new KeptRegions(std::move(keeper)));
}

AdoptionSummary KeptRegions::Adopt(core::RegionTable& regions) {
  AdoptionSummary summary;
  if (keeper_ == nullptr) return summary;
  Recovery found = keeper_->Recover();
  for (const std::string& note : found.notes) {
    spdlog::info("{}: {}", keeper_->Describe(), note);
  }
  for (const std::string& warning : found.warnings) {
    spdlog::warn("{}: {}", keeper_->Describe(), warning);
  }
  for (RecoveredRegion& region : found.regions) {
    const std::string name = region.info.name;
    const uint64_t size = region.info.size;
    auto restored = regions.Restore(region.info, std::move(region.segment),
                                    std::move(region.kept));
    if (restored.ok()) {
      ++summary.adopted;
      summary.adopted_bytes += size;
      spdlog::debug("adopted region '{}' ({} bytes, export {})", name, size,
                    ExportAccessName(region.info.export_access));
    } else {
      found.skipped.push_back(
          SkippedRegion{absl::StrCat("region '", name, "'"),
                        std::string(restored.status().message()), size});
    }
  }
  for (const SkippedRegion& skipped : found.skipped) {
    spdlog::warn("kept {} ({}) not adopted: {}; {}", skipped.region,
                 skipped.bytes != 0 ? FormatSize(skipped.bytes)
                                    : std::string("size unknown"),
                 skipped.why, keeper_->DiscardedTo());
  }
  summary.skipped = found.skipped.size();
  spdlog::info("adopted {} kept region(s) ({} bytes, {}) from {}; skipped {}",
               summary.adopted, summary.adopted_bytes,
               FormatSize(summary.adopted_bytes), keeper_->Describe(),
               summary.skipped);
  return summary;
}

std::string KeptRegions::ShutdownSummary(const core::RegionTotals& left) const {
  if (keeper_ == nullptr || left.kept_count == 0) {
    return absl::StrCat("released ", left.count, " daemon-owned region(s)");
  }
  return absl::StrCat("kept ", left.kept_count, " named region(s) (",
                      left.kept_bytes, " bytes, ", FormatSize(left.kept_bytes),
                      ") in ", keeper_->Describe(),
                      " for the next start; released ",
                      left.count - left.kept_count, " other region(s)");
}

}  // namespace rdmad::state
