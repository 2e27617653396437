// DecodeRemoteRegion, the far side of a transfer or a remote handle: a name
// or a descriptor becomes the target the layers below trust, and each
// malformed request is INVALID_ARGUMENT naming the field; DecodeTransfer
// decodes its remote side the same way.
#include "daemon/service/transfer_decoder.h"

#include <optional>
#include <string>
#include <vector>

#include "daemon/peer/descriptor_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;

std::string Descriptor(const std::string& peer) {
  v1::RegionDescriptor d;
  d.set_peer(peer);
  d.set_incarnation(5);
  d.set_region_id(9);
  d.set_name("kv");
  d.set_length(4096);
  d.set_access(v1::ACCESS_READ);
  d.set_tcp_key(77);
  return peer::EncodeDescriptor(d);
}

TEST(DecodeRemoteRegionTest, ANameHereOrOnAPeer) {
  v1::RemoteRegion remote;
  remote.set_name("kv");
  auto here = DecodeRemoteRegion(remote);
  ASSERT_TRUE(here.ok()) << here.status();
  EXPECT_TRUE(here->is_local());
  EXPECT_EQ(here->name, "kv");
  EXPECT_EQ(here->offset, 0u);

  remote.set_peer("127.0.0.1:7471");
  auto there = DecodeRemoteRegion(remote);
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_FALSE(there->is_local());
  EXPECT_EQ(there->peer, "127.0.0.1:7471");
}

TEST(DecodeRemoteRegionTest, ADescriptorNamesItsPeer) {
  v1::RemoteRegion remote;
  remote.set_encoded_descriptor(Descriptor("127.0.0.1:7471"));
  auto target = DecodeRemoteRegion(remote);
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->peer, "127.0.0.1:7471");
  ASSERT_NE(target->descriptor, nullptr);
  EXPECT_EQ(target->descriptor->region_id, 9u);
  EXPECT_EQ(target->descriptor->tcp_key, 77u);
  EXPECT_TRUE(target->name.empty());
}

TEST(DecodeRemoteRegionTest, RefusesWhatNamesNoRegion) {
  struct Case {
    const char* what;
    std::string peer;
    std::string name;
    std::optional<std::string> descriptor;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"nothing", "", "", std::nullopt, "no remote region given"},
      {"a bad peer", "127.0.0.1", "kv", std::nullopt, "remote peer:"},
      {"a bad name", "", "a name\n", std::nullopt, "remote region:"},
      {"an empty descriptor", "", "", "", "the encoded descriptor is empty"},
      {"a descriptor that does not decode", "", "", "rdmad1:%%%", ""},
      {"a descriptor of another peer", "127.0.0.2:7471", "",
       Descriptor("127.0.0.1:7471"), "leave the peer empty or make them agree"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::RemoteRegion remote;
    remote.set_peer(c.peer);
    if (!c.name.empty()) remote.set_name(c.name);
    if (c.descriptor.has_value()) remote.set_encoded_descriptor(*c.descriptor);
    auto target = DecodeRemoteRegion(remote);
    ASSERT_FALSE(target.ok());
    EXPECT_EQ(target.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(target.status().message(), HasSubstr(c.message));
  }
}

TEST(DecodeTransferTest, DecodesItsRemoteSideAsDecodeRemoteRegionDoes) {
  v1::TransferOp op;
  op.mutable_local()->set_id(3);
  op.set_length(8);
  op.set_remote_offset(64);
  op.mutable_remote()->set_peer("127.0.0.2:7471");
  op.mutable_remote()->set_encoded_descriptor(Descriptor("127.0.0.1:7471"));
  auto spec = DecodeTransfer(op, core::OpType::kRead, absl::InfiniteFuture());
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(spec.status().message(), HasSubstr("make them agree"));

  op.mutable_remote()->clear_peer();
  spec = DecodeTransfer(op, core::OpType::kRead, absl::InfiniteFuture());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->remote.peer, "127.0.0.1:7471");
  EXPECT_EQ(spec->remote.offset, 64u);
  EXPECT_EQ(spec->length, 8u);
}

}  // namespace
}  // namespace rdmad::service
