// Who may claim a name in the cluster directory, and who gets the bytes a
// client writes to it by name (docs/DIRECTORY.md, "Trust"), against a real
// etcd on loopback:
//   - a daemon started by another local uid that claims a name first, and a
//     record written straight into etcd, get no bytes from a client whose
//     daemon uses mutual TLS, or a peer allow-list that excludes them;
//   - the rightful holder re-asserts its record at once after an overwrite
//     and after a delete, and two daemons that both think they hold a name
//     do not write over each other;
//   - etcd back empty after an outage: transfers by name never fail
//     NOT_FOUND while the holder publishes again; yet a holder that died
//     is forgotten as soon as etcd says its lease ended;
//   - etcd's own authentication: user and password (a token that expires
//     is renewed; a wrong password and a user without permission on the
//     prefix are told precisely), and client certificates.
// The intruder's daemon runs as another uid where the test runs as root
// (CI does), else as the test's own uid, said loudly.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/directory_helpers.h"
#include "tests/integration/etcd_process.h"
#include "tests/integration/test_pki.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A uid no other test uses, for the daemon of "another local user".
constexpr uint32_t kIntruderUid = 64992;
constexpr int kLeaseTtlSeconds = 3;
constexpr char kWarning[] = "can claim this cluster's region names";

// The real uid of process `pid` (from /proc); -1 if unknown.
int64_t UidOf(pid_t pid) {
  std::smatch m;
  const std::string status =
      ReadTextFile(absl::StrCat("/proc/", pid, "/status"));
  if (std::regex_search(status, m, std::regex("Uid:\\s+([0-9]+)"))) {
    return std::stoll(m[1]);
  }
  return -1;
}

class DirectoryTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = EtcdMissingReason(); !why.empty()) {
      if (std::getenv("CI") != nullptr) FAIL() << why;
      GTEST_SKIP() << why;
    }
    ASSERT_TRUE(pki_.MakeCa("ca"));
    for (const char* name : {"node-h", "node-c", "intruder"}) {
      ASSERT_TRUE(pki_.MakeCert("ca", name));
    }
  }

  void StartEtcd(EtcdOptions options = {}) {
    auto etcd = EtcdProcess::Start(dir_.path(), std::move(options));
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
  }

  // The directory settings every daemon of the cluster has.
  std::string DirectoryConfig(int lease_ttl = kLeaseTtlSeconds) const {
    return absl::StrCat("directory: \"", etcd_->url(), "\"\n",
                        "directory_lease_ttl_seconds: ", lease_ttl, "\n");
  }

  // A daemon with `config` as its config file, on `peer_listen`.
  std::unique_ptr<DaemonProcess> StartDaemon(
      const std::string& name, const std::string& config,
      const std::string& peer_listen = "127.0.0.1:0",
      DaemonOptions options = {}) {
    options.config = config;
    options.peer_listen = peer_listen;
    return StartDaemonOrNull(dir_, name, std::move(options));
  }

  // Options that start a daemon as another local user (kIntruderUid), who
  // can reach etcd but cannot read this cluster's certificate keys. That
  // needs root; otherwise the daemon runs as this test's user (it is still
  // started without the keys), and the test says so.
  DaemonOptions AsAnotherUser() {
    DaemonOptions options;
    if (::geteuid() != 0) {
      std::cout << "*** not root: the intruder's daemon runs as this test's "
                   "uid, not as another one (CI runs as root) ***\n";
      return options;
    }
    // Its sockets go into the test's directory.
    EXPECT_EQ(::chmod(dir_.path().c_str(), 0777), 0);
    options.command_prefix = {LIMITED_LAUNCHER_PATH, absl::StrCat(kIntruderUid),
                              "-", "-", "--"};
    return options;
  }

  // etcd, a holder h_ that exports region `name` (rw) and a client's daemon
  // c_, both in the directory, and `name` listed in etcd.
  void StartHolderAndClient(const std::string& name,
                            int lease_ttl = kLeaseTtlSeconds) {
    StartEtcd();
    h_ = StartDaemon("h", DirectoryConfig(lease_ttl));
    c_ = StartDaemon("c", DirectoryConfig(lease_ttl));
    ASSERT_TRUE(h_ && c_);
    ASSERT_TRUE(WaitDirectoryConnected(*h_) && WaitDirectoryConnected(*c_));
    auto client = Connect(*h_);
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->CreateRegion(name, 4096, Access::kReadWrite).ok());
    ASSERT_TRUE(WaitNames(name, h_->peer_address(), absl::Seconds(10)));
  }

  // Another local user's daemon (AsAnotherUser) on `peer_listen`, in the
  // cluster's directory without its keys, which claims region `name`
  // (exported rw) before anyone else.
  std::unique_ptr<DaemonProcess> StartIntruderClaiming(
      const std::string& peer_listen, const std::string& name) {
    auto a = StartDaemon("a", DirectoryConfig(), peer_listen, AsAnotherUser());
    if (a == nullptr) return nullptr;
    if (::geteuid() == 0) {
      EXPECT_EQ(UidOf(a->pid()), kIntruderUid);
    }
    EXPECT_TRUE(WaitDirectoryConnected(*a)) << a->LogTail();
    auto client = Connect(*a);
    if (client == nullptr) return nullptr;
    auto made = client->CreateRegion(name, 4096, Access::kReadWrite);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? std::move(a) : nullptr;
  }

  // Makes region `name` (exported rw) on `x`, a daemon in no directory, and
  // writes a record for it naming `identity` straight into etcd.
  void ForgeRecordFor(const DaemonProcess& x, const std::string& name,
                      const std::string& identity) {
    auto client = Connect(x);
    ASSERT_TRUE(client);
    auto status = client->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    auto region = client->CreateRegion(name, 4096, Access::kReadWrite);
    ASSERT_TRUE(region.ok()) << region.status();
    PutRecord(name, x.peer_address(), region->id, status->incarnation,
              identity);
  }

  // Writes a record for region `name` straight into etcd, as anyone who
  // can write to it could: the fences (incarnation, region id) are those
  // of a real region, so that only the trust rules stand in the way.
  void PutRecord(const std::string& name, const std::string& node,
                 uint64_t region_id, uint64_t incarnation,
                 const std::string& identity) {
    const std::string value = absl::StrCat(
        R"({"name":")", name, R"(","node":")", node,
        R"(","size":"4096","access":"ACCESS_READ_WRITE","region_id":")",
        region_id, R"(","incarnation":")", incarnation, R"(","identity":")",
        identity, R"("})");
    ProcessResult put = etcd_->Ctl({"put", Key(name), value});
    ASSERT_EQ(put.exit_code, 0) << put.err;
  }
  static std::string Key(const std::string& name) {
    return "/rdmad/regions/" + name;
  }
  // The value of region `name`'s key now ("" if none).
  std::string ValueOf(const std::string& name) {
    ProcessResult get = etcd_->Ctl({"get", Key(name), "--print-value-only"});
    EXPECT_EQ(get.exit_code, 0) << get.err;
    return get.out;
  }
  // The mod revision of region `name`'s key (0 if none).
  int64_t ModRevisionOf(const std::string& name) {
    ProcessResult get = etcd_->Ctl({"get", Key(name), "-w", "json"});
    EXPECT_EQ(get.exit_code, 0) << get.err;
    std::smatch m;
    if (std::regex_search(get.out, m,
                          std::regex("\"mod_revision\":([0-9]+)"))) {
      return std::stoll(m[1]);
    }
    return 0;
  }
  // Waits until the key of `name` names `node` again; how long it took,
  // or nullopt after `timeout`.
  std::optional<absl::Duration> WaitNames(const std::string& name,
                                          const std::string& node,
                                          absl::Duration timeout) {
    const absl::Time start = absl::Now();
    while (absl::Now() - start < timeout) {
      if (absl::StrContains(ValueOf(name), absl::StrCat("\"", node, "\""))) {
        return absl::Now() - start;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return std::nullopt;
  }

  TempDir dir_;
  TestPki pki_{dir_.path() + "/pki"};
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<DaemonProcess> h_;  // StartHolderAndClient's
  std::unique_ptr<DaemonProcess> c_;
};

// Writes by name from `from` in a loop until stopped, and keeps every
// failure: a transfer by name must never fail while its holder holds it.
class ByNameWriter {
 public:
  ByNameWriter(const DaemonProcess& from, std::string name)
      : thread_([this, &from, name = std::move(name)] {
          auto client = Connect(from);
          if (client == nullptr) return;
          auto buffer = client->Allocate(8);
          if (!buffer.ok()) return;
          while (!stop_.load()) {
            auto w = client->Write(*buffer, 0, ByName(name), 0, 8);
            absl::MutexLock lock(&mu_);
            ++writes_;
            if (!w.ok()) failures_.push_back(w.status());
            absl::SleepFor(absl::Milliseconds(10));
          }
        }) {}
  ~ByNameWriter() { Stop(); }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int writes() {
    absl::MutexLock lock(&mu_);
    return writes_;
  }
  std::vector<absl::Status> failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  int writes_ = 0;
  std::vector<absl::Status> failures_;
  std::thread thread_;
};

// --- who gets the bytes ------------------------------------------------------

TEST_F(DirectoryTrustTest, AnotherUsersDaemonClaimingFirstGetsNoBytesUnderTls) {
  StartEtcd();
  auto h = StartDaemon("h", DirectoryConfig() + pki_.TlsConfig("ca", "node-h"));
  auto c = StartDaemon("c", DirectoryConfig() + pki_.TlsConfig("ca", "node-c"));
  ASSERT_TRUE(h && c);
  ASSERT_TRUE(WaitDirectoryConnected(*h) && WaitDirectoryConnected(*c));
  // Another local user's daemon claims the name first: the rightful holder
  // cannot have it.
  auto a = StartIntruderClaiming("127.0.0.1:0", "kv");
  ASSERT_TRUE(a);
  auto ch = Connect(*h);
  ASSERT_TRUE(ch);
  EXPECT_EQ(ch->CreateRegion("kv", 4096, Access::kReadWrite).status().code(),
            absl::StatusCode::kAlreadyExists);

  // The client's daemon finds the name on the intruder's daemon, whose
  // record names no certificate: nothing is written there, nor read.
  absl::Status w = WriteByName(*c, "kv", "stolen");
  EXPECT_EQ(w.code(), absl::StatusCode::kFailedPrecondition) << w;
  EXPECT_THAT(w.message(), HasSubstr("'kv'"));
  EXPECT_THAT(w.message(), HasSubstr(a->peer_address()));
  EXPECT_THAT(w.message(), HasSubstr("names no certificate identity"));
  auto cc = Connect(*c);
  ASSERT_TRUE(cc);
  auto buffer = cc->Allocate(6);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(cc->Read(*buffer, 0, ByName("kv"), 0, 6).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadLocal(*a, "kv", 6), std::string(6, '\0'));

  // Once the name is free, the rightful holder's record names its
  // certificate, which its Peer service presents: the bytes go there.
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  ASSERT_TRUE(ca->FreeRegion("kv").ok());
  absl::Status made;
  for (int i = 0; i < 100; ++i) {  // until the intruder's key is gone
    made = ch->CreateRegion("kv", 4096, Access::kReadWrite).status();
    if (made.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(made.ok()) << made;
  ASSERT_TRUE(WriteByName(*c, "kv", "landed").ok());
  EXPECT_EQ(ReadLocal(*h, "kv", 6), "landed");

  // With mutual TLS configured there is no start-up warning; the
  // intruder's daemon, with neither, warned.
  EXPECT_THAT(c->Log(), Not(HasSubstr(kWarning)));
  EXPECT_THAT(a->Log(), HasSubstr(kWarning));
}

TEST_F(DirectoryTrustTest, ARecordWrittenIntoEtcdGetsNoBytesUnderTls) {
  StartEtcd();
  auto h = StartDaemon("h", DirectoryConfig() + pki_.TlsConfig("ca", "node-h"));
  auto c = StartDaemon("c", DirectoryConfig() + pki_.TlsConfig("ca", "node-c"));
  // A daemon with a certificate of the same CA (an old node's, say), that
  // is in no directory: someone writes records naming it into etcd.
  auto x = StartDaemon("x", pki_.TlsConfig("ca", "intruder"));
  ASSERT_TRUE(h && c && x);
  ASSERT_TRUE(WaitDirectoryConnected(*h) && WaitDirectoryConnected(*c));

  // A record that claims the holder's identity for the other daemon: it
  // presents its own certificate, not the one the record names.
  ForgeRecordFor(*x, "forged", "node-h");
  absl::Status w = WriteByName(*c, "forged", "stolen");
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  EXPECT_THAT(w.message(), HasSubstr("'forged'"));
  EXPECT_THAT(w.message(), HasSubstr(x->peer_address()));
  EXPECT_THAT(w.message(), HasSubstr("'node-h'"));
  EXPECT_THAT(w.message(), HasSubstr("'intruder'"));
  // A record that names no identity at all.
  ForgeRecordFor(*x, "forged2", "");
  w = WriteByName(*c, "forged2", "stolen");
  EXPECT_EQ(w.code(), absl::StatusCode::kFailedPrecondition) << w;
  EXPECT_THAT(w.message(), HasSubstr("'forged2'"));
  EXPECT_EQ(ReadLocal(*x, "forged", 6), std::string(6, '\0'));
  EXPECT_EQ(ReadLocal(*x, "forged2", 6), std::string(6, '\0'));
}

TEST_F(DirectoryTrustTest, OutsideTheAllowListNoDaemonGetsBytesByName) {
  StartEtcd();
  // The cluster's daemons are on 127.0.0.1 and 127.0.0.2; the client's
  // daemon trusts only those (no mutual TLS).
  auto h = StartDaemon("h", DirectoryConfig(), "127.0.0.2:0");
  auto c = StartDaemon("c", DirectoryConfig() +
                                "peer_allow: \"127.0.0.1\"\n"
                                "peer_allow: \"127.0.0.2\"\n");
  // A daemon in no directory, which a record put into etcd will name.
  auto x = StartDaemon("x", "", "127.0.0.3:0");
  ASSERT_TRUE(h && c && x);
  ASSERT_TRUE(WaitDirectoryConnected(*h) && WaitDirectoryConnected(*c));
  // Another local user's daemon on another loopback address claims a name
  // first.
  auto a = StartIntruderClaiming("127.0.0.4:0", "kv");
  ASSERT_TRUE(a);
  absl::Status w = WriteByName(*c, "kv", "stolen");
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  EXPECT_THAT(w.message(), HasSubstr("'kv'"));
  EXPECT_THAT(w.message(), HasSubstr(a->peer_address()));
  EXPECT_THAT(w.message(), HasSubstr("outside peer_allow"));
  EXPECT_EQ(ReadLocal(*a, "kv", 6), std::string(6, '\0'));

  ForgeRecordFor(*x, "forged", "");
  w = WriteByName(*c, "forged", "stolen");
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  EXPECT_THAT(w.message(), HasSubstr("127.0.0.3"));
  EXPECT_EQ(ReadLocal(*x, "forged", 6), std::string(6, '\0'));

  // A daemon inside the list holds names as before.
  auto ch = Connect(*h);
  ASSERT_TRUE(ch);
  ASSERT_TRUE(ch->CreateRegion("good", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(*c, "good", "landed").ok());
  EXPECT_EQ(ReadLocal(*h, "good", 6), "landed");
  // Neither etcd authentication nor mutual TLS: the client's daemon said
  // at start what that means.
  EXPECT_THAT(c->Log(), HasSubstr(kWarning));
}

// --- the rightful holder -----------------------------------------------------

TEST_F(DirectoryTrustTest, TheHolderReassertsItsRecordAfterAnOverwrite) {
  ASSERT_NO_FATAL_FAILURE(StartHolderAndClient("kv"));
  DaemonProcess* h = h_.get();
  DaemonProcess* c = c_.get();

  PutRecord("kv", "127.0.0.1:1", 1, 1, "");
  const auto back = WaitNames("kv", h->peer_address(), absl::Seconds(5));
  ASSERT_TRUE(back.has_value()) << "still " << ValueOf("kv") << h->LogTail();
  std::cout << "re-asserted " << *back << " after the overwrite\n";
  EXPECT_THAT(h->Log(),
              HasSubstr("overwritten with a record naming 127.0.0.1:1"));
  ASSERT_TRUE(WriteByName(*c, "kv", "landed").ok());
  EXPECT_EQ(ReadLocal(*h, "kv", 6), "landed");
}

TEST_F(DirectoryTrustTest, TheHolderReassertsItsRecordAfterADelete) {
  ASSERT_NO_FATAL_FAILURE(StartHolderAndClient("kv"));
  DaemonProcess* h = h_.get();
  DaemonProcess* c = c_.get();
  ASSERT_TRUE(WriteByName(*c, "kv", "warm").ok());

  ByNameWriter writer(*c, "kv");
  absl::SleepFor(absl::Milliseconds(200));
  ProcessResult del = etcd_->Ctl({"del", Key("kv")});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  const auto back = WaitNames("kv", h->peer_address(), absl::Seconds(5));
  ASSERT_TRUE(back.has_value()) << h->LogTail();
  std::cout << "re-asserted " << *back << " after the delete\n";
  absl::SleepFor(absl::Milliseconds(500));
  writer.Stop();
  EXPECT_GT(writer.writes(), 10);
  for (const absl::Status& s : writer.failures()) ADD_FAILURE() << s;
  EXPECT_THAT(h->Log(), HasSubstr("was deleted by someone else"));
}

// A third party deletes the key of one holder and another daemon claims
// the free name before the first re-asserts it: both think they hold it.
// The key the second created is its claim; the first yields instead of
// writing over it, and the second never has to write back.
TEST_F(DirectoryTrustTest, TwoDaemonsThatBothThinkTheyHoldANameDoNotFight) {
  // Long enough a lease for the first holder to live through its pause.
  ASSERT_NO_FATAL_FAILURE(StartHolderAndClient("kv", 10));
  DaemonProcess* h = h_.get();
  DaemonProcess* b = c_.get();  // the second daemon to claim "kv"
  auto ch = Connect(*h);
  auto cb = Connect(*b);
  ASSERT_TRUE(ch && cb);

  ASSERT_TRUE(h->Pause());
  ProcessResult del = etcd_->Ctl({"del", Key("kv")});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  auto made = cb->CreateRegion("kv", 4096, Access::kReadWrite);
  h->Resume();
  ASSERT_TRUE(made.ok()) << made.status();

  // The first holder looks, finds the second's claim and yields.
  absl::Status conflict = absl::DeadlineExceededError("no conflict shown");
  for (int i = 0; i < 200 && !conflict.ok(); ++i) {
    auto status = ch->GetStatus();
    if (status.ok() && status->directory.has_value() &&
        status->directory->conflicts.size() == 1) {
      conflict = absl::OkStatus();
      EXPECT_THAT(status->directory->conflicts[0],
                  HasSubstr(b->peer_address()));
    } else {
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  ASSERT_TRUE(conflict.ok()) << h->LogTail();
  // No loop: the key stays the second's, untouched.
  const int64_t revision = ModRevisionOf("kv");
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(ModRevisionOf("kv"), revision);
  EXPECT_THAT(ValueOf("kv"), HasSubstr(b->peer_address()));
}

TEST_F(DirectoryTrustTest, ByNameTransfersKeepWorkingWhenEtcdComesBackEmpty) {
  ASSERT_NO_FATAL_FAILURE(StartHolderAndClient("kv"));
  DaemonProcess* h = h_.get();
  DaemonProcess* c = c_.get();
  ASSERT_TRUE(WriteByName(*c, "kv", "warm").ok());

  ByNameWriter writer(*c, "kv");
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(etcd_->RestartEmpty().ok());
  // The holder publishes again in the new, empty etcd...
  const auto back = WaitNames("kv", h->peer_address(), absl::Seconds(30));
  ASSERT_TRUE(back.has_value()) << h->LogTail();
  std::cout << "re-published " << *back << " after etcd came back empty\n";
  // ...and the client's daemon has read the new etcd meanwhile.
  ASSERT_TRUE(WaitDirectoryConnected(*c));
  absl::SleepFor(absl::Seconds(1));
  writer.Stop();
  EXPECT_GT(writer.writes(), 20);
  for (const absl::Status& s : writer.failures()) ADD_FAILURE() << s;
  auto listed = Listed(*c, "kv");
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->node, h->peer_address());
}

// The other side of keeping vanished entries: a holder that died is gone
// from the cache as soon as etcd says its lease ended, not a TTL later.
TEST_F(DirectoryTrustTest, ADeadHoldersEntryGoesWhenItsLeaseEnds) {
  ASSERT_NO_FATAL_FAILURE(StartHolderAndClient("kv"));
  DaemonProcess* h = h_.get();
  DaemonProcess* c = c_.get();
  ASSERT_TRUE(WriteByName(*c, "kv", "warm").ok());
  h->Kill();
  // etcd expires the lease (and deletes the key) within the TTL...
  const absl::Time killed = absl::Now();
  while (!ValueOf("kv").empty() &&
         absl::Now() - killed < absl::Seconds(kLeaseTtlSeconds + 5)) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(ValueOf("kv"), "");
  // ...and the client's daemon, told of the delete, asks about the lease
  // and forgets the entry: its cache no longer answers for the name.
  auto cc = Connect(*c);
  ASSERT_TRUE(cc);
  absl::Status found = absl::OkStatus();
  for (int i = 0; i < 40 && found.ok(); ++i) {
    found = cc->LookupRegion("kv").status();
    if (found.ok()) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(found.code(), absl::StatusCode::kNotFound) << found;
}

// --- etcd's own authentication -----------------------------------------------

class DirectoryAuthTest : public DirectoryTrustTest {
 protected:
  // Users and roles, then authentication on: "rdmad" (a password) and
  // "node-h" (a certificate's common name) may read and write the
  // cluster's prefix; "stranger" and "intruder" only another one.
  void SetUpAuth() {
    ASSERT_NO_FATAL_FAILURE(Ctl({"user", "add", "root:rootpw"}));
    ASSERT_NO_FATAL_FAILURE(Ctl({"user", "grant-role", "root", "root"}));
    for (const auto& [role, prefix] :
         {std::pair{"rdmad", "/rdmad/"}, std::pair{"other", "/other/"}}) {
      ASSERT_NO_FATAL_FAILURE(Ctl({"role", "add", role}));
      ASSERT_NO_FATAL_FAILURE(Ctl({"role", "grant-permission", role,
                                   "--prefix=true", "readwrite", prefix}));
    }
    for (const auto& [user, password, role] :
         {std::tuple{"rdmad", "goodpw", "rdmad"},
          std::tuple{"node-h", "unused", "rdmad"},
          std::tuple{"stranger", "strangerpw", "other"},
          std::tuple{"intruder", "unused", "other"}}) {
      ASSERT_NO_FATAL_FAILURE(
          Ctl({"user", "add", absl::StrCat(user, ":", password)}));
      ASSERT_NO_FATAL_FAILURE(Ctl({"user", "grant-role", user, role}));
    }
    ASSERT_NO_FATAL_FAILURE(Ctl({"auth", "enable"}));
  }
  void Ctl(const std::vector<std::string>& args) {
    ProcessResult r = etcd_->Ctl(args);
    ASSERT_EQ(r.exit_code, 0) << absl::StrJoin(args, " ") << ": " << r.err;
  }

  std::string PasswordConfig(const std::string& user,
                             const std::string& password) {
    const std::string path =
        absl::StrCat(dir_.path(), "/", user, "-", password, ".pw");
    std::ofstream(path) << password << "\n";
    EXPECT_EQ(::chmod(path.c_str(), 0600), 0);
    return absl::StrCat("directory_user: \"", user, "\"\n",
                        "directory_password_file: \"", path, "\"\n");
  }

  // Waits until `daemon`'s directory says it is not connected because of
  // an error containing `what`; the error, or "" if that never came.
  std::string WaitRefused(const DaemonProcess& daemon,
                          const std::string& what) {
    auto client = Connect(daemon);
    if (client == nullptr) return "";
    for (int i = 0; i < 300; ++i) {
      auto status = client->GetStatus();
      if (status.ok() && status->directory.has_value() &&
          status->directory->state != DirectoryState::kConnected &&
          absl::StrContains(status->directory->last_error, what)) {
        return status->directory->last_error;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    return "";
  }
};

TEST_F(DirectoryAuthTest, UserAndPasswordTokenRenewalAndRefusals) {
  // Tokens that expire after 2 s unused: every call after a pause needs a
  // new one.
  StartEtcd({.auth_token_ttl_seconds = 2});
  ASSERT_NO_FATAL_FAILURE(SetUpAuth());
  etcd_->set_ctl_flags({"--user=root:rootpw"});
  auto h =
      StartDaemon("h", DirectoryConfig() + PasswordConfig("rdmad", "goodpw"));
  auto c =
      StartDaemon("c", DirectoryConfig() + PasswordConfig("rdmad", "goodpw"));
  ASSERT_TRUE(h && c);
  ASSERT_TRUE(WaitDirectoryConnected(*h)) << h->LogTail();
  ASSERT_TRUE(WaitDirectoryConnected(*c)) << c->LogTail();
  auto ch = Connect(*h);
  ASSERT_TRUE(ch);
  ASSERT_TRUE(ch->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(*c, "kv", "first").ok());
  // With etcd authentication there is no start-up warning.
  EXPECT_THAT(c->Log(), Not(HasSubstr(kWarning)));

  // Both tokens expire; the next calls authenticate again, unseen.
  absl::SleepFor(absl::Seconds(4));
  auto made = ch->CreateRegion("kv2", 4096, Access::kReadWrite);
  ASSERT_TRUE(made.ok()) << made.status();
  absl::SleepFor(absl::Seconds(4));
  auto cc = Connect(*c);
  ASSERT_TRUE(cc);
  auto fresh = cc->LookupRegion("kv2", /*fresh=*/true);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->region.node, h->peer_address());
  ASSERT_TRUE(WriteByName(*c, "kv2", "second").ok());
  EXPECT_EQ(ReadLocal(*h, "kv2", 6), "second");

  // A wrong password: said precisely, and nothing is published.
  auto wrong = StartDaemon(
      "wrong", DirectoryConfig() + PasswordConfig("rdmad", "badpw"));
  ASSERT_TRUE(wrong);
  std::string why = WaitRefused(*wrong, "invalid user ID or password");
  ASSERT_FALSE(why.empty()) << wrong->LogTail();
  EXPECT_THAT(why, HasSubstr("directory_password_file"));
  EXPECT_THAT(wrong->Log(), HasSubstr("refused this daemon"));
  auto cw = Connect(*wrong);
  ASSERT_TRUE(cw);
  auto refused = cw->CreateRegion("kv3", 4096, Access::kReadWrite);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("invalid user ID"));

  // A user without permission on the prefix.
  auto stranger = StartDaemon(
      "stranger", DirectoryConfig() + PasswordConfig("stranger", "strangerpw"));
  ASSERT_TRUE(stranger);
  why = WaitRefused(*stranger, "permission denied");
  ASSERT_FALSE(why.empty()) << stranger->LogTail();
  EXPECT_THAT(why, HasSubstr("'stranger'"));
  EXPECT_THAT(why, HasSubstr("/rdmad/"));
}

TEST_F(DirectoryAuthTest, ClientCertificates) {
  // etcd serves TLS with a certificate of the CA and requires client
  // certificates of it; with authentication on, a certificate's common
  // name is the user.
  ASSERT_TRUE(pki_.MakeCert("ca", "etcd-server"));
  ASSERT_TRUE(pki_.MakeCert("ca", "root"));
  StartEtcd({.cert_file = pki_.Path("etcd-server.pem"),
             .key_file = pki_.Path("etcd-server.key"),
             .client_ca_file = pki_.Path("ca.pem")});
  etcd_->set_ctl_flags({"--cacert=" + pki_.Path("ca.pem"),
                        "--cert=" + pki_.Path("root.pem"),
                        "--key=" + pki_.Path("root.key")});
  ASSERT_NO_FATAL_FAILURE(SetUpAuth());
  auto etcd_tls = [&](const std::string& name) {
    return absl::StrCat(
        "directory_tls_ca_file: \"", pki_.Path("ca.pem"),
        "\"\ndirectory_tls_cert_file: \"", pki_.Path(name + ".pem"),
        "\"\ndirectory_tls_key_file: \"", pki_.Path(name + ".key"), "\"\n");
  };
  auto h = StartDaemon("h", DirectoryConfig() + etcd_tls("node-h"));
  auto c = StartDaemon("c", DirectoryConfig() + etcd_tls("node-h"));
  ASSERT_TRUE(h && c);
  ASSERT_TRUE(WaitDirectoryConnected(*h)) << h->LogTail();
  ASSERT_TRUE(WaitDirectoryConnected(*c)) << c->LogTail();
  auto ch = Connect(*h);
  ASSERT_TRUE(ch);
  ASSERT_TRUE(ch->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(WriteByName(*c, "kv", "landed").ok());
  EXPECT_EQ(ReadLocal(*h, "kv", 6), "landed");
  EXPECT_THAT(c->Log(), Not(HasSubstr(kWarning)));

  // A certificate whose user may not touch the prefix.
  auto other = StartDaemon("other", DirectoryConfig() + etcd_tls("intruder"));
  ASSERT_TRUE(other);
  const std::string why = WaitRefused(*other, "permission denied");
  ASSERT_FALSE(why.empty()) << other->LogTail();
  EXPECT_THAT(why, HasSubstr("client certificate"));
}

}  // namespace
}  // namespace rdmad::testing
