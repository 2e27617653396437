// GrantTarget: each of the four routes a handle's target takes (a
// descriptor of this daemon, a name held here, a name the directory finds,
// another daemon) with the size and access it grants, and each refusal
// with its code and what its message names.
#include "daemon/core/target_grant.h"

#include <memory>
#include <string>
#include <vector>

#include "daemon/core/memory_registrar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"
#include "tests/unit/fakes/region_fixtures.h"

namespace rdmad::core {
namespace {

using core::testing::kAlice;
using core::testing::kBob;

using ::testing::HasSubstr;
using testing::ByName;

class TargetGrantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Alice's regions: one private, one others may read, one exported for
    // writing only that others may read.
    Allocate("private", 4096, 0600, RemoteAccess::kReadWrite);
    Allocate("shared", 8192, 0644, RemoteAccess::kReadWrite);
    Allocate("exported-ro", 1000, 0600, RemoteAccess::kRead);
    Allocate("inbox", 512, 0644, RemoteAccess::kWrite);
  }

  void Allocate(const char* name, uint64_t size, uint32_t mode,
                RemoteAccess access) {
    ASSERT_TRUE(
        testing::AllocateNamed(regions_, kAlice, name, size, mode, access)
            .ok())
        << name;
  }

  std::shared_ptr<Region> Find(const char* name) {
    std::shared_ptr<Region> region = testing::FindNamed(regions_, name);
    EXPECT_NE(region, nullptr) << name;
    return region;
  }
  TransferTarget BySelfDescriptor(const char* name, uint64_t key_xor = 0) {
    return testing::BySelfDescriptor(*Find(name), key_xor);
  }
  static TransferTarget OnPeer(const char* name) {
    TransferTarget t;
    t.peer = "127.0.0.1:7472";
    t.name = name;
    return t;
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
};

constexpr TargetReach kEverywhere{.directory = true, .peers = true};

TEST_F(TargetGrantTest, GrantsEachRouteWhatItsOperationsWillBeAllowed) {
  struct Case {
    const char* what;
    Caller caller;
    TransferTarget target;
    TargetReach reach;
    TargetRoute route;
    uint64_t size;
    RemoteAccess access;
    TransportKind transport;
  };
  const std::vector<Case> cases = {
      {"own descriptor, owner", kAlice, BySelfDescriptor("private"),
       kEverywhere, TargetRoute::kSelfExport, 4096, RemoteAccess::kReadWrite,
       TransportKind::kLocal},
      {"own descriptor, narrowed by the mode", kBob,
       BySelfDescriptor("shared"), kEverywhere, TargetRoute::kSelfExport,
       8192, RemoteAccess::kRead, TransportKind::kLocal},
      {"own descriptor, narrowed by the export", kAlice,
       BySelfDescriptor("exported-ro"), kEverywhere, TargetRoute::kSelfExport,
       1000, RemoteAccess::kRead, TransportKind::kLocal},
      {"name here, owner", kAlice, ByName("private"), kEverywhere,
       TargetRoute::kLocalName, 4096, RemoteAccess::kReadWrite,
       TransportKind::kLocal},
      {"name here, others' bits", kBob, ByName("shared"), kEverywhere,
       TargetRoute::kLocalName, 8192, RemoteAccess::kRead,
       TransportKind::kLocal},
      {"name here, without a directory", kAlice, ByName("shared"),
       TargetReach{}, TargetRoute::kLocalName, 8192, RemoteAccess::kReadWrite,
       TransportKind::kLocal},
      {"name not held here", kAlice, ByName("elsewhere"), kEverywhere,
       TargetRoute::kDirectory, 0, RemoteAccess::kNone, TransportKind::kNone},
      {"name on a peer", kAlice, OnPeer("private"), kEverywhere,
       TargetRoute::kPeer, 0, RemoteAccess::kNone, TransportKind::kNone},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto grant = GrantTarget(c.caller, c.target, regions_, c.reach);
    ASSERT_TRUE(grant.ok()) << grant.status();
    EXPECT_EQ(grant->route, c.route) << TargetRouteName(grant->route);
    EXPECT_EQ(grant->size, c.size);
    EXPECT_EQ(grant->access, c.access);
    EXPECT_EQ(grant->transport, c.transport);
  }
}

TEST_F(TargetGrantTest, ADescriptorOfAnotherDaemonGoesToThePeer) {
  TransferTarget target;
  auto info = std::make_shared<RemoteRegionInfo>();
  info->peer = "127.0.0.1:7472";
  info->region_id = Find("private")->id();
  target.peer = info->peer;
  target.descriptor = std::move(info);
  auto grant = GrantTarget(kAlice, target, regions_, kEverywhere);
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->route, TargetRoute::kPeer);
}

TEST_F(TargetGrantTest, RefusesWithTheCodeAndWhatToDo) {
  struct Case {
    const char* what;
    Caller caller;
    TransferTarget target;
    TargetReach reach;
    absl::StatusCode code;
    const char* message;
  };
  TransferTarget unknown_id;
  unknown_id.self_region_id = 987654;
  const std::vector<Case> cases = {
      {"own descriptor of a region no longer exported", kAlice, unknown_id,
       kEverywhere, absl::StatusCode::kNotFound, ""},
      {"own descriptor with an earlier export's key", kAlice,
       BySelfDescriptor("private", 1), kEverywhere,
       absl::StatusCode::kPermissionDenied, ""},
      {"own descriptor the caller may not use", kBob,
       BySelfDescriptor("private"), kEverywhere,
       absl::StatusCode::kPermissionDenied, "region #"},
      {"own descriptor: export and mode share nothing", kBob,
       BySelfDescriptor("inbox"), kEverywhere,
       absl::StatusCode::kPermissionDenied, "its export allows writing only"},
      {"name not held here, no directory", kAlice, ByName("elsewhere"),
       TargetReach{.directory = false, .peers = true},
       absl::StatusCode::kNotFound, "elsewhere"},
      {"name here the caller may not use", kBob, ByName("private"),
       kEverywhere, absl::StatusCode::kPermissionDenied, "region 'private'"},
      {"another daemon, no transport to peers", kAlice, OnPeer("private"),
       TargetReach{.directory = true, .peers = false},
       absl::StatusCode::kFailedPrecondition, "no data transport to peers"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto grant = GrantTarget(c.caller, c.target, regions_, c.reach);
    ASSERT_FALSE(grant.ok()) << TargetRouteName(grant->route);
    EXPECT_EQ(grant.status().code(), c.code) << grant.status();
    EXPECT_THAT(grant.status().message(), HasSubstr(c.message));
  }
}

TEST(TargetRouteNameTest, NamesEachRoute) {
  EXPECT_EQ(TargetRouteName(TargetRoute::kSelfExport), "self export");
  EXPECT_EQ(TargetRouteName(TargetRoute::kLocalName), "local name");
  EXPECT_EQ(TargetRouteName(TargetRoute::kDirectory), "directory");
  EXPECT_EQ(TargetRouteName(TargetRoute::kPeer), "peer");
}

}  // namespace
}  // namespace rdmad::core
