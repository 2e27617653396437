// RecordedRegion: what the two keepers' region handles share. It holds the
// region's record and keeps it current: an export or permission change
// that changes something is written through the keeper's Rewrite (on error
// the old record stands); the region's state ends once, by Forget (freed)
// or Discard (not adopted). A keeper's handle says only how its storage
// rewrites a record, removes the state and puts it aside.
//
// Example:
//   class DirRegion final : public RecordedRegion {
//     absl::Status Rewrite(const RegionRecord& next, absl::string_view what)
//         override;              // a temporary file renamed over the old
//     void Remove() override;    // record first, then memory
//     void PutAside(const std::string& why) override;
//   };
//
// Thread-safe: every call holds the handle's mutex, the keeper's hooks
// included, so a hook never runs beside another or after the end.
#ifndef RDMAD_DAEMON_STATE_RECORDED_REGION_H_
#define RDMAD_DAEMON_STATE_RECORDED_REGION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/core/kept_region.h"
#include "daemon/state/region_record.h"

namespace rdmad::state {

class RecordedRegion : public core::KeptRegion {
 public:
  explicit RecordedRegion(RegionRecord record) : record_(std::move(record)) {}

  absl::Status SetExportAccess(
      core::RemoteAccess access,
      const std::vector<core::ExportGrant>& allow) final;
  absl::Status SetAcl(const core::RegionAcl& acl) final;
  void Forget() final;
  void Discard(const std::string& why) final;

 protected:
  // Stores `next` in place of the current record (same slot); on error the
  // current one must still stand. `what` names the change for messages:
  // "export", "permissions".
  virtual absl::Status Rewrite(const RegionRecord& next, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // The region was freed: its record, then its memory, go for good.
  virtual void Remove() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // The region was not adopted (`why`): its state is put aside, or removed
  // where there is no such place.
  virtual void PutAside(const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;

  const RegionRecord& record() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return record_;
  }

  absl::Mutex mu_;

 private:
  // Rewrites the record as `next` unless the region's state has ended.
  absl::Status Change(RegionRecord next, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RegionRecord record_ ABSL_GUARDED_BY(mu_);
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_RECORDED_REGION_H_
