// ToolFlags: options and switches bound to variables; anything it cannot
// take ends the program with status 2, saying what and how to call it.
#include "common/tool_flags.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace rdmad {
namespace {

struct Options {
  std::string socket = "/run/rdmad/rdmad.sock";
  std::vector<std::string> peers;
  int calls = 2000;
  uint64_t size = 4096;
  bool json = false;
  bool yield = true;
};

ToolFlags FlagsFor(Options* o) {
  ToolFlags flags("tool", "--socket PATH [--calls N]");
  flags.Text("--socket", &o->socket)
      .List("--peers", &o->peers)
      .Number("--calls", &o->calls, 10, 100000)
      .Bytes("--size", &o->size)
      .Switch("--json", &o->json)
      .Switch("--no-yield", &o->yield, false);
  return flags;
}

void ParseInto(Options* o, std::vector<std::string> args) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  FlagsFor(o).Parse(static_cast<int>(argv.size()), argv.data());
}

TEST(ToolFlagsTest, FillsWhatIsGivenAndKeepsTheDefaults) {
  Options o;
  ParseInto(&o, {"--peers", "a:1,,b:2", "--json", "--size", "64K",
                 "--no-yield", "--calls", "10"});
  EXPECT_EQ(o.socket, "/run/rdmad/rdmad.sock");
  EXPECT_EQ(o.peers, (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(o.calls, 10);
  EXPECT_EQ(o.size, 64u << 10);
  EXPECT_TRUE(o.json);
  EXPECT_FALSE(o.yield);
}

TEST(ToolFlagsTest, AnythingItCannotTakeExitsWithUsage) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--bogus"}, "unknown argument --bogus"},
      {{"--calls"}, "--calls needs a value"},
      {{"--calls", "9"}, "bad value for --calls: 9"},
      {{"--calls", "100001"}, "bad value for --calls: 100001"},
      {{"--calls", "ten"}, "bad value for --calls: ten"},
      {{"--size", "0"}, "bad value for --size: 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.says);
    Options o;
    EXPECT_EXIT(ParseInto(&o, c.args), ::testing::ExitedWithCode(2),
                std::string(c.says) + "\nusage: tool --socket PATH");
  }
}

}  // namespace
}  // namespace rdmad
