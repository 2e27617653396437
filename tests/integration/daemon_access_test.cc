// Access control end to end, with real daemons on loopback:
//   - per-uid quotas (regions, pinned bytes) answer RESOURCE_EXHAUSTED
//     naming the quota;
//   - socket_group/socket_mode give the Unix sockets that owner and mode;
//   - a client of another uid (setuid nobody; needs root, skipped loudly
//     otherwise) is confined to what a region's mode grants;
//   - revocation: a peer's next access after unexport, re-export, free and
//     a chmod/chgrp that takes rights away fails with a precise status (by
//     name and by saved descriptor);
//   - peer_allow refuses Peer calls and TCP data connections from others;
//   - mutual TLS between daemons: two daemons with certificates from one
//     CA move data; a daemon without a certificate, or with one from
//     another CA, is refused.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/raw_session.h"
#include "tests/integration/test_pki.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kNobody = 65534;

constexpr char kPinnedBudget[] = "max_pinned_bytes: 1073741824\n";

std::string WriteConfig(const std::string& dir, const std::string& name,
                        const std::string& text) {
  const std::string path = absl::StrCat(dir, "/", name, ".conf");
  std::ofstream(path) << kPinnedBudget << text;
  return path;
}

std::unique_ptr<DaemonProcess> Start(const TempDir& dir, const std::string& name,
                                     const std::string& config_text = "") {
  DaemonOptions options;
  options.config = absl::StrCat(kPinnedBudget, config_text);
  return StartDaemonOrNull(dir, name, std::move(options));
}

// --- quotas -----------------------------------------------------------------

TEST(DaemonAccessTest, QuotasPerUidAreEnforcedAndNamed) {
  TempDir dir;
  auto d = Start(dir, "q",
                 "quota_regions_per_uid: 3\n"
                 "quota_pinned_bytes_per_uid: 1048576\n");
  ASSERT_TRUE(d);
  auto client = Connect(*d);
  ASSERT_TRUE(client);
  auto big = client->Allocate(2 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("quota_pinned_bytes_per_uid"));
  std::vector<Buffer> held;
  for (int i = 0; i < 3; ++i) {
    auto b = client->Allocate(4096);
    ASSERT_TRUE(b.ok()) << b.status();
    held.push_back(*std::move(b));
  }
  auto fourth = client->Allocate(4096);
  ASSERT_FALSE(fourth.ok());
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fourth.status().message(), HasSubstr("quota_regions_per_uid"));
  EXPECT_THAT(fourth.status().message(), HasSubstr("raise"));
  // Named regions count too; freeing gives room back.
  ASSERT_TRUE(held.back().Release().ok());
  held.pop_back();
  ASSERT_TRUE(client->CreateRegion("named", 4096, Access::kNone).ok());
  EXPECT_EQ(client->CreateRegion("named2", 4096, Access::kNone).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(DaemonAccessTest, TransfersInFlightQuotaRefusesTheNextOne) {
  TempDir dir;
  auto a = Start(dir, "qa", "quota_transfers_per_uid: 2\n");
  auto b = Start(dir, "qb");
  ASSERT_TRUE(a && b);
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  ASSERT_TRUE(cb->CreateRegion("kv", 1 << 20, Access::kReadWrite).ok());
  auto ca = Client::Connect({.socket_path = a->socket(),
                             .timeout = absl::Seconds(60)});
  ASSERT_TRUE(ca.ok());
  auto buf = (*ca)->Allocate(1 << 20);
  ASSERT_TRUE(buf.ok());
  // Resolve and connect first, so the held transfers are posted at once.
  ASSERT_TRUE((*ca)->Write(*buf, 0, Remote(*b, "kv"), 0, 4096).ok());

  // B stops: two transfers hang in flight (posted, unanswered). Each of
  // their threads writes once first, so that what it needs before posting
  // (its queue, the remote handle: a Peer call to B) is there already.
  std::vector<std::thread> held;
  std::atomic<int> held_ok{0};
  std::atomic<int> warm{0};
  absl::Notification stopped;
  for (int i = 0; i < 2; ++i) {
    held.emplace_back([&] {
      if ((*ca)->Write(*buf, 0, Remote(*b, "kv"), 0, 4096).ok()) warm++;
      stopped.WaitForNotification();
      if ((*ca)->Write(*buf, 0, Remote(*b, "kv"), 0, 4096).ok()) held_ok++;
    });
  }
  const absl::Time warm_by = absl::Now() + absl::Seconds(60);
  while (warm.load() < 2 && absl::Now() < warm_by) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Every thread of B stopped before the held writes go: one still running
  // could answer them, and they would not be held.
  EXPECT_TRUE(b->Pause()) << "B did not stop";
  stopped.Notify();
  const absl::Time posted_by = absl::Now() + absl::Seconds(20);
  uint32_t outstanding = 0;
  while (absl::Now() < posted_by) {
    auto qps = (*ca)->ListQps();
    outstanding = 0;
    if (qps.ok()) {
      for (const auto& q : *qps) outstanding += q.outstanding;
    }
    if (outstanding >= 2) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(outstanding, 2u);
  auto third = (*ca)->Write(*buf, 0, Remote(*b, "kv"), 0, 4096);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted)
      << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("quota_transfers_per_uid"));
  b->Resume();
  for (auto& t : held) t.join();
  EXPECT_EQ(held_ok.load(), 2);
  // The slots came back.
  EXPECT_TRUE((*ca)->Write(*buf, 0, Remote(*b, "kv"), 0, 4096).ok());
}

