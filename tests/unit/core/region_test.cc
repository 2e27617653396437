// Region: export uses and revocation as a barrier. SetExport (unexport,
// re-export, free) waits for every access that began under the old export,
// and none can begin after it; a stuck access is bounded by the drain
// timeout. Also the addresses a certificate-admitted Resolve lets onto the
// TCP data path.
#include "daemon/core/region.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <atomic>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "daemon/core/region_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

constexpr Caller kOwner{1, 1000, 1000, 11};

class RegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AllocateOptions options;
    options.name = "kv";
    options.size = 4096;
    options.daemon_owned = true;
    options.export_access = RemoteAccess::kReadWrite;
    auto region = regions_.Allocate(kOwner, options);
    ASSERT_TRUE(region.ok()) << region.status();
    region_ = *region;
    key_ = region_->exported().tcp_key;
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
  std::shared_ptr<Region> region_;
  uint64_t key_ = 0;
};

TEST_F(RegionTest, UseNeedsTheCurrentKeyAndTheAccess) {
  auto use = region_->BeginExportUse(key_, RemoteAccess::kWrite);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(use->key(), key_);
  EXPECT_EQ(region_->ExportUsesInFlight(), 1u);
  auto by_name = region_->BeginExportUse(std::nullopt, RemoteAccess::kRead);
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->key(), key_);
  EXPECT_EQ(region_->ExportUsesInFlight(), 2u);
  auto wrong = region_->BeginExportUse(key_ + 1, RemoteAccess::kRead);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(wrong.status().message(), HasSubstr("key does not match"));
  // Moving a use moves the count with it; destroying ends it.
  ExportUse moved = *std::move(use);
  EXPECT_EQ(region_->ExportUsesInFlight(), 2u);
  { ExportUse gone = std::move(moved); }
  EXPECT_EQ(region_->ExportUsesInFlight(), 1u);
}

