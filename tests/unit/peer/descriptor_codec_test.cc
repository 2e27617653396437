#include "daemon/peer/descriptor_codec.h"

#include <string>

#include "gtest/gtest.h"

namespace rdmad::peer {
namespace {

v1::RegionDescriptor Sample() {
  v1::RegionDescriptor d;
  d.set_peer("127.0.0.1:7471");
  d.set_incarnation(99);
  d.set_region_id(3);
  d.set_name("kv");
  d.set_length(1 << 20);
  d.set_access(v1::ACCESS_READ);
  d.set_addr(0x7f0000001000);
  d.set_tcp_key(0x1234567890abcdef);
  v1::DeviceKey* k = d.add_keys();
  k->set_device("rxe0");
  k->set_rkey(77);
  return d;
}

TEST(DescriptorCodecTest, RoundTrip) {
  const std::string text = EncodeDescriptor(Sample());
  EXPECT_EQ(text.rfind("rdmad1:", 0), 0u);
  for (char c : text) EXPECT_TRUE(c > ' ' && c < 127) << "printable";
  auto back = DecodeDescriptor(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), Sample().SerializeAsString());
}

TEST(DescriptorCodecTest, RejectsDamage) {
  const std::string good = EncodeDescriptor(Sample());
  for (const std::string& bad :
       {std::string(""), std::string("rdmad1:"), std::string("rdmad2:AAAA"),
        std::string("kv"), std::string("rdmad1:!!!!"),
        good.substr(0, good.size() / 2), std::string("rdmad1:") +
        std::string(5000, 'A')}) {
    auto d = DecodeDescriptor(bad);
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) {
      EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    }
  }
  v1::RegionDescriptor no_peer = Sample();
  no_peer.clear_peer();
  EXPECT_FALSE(DecodeDescriptor(EncodeDescriptor(no_peer)).ok());
  v1::RegionDescriptor no_length = Sample();
  no_length.set_length(0);
  EXPECT_FALSE(DecodeDescriptor(EncodeDescriptor(no_length)).ok());
}

}  // namespace
}  // namespace rdmad::peer