// --- sockets ----------------------------------------------------------------

TEST(DaemonAccessTest, SocketGroupAndModeApplyToBothSockets) {
  TempDir dir;
  const gid_t gid = ::getgid();
  auto d = Start(dir, "s",
                 absl::StrCat("socket_mode: \"0660\"\nsocket_group: \"", gid,
                              "\"\n"));
  ASSERT_TRUE(d);
  for (const std::string& path : {d->socket(), d->socket() + ".session"}) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, 0660u) << path;
    EXPECT_EQ(st.st_gid, gid) << path;
  }
  auto client = Connect(*d);
  ASSERT_TRUE(client);
  EXPECT_TRUE(client->GetStatus().ok());

  // A group that does not exist is a startup error that says so.
  auto bad = RunProcess({RdmadBinary(), "--socket", dir.path() + "/x.sock",
                         "--peer_listen", "127.0.0.1:0", "--transport", "tcp",
                         "--config",
                         WriteConfig(dir.path(), "bad",
                                     "socket_group: \"no-such-group-rdmad\"\n")},
                        "", absl::Seconds(30));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err + bad.out, HasSubstr("no-such-group-rdmad"));
}

TEST(DaemonAccessTest, RdmactlAllocSetsModeAndGroupAndListShowsThem) {
  TempDir dir;
  auto d = Start(dir, "r");
  ASSERT_TRUE(d);
  const gid_t gid = ::getgid();
  auto ok = RunProcess({RdmactlBinary(), "--socket", d->socket(), "alloc",
                        "shared", "4K", "--mode", "0640", "--group",
                        absl::StrCat(gid)});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("mode 0640"));
  auto bad = RunProcess({RdmactlBinary(), "--socket", d->socket(), "alloc",
                         "x", "4K", "--mode", "0755"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("read (4) and write (2)"));
  bad = RunProcess({RdmactlBinary(), "--socket", d->socket(), "alloc", "x",
                    "4K", "--mode", "rw"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("must be octal"));
  auto list = RunProcess({RdmactlBinary(), "--socket", d->socket(), "regions"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("MODE"));
  EXPECT_THAT(list.out, HasSubstr("0640"));
  auto client = Connect(*d);
  ASSERT_TRUE(client);
  auto regions = client->ListRegions();
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ(regions->size(), 1u);
  EXPECT_EQ((*regions)[0].mode, 0640u);
  EXPECT_EQ((*regions)[0].owner_gid, gid);
}

// --- another uid ------------------------------------------------------------

class OtherUidTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "\n\n*** SKIPPED: confining a client of another uid "
                      "needs root to setuid(nobody); run the suite as root "
                      "(CI does) to cover it. ***\n";
    }
    // nobody must be able to reach the socket inside our private temp dir.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    daemon_ = Start(dir_, "u");
    ASSERT_TRUE(daemon_);
    owner_ = Connect(*daemon_);
    ASSERT_TRUE(owner_);
  }

  // Runs the helper as nobody (gid nogroup plus `supplementary` groups);
  // returns "CODE MESSAGE".
  std::string AsNobody(const std::vector<std::string>& args,
                       const std::string& supplementary = "") {
    std::vector<std::string> argv = {
        ACCESS_PROBE_PATH, daemon_->socket(), absl::StrCat(kNobody),
        absl::StrCat(kNobody, supplementary.empty() ? "" : ",", supplementary)};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = RunProcess(argv, "", absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  static int Code(const std::string& line) { return std::atoi(line.c_str()); }

  // rdmactl ARGS as nobody (gid nogroup, supplementary `groups` if any).
  ProcessResult RdmactlAsNobody(const std::vector<std::string>& args,
                                const std::string& groups = "") {
    std::vector<std::string> argv = {
        "/usr/bin/setpriv", absl::StrCat("--reuid=", kNobody),
        absl::StrCat("--regid=", kNobody)};
    argv.push_back(groups.empty() ? "--clear-groups"
                                  : absl::StrCat("--groups=", groups));
    argv.push_back(RdmactlBinary());
    argv.push_back("--socket");
    argv.push_back(daemon_->socket());
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, "", absl::Seconds(60));
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> owner_;
};

TEST_F(OtherUidTest, ASocketThatIsNotOpenToTheUserSaysSoAndHowToJoin) {
  // The package's sockets: 0660, group rdma (here root's group), and a
  // user outside it.
  auto closed = Start(dir_, "closed", "socket_mode: \"0660\"\n");
  ASSERT_TRUE(closed);
  ProcessResult r = RunProcess(
      {"/usr/bin/setpriv", absl::StrCat("--reuid=", kNobody),
       absl::StrCat("--regid=", kNobody), "--clear-groups", RdmactlBinary(),
       "--socket", closed->socket(), "status"},
      "", absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 5) << r.err;  // permission denied, not unreachable
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("rdmad at ", closed->socket(),
                                            ": Permission denied")));
  EXPECT_THAT(r.err, HasSubstr("usermod -aG rdma"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr(".session")));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("Is rdmad running")));
}

