// rdmactl against real daemons, as scripts and people use it: one JSON
// dialect on every command (errors included) and an exit status per class
// of error; remote regions (regions --peer, stat, get without --length, a
// put that does not fit); descriptors with offsets; copies between local
// regions; progress on terminals only; --timeout for the whole command;
// what peers and qps show on TCP.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "rdmad/queue.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"
#include "tests/json_reader.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

// Bytes that differ at every offset, so a misplaced byte shows.
std::string Pattern(size_t n, int seed) {
  std::string data(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    data[i] = static_cast<char>((i * 131 + seed * 7 + i / 251) & 0xff);
  }
  return data;
}

JsonValue ParseJson(const std::string& json) {
  auto parsed = JsonValue::Parse(json);
  EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << json;
  return parsed.ok() ? *std::move(parsed) : JsonValue();
}

// The field `key` of `object`, which must be there.
const JsonValue& Field(const JsonValue& object, const std::string& key) {
  EXPECT_TRUE(object.has(key)) << "no key '" << key << "'";
  return object[key];
}

bool IsNumber(const JsonValue& v) { return v.is_number(); }

class RdmactlTest : public ::testing::Test {
 protected:
  std::unique_ptr<DaemonProcess> StartDaemon(const std::string& name,
                                             DaemonOptions options = {}) {
    return StartDaemonOrNull(dir_, name, std::move(options));
  }

  // rdmactl against `daemon`, with `args`.
  ProcessResult Run(const DaemonProcess& daemon,
                    const std::vector<std::string>& args,
                    const std::string& input = "") {
    std::vector<std::string> argv = {RdmactlBinary(), "--socket",
                                     daemon.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunProcess(argv, input, absl::Seconds(120));
  }

  // rdmactl ... --json that must succeed; its answer.
  JsonValue Json(const DaemonProcess& daemon, std::vector<std::string> args) {
    args.push_back("--json");
    ProcessResult out = Run(daemon, args);
    EXPECT_EQ(out.exit_code, 0) << absl::StrJoin(args, " ") << ": " << out.err;
    return ParseJson(out.out);
  }

  std::string Path(const std::string& name) const {
    return absl::StrCat(dir_.path(), "/", name);
  }

  TempDir dir_;
};

// --- one JSON dialect -------------------------------------------------------

TEST_F(RdmactlTest, EveryCommandAnswersInOneJsonDialect) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  JsonValue region = Json(*a, {"alloc", "kv", "1M", "--export", "rw"});
  EXPECT_TRUE(IsNumber(Field(region, "size")));
  EXPECT_EQ(Field(region, "size").number(), 1048576);
  EXPECT_TRUE(IsNumber(Field(region, "id")));
  EXPECT_EQ(Field(region, "mode").string(), "0600");  // not 384
  EXPECT_EQ(Field(region, "export").string(), "rw");  // as the table
  EXPECT_EQ(Field(region, "owner").string(), "daemon");
  ASSERT_EQ(Run(*a, {"alloc", "small", "4K"}).exit_code, 0);

  // jq 'select(.size > 1048576)' must compare numbers.
  JsonValue regions = Json(*a, {"regions"});
  const auto& list = Field(regions, "regions").array();
  ASSERT_EQ(list.size(), 2);
  for (const JsonValue& r : list) {
    EXPECT_TRUE(IsNumber(Field(r, "size")));
    EXPECT_TRUE(IsNumber(Field(r, "uid")));
  }

  JsonValue status = Json(*a, {"status"});
  EXPECT_TRUE(IsNumber(Field(status, "pid")));
  EXPECT_TRUE(IsNumber(Field(status, "regions")));
  EXPECT_EQ(Field(status, "regions").number(), 2);
  EXPECT_EQ(Field(status, "transport").string(), TestTransport());
  EXPECT_THAT(Field(status, "incarnation").string(), HasSubstr("0x"));
  EXPECT_TRUE(IsNumber(Field(status, "pinned_bytes")));
  JsonValue devices = Json(*a, {"devices"});
  EXPECT_TRUE(Field(devices, "devices").is_array());

