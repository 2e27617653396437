#include "common/size.h"

#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad {
namespace {

using ::testing::HasSubstr;

TEST(ParseSizeTest, PlainNumbers) {
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize(" 17 "), 17u);
  EXPECT_EQ(*ParseSize("18446744073709551615"),
            std::numeric_limits<uint64_t>::max());
}

TEST(ParseSizeTest, BinarySuffixes) {
  EXPECT_EQ(*ParseSize("4K"), 4096u);
  EXPECT_EQ(*ParseSize("4k"), 4096u);
  EXPECT_EQ(*ParseSize("4Ki"), 4096u);
  EXPECT_EQ(*ParseSize("4KiB"), 4096u);
  EXPECT_EQ(*ParseSize("1M"), 1u << 20);
  EXPECT_EQ(*ParseSize("1Mi"), 1u << 20);
  EXPECT_EQ(*ParseSize("1G"), 1ull << 30);
  EXPECT_EQ(*ParseSize("1Gi"), 1ull << 30);
  EXPECT_EQ(*ParseSize("2T"), 2ull << 40);
  EXPECT_EQ(*ParseSize("3B"), 3u);
}

TEST(ParseSizeTest, DecimalSuffixes) {
  EXPECT_EQ(*ParseSize("1KB"), 1000u);
  EXPECT_EQ(*ParseSize("1MB"), 1000000u);
  EXPECT_EQ(*ParseSize("1GB"), 1000000000u);
}

TEST(ParseSizeTest, FractionsThatMakeWholeBytes) {
  EXPECT_EQ(*ParseSize("1.5M"), 1572864u);
  EXPECT_EQ(*ParseSize("0.5K"), 512u);
  EXPECT_EQ(*ParseSize("2.25Gi"), 2415919104u);
  EXPECT_EQ(*ParseSize("1.5KB"), 1500u);
  EXPECT_EQ(*ParseSize("4.0"), 4u);
  EXPECT_EQ(*ParseSize("16777215.5T"), (16777215ull << 40) + (1ull << 39));
  EXPECT_THAT(ParseSize("16777216.0T").status().message(),
              HasSubstr("64 bits"));
  EXPECT_THAT(ParseSize("1.0000000000000000001K").status().message(),
              HasSubstr("too many decimals"));
}

TEST(ParseSizeTest, RejectsFractionsOfAByte) {
  for (const char* bad : {"1.5", "0.3K", "1.1B", "0.0001K"}) {
    auto parsed = ParseSize(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("whole number of bytes"))
        << bad;
  }
  EXPECT_THAT(ParseSize("1.M").status().message(),
              HasSubstr("no digits after the decimal point"));
}

TEST(ParseSizeTest, RejectsGarbage) {
  for (const char* bad : {"", "K", "-1", "+4", ".5M", "4X", "4 K", "0x10",
                          "4KK", "M4", "1.5.5M", "1,5M"}) {
    auto parsed = ParseSize(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ParseSizeTest, RejectsOverflow) {
  EXPECT_THAT(ParseSize("18446744073709551616").status().message(),
              HasSubstr("64 bits"));
  EXPECT_THAT(ParseSize("16777216T").status().message(), HasSubstr("64 bits"));
  EXPECT_FALSE(ParseSize("99999999999999999999999").ok());
  EXPECT_EQ(*ParseSize("16777215T"), 16777215ull << 40);
}

TEST(ByteCountTest, OneStyleAndAlwaysExact) {
  EXPECT_EQ(ByteCount(0), "0 B");
  EXPECT_EQ(ByteCount(1), "1 B");
  EXPECT_EQ(ByteCount(1023), "1023 B");
  EXPECT_EQ(ByteCount(4096), "4 KiB");
  EXPECT_EQ(ByteCount(3u << 19), "1.5 MiB");
  EXPECT_EQ(ByteCount(64ull << 30), "64 GiB");
  // Where one decimal would round, the bytes themselves.
  EXPECT_EQ(ByteCount((1u << 20) + 1), "1048577 B");
  EXPECT_EQ(ByteCount(65537), "65537 B");
}

TEST(FormatSizeTest, ExactBinaryUnits) {
  EXPECT_EQ(FormatSize(0), "0");
  EXPECT_EQ(FormatSize(1000), "1000");
  EXPECT_EQ(FormatSize(4096), "4Ki");
  EXPECT_EQ(FormatSize(3u << 20), "3Mi");
  EXPECT_EQ(FormatSize((1u << 20) + 1), "1048577");
  EXPECT_EQ(FormatSize(1ull << 40), "1Ti");
}

TEST(RangeInsideTest, Inside) {
  EXPECT_TRUE(RangeInside(100, 0, 100));
  EXPECT_TRUE(RangeInside(100, 99, 1));
  EXPECT_TRUE(RangeInside(100, 50, 50));
}

TEST(RangeInsideTest, Outside) {
  EXPECT_FALSE(RangeInside(100, 0, 101));
  EXPECT_FALSE(RangeInside(100, 100, 1));
  EXPECT_FALSE(RangeInside(100, 101, 0));
  EXPECT_FALSE(RangeInside(0, 0, 1));
}

TEST(RangeInsideTest, ZeroLengthRejected) {
  EXPECT_FALSE(RangeInside(100, 0, 0));
  EXPECT_FALSE(RangeInside(100, 100, 0));
}

TEST(RangeInsideTest, OffsetPlusLengthOverflow) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // offset + length wraps to a small number: must still be rejected.
  EXPECT_FALSE(RangeInside(100, 50, kMax));
  EXPECT_FALSE(RangeInside(100, kMax, 2));
  EXPECT_FALSE(RangeInside(kMax, kMax, 1));
  EXPECT_FALSE(RangeInside(kMax, 1, kMax));
  EXPECT_TRUE(RangeInside(kMax, 0, kMax));
  EXPECT_TRUE(RangeInside(kMax, kMax - 1, 1));
}

}  // namespace
}  // namespace rdmad
