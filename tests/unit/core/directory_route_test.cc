// Transfers to a region named without a daemon: the engine asks the
// directory (a fake here), sends to the holder with fences, and re-resolves
// once when the holder says the region is gone (generation fencing).
#include "daemon/core/directory_route.h"

#include <deque>
#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/fakes/callers.h"

namespace rdmad::core {
namespace {

using core::testing::kAlice;

using ::testing::HasSubstr;

DirectoryEntry Entry(const std::string& node, uint64_t incarnation,
                     int64_t revision, uint64_t region_id = 5) {
  DirectoryEntry e;
  e.name = "kv/x";
  e.node = node;
  e.size = 4096;
  e.access = RemoteAccess::kReadWrite;
  e.region_id = region_id;
  e.generation = {incarnation, revision};
  return e;
}

// Answers look-ups from a script; records what it was asked.
class FakeDirectory : public RegionResolver {
 public:
  void Resolve(const std::string& name, absl::Time,
               DirectoryGeneration stale, ResolveDone done) override {
    asked.push_back({name, stale});
    if (answers.empty()) return done(absl::NotFoundError("no such name"));
    auto answer = answers.front();
    answers.pop_front();
    done(std::move(answer));
  }
  std::string self_node() const override { return "self:1"; }

  std::deque<absl::StatusOr<DirectoryEntry>> answers;
  std::vector<std::pair<std::string, DirectoryGeneration>> asked;
};

// The peer layer: completes each transfer with the next scripted status.
class FakeRemote : public RemoteTransfers {
 public:
  void SubmitBatch(absl::Span<Transfer> transfers) override {
    for (Transfer& t : transfers) {
      sent.push_back(t.remote);
      absl::Status s = results.empty() ? absl::OkStatus() : results.front();
      if (!results.empty()) results.pop_front();
      TransferDone done = std::move(t.done);
      if (!s.ok()) {
        done(s);
      } else {
        done(TransferResult{t.length, TransportKind::kTcp,
                            absl::ZeroDuration()});
      }
    }
  }
  std::deque<absl::Status> results;
  std::vector<TransferTarget> sent;  // where each went
};

class DirectoryRouteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AllocateOptions src;
    src.name = "src";
    src.size = 4096;
    src.daemon_owned = true;
    ASSERT_TRUE(regions_.Allocate(kAlice, src).ok());
    AllocateOptions here = src;
    here.name = "here";
    here.export_access = RemoteAccess::kReadWrite;
    ASSERT_TRUE(regions_.Allocate(kAlice, here).ok());
    engine_.SetDirectory(&directory_);
  }

  absl::StatusOr<TransferResult> Run(const std::string& name) {
    TransferSpec r;
    r.op = OpType::kWrite;
    r.local = {0, "src"};
    r.remote.name = name;
    r.length = 16;
    std::optional<absl::StatusOr<TransferResult>> out;
    engine_.Submit(kAlice, std::move(r),
                   [&](absl::StatusOr<TransferResult> result) { out = result; });
    EXPECT_TRUE(out.has_value()) << "the fakes complete inline";
    return out.value_or(absl::InternalError("no result"));
  }

  NullRegistrar registrar_;
  RegionTable regions_{&registrar_, RegionLimits{}};
  FakeDirectory directory_;
  FakeRemote remote_;
  TransferEngine engine_{&regions_, &remote_};
};

TEST_F(DirectoryRouteTest, LocalExportsNeverAskTheDirectory) {
  ASSERT_TRUE(Run("here").ok());
  EXPECT_TRUE(directory_.asked.empty());
  EXPECT_TRUE(remote_.sent.empty());
}

TEST_F(DirectoryRouteTest, SendsToTheHolderWithFences) {
  directory_.answers.push_back(Entry("10.0.0.2:7471", 0xa1, 10, 5));
  auto result = Run("kv/x");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(remote_.sent.size(), 1u);
  EXPECT_EQ(remote_.sent[0].peer, "10.0.0.2:7471");
  EXPECT_EQ(remote_.sent[0].name, "kv/x");
  EXPECT_EQ(remote_.sent[0].expect_incarnation, 0xa1u);
  EXPECT_EQ(remote_.sent[0].expect_region_id, 5u);
  EXPECT_EQ(engine_.counters().ops_ok, 1u);
}

TEST_F(DirectoryRouteTest, UnknownNameFailsWithTheDirectorysStatus) {
  auto result = Run("kv/x");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(remote_.sent.empty());
  EXPECT_EQ(engine_.counters().ops_failed, 1u);
}