  // The data commands report too.
  const std::string in = Path("in.bin");
  WriteFile(in, Pattern(5000, 1));
  JsonValue put = Json(*a, {"put", in, "kv@100"});
  EXPECT_EQ(Field(put, "command").string(), "put");
  EXPECT_EQ(Field(put, "bytes").number(), 5000);
  JsonValue get = Json(*a, {"get", "kv@100", "--length", "5000", "-o",
                         Path("out.bin")});
  EXPECT_EQ(Field(get, "bytes").number(), 5000);
  EXPECT_EQ(ReadTextFile(Path("out.bin")), Pattern(5000, 1));
  const std::string remote = absl::StrCat(a->peer_address(), "/kv");
  JsonValue copy = Json(*a, {"copy", "kv@100", "small", "--length", "4096"});
  EXPECT_EQ(Field(copy, "bytes").number(), 4096);
  EXPECT_EQ(Field(copy, "transport").string(), "local");
  JsonValue exported = Json(*a, {"export", "kv", "r"});
  EXPECT_EQ(Field(exported, "export").string(), "r");
  JsonValue chmod = Json(*a, {"chmod", "kv", "0640"});
  EXPECT_EQ(Field(chmod, "mode").string(), "0640");
  JsonValue chgrp = Json(*a, {"chgrp", "kv", "0"});
  EXPECT_EQ(Field(chgrp, "gid").number(), 0);
  JsonValue descriptor = Json(*a, {"descriptor", "kv"});
  EXPECT_THAT(Field(descriptor, "descriptor").string(),
              HasSubstr("rdmad1:"));
  JsonValue stat = Json(*b, {"stat", remote});
  EXPECT_EQ(Field(stat, "size").number(), 1048576);
  EXPECT_EQ(Field(stat, "export").string(), "r");
  ASSERT_EQ(Run(*b, {"get", remote, "--length", "10", "-o", Path("x")})
                .exit_code,
            0);
  JsonValue peers = Json(*b, {"peers"});
  const JsonValue& peer =
      Field(peers, "peers")[0];
  EXPECT_EQ(Field(peer, "address").string(), a->peer_address());
  EXPECT_TRUE(IsNumber(Field(peer, "read")));
  EXPECT_EQ(Field(peer, "read").number(), 10);
  EXPECT_TRUE(IsNumber(Field(peer, "ops")));
  JsonValue qps = Json(*b, {"qps"});
  EXPECT_FALSE(Field(qps, "qps").array().empty());
  JsonValue freed = Json(*a, {"free", "small"});
  EXPECT_EQ(Field(freed, "freed").string(), "small");
}

// help is a command too: with --json, one document (no daemon needed).
TEST_F(RdmactlTest, HelpAnswersInJsonToo) {
  const std::string socket = Path("none.sock");
  ProcessResult overview =
      RunProcess({RdmactlBinary(), "--socket", socket, "--json", "help"});
  ASSERT_EQ(overview.exit_code, 0) << overview.err;
  JsonValue json = ParseJson(overview.out);
  EXPECT_THAT(Field(json, "usage").string(), HasSubstr("usage: rdmactl"));
  EXPECT_FALSE(json.has("command"));
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json", "help", "bench"},
                                             {"bench", "--help", "--json"}}) {
    std::vector<std::string> argv = {RdmactlBinary(), "--socket", socket};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult one = RunProcess(argv);
    ASSERT_EQ(one.exit_code, 0) << absl::StrJoin(args, " ") << ": " << one.err;
    json = ParseJson(one.out);
    EXPECT_EQ(Field(json, "command").string(), "bench");
    EXPECT_THAT(Field(json, "usage").string(),
                HasSubstr("usage: rdmactl bench"));
  }
  // Without --json, the text as it was.
  ProcessResult text = RunProcess({RdmactlBinary(), "help", "bench"});
  EXPECT_THAT(text.out, ::testing::StartsWith("usage: rdmactl bench"));
}

TEST_F(RdmactlTest, ErrorsAreJsonWithAnExitStatusPerClass) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  ASSERT_EQ(Run(*a, {"alloc", "kv", "4K"}).exit_code, 0);
  struct Case {
    std::vector<std::string> args;
    int exit_status;
    std::string code;
  };
  const std::vector<Case> cases = {
      {{"free", "nope"}, 4, "NOT_FOUND"},
      {{"alloc", "kv", "4K"}, 6, "ALREADY_EXISTS"},
      {{"get", "kv@8K", "-o", Path("x")}, 7, "OUT_OF_RANGE"},
      {{"get", "kv"}, 2, "USAGE"},  // --json needs -o FILE for the data
      {{"descriptor", "kv"}, 10, "FAILED_PRECONDITION"},  // not exported
      {{"regions", "--peer", "127.0.0.1:1"}, 3, "UNAVAILABLE"},
      {{"alloc", "x", "4K", "--bogus"}, 2, "USAGE"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back("--json");
    ProcessResult out = Run(*a, args);
    EXPECT_EQ(out.exit_code, c.exit_status) << absl::StrJoin(args, " ");
    const JsonValue json = ParseJson(out.out);
    const JsonValue& error = Field(json, "error");
    EXPECT_EQ(Field(error, "code").string(), c.code);
    EXPECT_EQ(Field(error, "exit_status").number(), c.exit_status);
    EXPECT_FALSE(Field(error, "message").string().empty());
    // People still get the line on stderr.
    EXPECT_THAT(out.err, HasSubstr("rdmactl: "));
  }
  ProcessResult unreachable = RunProcess(
      {RdmactlBinary(), "--socket", Path("none.sock"), "status", "--json"});
  EXPECT_EQ(unreachable.exit_code, 3);
  EXPECT_EQ(Field(Field(ParseJson(unreachable.out), "error"),
                  "code")
                .string(),
            "UNAVAILABLE");
}

