// examples/python/rdmad_client.py against a real daemon: the example
// generates its stubs from proto/ at run time, opens a session, calls
// GetStatus and ListRegions, allocates, exports, describes and frees a
// buffer. Checked from its JSON output and from the daemon's side.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {
namespace {

using ::testing::HasSubstr;

TEST(PythonExampleTest, TalksToTheLocalService) {
  TempDir dir;
  auto daemon = DaemonProcess::Start(dir.path(), "d");
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  const ProcessResult run = RunProcess(
      {RDMAD_PYTHON, RDMAD_PYTHON_EXAMPLE, "--socket", (*daemon)->socket(),
       "--proto-dir", RDMAD_PROTO_DIR, "--name", "py-test", "--size", "8192",
       "--json"},
      "", absl::Seconds(120));
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("\"pid\": ", (*daemon)->pid())));
  EXPECT_THAT(run.out, HasSubstr("\"name\": \"py-test\""));
  EXPECT_THAT(run.out, HasSubstr("\"size\": 8192"));
  EXPECT_THAT(run.out, HasSubstr("\"export_access\": \"ACCESS_READ_WRITE\""));
  EXPECT_THAT(run.out, HasSubstr("\"descriptor\": \"rdmad1:"));
  EXPECT_THAT(run.out, HasSubstr("\"listed\": true"));
  EXPECT_THAT(run.out, HasSubstr("\"freed\": true"));

  // The daemon agrees: the buffer is gone.
  auto client = Client::Connect({.socket_path = (*daemon)->socket()});
  ASSERT_TRUE(client.ok()) << client.status();
  auto regions = (*client)->ListRegions();
  ASSERT_TRUE(regions.ok()) << regions.status();
  for (const auto& region : *regions) {
    EXPECT_NE(region.name, "py-test");
  }
}

}  // namespace
}  // namespace rdmad::testing