TEST_F(DirectoryRouteTest, StaleGenerationIsReresolvedOnce) {
  // The cached entry says n1; the region moved to n2.
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  directory_.answers.push_back(Entry("n2:1", 0xb2, 14));
  remote_.results.push_back(absl::NotFoundError("gone from n1"));
  auto result = Run("kv/x");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(remote_.sent.size(), 2u);
  EXPECT_EQ(remote_.sent[1].peer, "n2:1");
  EXPECT_EQ(remote_.sent[1].expect_incarnation, 0xb2u);
  ASSERT_EQ(directory_.asked.size(), 2u);
  EXPECT_TRUE(directory_.asked[0].second.empty());
  // The second look-up skips the generation that failed.
  EXPECT_EQ(directory_.asked[1].second, (DirectoryGeneration{0xa1, 10}));
}

TEST_F(DirectoryRouteTest, DeadHolderIsReresolvedToo) {
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  directory_.answers.push_back(Entry("n2:1", 0xb2, 14));
  remote_.results.push_back(absl::UnavailableError("n1 is unreachable"));
  ASSERT_TRUE(Run("kv/x").ok());
  EXPECT_EQ(remote_.sent.back().peer, "n2:1");
}

TEST_F(DirectoryRouteTest, SameGenerationAgainFailsWithAPreciseStatus) {
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  remote_.results.push_back(absl::NotFoundError("region freed on n1"));
  auto result = Run("kv/x");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("region freed on n1"));
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("generation a1/10"));
  EXPECT_EQ(remote_.sent.size(), 1u);  // not sent twice to the same entry
}

TEST_F(DirectoryRouteTest, RetriesOnlyOnce) {
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  directory_.answers.push_back(Entry("n2:1", 0xb2, 14));
  remote_.results.push_back(absl::NotFoundError("gone from n1"));
  remote_.results.push_back(absl::NotFoundError("gone from n2"));
  auto result = Run("kv/x");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(remote_.sent.size(), 2u);
  EXPECT_EQ(directory_.asked.size(), 2u);
}

TEST_F(DirectoryRouteTest, OtherFailuresAreNotRetried) {
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  remote_.results.push_back(absl::OutOfRangeError("too long"));
  EXPECT_EQ(Run("kv/x").status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(remote_.sent.size(), 1u);
  EXPECT_EQ(directory_.asked.size(), 1u);
}

TEST_F(DirectoryRouteTest, AnEntryForThisDaemonIsNeverSentToItself) {
  directory_.answers.push_back(Entry("self:1", 0xa1, 10));
  directory_.answers.push_back(Entry("self:1", 0xa1, 10));
  auto result = Run("kv/x");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(remote_.sent.empty());
}

// With mutual TLS, a record that names no certificate identity reaches no
// one: it is looked up once more (the rightful holder may have re-published
// it), and what the directory then lists is sent to.
TEST_F(DirectoryRouteTest, UnderMutualTlsARecordWithoutIdentityIsNotSentTo) {
  const HolderTrust trust(/*mutual_tls=*/true, PeerAllowList());
  engine_.SetDirectory(&directory_, &trust);
  DirectoryEntry forged = Entry("evil:1", 0xe1, 10);
  directory_.answers.push_back(forged);
  directory_.answers.push_back(forged);
  auto result = Run("kv/x");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("'kv/x'"));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("evil:1"));
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("names no certificate identity"));
  EXPECT_TRUE(remote_.sent.empty());
  ASSERT_EQ(directory_.asked.size(), 2u);
  EXPECT_EQ(directory_.asked[1].second, (DirectoryGeneration{0xe1, 10}));

  // The holder re-published its own record meanwhile: that one is used,
  // and the peer layer is told which certificate the holder must present.
  DirectoryEntry rightful = Entry("good:1", 0xa1, 12);
  rightful.identity = "node-good";
  directory_.answers.push_back(forged);
  directory_.answers.push_back(rightful);
  ASSERT_TRUE(Run("kv/x").ok());
  ASSERT_EQ(remote_.sent.size(), 1u);
  EXPECT_EQ(remote_.sent[0].peer, "good:1");
  EXPECT_EQ(remote_.sent[0].holder_trust, &trust);
  EXPECT_EQ(remote_.sent[0].expect_identity, "node-good");
}

TEST_F(DirectoryRouteTest, WithoutTrustRulesHoldersAreNotChecked) {
  const HolderTrust trust;  // neither mutual TLS nor peer_allow
  engine_.SetDirectory(&directory_, &trust);
  directory_.answers.push_back(Entry("n1:1", 0xa1, 10));
  ASSERT_TRUE(Run("kv/x").ok());
  ASSERT_EQ(remote_.sent.size(), 1u);
  EXPECT_EQ(remote_.sent[0].holder_trust, nullptr);
}

TEST_F(DirectoryRouteTest, WithoutADirectoryNamesStayLocal) {
  engine_.SetDirectory(nullptr);
  EXPECT_EQ(Run("kv/x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(directory_.asked.empty());
}

}  // namespace
}  // namespace rdmad::core