// --- remote regions -----------------------------------------------------------

TEST_F(RdmactlTest, RemoteRegionsCanBeListedSizedAndReadWhole) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "1M", "--export", "rw"}).exit_code, 0);
  ASSERT_EQ(Run(*b, {"alloc", "ro", "4K", "--export", "r"}).exit_code, 0);
  ASSERT_EQ(Run(*b, {"alloc", "private", "4K"}).exit_code, 0);
  const std::string whole = Pattern(1 << 20, 3);
  WriteFile(Path("whole.bin"), whole);
  ASSERT_EQ(Run(*b, {"put", Path("whole.bin"), "kv"}).exit_code, 0);

  // What B exports to A: names, sizes, access; not its private region.
  ProcessResult listed = Run(*a, {"regions", "--peer", b->peer_address()});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("kv"));
  EXPECT_THAT(listed.out, HasSubstr("1 MiB"));
  EXPECT_THAT(listed.out, HasSubstr("ro"));
  EXPECT_THAT(listed.out, Not(HasSubstr("private")));
  ProcessResult stat =
      Run(*a, {"stat", absl::StrCat(b->peer_address(), "/kv")});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_THAT(stat.out, ::testing::ContainsRegex("size: +1 MiB\n"));
  // An offset says where it is and what follows; past the end it fails.
  ProcessResult at =
      Run(*a, {"stat", absl::StrCat(b->peer_address(), "/kv@4K")});
  ASSERT_EQ(at.exit_code, 0) << at.err;
  EXPECT_THAT(at.out, ::testing::ContainsRegex(
                          "offset: +4 KiB, 1020 KiB from there to the end"));
  JsonValue at_json =
      Json(*a, {"stat", absl::StrCat(b->peer_address(), "/kv@4K")});
  EXPECT_EQ(Field(at_json, "offset").number(), 4096);
  EXPECT_EQ(Field(at_json, "bytes_from_offset").number(), 1020 * 1024);
  ProcessResult past_end =
      Run(*a, {"stat", absl::StrCat(b->peer_address(), "/kv@2M")});
  EXPECT_EQ(past_end.exit_code, 7) << past_end.err;
  EXPECT_THAT(past_end.err,
              HasSubstr("offset 2 MiB is past the end of the region (1 MiB)"));

  // get without --length: the rest of the remote region from the offset.
  ProcessResult get =
      Run(*a, {"get", absl::StrCat(b->peer_address(), "/kv@4K"), "-o",
               Path("rest.bin")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadTextFile(Path("rest.bin")), whole.substr(4096));
  // ... also through a descriptor with an offset.
  ProcessResult descriptor = Run(*b, {"descriptor", "kv"});
  ASSERT_EQ(descriptor.exit_code, 0) << descriptor.err;
  std::string d = descriptor.out;
  d.pop_back();  // newline
  ProcessResult via_descriptor = Run(
      *a, {"get", absl::StrCat(d, "@1M"), "--length", "1"});
  EXPECT_EQ(via_descriptor.exit_code, 7) << via_descriptor.err;  // past end
  via_descriptor =
      Run(*a, {"get", absl::StrCat(d, "@1000K"), "-o", Path("tail.bin")});
  ASSERT_EQ(via_descriptor.exit_code, 0) << via_descriptor.err;
  EXPECT_EQ(ReadTextFile(Path("tail.bin")), whole.substr(1000 * 1024));
}