TEST_F(OtherUidTest, QueuesOfOtherUsersAreNotListed) {
  auto queue = owner_->OpenQueue();
  ASSERT_TRUE(queue.ok()) << queue.status();
  ProcessResult theirs = RdmactlAsNobody({"queues", "--json"});
  EXPECT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_THAT(theirs.out, HasSubstr("\"queues\": []")) << theirs.out;
  auto mine = owner_->ListQueues();  // root's: every queue
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, (*queue)->id());
}

TEST_F(OtherUidTest, ConfinedToWhatTheModeGrants) {
  // Root's private region, a world-readable one, and an exported target
  // that everyone may write (a target on this daemon needs its own mode;
  // see NoRouteToThisDaemonGivesMoreThanTheMode).
  ASSERT_TRUE(owner_->CreateRegion("secret", 4096, Access::kRead).ok());
  RegionOptions everyone;
  everyone.mode = 0666;
  ASSERT_TRUE(
      owner_->CreateRegion("target", 4096, Access::kReadWrite, everyone).ok());
  auto shared = RunProcess({ACCESS_PROBE_PATH, daemon_->socket(), "-", "-",
                            "alloc", "public", "4096", "0644"});
  ASSERT_EQ(Code(shared.out), 0) << shared.out;

  // Private (0600): nothing at all.
  std::string out = AsNobody({"map", "secret"});
  EXPECT_EQ(Code(out), 7) << out;  // PERMISSION_DENIED
  EXPECT_THAT(out, HasSubstr("uid 65534 may not read"));
  out = AsNobody({"free", "secret"});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("only that user or root"));
  out = AsNobody({"export", "secret"});
  EXPECT_EQ(Code(out), 7) << out;
  out = AsNobody({"descriptor", "secret"});
  EXPECT_EQ(Code(out), 7) << out;
  out = AsNobody({"send", "secret", "target"});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("may not read"));

  // World-readable (0644): may be sent from and mapped read-only (for
  // real: not writable, not upgradable), not received into.
  out = AsNobody({"send", "public", "target"});
  EXPECT_EQ(Code(out), 0) << out;
  out = AsNobody({"recv", "public", "target"});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("may not write"));
  out = AsNobody({"map", "public"});
  EXPECT_EQ(out, "0 r read-only\n");

  // Its own regions are its own: created with its uid, freeable by it.
  out = AsNobody({"alloc", "nobodys", "4096", "0600"});
  EXPECT_EQ(Code(out), 0) << out;
  auto list = owner_->ListRegions();
  ASSERT_TRUE(list.ok());
  bool found = false;
  for (const auto& r : *list) {
    if (r.name != "nobodys") continue;
    found = true;
    EXPECT_EQ(r.owner_uid, kNobody);
    EXPECT_EQ(r.mode, 0600u);
  }
  EXPECT_TRUE(found);
  // And root still reaches everything.
  EXPECT_TRUE(owner_->MapRegion("nobodys").ok());
  EXPECT_TRUE(owner_->FreeRegion("nobodys").ok());
}

TEST_F(OtherUidTest, GroupBitsApplyThroughPrimaryAndSupplementaryGroups) {
  // Group 4242 (members: whoever has it as a supplementary group), group
  // nogroup (nobody's primary group); both group-rw, nothing for others.
  RegionOptions g4242;
  g4242.mode = 0660;
  g4242.group = 4242;
  ASSERT_TRUE(owner_->CreateRegion("team", 4096, Access::kNone, g4242).ok());
  RegionOptions nogroup;
  nogroup.mode = 0060;
  nogroup.group = kNobody;
  ASSERT_TRUE(owner_->CreateRegion("nogroup", 4096, Access::kNone, nogroup).ok());

  std::string out = AsNobody({"map", "team"});
  EXPECT_EQ(Code(out), 7) << out;
  // The kernel reports supplementary groups on the session socket.
  out = AsNobody({"map", "team"}, "4242");
  EXPECT_EQ(out, "0 rw writable\n");
  out = AsNobody({"map", "team"}, "4243,4244");
  EXPECT_EQ(Code(out), 7) << out;
  out = AsNobody({"map", "nogroup"});
  EXPECT_EQ(Code(out), 0) << out;
  // Group members use, but do not manage.
  out = AsNobody({"free", "team"}, "4242");
  EXPECT_EQ(Code(out), 7) << out;
}

