// rdmactl's one JSON dialect (client/rdmactl/json.h): numbers stay numbers,
// strings are escaped, keys keep their order, and any JSON reader reads it.
#include "client/rdmactl/json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "gtest/gtest.h"
#include "tests/json_reader.h"

namespace rdmad::rdmactl {
namespace {

TEST(JsonTest, ScalarsPrintAsJsonScalars) {
  EXPECT_EQ(Json().Dump(), "null\n");
  EXPECT_EQ(Json(true).Dump(), "true\n");
  EXPECT_EQ(Json(uint64_t{18446744073709551615u}).Dump(),
            "18446744073709551615\n");
  EXPECT_EQ(Json(int64_t{-5}).Dump(), "-5\n");
  EXPECT_EQ(Json(uint32_t{4096}).Dump(), "4096\n");
  EXPECT_EQ(Json(1.5).Dump(), "1.5\n");
  EXPECT_EQ(Json(2.0).Dump(), "2\n");
  EXPECT_EQ(Json(1234567890.125).Dump(), "1234567890.125\n");  // no exponent
  EXPECT_EQ(Json(std::nan("")).Dump(), "null\n");
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).Dump(), "null\n");
  EXPECT_EQ(Json(std::optional<uint64_t>()).Dump(), "null\n");
  EXPECT_EQ(Json(std::optional<uint64_t>(7)).Dump(), "7\n");
  EXPECT_EQ(Json("rw").Dump(), "\"rw\"\n");
}

TEST(JsonTest, StringsAreEscaped) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
}

TEST(JsonTest, ObjectsKeepTheirKeyOrderAndNest) {
  Json keys = Json::Array();
  keys.Push(Json::Object().Set("device", "rxe0").Set("rkey", uint32_t{7}));
  Json region = Json::Object();
  region.Set("name", "kv")
      .Set("size", uint64_t{4096})
      .Set("keys", std::move(keys))
      .Set("empty", Json::Array())
      .Set("none", Json::Object());
  EXPECT_EQ(region.Dump(),
            "{\n"
            "  \"name\": \"kv\",\n"
            "  \"size\": 4096,\n"
            "  \"keys\": [\n"
            "    {\n"
            "      \"device\": \"rxe0\",\n"
            "      \"rkey\": 7\n"
            "    }\n"
            "  ],\n"
            "  \"empty\": [],\n"
            "  \"none\": {}\n"
            "}\n");
  // And a JSON reader takes it, with numbers as numbers.
  auto parsed = testing::JsonValue::Parse(region.Dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)["size"].is_number());
  EXPECT_EQ((*parsed)["size"].number(), 4096);
  EXPECT_EQ((*parsed)["keys"][0]["device"].string(), "rxe0");
  EXPECT_TRUE((*parsed)["empty"].is_array());
}

TEST(JsonTest, EscapedStringsReadBackAsTheyWere) {
  const std::string tricky = "quote\" back\\slash\nnew\tline\x01";
  auto parsed = testing::JsonValue::Parse(Json(tricky).Dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->string(), tricky);
}

}  // namespace
}  // namespace rdmad::rdmactl