// status says where everything is: the data listener, the metrics URL and
// the config file it read; --version needs no daemon.
TEST_F(RdmactlTest, StatusShowsListenersMetricsAndConfigFile) {
  const std::string conf = Path("a.conf");
  WriteFile(conf, "log_level: \"info\"\n");
  auto a = StartDaemon(
      "a", {.extra_args = {"--config", conf, "--metrics_listen",
                           "127.0.0.1:0"}});
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  JsonValue with = Json(*a, {"status"});
  EXPECT_THAT(Field(with, "data_listen").string(),
              ::testing::StartsWith("127.0.0.1:"));
  EXPECT_THAT(Field(with, "metrics_url").string(),
              ::testing::MatchesRegex("http://127\\.0\\.0\\.1:[0-9]+/metrics"));
  EXPECT_EQ(Field(with, "config_file").string(), conf);
  ProcessResult text = Run(*a, {"status"});
  EXPECT_THAT(text.out, ::testing::ContainsRegex("data listener: +127.0.0.1:"));
  EXPECT_THAT(text.out, ::testing::ContainsRegex("config file: +" + conf));
  JsonValue without = Json(*b, {"status"});
  EXPECT_EQ(Field(without, "metrics_url").string(), "");
  EXPECT_EQ(Field(without, "config_file").string(), "");
  ProcessResult plain = Run(*b, {"status"});
  EXPECT_THAT(plain.out, ::testing::ContainsRegex("metrics: +off"));
  EXPECT_THAT(plain.out, ::testing::ContainsRegex("config file: +none"));

  ProcessResult version =
      RunProcess({RdmactlBinary(), "--socket", Path("none.sock"), "--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, ::testing::MatchesRegex("rdmactl [0-9.]+\n"));
}

// At exactly the end of a region there is nothing to read: get returns no
// bytes, remote as local; past the end, or too much, is OUT_OF_RANGE with a
// message that names what did not fit and that nothing was read.
TEST_F(RdmactlTest, GetAtTheEndOfARegionReadsNothingLocalOrRemote) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "zodd", "65537", "--export", "rw"}).exit_code, 0);
  ASSERT_EQ(Run(*a, {"alloc", "dst", "4K"}).exit_code, 0);
  const std::string remote = absl::StrCat(b->peer_address(), "/zodd");
  for (const auto& [daemon, src] :
       std::vector<std::pair<DaemonProcess*, std::string>>{
           {b.get(), "zodd@65537"},
           {a.get(), absl::StrCat(remote, "@65537")}}) {
    SCOPED_TRACE(src);
    WriteFile(Path("end.bin"), "old contents");
    JsonValue get = Json(*daemon, {"get", src, "-o", Path("end.bin")});
    EXPECT_EQ(Field(get, "bytes").number(), 0);
    EXPECT_EQ(ReadTextFile(Path("end.bin")), "");
    ProcessResult to_stdout = Run(*daemon, {"get", src});
    EXPECT_EQ(to_stdout.exit_code, 0) << to_stdout.err;
    EXPECT_EQ(to_stdout.out, "");
  }
  ProcessResult past = Run(*a, {"get", absl::StrCat(remote, "@65538")});
  EXPECT_EQ(past.exit_code, 7) << past.err;
  EXPECT_THAT(past.err, HasSubstr("offset 65538 is past the end of region "
                                  "'zodd' (65537 B)"));
  ProcessResult too_long =
      Run(*b, {"get", "zodd@65000", "--length", "1000"});
  EXPECT_EQ(too_long.exit_code, 7) << too_long.err;
  EXPECT_THAT(too_long.err, HasSubstr("--length 1000 B does not fit in "
                                      "region 'zodd' at offset 65000"));
  EXPECT_THAT(too_long.err, HasSubstr("nothing was read"));
  EXPECT_THAT(too_long.err, Not(HasSubstr("written")));
  // A copy from the end has nothing to copy, and says which region ended.
  ProcessResult copy = Run(*a, {"copy", absl::StrCat(remote, "@65537"), "dst"});
  EXPECT_EQ(copy.exit_code, 7) << copy.err;
  EXPECT_THAT(copy.err, HasSubstr("nothing to copy: offset 65537 is the end "
                                  "of region 'zodd'"));
}

