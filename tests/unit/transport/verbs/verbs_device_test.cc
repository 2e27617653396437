// Device discovery and registration on whatever this host has. Unit hosts
// (and CI) have no RDMA device: discovery must then succeed with an empty
// list, and opening or registering must fail with a clear status.
#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/registrar.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

TEST(DiscoverDevicesTest, SucceedsWithOrWithoutDevices) {
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = DiscoverDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  // Whatever is present must be described sanely.
  for (const core::DeviceInfo& device : *devices) {
    EXPECT_FALSE(device.name.empty());
    EXPECT_EQ(device.node_guid.size(), 19u) << device.node_guid;
    EXPECT_FALSE(device.ports.empty()) << device.name;
    for (const core::PortInfo& port : device.ports) {
      EXPECT_GE(port.port, 1u);
      for (const core::GidInfo& gid : port.gids) {
        EXPECT_FALSE(gid.text.empty());
        EXPECT_TRUE(gid.type == "RoCEv2" || gid.type == "IB/RoCEv1")
            << gid.type;
      }
    }
  }
}

// Discovery finds exactly the devices the kernel lists in sysfs: none on a
// host without RDMA (these machines), rxe0 in the soft-RoCE lab.
TEST(DiscoverDevicesTest, FindsExactlyTheDevicesSysfsLists) {
  std::vector<std::string> in_sysfs;
  if (DIR* dir = ::opendir("/sys/class/infiniband")) {
    while (dirent* e = ::readdir(dir)) {
      if (e->d_name[0] != '.') in_sysfs.push_back(e->d_name);
    }
    ::closedir(dir);
  }
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = DiscoverDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::vector<std::string> found;
  for (const core::DeviceInfo& d : *devices) found.push_back(d.name);
  std::sort(in_sysfs.begin(), in_sysfs.end());
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, in_sysfs);
}

TEST(OpenDeviceTest, UnknownNameIsNotFound) {
  absl::StatusOr<std::shared_ptr<Device>> device =
      OpenDevice("rdmad-no-such-device");
  EXPECT_EQ(device.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(device.status().message(), HasSubstr("rdmad-no-such-device"));
  EXPECT_THAT(device.status().message(), HasSubstr("devices present"));
}

TEST(VerbsRegistrarTest, NoDevicesGivesRegistrationWithoutKeys) {
  VerbsRegistrar registrar({});
  std::vector<char> buffer(4096);
  absl::StatusOr<std::unique_ptr<core::Registration>> registration =
      registrar.Register(buffer.data(), buffer.size(),
                         core::RemoteAccess::kReadWrite);
  ASSERT_TRUE(registration.ok()) << registration.status();
  EXPECT_TRUE((*registration)->keys().empty());
}

TEST(VerbsRegistrarTest, RejectsEmptyRange) {
  VerbsRegistrar registrar({});
  std::vector<char> buffer(16);
  EXPECT_EQ(registrar.Register(buffer.data(), 0, core::RemoteAccess::kNone)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registrar.Register(nullptr, 16, core::RemoteAccess::kNone)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VerbsRegistrarTest, OpenAllMatchesDiscovery) {
  absl::StatusOr<std::vector<core::DeviceInfo>> devices = DiscoverDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  absl::StatusOr<std::unique_ptr<VerbsRegistrar>> registrar =
      VerbsRegistrar::OpenAll();
  ASSERT_TRUE(registrar.ok()) << registrar.status();
  EXPECT_EQ((*registrar)->devices().size(), devices->size());
}

}  // namespace
}  // namespace rdmad::verbs
