// rdmactl's command line (client/rdmactl/args.h) for the commands and
// options of the inspection and data commands: stat, chmod, chgrp,
// regions --peer, get without --length, --json with get, --timeout, and
// the region commands (alloc, export, ls, lookup, put, free, copy).
#include "client/rdmactl/args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::rdmactl {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<Invocation> Parse(const std::vector<std::string>& args) {
  return ParseCommandLine(args, nullptr);
}

TEST(ArgsTest, StatTakesAnyRegionAddress) {
  auto local = Parse({"stat", "kv"});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->command, Command::kStat);
  EXPECT_TRUE(local->src.is_local());
  auto remote = Parse({"stat", "10.0.0.2:7471/kv@4K"});
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(remote->src.region.peer, "10.0.0.2:7471");
  EXPECT_EQ(remote->src.region.offset, 4096u);
  EXPECT_FALSE(Parse({"stat"}).ok());
}

TEST(ArgsTest, DescriptorsTakeAnOffset) {
  auto get = Parse({"get", "rdmad1:AAAA@4K", "--length", "10"});
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_EQ(get->src.region.descriptor, "rdmad1:AAAA");
  EXPECT_EQ(get->src.region.offset, 4096u);
  auto bad = Parse({"get", "rdmad1:AAAA@x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("offset"));
}

TEST(ArgsTest, GetOfARemoteRegionNeedsNoLength) {
  auto get = Parse({"get", "10.0.0.2:7471/kv"});
  ASSERT_TRUE(get.ok()) << get.status();
  EXPECT_FALSE(get->length.has_value());
  auto copy = Parse({"copy", "10.0.0.2:7471/kv", "local"});
  ASSERT_TRUE(copy.ok()) << copy.status();
}

TEST(ArgsTest, GetWithJsonWritesTheDataToAFile) {
  auto to_stdout = Parse({"get", "kv", "--json"});
  ASSERT_FALSE(to_stdout.ok());
  EXPECT_THAT(to_stdout.status().message(), HasSubstr("-o FILE"));
  EXPECT_TRUE(Parse({"get", "kv", "--json", "-o", "out.bin"}).ok());
}

TEST(ArgsTest, ChmodAndChgrp) {
  auto chmod = Parse({"chmod", "kv", "640"});
  ASSERT_TRUE(chmod.ok()) << chmod.status();
  EXPECT_EQ(chmod->command, Command::kChmod);
  EXPECT_EQ(chmod->mode, 0640u);
  EXPECT_EQ(Parse({"chmod", "kv", "0"})->mode, 0u);
  auto exec = Parse({"chmod", "kv", "0755"});
  ASSERT_FALSE(exec.ok());
  EXPECT_THAT(exec.status().message(), HasSubstr("read (4) and write (2)"));
  EXPECT_FALSE(Parse({"chmod", "kv", "rw"}).ok());
  EXPECT_FALSE(Parse({"chmod", "kv"}).ok());
  auto chgrp = Parse({"chgrp", "kv", "4242"});
  ASSERT_TRUE(chgrp.ok()) << chgrp.status();
  EXPECT_EQ(chgrp->group, 4242u);
  EXPECT_EQ(Parse({"chgrp", "kv", "root"})->group, 0u);
  auto unknown = Parse({"chgrp", "kv", "no-such-group-rdmad"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("not a group"));
}

TEST(ArgsTest, RegionsOfAPeer) {
  auto regions = Parse({"regions", "--peer", "10.0.0.2:7471"});
  ASSERT_TRUE(regions.ok()) << regions.status();
  EXPECT_EQ(regions->peer, "10.0.0.2:7471");
  EXPECT_TRUE(Parse({"regions"})->peer.empty());
  EXPECT_FALSE(Parse({"regions", "--peer", "nohost"}).ok());
}

TEST(ArgsTest, TimeoutIsForTheWholeCommandAndOptional) {
  EXPECT_FALSE(Parse({"status"})->global.timeout.has_value());
  auto timed = Parse({"status", "--timeout", "2m"});
  ASSERT_TRUE(timed.ok());
  EXPECT_EQ(timed->global.timeout, absl::Minutes(2));
  EXPECT_FALSE(Parse({"status", "--timeout", "0"}).ok());
}

TEST(ArgsTest, HelpDocumentsExitStatusesAndJsonEverywhere) {
  const std::string usage = Usage();
  EXPECT_THAT(usage, HasSubstr("every command"));
  EXPECT_THAT(usage, HasSubstr("3 unavailable"));
  EXPECT_THAT(usage, HasSubstr("9 timed"));
  EXPECT_THAT(usage, HasSubstr("chmod"));
  EXPECT_THAT(usage, HasSubstr("stat"));
}

// The region commands fill what they take, each value checked, and an
// option's error names the option.
TEST(ArgsTest, RegionCommandsFillTheirFields) {
  auto alloc = Parse({"alloc", "kv", "4K", "--export", "rw", "--mode", "0640",
                      "--group", "0"});
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  EXPECT_EQ(alloc->command, Command::kAlloc);
  EXPECT_EQ(alloc->name, "kv");
  EXPECT_EQ(alloc->size, 4096u);
  EXPECT_EQ(alloc->access, Access::kReadWrite);
  EXPECT_EQ(alloc->region_options.mode, 0640u);
  EXPECT_EQ(alloc->region_options.group, 0u);

  auto exported = Parse({"export", "kv", "r", "--allow", "1000@10.0.0.2"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->access, Access::kRead);
  EXPECT_EQ(exported->allow.size(), 1u);

  auto ls = Parse({"ls", "kv-"});
  ASSERT_TRUE(ls.ok()) << ls.status();
  EXPECT_EQ(ls->prefix, "kv-");
  auto lookup = Parse({"lookup", "kv", "--fresh"});
  ASSERT_TRUE(lookup.ok()) << lookup.status();
  EXPECT_TRUE(lookup->fresh);
  EXPECT_EQ(lookup->name, "kv");
  auto put = Parse({"put", "in.bin", "kv@4K"});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->file, "in.bin");
  EXPECT_EQ(put->dest.text, "kv@4K");
  EXPECT_EQ(Parse({"free", "kv"})->name, "kv");
}

TEST(ArgsTest, RegionCommandErrorsSayWhatIsWrong) {
  struct Case {
    std::vector<std::string> args;
    const char* says;
  };
  const Case cases[] = {
      {{"alloc", "kv", "lots"}, "SIZE: "},
      {{"alloc", "kv", "4K", "--export", "x"}, "--export: "},
      {{"alloc", "kv", "4K", "--mode", "9"}, "--mode: "},
      {{"alloc", "kv", "4K", "--group", "no-such-group-here"}, "--group: "},
      {{"export", "kv", "none", "--allow", "1000@10.0.0.2"}, "not none"},
      {{"export", "kv", "r", "--allow", "abc@10.0.0.2"}, "--allow: "},
      {{"ls", "a:b"}, "is not the start of a region name"},
      {{"copy", "10.0.0.2:7471/a", "10.0.0.2:7471/b"}, "must be a local"},
      {{"copy", "kv", "other", "--length", "0"}, "at least 1 byte"},
      {{"help", "frobnicate"}, "no command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args[0] + " " + c.args[1]);
    auto parsed = Parse(c.args);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.says));
  }
}

}  // namespace
}  // namespace rdmad::rdmactl