TEST_F(RdmactlTest, RemotePutThatDoesNotFitWritesNothing) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "1M", "--export", "rw"}).exit_code, 0);
  const std::string remote = absl::StrCat(b->peer_address(), "/kv@4K");
  // A file one byte too large, and the same through a pipe.
  WriteFile(Path("big.bin"), Pattern((1 << 20) - 4096 + 1, 5));
  for (const bool pipe : {false, true}) {
    ProcessResult put =
        pipe ? Run(*a, {"put", "-", remote}, ReadTextFile(Path("big.bin")))
             : Run(*a, {"put", Path("big.bin"), remote});
    EXPECT_EQ(put.exit_code, 7) << put.err;  // OUT_OF_RANGE
    EXPECT_THAT(put.err, HasSubstr("does not fit in region 'kv'"));
    EXPECT_THAT(put.err, HasSubstr("nothing was written"));
  }
  // Nothing landed: the region is still all zeros.
  auto cb = Connect(*b);
  ASSERT_TRUE(cb);
  auto kv = cb->MapRegion("kv");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(std::string(kv->data(), kv->size()),
            std::string(kv->size(), '\0'));
  // One byte less fits.
  WriteFile(Path("fits.bin"), Pattern((1 << 20) - 4096, 5));
  ProcessResult put = Run(*a, {"put", Path("fits.bin"), remote});
  EXPECT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(std::string(kv->data() + 4096, (1 << 20) - 4096),
            Pattern((1 << 20) - 4096, 5));
}

// A region named through the daemon's own peer address is sized as any
// remote one (stat; put, get and copy without --length ask for the size
// first): the daemon asks itself for the caller's uid.
TEST_F(RdmactlTest, TheDaemonsOwnPeerAddressNamesItsRegions) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  ASSERT_EQ(Run(*a, {"alloc", "kv", "64K", "--export", "rw"}).exit_code, 0);
  ASSERT_EQ(Run(*a, {"alloc", "dst", "64K"}).exit_code, 0);
  const std::string self = absl::StrCat(a->peer_address(), "/kv");
  JsonValue stat = Json(*a, {"stat", self});
  EXPECT_EQ(Field(stat, "size").number(), 65536);
  EXPECT_EQ(Field(stat, "export").string(), "rw");

  const std::string data = Pattern(65536 - 1024, 6);
  WriteFile(Path("in.bin"), data);
  ProcessResult put = Run(*a, {"put", Path("in.bin"), absl::StrCat(self, "@1K")});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  ProcessResult get =
      Run(*a, {"get", absl::StrCat(self, "@1K"), "-o", Path("out.bin")});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadTextFile(Path("out.bin")), data);
  ProcessResult copy = Run(*a, {"copy", absl::StrCat(self, "@1K"), "dst"});
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  ProcessResult back = Run(*a, {"get", "dst", "--length", "63K"});
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, data);
}

// --- descriptors and copies -----------------------------------------------------

TEST_F(RdmactlTest, CopyBetweenLocalRegionsNeedsNoExport) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  ASSERT_EQ(Run(*a, {"alloc", "src", "8K"}).exit_code, 0);
  ASSERT_EQ(Run(*a, {"alloc", "dst", "8K"}).exit_code, 0);
  WriteFile(Path("src.bin"), Pattern(8192, 9));
  ASSERT_EQ(Run(*a, {"put", Path("src.bin"), "src"}).exit_code, 0);
  ProcessResult copy = Run(*a, {"copy", "src@1K", "dst@2K", "--length", "4K"});
  ASSERT_EQ(copy.exit_code, 0) << copy.err;
  ProcessResult back = Run(*a, {"get", "dst@2K", "--length", "4K"});
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, Pattern(8192, 9).substr(1024, 4096));
  // A target that does not exist is named, without jargon.
  ProcessResult missing = Run(*a, {"copy", "src", "nothere", "--length", "1"});
  EXPECT_EQ(missing.exit_code, 4) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("'nothere'"));
  EXPECT_THAT(missing.err, Not(HasSubstr("create it")));
}

TEST_F(RdmactlTest, AStaleDescriptorSaysWhatToDo) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "4K", "--export", "rw"}).exit_code, 0);
  ProcessResult descriptor = Run(*b, {"descriptor", "kv"});
  ASSERT_EQ(descriptor.exit_code, 0);
  std::string d = descriptor.out;
  d.pop_back();
  ASSERT_EQ(Run(*b, {"free", "kv"}).exit_code, 0);
  ProcessResult get = Run(*a, {"get", d, "--length", "1"});
  EXPECT_EQ(get.exit_code, 4) << get.err;
  EXPECT_THAT(get.err, HasSubstr("rdmactl descriptor NAME"));
  EXPECT_THAT(get.err, Not(HasSubstr("resolve it again")));
}

