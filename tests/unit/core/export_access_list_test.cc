// ExportAccessList: which remote principals (peer daemon, optional uid) an
// export admits, on Peer.Resolve and on the TCP data path.
#include "daemon/core/export_access_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

using ::testing::HasSubstr;

sockaddr_storage V4(const char* address) {
  sockaddr_storage out{};
  auto* in = reinterpret_cast<sockaddr_in*>(&out);
  in->sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &in->sin_addr);
  return out;
}

TEST(ExportAccessListTest, EmptyAdmitsEveryoneAndEveryUid) {
  ExportAccessList list;
  EXPECT_TRUE(list.empty());
  EXPECT_TRUE(list.Admits({"10.0.0.9", {}}, 1234));
  EXPECT_TRUE(list.Admits({"", {}}, std::nullopt));
  EXPECT_TRUE(list.AdmitsAddress(V4("192.0.2.1")));
  EXPECT_EQ(list.ToString(), "any");
}

TEST(ExportAccessListTest, AddressesAndBlocksWithAndWithoutUid) {
  auto list = ExportAccessList::Parse(
      {{"10.0.0.2", 1000}, {"192.0.2.0/24", std::nullopt}});
  ASSERT_TRUE(list.ok()) << list.status();
  // 10.0.0.2 only for uid 1000.
  EXPECT_TRUE(list->Admits({"10.0.0.2", {}}, 1000));
  EXPECT_FALSE(list->Admits({"10.0.0.2", {}}, 1001));
  EXPECT_FALSE(list->Admits({"10.0.0.2", {}}, std::nullopt));
  EXPECT_FALSE(list->Admits({"10.0.0.3", {}}, 1000));
  // The block, for any uid, and IPv4-mapped IPv6 peers as well.
  EXPECT_TRUE(list->Admits({"192.0.2.77", {}}, 0));
  EXPECT_TRUE(list->Admits({"::ffff:192.0.2.77", {}}, std::nullopt));
  EXPECT_FALSE(list->Admits({"192.0.3.1", {}}, 0));
  // An unknown address is admitted by no address entry.
  EXPECT_FALSE(list->Admits({"", {}}, 1000));
  // The data path sees addresses only: any entry's address counts.
  EXPECT_TRUE(list->AdmitsAddress(V4("10.0.0.2")));
  EXPECT_TRUE(list->AdmitsAddress(V4("192.0.2.200")));
  EXPECT_FALSE(list->AdmitsAddress(V4("127.0.0.1")));
  sockaddr_storage unknown{};
  EXPECT_FALSE(list->AdmitsAddress(unknown));
  EXPECT_EQ(list->ToString(), "1000@10.0.0.2, 192.0.2.0/24");
}

TEST(ExportAccessListTest, CertificateNamesNeverMatchAnAddress) {
  auto list = ExportAccessList::Parse({{"cert:node-b", std::nullopt}});
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->Admits({"10.0.0.2", {"node-b"}}, 7));
  EXPECT_TRUE(list->Admits({"", {"other", "node-b"}}, std::nullopt));
  EXPECT_FALSE(list->Admits({"10.0.0.2", {"node-c"}}, 7));
  // Without mutual TLS there are no names: a plaintext peer gets nothing,
  // whatever it is called or where it comes from.
  EXPECT_FALSE(list->Admits({"node-b", {}}, 7));
  EXPECT_FALSE(list->AdmitsAddress(V4("10.0.0.2")));
}

TEST(ExportAccessListTest, StarAdmitsAnyPeerForItsUid) {
  auto list = ExportAccessList::Parse({{"*", 0}});
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->Admits({"203.0.113.5", {}}, 0));
  EXPECT_FALSE(list->Admits({"203.0.113.5", {}}, 1));
  EXPECT_TRUE(list->AdmitsAddress(V4("203.0.113.5")));
}

TEST(ExportAccessListTest, RejectsMalformedEntriesNamingThem) {
  for (const char* bad : {"", "banana", "10.0.0.0/33", "10.0.0.1/", "cert:",
                          "cert:has space", "10.0.0.1:7471", "host.example"}) {
    auto list = ExportAccessList::Parse({{bad, std::nullopt}});
    ASSERT_FALSE(list.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(list.status().message(), HasSubstr("access list entry"));
  }
  std::vector<ExportGrant> many(ExportAccessList::kMaxEntries + 1,
                                ExportGrant{"10.0.0.1", std::nullopt});
  auto list = ExportAccessList::Parse(many);
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("at most 64"));
  many.pop_back();
  EXPECT_TRUE(ExportAccessList::Parse(many).ok());
}

TEST(ExportAccessListTest, GrantTextRoundTrips) {
  auto grant = ExportAccessList::ParseGrantText("1000@10.0.0.0/8");
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->peer, "10.0.0.0/8");
  EXPECT_EQ(grant->uid, 1000u);
  EXPECT_EQ(ExportAccessList::FormatGrant(*grant), "1000@10.0.0.0/8");
  grant = ExportAccessList::ParseGrantText("cert:b");
  ASSERT_TRUE(grant.ok());
  EXPECT_FALSE(grant->uid.has_value());
  for (const char* bad : {"x@10.0.0.1", "@10.0.0.1", "-1@10.0.0.1",
                          "99999999999@10.0.0.1", "1000@", "1000@nonsense"}) {
    EXPECT_FALSE(ExportAccessList::ParseGrantText(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rdmad::core