// A session token is useless in any process but the one it was issued to:
// the daemon binds each Local call to the kernel-verified credentials of the
// connection it arrived on.
TEST_F(OtherUidTest, SessionTokenIsUselessInAnotherProcess) {
  RegionOptions everyone;
  everyone.mode = 0666;
  ASSERT_TRUE(
      owner_->CreateRegion("target", 4096, Access::kReadWrite, everyone).ok());
  // The victim: root's session with a session buffer.
  auto victim = RawSession::Open(daemon_->socket());
  ASSERT_TRUE(victim.ok()) << victim.status();
  uint64_t buffer_id = 0;
  {
    grpc::ClientContext ctx;
    (*victim)->Authorize(&ctx);
    v1::AllocateBufferRequest request;
    request.set_size(4096);
    v1::AllocateBufferResponse response;
    ASSERT_TRUE(
        (*victim)->stub().AllocateBuffer(&ctx, request, &response).ok());
    buffer_id = response.region().id();
  }
  const std::string token = "token=" + (*victim)->token();
  const std::string id = absl::StrCat("#", buffer_id);
  // Another uid with the stolen token: a WRITE sourced from the victim's
  // buffer is refused, and so is every other call that takes a session.
  std::string out = AsNobody({token, "send", id, "target"});
  EXPECT_EQ(Code(out), 7) << out;  // PERMISSION_DENIED
  EXPECT_THAT(out, HasSubstr("not issued to this process"));
  out = AsNobody({token, "free", id});
  EXPECT_EQ(Code(out), 7) << out;
  out = AsNobody({token, "list"});
  EXPECT_EQ(Code(out), 7) << out;
  // The same uid in another process: refused all the same.
  auto same_uid = RunProcess({ACCESS_PROBE_PATH, daemon_->socket(), "-",
                              "-", token, "send", id, "target"});
  EXPECT_EQ(Code(same_uid.out), 7) << same_uid.out << same_uid.err;
  // A made-up token stays UNAUTHENTICATED.
  out = AsNobody(
      {"token=0123456789abcdef0123456789abcdef", "send", id, "target"});
  EXPECT_EQ(Code(out), 16) << out;
  // Without the token, nobody's own session may not use the buffer either.
  out = AsNobody({"send", id, "target"});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("another client session"));
  // The victim's own process still can.
  grpc::ClientContext ctx;
  (*victim)->Authorize(&ctx);
  v1::TransferRequest request;
  request.mutable_op()->mutable_local()->set_id(buffer_id);
  request.mutable_op()->mutable_remote()->set_name("target");
  request.mutable_op()->set_length(16);
  v1::TransferResponse response;
  grpc::Status st = (*victim)->stub().Write(&ctx, request, &response);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// Local users never gain through a route to this same daemon (empty peer,
// its own Peer address, an alias of it, a descriptor it issued) what the
// region's mode denies them, however the region is exported.
TEST_F(OtherUidTest, NoRouteToThisDaemonGivesMoreThanTheMode) {
  ASSERT_TRUE(owner_->CreateRegion("secret", 4096, Access::kReadWrite).ok());
  RegionOptions readable;
  readable.mode = 0644;
  ASSERT_TRUE(
      owner_->CreateRegion("pub", 4096, Access::kReadWrite, readable).ok());
  auto secret = owner_->MapRegion("secret");
  auto pub = owner_->MapRegion("pub");
  ASSERT_TRUE(secret.ok() && pub.ok());
  std::memset(secret->data(), 'S', 4096);
  std::memset(pub->data(), 'P', 4096);
  std::string out = AsNobody({"alloc", "mine", "4096", "0600"});
  ASSERT_EQ(Code(out), 0) << out;
  // Descriptors root hands out (nobody may not get them itself: "pub" is
  // exported rw and nobody may not write it).
  auto secret_descriptor = owner_->GetDescriptor("secret");
  auto pub_descriptor = owner_->GetDescriptor("pub");
  ASSERT_TRUE(secret_descriptor.ok() && pub_descriptor.ok());
  out = AsNobody({"descriptor", "pub"});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("grants remote write"));

  const std::string self = daemon_->peer_address();
  const std::string alias =
      "localhost" + self.substr(self.rfind(':'));  // same daemon, other name
  struct Route {
    std::string what;
    std::vector<std::string> send_secret, recv_secret, send_pub, recv_pub;
  };
  const std::vector<Route> routes = {
      {"empty peer",
       {"send", "mine", "secret"},
       {"recv", "mine", "secret"},
       {"send", "mine", "pub"},
       {"recv", "mine", "pub"}},
      {"own peer address",
       {"send", "mine", "secret", self},
       {"recv", "mine", "secret", self},
       {"send", "mine", "pub", self},
       {"recv", "mine", "pub", self}},
      {"alias of the peer address",
       {"send", "mine", "secret", alias},
       {"recv", "mine", "secret", alias},
       {"send", "mine", "pub", alias},
       {"recv", "mine", "pub", alias}},
      {"descriptor",
       {"send-descriptor", "mine", *secret_descriptor},
       {"recv-descriptor", "mine", *secret_descriptor},
       {"send-descriptor", "mine", *pub_descriptor},
       {"recv-descriptor", "mine", *pub_descriptor}},
  };
  for (const Route& route : routes) {
    SCOPED_TRACE(route.what);
    out = AsNobody(route.send_secret);
    EXPECT_EQ(Code(out), 7) << out;
    out = AsNobody(route.recv_secret);
    EXPECT_EQ(Code(out), 7) << out;
    out = AsNobody(route.send_pub);
    EXPECT_EQ(Code(out), 7) << out;
    // Reading a world-readable region is what its mode grants.
    out = AsNobody(route.recv_pub);
    EXPECT_EQ(Code(out), 0) << out;
  }
  // Nothing landed, nothing leaked.
  EXPECT_EQ(std::string(secret->data(), 4096), std::string(4096, 'S'));
  EXPECT_EQ(std::string(pub->data(), 4096), std::string(4096, 'P'));
  auto mine = owner_->MapRegion("mine");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(std::string(mine->data(), 4096).find('S'), std::string::npos);
  // Root, whom the modes allow everything, may use every route.
  auto buf = owner_->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  RemoteRegion via_alias;
  via_alias.peer = alias;
  via_alias.name = "secret";
  EXPECT_TRUE(owner_->Write(*buf, 0, via_alias, 0, 16).ok());
  RemoteRegion via_descriptor;
  via_descriptor.descriptor = *secret_descriptor;
  EXPECT_TRUE(owner_->Write(*buf, 0, via_descriptor, 0, 16).ok());
}

