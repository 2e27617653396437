// RecordedRegion on its own, with a keeper's hooks that record their calls:
// only a change is rewritten, and the record follows only a rewrite that
// succeeded; the region's state ends once, by Forget or Discard, after
// which nothing is rewritten any more.
#include "daemon/state/recorded_region.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::state {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

RegionRecord Record() {
  RegionRecord record;
  record.slot = "5f0c2a7e91d3b846";
  record.info.name = "kv";
  record.info.size = 4096;
  record.info.acl = {1000, 1000, 0640};
  record.info.export_access = core::RemoteAccess::kRead;
  return record;
}

// A keeper's handle whose storage is a list of what it was asked to do.
class ListedRegion final : public RecordedRegion {
 public:
  ListedRegion() : RecordedRegion(Record()) {}

  std::vector<std::string> calls;
  absl::Status rewrite_result = absl::OkStatus();

  RegionRecord Current() {
    absl::MutexLock lock(&mu_);
    return record();
  }

 private:
  absl::Status Rewrite(const RegionRecord& next,
                       absl::string_view what) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    calls.push_back(
        absl::StrCat("rewrite ", what, " mode=", next.info.acl.mode,
                     " export=", ExportAccessName(next.info.export_access)));
    return rewrite_result;
  }
  void Remove() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    calls.push_back("remove");
  }
  void PutAside(const std::string& why) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    calls.push_back("put aside: " + why);
  }
};

TEST(RecordedRegionTest, RewritesOnlyAChange) {
  ListedRegion region;
  EXPECT_TRUE(region.SetExportAccess(core::RemoteAccess::kRead, {}).ok());
  EXPECT_TRUE(region.SetAcl({1000, 1000, 0640}).ok());
  EXPECT_THAT(region.calls, IsEmpty());

  EXPECT_TRUE(region.SetExportAccess(core::RemoteAccess::kReadWrite, {}).ok());
  EXPECT_TRUE(region.SetAcl({1000, 1000, 0600}).ok());
  EXPECT_TRUE(region
                  .SetExportAccess(core::RemoteAccess::kReadWrite,
                                   {{.peer = "10.0.0.2"}})
                  .ok());
  EXPECT_THAT(region.calls,
              ElementsAre("rewrite export mode=416 export=rw",
                          "rewrite permissions mode=384 export=rw",
                          "rewrite export mode=384 export=rw"));
  const RegionRecord now = region.Current();
  EXPECT_EQ(now.info.acl.mode, 0600u);
  EXPECT_EQ(now.info.export_access, core::RemoteAccess::kReadWrite);
  EXPECT_EQ(now.info.export_allow.size(), 1u);
}

TEST(RecordedRegionTest, AFailedRewriteLeavesTheRecordAsItWas) {
  ListedRegion region;
  region.rewrite_result = absl::UnavailableError("store full");
  EXPECT_EQ(region.SetAcl({1000, 1000, 0600}).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(region.Current().info.acl.mode, 0640u);
  // So the same change is tried again, and then holds.
  region.rewrite_result = absl::OkStatus();
  EXPECT_TRUE(region.SetAcl({1000, 1000, 0600}).ok());
  EXPECT_EQ(region.Current().info.acl.mode, 0600u);
  EXPECT_EQ(region.calls.size(), 2u);
}

TEST(RecordedRegionTest, ForgetEndsTheStateOnceAndStopsRewrites) {
  ListedRegion region;
  region.Forget();
  region.Forget();
  region.Discard("late");
  EXPECT_TRUE(region.SetAcl({1000, 1000, 0600}).ok());
  EXPECT_TRUE(region.SetExportAccess(core::RemoteAccess::kNone, {}).ok());
  EXPECT_THAT(region.calls, ElementsAre("remove"));
}

TEST(RecordedRegionTest, DiscardPutsTheStateAsideOnce) {
  ListedRegion region;
  region.Discard("its memory is missing");
  region.Discard("again");
  region.Forget();
  EXPECT_TRUE(region.SetAcl({1000, 1000, 0600}).ok());
  EXPECT_THAT(region.calls, ElementsAre("put aside: its memory is missing"));
}

}  // namespace
}  // namespace rdmad::state
