// Page sizes and tokens of the listing RPCs (daemon/service/paging.h).
#include "daemon/service/paging.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::service {
namespace {

using ::testing::HasSubstr;

TEST(PagingTest, PageSizeHasADefaultAndACeiling) {
  EXPECT_EQ(PageSize(0), kDefaultPageSize);
  EXPECT_EQ(PageSize(1), 1u);
  EXPECT_EQ(PageSize(5000), 5000u);
  EXPECT_EQ(PageSize(4000000000u), kMaxPageSize);
}

TEST(PagingTest, IdTokensRoundTripAndBadOnesAreRefused) {
  EXPECT_EQ(*ParseIdToken(""), 0u);
  EXPECT_EQ(*ParseIdToken(IdToken(1234)), 1234u);
  for (const char* bad : {"x", "-1", "+5", "1.5", "99999999999999999999999"}) {
    auto parsed = ParseIdToken(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("next_page_token"));
  }
}

TEST(PagingTest, NameTokensAreRegionNames) {
  EXPECT_EQ(*ParseNameToken(""), "");
  EXPECT_EQ(*ParseNameToken("kv-1"), "kv-1");
  // Names may hold single '/' (kv/shard-7), never an empty part.
  EXPECT_EQ(*ParseNameToken("kv/shard-7"), "kv/shard-7");
  EXPECT_FALSE(ParseNameToken("a//b").ok());
  EXPECT_FALSE(ParseNameToken("a b").ok());
  EXPECT_FALSE(ParseNameToken(std::string(1000, 'a')).ok());
}

}  // namespace
}  // namespace rdmad::service
