#include "daemon/core/session_table.h"

#include "gtest/gtest.h"

namespace rdmad::core {
namespace {

TEST(SessionTableTest, OpenAuthenticateClose) {
  SessionTable table;
  const auto a = table.Open(1000, 100, 42);
  const auto b = table.Open(1001, 101, 43);
  EXPECT_NE(a.id, b.id);
  EXPECT_NE(a.token, b.token);
  EXPECT_EQ(a.token.size(), 32u);  // 128 bits, hex
  EXPECT_EQ(table.size(), 2u);

  auto caller = table.Authenticate(a.token);
  ASSERT_TRUE(caller.ok());
  EXPECT_EQ(caller->session_id, a.id);
  EXPECT_EQ(caller->uid, 1000u);
  EXPECT_EQ(caller->gid, 100u);
  EXPECT_EQ(caller->pid, 42);

  EXPECT_TRUE(table.Close(a.id));
  EXPECT_FALSE(table.Close(a.id));
  EXPECT_EQ(table.Authenticate(a.token).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(table.Authenticate(b.token).ok());
  EXPECT_EQ(table.size(), 1u);
}

TEST(SessionTableTest, ForeignAndEmptyTokensAreRejected) {
  SessionTable table;
  table.Open(1, 1, 1);
  for (const char* token : {"", "0", "00000000000000000000000000000000",
                            "not-a-token"}) {
    EXPECT_EQ(table.Authenticate(token).status().code(),
              absl::StatusCode::kUnauthenticated)
        << token;
  }
}

// A token is good only in the process it was issued to: the pid and uid of
// the connection a call arrives on must be the session's.
TEST(SessionTableTest, TokenIsBoundToItsProcess) {
  SessionTable table;
  const auto a = table.Open(1000, 100, 42);
  auto caller = table.AuthenticateFrom(a.token, 42, 1000);
  ASSERT_TRUE(caller.ok()) << caller.status();
  EXPECT_EQ(caller->session_id, a.id);
  // Another uid holding it.
  auto other_uid = table.AuthenticateFrom(a.token, 77, 1001);
  EXPECT_EQ(other_uid.status().code(), absl::StatusCode::kPermissionDenied);
  // Another process of the same uid.
  auto other_pid = table.AuthenticateFrom(a.token, 43, 1000);
  EXPECT_EQ(other_pid.status().code(), absl::StatusCode::kPermissionDenied);
  // Root is no exception.
  EXPECT_EQ(table.AuthenticateFrom(a.token, 1, 0).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Unknown tokens stay UNAUTHENTICATED, whoever sends them.
  EXPECT_EQ(table.AuthenticateFrom("nope", 42, 1000).status().code(),
            absl::StatusCode::kUnauthenticated);
  table.Close(a.id);
  EXPECT_EQ(table.AuthenticateFrom(a.token, 42, 1000).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(SessionTableTest, IdsAreNeverReused) {
  SessionTable table;
  const auto a = table.Open(1, 1, 1);
  table.Close(a.id);
  const auto b = table.Open(1, 1, 1);
  EXPECT_GT(b.id, a.id);
}

}  // namespace
}  // namespace rdmad::core
