// Which daemons a transfer by name may go to (core/holder_trust.h).
#include "daemon/core/holder_trust.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

PeerAllowList Allow(std::vector<std::string> entries) {
  auto allow = PeerAllowList::Parse(entries);
  EXPECT_TRUE(allow.ok()) << allow.status();
  return allow.value_or(PeerAllowList());
}

DirectoryEntry Entry(const std::string& identity) {
  DirectoryEntry e;
  e.name = "kv";
  e.node = "10.0.0.2:7471";
  e.identity = identity;
  return e;
}

TEST(HolderTrustTest, WithoutRulesEveryHolderIsTrusted) {
  const HolderTrust trust;
  EXPECT_FALSE(trust.checks_holders());
  EXPECT_TRUE(trust.CheckRecord(Entry("")).ok());
  EXPECT_TRUE(trust.CheckHolder("kv", "10.0.0.2:7471", "", nullptr).ok());
}

TEST(HolderTrustTest, MutualTlsNeedsARecordThatNamesAnIdentity) {
  const HolderTrust trust(true, PeerAllowList());
  EXPECT_TRUE(trust.checks_holders());
  absl::Status refused = trust.CheckRecord(Entry(""));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("'kv'"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("10.0.0.2:7471"));
  EXPECT_TRUE(trust.CheckRecord(Entry("node-b")).ok());
}

TEST(HolderTrustTest, MutualTlsNeedsTheCertificateTheRecordNames) {
  const HolderTrust trust(true, PeerAllowList());
  const PeerIdentity b{"10.0.0.2", {"node-b", "b.example"}};
  EXPECT_TRUE(trust.CheckHolder("kv", "10.0.0.2:7471", "node-b", &b).ok());
  EXPECT_TRUE(trust.CheckHolder("kv", "10.0.0.2:7471", "b.example", &b).ok());

  const PeerIdentity intruder{"10.0.0.2", {"intruder"}};
  absl::Status refused =
      trust.CheckHolder("kv", "10.0.0.2:7471", "node-b", &intruder);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("'kv'"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("10.0.0.2:7471"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("'node-b'"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("'intruder'"));

  const PeerIdentity plaintext{"10.0.0.2", {}};
  refused = trust.CheckHolder("kv", "10.0.0.2:7471", "node-b", &plaintext);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("presented no verified certificate"));
  EXPECT_EQ(trust.CheckHolder("kv", "10.0.0.2:7471", "node-b", nullptr).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(HolderTrustTest, AllowListDecidesByTheAddressThatAnswered) {
  const HolderTrust trust(false, Allow({"10.0.0.0/24"}));
  EXPECT_TRUE(trust.checks_holders());
  // Without mutual TLS a record needs no identity.
  EXPECT_TRUE(trust.CheckRecord(Entry("")).ok());
  const PeerIdentity inside{"10.0.0.2", {}};
  EXPECT_TRUE(trust.CheckHolder("kv", "10.0.0.2:7471", "", &inside).ok());
  const PeerIdentity outside{"10.0.1.9", {}};
  absl::Status refused =
      trust.CheckHolder("kv", "evil.example:7471", "", &outside);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("evil.example:7471"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("10.0.1.9"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("peer_allow"));
  const PeerIdentity unknown{"", {}};
  EXPECT_EQ(trust.CheckHolder("kv", "x:1", "", &unknown).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(HolderTrustTest, BothRulesApplyTogether) {
  const HolderTrust trust(true, Allow({"10.0.0.2"}));
  const PeerIdentity right{"10.0.0.2", {"node-b"}};
  EXPECT_TRUE(trust.CheckHolder("kv", "n:1", "node-b", &right).ok());
  const PeerIdentity elsewhere{"10.0.0.3", {"node-b"}};
  EXPECT_EQ(trust.CheckHolder("kv", "n:1", "node-b", &elsewhere).code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace rdmad::core