// stat of a descriptor asks the daemon that issued it, as stat of
// HOST:PORT/NAME does: a freed region, or a revoked descriptor, is not
// reported as there.
TEST_F(RdmactlTest, StatOfADescriptorAsksItsDaemon) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "4K", "--export", "rw"}).exit_code, 0);
  auto descriptor = [&] {
    ProcessResult out = Run(*b, {"descriptor", "kv"});
    EXPECT_EQ(out.exit_code, 0) << out.err;
    std::string d = out.out;
    if (!d.empty()) d.pop_back();  // newline
    return d;
  };
  const std::string d = descriptor();
  for (DaemonProcess* daemon : {a.get(), b.get()}) {  // remote and its own
    JsonValue stat = Json(*daemon, {"stat", d});
    EXPECT_EQ(Field(stat, "size").number(), 4096);
    EXPECT_EQ(Field(stat, "export").string(), "rw");
    EXPECT_EQ(Field(stat, "peer").string(), b->peer_address());
  }
  // Freed: gone, and still gone when a new region takes its name.
  ASSERT_EQ(Run(*b, {"free", "kv"}).exit_code, 0);
  for (DaemonProcess* daemon : {a.get(), b.get()}) {
    ProcessResult gone = Run(*daemon, {"stat", d});
    EXPECT_EQ(gone.exit_code, 4) << gone.err;  // NOT_FOUND
  }
  ASSERT_EQ(Run(*b, {"alloc", "kv", "4K", "--export", "rw"}).exit_code, 0);
  for (DaemonProcess* daemon : {a.get(), b.get()}) {
    ProcessResult gone = Run(*daemon, {"stat", d});
    EXPECT_EQ(gone.exit_code, 4) << gone.err;
    EXPECT_THAT(gone.err, HasSubstr("rdmactl descriptor "));
  }
  // Re-exported: the region is there, the descriptor no longer reaches it.
  const std::string revoked = descriptor();
  ASSERT_EQ(Run(*b, {"export", "kv", "r"}).exit_code, 0);
  for (DaemonProcess* daemon : {a.get(), b.get()}) {
    ProcessResult stale = Run(*daemon, {"stat", revoked});
    EXPECT_EQ(stale.exit_code, 10) << stale.err;  // FAILED_PRECONDITION
    EXPECT_THAT(stale.err, HasSubstr("re-exported"));
  }
  EXPECT_EQ(Field(Json(*a, {"stat", descriptor()}), "export").string(), "r");
}

// --- progress and --timeout -------------------------------------------------

TEST_F(RdmactlTest, ProgressOnlyOnATerminal) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "80M", "--export", "rw"}).exit_code, 0);
  WriteFile(Path("big.bin"), Pattern(80 << 20, 2));
  const std::string remote = absl::StrCat(b->peer_address(), "/kv");
  // Not a terminal (a pipe): stderr stays empty.
  ProcessResult quiet = Run(*a, {"put", Path("big.bin"), remote});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  // On a terminal (script(1) gives rdmactl a pty): progress and rate.
  const std::string command = absl::StrCat(
      RdmactlBinary(), " --socket ", a->socket(), " put ", Path("big.bin"),
      " ", remote);
  ProcessResult shown = RunProcess(
      {"/usr/bin/script", "-qec", command, "/dev/null"}, "",
      absl::Seconds(120));
  ASSERT_EQ(shown.exit_code, 0) << shown.out << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("of 80 MiB"));
  EXPECT_THAT(shown.out, HasSubstr("MB/s"));
  EXPECT_THAT(shown.out, HasSubstr("wrote 80 MiB"));
}