// The exporter decides with its access list: which peer daemons, and which
// uids they act for, may resolve (and so reach) an export.
TEST_F(OtherUidTest, ExportAccessListAdmitsOnlyItsPrincipals) {
  auto exporter = Start(dir_, "exporter");
  ASSERT_TRUE(exporter);
  auto ce = Connect(*exporter);
  ASSERT_TRUE(ce);
  ASSERT_TRUE(ce->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  auto view = ce->MapRegion("kv");
  ASSERT_TRUE(view.ok());
  std::memset(view->data(), 'K', 4096);
  std::string out = AsNobody({"alloc", "mine", "4096", "0600"});
  ASSERT_EQ(Code(out), 0) << out;
  const std::string peer = exporter->peer_address();
  auto buf = owner_->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  auto root_write = [&] {
    RemoteRegion r;
    r.peer = peer;
    r.name = "kv";
    return owner_->Write(*buf, 0, r, 0, 16).status();
  };
  auto export_to = [&](const std::string& allow) {
    ProcessResult r =
        RunProcess({RdmactlBinary(), "--socket", exporter->socket(), "export",
                    "kv", "rw", "--allow", allow});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };

  // Another address only: refused at Resolve, naming the list.
  EXPECT_THAT(export_to("192.0.2.1"), HasSubstr("exported rw to 192.0.2.1"));
  absl::Status w = root_write();
  EXPECT_EQ(w.code(), absl::StatusCode::kPermissionDenied) << w;
  EXPECT_THAT(w.message(), HasSubstr("does not admit peer 127.0.0.1"));
  // This daemon's address, root only: root passes, nobody does not.
  export_to("0@127.0.0.1");
  EXPECT_TRUE(root_write().ok());
  out = AsNobody({"send", "mine", "kv", peer});
  EXPECT_EQ(Code(out), 7) << out;
  EXPECT_THAT(out, HasSubstr("acting for uid 65534"));
  // Nobody only: the other way round (each uid resolves for itself).
  export_to(absl::StrCat(kNobody, "@127.0.0.0/8"));
  out = AsNobody({"send", "mine", "kv", peer});
  EXPECT_EQ(Code(out), 0) << out;
  EXPECT_EQ(root_write().code(), absl::StatusCode::kPermissionDenied);
  // Malformed entries are refused with the entry named.
  ProcessResult bad =
      RunProcess({RdmactlBinary(), "--socket", exporter->socket(), "export",
                  "kv", "rw", "--allow", "10.0.0.0/33"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("10.0.0.0/33"));
  // The list shows in listings, and re-exporting without one opens it.
  auto regions = ce->ListRegions();
  ASSERT_TRUE(regions.ok());
  ASSERT_EQ((*regions)[0].export_allow.size(), 1u);
  EXPECT_EQ((*regions)[0].export_allow[0].uid, kNobody);
  ASSERT_TRUE(ce->Export("kv", Access::kReadWrite).ok());
  EXPECT_TRUE(root_write().ok());
}

// rdmactl as another user: a region it may only read is mapped read-only,
// so get and copy work and put is refused; only the owner changes modes.
TEST_F(OtherUidTest, RdmactlUsesWhatTheModeGrantsAndOnlyOwnersChmod) {
  RegionOptions readable;
  readable.mode = 0644;
  ASSERT_TRUE(owner_->CreateRegion("public", 4096, Access::kNone, readable).ok());
  {
    auto view = owner_->MapRegion("public");
    ASSERT_TRUE(view.ok()) << view.status();
    std::memcpy(view->data(), "hello", 5);
  }
  ProcessResult get = RdmactlAsNobody({"get", "public", "--length", "5"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.out, "hello");
  ASSERT_EQ(RdmactlAsNobody({"alloc", "mine", "4K"}).exit_code, 0);
  ProcessResult copy = RdmactlAsNobody({"copy", "public", "mine", "--length", "5"});
  EXPECT_EQ(copy.exit_code, 0) << copy.err;
  ProcessResult put = RdmactlAsNobody({"put", "-", "public"});
  EXPECT_EQ(put.exit_code, 5) << put.err;  // PERMISSION_DENIED
  EXPECT_THAT(put.err, HasSubstr("read-only for you"));

  ProcessResult chmod = RdmactlAsNobody({"chmod", "public", "0666"});
  EXPECT_EQ(chmod.exit_code, 5) << chmod.err;
  EXPECT_THAT(chmod.err, HasSubstr("only that user or root"));
  EXPECT_EQ(RdmactlAsNobody({"chgrp", "public", absl::StrCat(kNobody)}).exit_code, 5);

  // The owner takes read away: nobody reads nothing now.
  ASSERT_TRUE(owner_->SetRegionPermissions("public", 0600, std::nullopt).ok());
  get = RdmactlAsNobody({"get", "public", "--length", "5"});
  EXPECT_EQ(get.exit_code, 5) << get.err;
  EXPECT_THAT(get.err, HasSubstr("may not read"));
  // ... and gives it to a group instead.
  auto changed = owner_->SetRegionPermissions("public", 0640, 4242);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->owner_gid, 4242u);
  EXPECT_EQ(RdmactlAsNobody({"get", "public", "--length", "5"}).exit_code, 5);
  get = RdmactlAsNobody({"get", "public", "--length", "5"}, "4242");
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.out, "hello");

  // Owners change their own regions' modes, but not to another's group.
  EXPECT_EQ(RdmactlAsNobody({"chmod", "mine", "0644"}).exit_code, 0);
  ProcessResult foreign = RdmactlAsNobody({"chgrp", "mine", "4242"});
  EXPECT_EQ(foreign.exit_code, 5) << foreign.err;
  EXPECT_THAT(foreign.err, HasSubstr("is not in group 4242"));
  EXPECT_EQ(RdmactlAsNobody({"chgrp", "mine", "4242"}, "4242").exit_code, 0);
}

// rdmactl stat through the daemon's own peer address answers a local user
// with what the region's mode leaves of its export, as a transfer by that
// route gets (NoRouteToThisDaemonGivesMoreThanTheMode).
TEST_F(OtherUidTest, StatThroughTheOwnPeerAddressShowsWhatTheModeLeaves) {
  ASSERT_TRUE(owner_->CreateRegion("secret", 4096, Access::kReadWrite).ok());
  RegionOptions readable;
  readable.mode = 0644;
  ASSERT_TRUE(
      owner_->CreateRegion("pub", 4096, Access::kReadWrite, readable).ok());
  const std::string self = daemon_->peer_address();
  ProcessResult pub =
      RdmactlAsNobody({"stat", absl::StrCat(self, "/pub"), "--json"});
  EXPECT_EQ(pub.exit_code, 0) << pub.err;
  EXPECT_THAT(pub.out, HasSubstr("\"export\": \"r\""));
  ProcessResult secret = RdmactlAsNobody({"stat", absl::StrCat(self, "/secret")});
  EXPECT_EQ(secret.exit_code, 5) << secret.err;  // PERMISSION_DENIED
  EXPECT_THAT(secret.err, HasSubstr("uid 65534 may neither read nor write"));
  // Root, whom the modes allow everything, sees the whole export.
  ProcessResult root = RunProcess({RdmactlBinary(), "--socket",
                                   daemon_->socket(), "stat",
                                   absl::StrCat(self, "/secret"), "--json"});
  EXPECT_EQ(root.exit_code, 0) << root.err;
  EXPECT_THAT(root.out, HasSubstr("\"export\": \"rw\""));
}

// --- revocation -------------------------------------------------------------

// Daemon A's client reaches the regions of daemon B, by name and by
// descriptor.
class PeerRevocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = Start(dir_, "a");
    b_ = Start(dir_, "b");
    ASSERT_TRUE(a_ && b_);
    ca_ = Connect(*a_);
    cb_ = Connect(*b_);
    ASSERT_TRUE(ca_ && cb_);
  }

  // B's region `name` as a descriptor from B's client (GetDescriptor).
  RemoteRegion DescriptorOf(const std::string& name) {
    auto descriptor = cb_->GetDescriptor(name);
    EXPECT_TRUE(descriptor.ok()) << descriptor.status();
    RemoteRegion by_descriptor;
    by_descriptor.descriptor = descriptor.ok() ? *descriptor : "";
    return by_descriptor;
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> a_, b_;
  std::unique_ptr<Client> ca_, cb_;
};

