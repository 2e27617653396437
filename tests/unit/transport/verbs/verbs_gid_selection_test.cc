// GID index and port choice on synthetic GID tables: no RDMA device needed.
#include <optional>
#include <string>
#include <vector>

#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/gid_selection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

core::GidInfo MakeGid(uint32_t index, const std::string& text,
                      absl::string_view type) {
  core::GidInfo gid;
  gid.index = index;
  absl::StatusOr<Gid> raw = GidFromText(text);
  EXPECT_TRUE(raw.ok()) << text;
  gid.raw = raw.value_or(Gid{});
  gid.text = text;
  gid.type = std::string(type);
  gid.netdev = "veth0";
  return gid;
}

core::PortInfo RocePort(std::vector<core::GidInfo> gids) {
  core::PortInfo port;
  port.port = 1;
  port.state = core::PortState::kActive;
  port.link_layer = "Ethernet";
  port.active_mtu = 1024;
  port.max_mtu = 4096;
  port.gids = std::move(gids);
  return port;
}

// A GID table and the index chosen from it, with or without a configured
// index.
struct GidCase {
  const char* what;
  std::vector<core::GidInfo> gids;
  std::optional<uint32_t> configured;
  uint32_t chosen;
  const char* link_layer = "Ethernet";
};

TEST(ChooseGidIndexTest, ChoosesFromEachTable) {
  const GidCase cases[] = {
      {"soft-RoCE on a veth with 192.0.2.1: link-local v1/v2, then the "
       "IPv4-mapped v1/v2; RoCEv2 IPv4-mapped wins",
       {MakeGid(0, "fe80::5054:ff:fe12:3456", kGidTypeIbRoceV1),
        MakeGid(1, "fe80::5054:ff:fe12:3456", kGidTypeRoceV2),
        MakeGid(2, "::ffff:192.0.2.1", kGidTypeIbRoceV1),
        MakeGid(3, "::ffff:192.0.2.1", kGidTypeRoceV2)},
       std::nullopt,
       3},
      {"rdma_rxe listing only RoCEv2: link-local at 0, IPv4-mapped at 1",
       {MakeGid(0, "fe80::5054:ff:fe12:3456", kGidTypeRoceV2),
        MakeGid(1, "::ffff:192.0.2.1", kGidTypeRoceV2)},
       std::nullopt,
       1},
      {"the lowest IPv4-mapped index wins",
       {MakeGid(5, "::ffff:198.51.100.7", kGidTypeRoceV2),
        MakeGid(3, "::ffff:192.0.2.1", kGidTypeRoceV2),
        MakeGid(1, "fe80::1", kGidTypeRoceV2)},
       std::nullopt,
       3},
      {"without IPv4, the first RoCEv2 entry",
       {MakeGid(0, "fe80::1", kGidTypeIbRoceV1),
        MakeGid(1, "fe80::1", kGidTypeRoceV2),
        MakeGid(2, "2001:db8::1", kGidTypeIbRoceV1),
        MakeGid(3, "2001:db8::1", kGidTypeRoceV2)},
       std::nullopt,
       1},
      {"an IPv4-mapped RoCEv1 entry is not preferred",
       {MakeGid(0, "fe80::1", kGidTypeIbRoceV1),
        MakeGid(2, "::ffff:192.0.2.1", kGidTypeIbRoceV1)},
       std::nullopt,
       0},
      {"an InfiniBand port uses index 0",
       {MakeGid(0, "fe80::2:c903:a:1234", kGidTypeIbRoceV1)},
       std::nullopt,
       0,
       "InfiniBand"},
      {"a configured index wins",
       {MakeGid(0, "fe80::1", kGidTypeRoceV2),
        MakeGid(1, "::ffff:192.0.2.1", kGidTypeRoceV2)},
       0u,
       0},
  };
  for (const GidCase& c : cases) {
    SCOPED_TRACE(c.what);
    core::PortInfo port = RocePort(c.gids);
    port.link_layer = c.link_layer;
    absl::StatusOr<uint32_t> index = ChooseGidIndex(port, c.configured);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(*index, c.chosen);
  }
}

TEST(ChooseGidIndexTest, ConfiguredIndexMustExist) {
  const core::PortInfo port = RocePort({
      MakeGid(0, "fe80::1", kGidTypeRoceV2),
      MakeGid(1, "::ffff:192.0.2.1", kGidTypeRoceV2),
  });
  absl::StatusOr<uint32_t> index = ChooseGidIndex(port, 4u);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(index.status().message(), HasSubstr("GID index 4"));
  EXPECT_THAT(index.status().message(), HasSubstr("1=::ffff:192.0.2.1"));
}

TEST(ChooseGidIndexTest, EmptyTableIsAnError) {
  const core::PortInfo port = RocePort({});
  absl::StatusOr<uint32_t> index = ChooseGidIndex(port, std::nullopt);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(index.status().message(), HasSubstr("no valid GID"));
}

TEST(ChooseActivePortTest, FirstActivePort) {
  core::DeviceInfo device;
  device.name = "mlx5_0";
  core::PortInfo down = RocePort({});
  down.port = 1;
  down.state = core::PortState::kDown;
  core::PortInfo up = RocePort({});
  up.port = 2;
  device.ports = {down, up};
  absl::StatusOr<uint32_t> port = ChooseActivePort(device);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 2u);
}

TEST(ChooseActivePortTest, NoActivePortNamesStates) {
  core::DeviceInfo device;
  device.name = "rxe0";
  core::PortInfo down = RocePort({});
  down.state = core::PortState::kDown;
  device.ports = {down};
  absl::StatusOr<uint32_t> port = ChooseActivePort(device);
  EXPECT_EQ(port.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(port.status().message(), HasSubstr("1=DOWN"));
  EXPECT_THAT(port.status().message(), HasSubstr("rxe0"));
}

}  // namespace
}  // namespace rdmad::verbs