// --timeout bounds the whole command, and its error says how far it got:
// here the peer stops answering after the first 64 MiB chunk.
TEST_F(RdmactlTest, TimeoutBoundsTheWholeCommandAndSaysWhatWasDone) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "128M", "--export", "rw"}).exit_code, 0);
  // The first 64 MiB staging chunk must reach B before the deadline; how
  // long that takes depends on the build (sanitizers) and the machine's load,
  // so time one such put first and give the deadline ample room over it. The
  // data is made before anything is timed.
  const std::string chunk = Pattern(64 << 20, 4);
  const std::string file = Path("chunk.bin");
  WriteFile(file, chunk);
  const std::string dest = absl::StrCat(b->peer_address(), "/kv");
  const absl::Time warm_start = absl::Now();
  ASSERT_EQ(Run(*a, {"put", file, dest}).exit_code, 0);
  const absl::Duration warm = absl::Now() - warm_start;
  const int64_t timeout_s =
      std::max<int64_t>(10, absl::ToInt64Seconds(warm * 4) + 2);
  const std::string timeout = absl::StrCat(timeout_s, "s");

  const std::string fifo = Path("in.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto ca = Connect(*a);
  ASSERT_TRUE(ca);
  auto peers = ca->ListPeers();
  ASSERT_TRUE(peers.ok() && !peers->empty()) << peers.status();
  const uint64_t written_before = (*peers)[0].bytes_written;
  // Should rdmactl end early, writes to the FIFO must fail, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  std::thread feeder([&] {
    // Non-blocking open until rdmactl opened its end (bounded), so that an
    // rdmactl that failed early cannot leave this thread waiting forever.
    int fd = -1;
    const absl::Time open_by = absl::Now() + absl::Seconds(60);
    while (fd < 0 && absl::Now() < open_by) {
      fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd < 0) absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_GE(fd, 0) << "rdmactl never opened the FIFO";
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    size_t sent = 0;
    while (sent < chunk.size()) {
      const ssize_t n = ::write(fd, chunk.data() + sent, chunk.size() - sent);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    // Wait (bounded) until the first chunk reached B, then stop B and send
    // the rest, which cannot get anywhere now.
    const absl::Time by = absl::Now() + absl::Seconds(timeout_s);
    while (absl::Now() < by) {
      auto now = ca->ListPeers();
      if (now.ok() && !now->empty() &&
          (*now)[0].bytes_written >= written_before + (64u << 20)) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(b->Pause()) << "B did not stop";
    (void)!::write(fd, chunk.data(), 1 << 20);
    ::close(fd);
  });
  ProcessResult put = Run(*a, {"put", fifo, dest, "--timeout", timeout});
  feeder.join();
  b->Resume();
  EXPECT_EQ(put.exit_code, 9) << put.err;  // DEADLINE_EXCEEDED
  EXPECT_THAT(put.err, HasSubstr(absl::StrCat(
                           "--timeout ",
                           absl::FormatDuration(absl::Seconds(timeout_s)),
                           " passed")));
  EXPECT_THAT(put.err, HasSubstr("wrote 64 MiB"))
      << "one 64 MiB put took " << warm << " before this one";
}

// --- peers and qps on TCP ---------------------------------------------------

TEST_F(RdmactlTest, PeersShowTheLastErrorAndQpsShowWhatTcpHas) {
  auto a = StartDaemon("a");
  auto b = StartDaemon("b");
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Run(*b, {"alloc", "kv", "4K", "--export", "rw"}).exit_code, 0);
  ASSERT_EQ(Run(*a, {"get", absl::StrCat(b->peer_address(), "/kv"),
                     "--length", "8"})
                .exit_code,
            0);
  // A region B does not have: the peer is up, the name does not resolve
  // (no transfer starts, none is counted), and that is the last error.
  ProcessResult failed = Run(
      *a, {"get", absl::StrCat(b->peer_address(), "/nothere"), "--length", "8"});
  EXPECT_EQ(failed.exit_code, 4);
  JsonValue peers = Json(*a, {"peers"});
  {
    const JsonValue& peer = Field(peers, "peers")[0];
    EXPECT_EQ(Field(peer, "failed").number(), 0);
    EXPECT_THAT(Field(peer, "last_error").string(), HasSubstr("NOT_FOUND"));
    EXPECT_THAT(Field(peer, "last_error").string(), HasSubstr("'nothere'"));
  }
  ProcessResult table = Run(*a, {"peers"});
  EXPECT_THAT(table.out, HasSubstr("NOT_FOUND"));
  // A transfer that fails at B's end: counted, and the last error now.
  ProcessResult outside = Run(
      *a, {"get", absl::StrCat(b->peer_address(), "/kv@4K"), "--length", "8"});
  EXPECT_EQ(outside.exit_code, 7) << outside.err;  // OUT_OF_RANGE
  peers = Json(*a, {"peers"});
  {
    const JsonValue& peer = Field(peers, "peers")[0];
    EXPECT_EQ(Field(peer, "failed").number(), 1);
    EXPECT_THAT(Field(peer, "last_error").string(), HasSubstr("OUT_OF_RANGE"));
  }

  if (TestTransport() != "tcp") return;  // verbs QPs: the lab's tests
  JsonValue qps = Json(*a, {"qps"});
  const auto& list = Field(qps, "qps").array();
  ASSERT_FALSE(list.empty());
  int connected = 0;
  std::set<double> conns;  // each connection's index in its channel
  for (const JsonValue& v : list) {
    const JsonValue& q = v;
    conns.insert(Field(q, "conn").number());
    EXPECT_EQ(Field(q, "transport").string(), "tcp");
    EXPECT_EQ(Field(q, "role").string(), "initiator");  // A opened them
    EXPECT_EQ(q.has("local_qpn"), false);  // no verbs columns
    EXPECT_EQ(q.has("mtu"), false);
    // Connections open on first use; those that carried data have both
    // ends' addresses.
    if (Field(q, "sent").number() > 0) {
      ++connected;
      EXPECT_THAT(Field(q, "local").string(), HasSubstr("127.0.0.1:"));
      EXPECT_THAT(Field(q, "remote").string(), HasSubstr("127.0.0.1:"));
    }
  }
  EXPECT_GE(connected, 1);
  // One channel (to B), its connections numbered 0, 1, ... in order.
  EXPECT_EQ(conns.size(), list.size());
  EXPECT_EQ(*conns.begin(), 0);
  EXPECT_EQ(*conns.rbegin(), static_cast<double>(list.size() - 1));
  ProcessResult text = Run(*a, {"qps"});
  EXPECT_THAT(text.out, HasSubstr("TCP data connections:"));
  EXPECT_THAT(text.out, HasSubstr("ROLE"));
  EXPECT_THAT(text.out, HasSubstr("TRANSPORT"));
  EXPECT_THAT(text.out, Not(HasSubstr("QPN")));
}