TEST_F(PeerRevocationTest, UnexportReexportAndFreeRevokePeersAccess) {
  ASSERT_TRUE(cb_->CreateRegion("kv", 8192, Access::kReadWrite).ok());
  const RemoteRegion by_descriptor = DescriptorOf("kv");
  auto buf = ca_->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  std::memset(buf->data(), 0x5a, 4096);
  ASSERT_TRUE(ca_->Write(*buf, 0, Remote(*b_, "kv"), 0, 4096).ok());
  ASSERT_TRUE(ca_->Write(*buf, 0, by_descriptor, 0, 4096).ok());

  // Unexport: by name NOT_FOUND (resolve fails), by descriptor NOT_FOUND.
  ASSERT_TRUE(cb_->Export("kv", Access::kNone).ok());
  auto w = ca_->Write(*buf, 0, Remote(*b_, "kv"), 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("no exported region named 'kv'"));
  w = ca_->Write(*buf, 0, by_descriptor, 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("not exported"));

  // Re-export read-only: the old descriptor's key is dead, the name works
  // with the new grant only.
  ASSERT_TRUE(cb_->Export("kv", Access::kRead).ok());
  w = ca_->Read(*buf, 0, by_descriptor, 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("key does not match"));
  EXPECT_TRUE(ca_->Read(*buf, 0, Remote(*b_, "kv"), 0, 4096).ok());
  w = ca_->Write(*buf, 0, Remote(*b_, "kv"), 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
  const RemoteRegion fresh_descriptor = DescriptorOf("kv");

  // Free: both ways NOT_FOUND.
  ASSERT_TRUE(cb_->FreeRegion("kv").ok());
  w = ca_->Read(*buf, 0, fresh_descriptor, 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
  w = ca_->Read(*buf, 0, Remote(*b_, "kv"), 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound) << w.status();
}

// A chmod or chgrp that takes rights away ends the export's keys, as a
// re-export does: a descriptor handed out before (GetDescriptor needs the
// local rights the export grants) stops working, wherever it went; peers
// that name the region resolve it again by themselves. Adding rights
// changes no key.
TEST_F(PeerRevocationTest, ChmodThatTakesRightsAwayEndsTheExportsKeys) {
  ASSERT_TRUE(
      cb_->CreateRegion("kv", 8192, Access::kReadWrite, {.mode = 0666}).ok());
  RemoteRegion by_descriptor = DescriptorOf("kv");
  auto buf = ca_->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(ca_->Write(*buf, 0, by_descriptor, 0, 4096).ok());
  ASSERT_TRUE(ca_->Write(*buf, 0, Remote(*b_, "kv"), 0, 4096).ok());

  // Others lose write: the descriptor is dead, the name works.
  ASSERT_TRUE(cb_->SetRegionPermissions("kv", 0664, std::nullopt).ok());
  auto w = ca_->Write(*buf, 0, by_descriptor, 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("key does not match"));
  EXPECT_TRUE(ca_->Write(*buf, 0, Remote(*b_, "kv"), 0, 4096).ok());

  // Others get write back: nothing is taken away, the keys stay.
  by_descriptor = DescriptorOf("kv");
  ASSERT_TRUE(cb_->SetRegionPermissions("kv", 0666, std::nullopt).ok());
  EXPECT_TRUE(ca_->Write(*buf, 0, by_descriptor, 0, 4096).ok());

  // A new group takes the group's rights from the old one's members.
  ASSERT_TRUE(cb_->SetRegionPermissions("kv", std::nullopt, 4242).ok());
  w = ca_->Write(*buf, 0, by_descriptor, 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
}

// --- peer allow-list --------------------------------------------------------

TEST(DaemonAccessTest, PeerAllowListRefusesOthers) {
  TempDir dir;
  // b allows only an address that is not loopback; c allows loopback.
  auto a = Start(dir, "a");
  auto b = Start(dir, "b", "peer_allow: \"192.0.2.1\"\n");
  auto c = Start(dir, "c", "peer_allow: \"127.0.0.0/8\"\npeer_allow: \"::1\"\n");
  ASSERT_TRUE(a && b && c);
  auto ca = Connect(*a);
  auto cb = Connect(*b);
  auto cc = Connect(*c);
  ASSERT_TRUE(ca && cb && cc);
  ASSERT_TRUE(cb->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  ASSERT_TRUE(cc->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  auto buf = ca->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  auto w = ca->Write(*buf, 0, Remote(*b, "kv"), 0, 100);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("peer_allow"));
  EXPECT_TRUE(ca->Write(*buf, 0, Remote(*c, "kv"), 0, 100).ok());
  // Listing and sizing exports go through the same gate.
  auto listed = ca->ListRemoteRegions(b->peer_address());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kPermissionDenied)
      << listed.status();
  EXPECT_THAT(listed.status().message(), HasSubstr("peer_allow"));
  EXPECT_EQ(ca->StatRegion(Remote(*b, "kv")).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto allowed = ca->ListRemoteRegions(c->peer_address());
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  ASSERT_EQ(allowed->size(), 1u);
  EXPECT_EQ((*allowed)[0].name, "kv");

  // A raw TCP connection to b's data listener is closed before any reply.
  const int port = DataPort(*b);
  ASSERT_GT(port, 0) << b->LogTail();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char byte = 0;
  const ssize_t n = ::recv(fd, &byte, 1, 0);
  EXPECT_LE(n, 0) << "the data listener kept a connection peer_allow refuses";
  ::close(fd);
  EXPECT_THAT(b->LogTail(), HasSubstr("not in peer_allow"));
}

// --- mutual TLS -------------------------------------------------------------

class MutualTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.MakeCa("ca"));
    ASSERT_TRUE(pki_.MakeCa("rogue"));
    ASSERT_TRUE(pki_.MakeCert("ca", "d1"));
    ASSERT_TRUE(pki_.MakeCert("ca", "d2"));
    ASSERT_TRUE(pki_.MakeCert("rogue", "d3"));
  }

  bool MakeCert(const std::string& ca, const std::string& name) {
    return pki_.MakeCert(ca, name);
  }
  std::string P(const std::string& name) { return pki_.Path(name); }
  std::string TlsConfig(const std::string& ca, const std::string& name) {
    return pki_.TlsConfig(ca, name);
  }

  TempDir dir_;
  TestPki pki_{dir_.path() + "/pki"};
};

TEST_F(MutualTlsTest, DaemonsWithCertsTransferAndOthersAreRefused) {
  auto d1 = Start(dir_, "d1", TlsConfig("ca", "d1"));
  auto d2 = Start(dir_, "d2", TlsConfig("ca", "d2"));
  auto plain = Start(dir_, "plain");
  auto rogue = Start(dir_, "rogue", TlsConfig("rogue", "d3"));
  ASSERT_TRUE(d1 && d2 && plain && rogue);
  auto c1 = Connect(*d1);
  auto c2 = Connect(*d2);
  auto cp = Connect(*plain);
  auto cr = Connect(*rogue);
  ASSERT_TRUE(c1 && c2 && cp && cr);
  ASSERT_TRUE(c2->CreateRegion("kv", 1 << 20, Access::kReadWrite).ok());
  auto view = c2->MapRegion("kv");
  ASSERT_TRUE(view.ok());

  auto buf = c1->Allocate(1 << 20);
  ASSERT_TRUE(buf.ok());
  for (size_t i = 0; i < buf->size(); ++i) buf->data()[i] = static_cast<char>(i * 7);
  auto w = c1->Write(*buf, 0, Remote(*d2, "kv"), 0, 1 << 20);
  ASSERT_TRUE(w.ok()) << w.status() << "\n" << d1->LogTail() << d2->LogTail();
  EXPECT_EQ(std::memcmp(view->data(), buf->data(), 1 << 20), 0);

  // No client certificate (plaintext gRPC to a TLS port): refused.
  auto pbuf = cp->Allocate(4096);
  ASSERT_TRUE(pbuf.ok());
  auto refused = cp->Write(*pbuf, 0, Remote(*d2, "kv"), 0, 4096);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  // A certificate from another CA: refused.
  auto rbuf = cr->Allocate(4096);
  ASSERT_TRUE(rbuf.ok());
  refused = cr->Write(*rbuf, 0, Remote(*d2, "kv"), 0, 4096);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable)
      << refused.status();
  // Neither touched the region.
  EXPECT_EQ(std::memcmp(view->data(), buf->data(), 1 << 20), 0);

  // Inspection of a peer's exports uses the same certificates.
  auto listed = c1->ListRemoteRegions(d2->peer_address());
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, 1u << 20);
  EXPECT_EQ(cp->ListRemoteRegions(d2->peer_address()).status().code(),
            absl::StatusCode::kUnavailable);
}