TEST_F(RegionTest, ReadOnlyExportRefusesWriteUses) {
  ASSERT_TRUE(region_->SetExport(RemoteAccess::kRead, 77, nullptr).ok());
  EXPECT_EQ(region_->BeginExportUse(77, RemoteAccess::kWrite).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(region_->BeginExportUse(77, RemoteAccess::kRead).ok());
}

TEST_F(RegionTest, NoUseBeginsAfterRevocation) {
  ASSERT_TRUE(region_->SetExport(RemoteAccess::kNone, 0, nullptr).ok());
  auto use = region_->BeginExportUse(key_, RemoteAccess::kWrite);
  EXPECT_EQ(use.status().code(), absl::StatusCode::kNotFound);
  use = region_->BeginExportUse(std::nullopt, RemoteAccess::kRead);
  EXPECT_EQ(use.status().code(), absl::StatusCode::kNotFound);
  // Nor with the key of the export before a re-export.
  ASSERT_TRUE(
      region_->SetExport(RemoteAccess::kReadWrite, key_ + 5, nullptr).ok());
  EXPECT_EQ(region_->BeginExportUse(key_, RemoteAccess::kWrite).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(RegionTest, RevocationWaitsForUsesInProgress) {
  auto use = region_->BeginExportUse(key_, RemoteAccess::kWrite);
  ASSERT_TRUE(use.ok());
  std::atomic<bool> returned{false};
  absl::Status revoked;
  std::thread revoker([&] {
    revoked = region_->SetExport(RemoteAccess::kNone, 0, nullptr);
    returned = true;
  });
  // The new state is in force at once: no new use, even while waiting.
  absl::Time until = absl::Now() + absl::Seconds(30);
  while (region_->exported().access != RemoteAccess::kNone &&
         absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_FALSE(region_->BeginExportUse(std::nullopt, RemoteAccess::kRead).ok());
  // It has not returned while the use lives (give it ample time to be
  // wrong)...
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(returned.load());
  // ...and returns once it ends.
  use = absl::CancelledError("use ended");
  revoker.join();
  EXPECT_TRUE(returned.load());
  EXPECT_TRUE(revoked.ok()) << revoked;
  EXPECT_EQ(region_->ExportUsesInFlight(), 0u);
}

TEST_F(RegionTest, UsesOfTheNewExportDoNotHoldUpARevocationOfTheOld) {
  auto old_use = region_->BeginExportUse(key_, RemoteAccess::kWrite);
  ASSERT_TRUE(old_use.ok());
  absl::Notification re_exported;
  std::thread exporter([&] {
    EXPECT_TRUE(region_->SetExport(RemoteAccess::kReadWrite, 99, nullptr).ok());
    re_exported.Notify();
  });
  // A use of the new export while the old one drains...
  absl::Time until = absl::Now() + absl::Seconds(30);
  absl::StatusOr<ExportUse> new_use = absl::UnknownError("not yet");
  while (!new_use.ok() && absl::Now() < until) {
    new_use = region_->BeginExportUse(99, RemoteAccess::kRead);
    if (!new_use.ok()) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(new_use.ok());
  // ...does not keep the re-export from completing once the old use ends.
  old_use = absl::CancelledError("done");
  EXPECT_TRUE(re_exported.WaitForNotificationWithTimeout(absl::Seconds(30)));
  exporter.join();
  EXPECT_EQ(region_->ExportUsesInFlight(), 1u);
}

TEST_F(RegionTest, AStuckUseIsBoundedByTheDrainTimeout) {
  auto use = region_->BeginExportUse(key_, RemoteAccess::kRead);
  ASSERT_TRUE(use.ok());
  const absl::Time start = absl::Now();
  absl::Status revoked = region_->SetExport(RemoteAccess::kNone, 0, nullptr,
                                            nullptr, absl::Milliseconds(50));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(revoked.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(revoked.message(), HasSubstr("1 access(es)"));
  // The revocation is in force all the same.
  EXPECT_EQ(region_->exported().access, RemoteAccess::kNone);
  EXPECT_FALSE(region_->BeginExportUse(key_, RemoteAccess::kRead).ok());
}

TEST_F(RegionTest, FreeIsABarrierToo) {
  auto use = region_->BeginExportUse(key_, RemoteAccess::kWrite);
  ASSERT_TRUE(use.ok());
  std::atomic<bool> returned{false};
  std::thread freer([&] {
    EXPECT_TRUE(regions_.Free(kOwner, {0, "kv"}).ok());
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(returned.load());
  use = absl::CancelledError("done");
  freer.join();
  EXPECT_TRUE(returned.load());
}

TEST_F(RegionTest, AccessListAndAdmittedDataPeers) {
  auto list =
      ExportAccessList::Parse({{"cert:b", std::nullopt}, {"10.0.0.0/8", 5}});
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(region_
                  ->SetExport(RemoteAccess::kRead, 1, nullptr,
                              std::make_shared<ExportAccessList>(*list))
                  .ok());
  EXPECT_EQ(region_->exported().allow->ToString(), "cert:b, 5@10.0.0.0/8");
  sockaddr_storage peer{};
  auto* in = reinterpret_cast<sockaddr_in*>(&peer);
  in->sin_family = AF_INET;
  ::inet_pton(AF_INET, "192.0.2.9", &in->sin_addr);
  EXPECT_FALSE(region_->AdmitsDataPeer(peer));
  // A certificate-admitted Resolve from 192.0.2.9 admits its data path...
  region_->AdmitDataPeer("192.0.2.9");
  region_->AdmitDataPeer("not an address");
  EXPECT_TRUE(region_->AdmitsDataPeer(peer));
  ::inet_pton(AF_INET, "10.1.2.3", &in->sin_addr);
  EXPECT_TRUE(region_->AdmitsDataPeer(peer));
  // ...until the export changes.
  ASSERT_TRUE(region_
                  ->SetExport(RemoteAccess::kRead, 2, nullptr,
                              std::make_shared<ExportAccessList>(*list))
                  .ok());
  ::inet_pton(AF_INET, "192.0.2.9", &in->sin_addr);
  EXPECT_FALSE(region_->AdmitsDataPeer(peer));
  // No list: everyone.
  ASSERT_TRUE(region_->SetExport(RemoteAccess::kRead, 3, nullptr).ok());
  EXPECT_TRUE(region_->AdmitsDataPeer(peer));
  EXPECT_TRUE(region_->exported().allow->empty());
}

}  // namespace
}  // namespace rdmad::core