// --- queues -----------------------------------------------------------------

TEST_F(RdmactlTest, QueuesShowsTheClientsQueuesAndWhatWentThrough) {
  auto a = StartDaemon("a");
  ASSERT_TRUE(a);
  EXPECT_EQ(Run(*a, {"queues"}).out, "no queues\n");
  auto client = Connect(*a);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->CreateRegion("dst", 4096, Access::kReadWrite).ok());
  auto queue = client->OpenQueue({.depth = 16});
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto dst = client->OpenRemote(*RemoteRegion::Parse("dst"));
  ASSERT_TRUE(dst.ok()) << dst.status();
  auto buf = client->Allocate(4096);
  ASSERT_TRUE(buf.ok());
  // Three WRITEs, the last one past the end of the region.
  for (uint64_t offset : {0u, 8u, 4096u}) {
    std::vector<Op> op = {{.kind = Op::Kind::kWrite, .local = &*buf,
                           .remote = &*dst, .remote_offset = offset,
                           .length = 8, .tag = offset}};
    ASSERT_TRUE((*queue)->Submit(op).ok());
    Completion done[1];
    while ((*queue)->Poll(absl::MakeSpan(done)) == 0) {
      ASSERT_TRUE((*queue)->Wait(absl::Now() + absl::Seconds(30)).ok());
    }
  }

  JsonValue json = Json(*a, {"queues"});
  const auto& list = Field(json, "queues").array();
  ASSERT_EQ(list.size(), 1u);
  const JsonValue& q = list[0];
  EXPECT_EQ(Field(q, "queue").number(), static_cast<double>((*queue)->id()));
  EXPECT_EQ(Field(q, "pid").number(), ::getpid());
  EXPECT_EQ(Field(q, "uid").number(), ::getuid());
  EXPECT_EQ(Field(q, "submission_entries").number(), 16);
  EXPECT_EQ(Field(q, "notifications").boolean(), false);
  EXPECT_EQ(Field(q, "submitted").number(), 3);
  EXPECT_EQ(Field(q, "completed").number(), 3);
  EXPECT_EQ(Field(q, "failed").number(), 1);
  EXPECT_EQ(Field(q, "in_flight").number(), 0);
  EXPECT_TRUE(IsNumber(Field(q, "wakeups")));
  EXPECT_TRUE(IsNumber(Field(q, "doorbells")));
  EXPECT_TRUE(IsNumber(Field(q, "age_ms")));
  EXPECT_EQ(Field(q, "state").string(), "running");
  EXPECT_TRUE(Field(q, "stop_code").is_null());

  ProcessResult text = Run(*a, {"queues"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("WAKEUPS"));
  EXPECT_THAT(text.out, HasSubstr("16/"));
  EXPECT_THAT(text.out, HasSubstr("running"));
}

// Each rdmactl call opens and ends a session: that is debug, not info.
TEST_F(RdmactlTest, CallsDoNotFillTheDaemonLogAtInfo) {
  auto a = StartDaemon("a", {.log_level = "info"});
  ASSERT_TRUE(a);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Run(*a, {"status"}).exit_code, 0);
  const std::string log = a->Log();
  EXPECT_THAT(log, HasSubstr("ready"));  // info lines do get there
  EXPECT_THAT(log, Not(HasSubstr("opened: pid")));
  EXPECT_THAT(log, Not(HasSubstr("ended; freed")));
}

}  // namespace
}  // namespace rdmad::testing