// With mutual TLS, an export's access list can name peers by their
// verified certificate: the calling daemon's own address does not matter.
TEST_F(MutualTlsTest, AccessListNamesPeersByCertificate) {
  ASSERT_TRUE(MakeCert("ca", "d4"));
  auto d1 = Start(dir_, "d1", TlsConfig("ca", "d1"));
  auto d2 = Start(dir_, "d2", TlsConfig("ca", "d2"));
  auto d4 = Start(dir_, "d4", TlsConfig("ca", "d4"));
  ASSERT_TRUE(d1 && d2 && d4);
  auto c1 = Connect(*d1);
  auto c2 = Connect(*d2);
  auto c4 = Connect(*d4);
  ASSERT_TRUE(c1 && c2 && c4);
  ASSERT_TRUE(c2->CreateRegion("kv", 4096, Access::kReadWrite).ok());
  auto grant = ExportGrant::Parse("cert:d1");
  ASSERT_TRUE(grant.ok());
  ASSERT_TRUE(c2->Export("kv", Access::kReadWrite, {*grant}).ok());
  auto b1 = c1->Allocate(4096);
  auto b4 = c4->Allocate(4096);
  ASSERT_TRUE(b1.ok() && b4.ok());
  auto w = c1->Write(*b1, 0, Remote(*d2, "kv"), 0, 4096);
  EXPECT_TRUE(w.ok()) << w.status();
  // d4 has a certificate from the same CA, but it is not on the list; nor
  // is its address any help (it is the same as d1's).
  w = c4->Write(*b4, 0, Remote(*d2, "kv"), 0, 4096);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied)
      << w.status();
  EXPECT_THAT(w.status().message(), HasSubstr("certificate d4"));
  // By address instead: both share 127.0.0.1, so both pass.
  auto by_address = ExportGrant::Parse("127.0.0.1");
  ASSERT_TRUE(c2->Export("kv", Access::kReadWrite, {*by_address}).ok());
  EXPECT_TRUE(c4->Write(*b4, 0, Remote(*d2, "kv"), 0, 4096).ok());
}

TEST_F(MutualTlsTest, IncompleteTlsConfigIsAStartupError) {
  auto r = RunProcess(
      {RdmadBinary(), "--socket", dir_.path() + "/x.sock", "--peer_listen",
       "127.0.0.1:0", "--transport", "tcp", "--config",
       WriteConfig(dir_.path(), "half",
                   absl::StrCat("tls_ca_file: \"", P("ca.pem"), "\"\n"))},
      "", absl::Seconds(30));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err + r.out, HasSubstr("tls_cert_file"));
}

}  // namespace
}  // namespace rdmad::testing
