// The config file: strict parsing with file:line:column errors that name
// the field, semantic checks, the shipped default config, and which fields
// a SIGHUP reload may change.
#include "daemon/config/config_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/config/config_reload.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::config {
namespace {

using ::testing::HasSubstr;

TEST(ConfigFileTest, GoodFileParses) {
  auto config = ParseConfigText(
      "# comment\n"
      "socket: \"/run/x/rdmad.sock\"\n"
      "peer_listen: \"127.0.0.1:7000\"\n"
      "transport: \"tcp\"\n"
      "log_level: \"warn\"\n"
      "qp_timeout: 0\n"
      "metrics_listen: \"127.0.0.1:0\"\n",
      "good.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket(), "/run/x/rdmad.sock");
  EXPECT_EQ(config->transport(), "tcp");
  EXPECT_TRUE(config->has_qp_timeout());  // explicit 0 is kept as set
  EXPECT_TRUE(MetricsEnabled(*config));
}

TEST(ConfigFileTest, SyntaxErrorNamesFileAndLine) {
  auto config = ParseConfigText(
      "transport: \"tcp\"\n"
      "log_level: \"info\"\n"
      "peer_listen \"127.0.0.1:7000\n",  // no colon, unterminated string
      "broken.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("broken.conf:3:"));
  EXPECT_THAT(config.status().message(), HasSubstr("peer_listen"));
}

TEST(ConfigFileTest, UnknownFieldIsAnError) {
  auto config = ParseConfigText(
      "transport: \"tcp\"\n"
      "peer_lisen: \"127.0.0.1:7000\"\n",
      "typo.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("typo.conf:2:"));
  EXPECT_THAT(config.status().message(), HasSubstr("peer_lisen"));
}

TEST(ConfigFileTest, MalformedValueNamesField) {
  auto config = ParseConfigText(
      "transport: \"tcp\"\n"
      "\n"
      "qps_per_peer: \"four\"\n",
      "value.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("value.conf:3:"));
  EXPECT_THAT(config.status().message(), HasSubstr("qps_per_peer"));
}

TEST(ConfigFileTest, SizesTakeSizeStrings) {
  auto config = ParseConfigText(
      "max_pinned_bytes: 4G  # unquoted\n"
      "quota_pinned_bytes_per_uid: \"512Mi\"\n"
      "verbs_chunk_bytes: 1.5M\n"
      "verbs_read_chunk_bytes: 65536\n",
      "sizes.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_pinned_bytes(), 4ull << 30);
  EXPECT_EQ(config->quota_pinned_bytes_per_uid(), 512ull << 20);
  EXPECT_EQ(config->verbs_chunk_bytes(), 3ull << 19);
  EXPECT_EQ(config->verbs_read_chunk_bytes(), 65536u);
}

TEST(ConfigFileTest, SizeStringsOnlyInSizeFields) {
  // A comment and a string that look like sizes are left alone; a field
  // that is not a size still wants a number.
  auto config = ParseConfigText(
      "# max_pinned_bytes: 4G\n"
      "socket: \"/run/x/max_pinned_bytes: 4G\"\n",
      "other.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->socket(), "/run/x/max_pinned_bytes: 4G");
  EXPECT_EQ(config->max_pinned_bytes(), 0u);
  auto threads = ParseConfigText("io_threads: 4G\n", "threads.conf");
  ASSERT_FALSE(threads.ok());
  EXPECT_THAT(threads.status().message(), HasSubstr("give a whole number"));
}

TEST(ConfigFileTest, MistakesComeWithWhatToWrite) {
  struct Case {
    std::string line;
    std::string hint;
  };
  const std::vector<Case> cases = {
      {"peer_listen: 127.0.0.1:7471",
       "quote the value: peer_listen: \"127.0.0.1:7471\""},
      {"transport: tcp  # no quotes", "quote the value: transport: \"tcp\""},
      {"max_pinned_bytes: 4X", "give bytes or a size like 4G"},
      {"max_pinned_bytes: 0.3K", "whole number of bytes"},
      {"qps_per_peer: \"four\"", "give a whole number"},
      {"keep_regions_on_restart: 3", "give true or false"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    auto config = ParseConfigText("log_level: \"info\"\n" + c.line + "\n",
                                  "hint.conf");
    ASSERT_FALSE(config.ok()) << "accepted";
    EXPECT_THAT(config.status().message(), HasSubstr("hint.conf:2:"));
    EXPECT_THAT(config.status().message(), HasSubstr(c.hint));
  }
}

TEST(ConfigFileTest, FieldGivenTwiceIsAnError) {
  auto config = ParseConfigText(
      "transport: \"tcp\"\ntransport: \"verbs\"\n", "twice.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("twice.conf:2:"));
}

TEST(ConfigFileTest, BadValuesNameLineAndField) {
  auto config = ParseConfigText(
      "transport: \"tcp\"\n"
      "qp_timeout: 40\n"
      "log_level: \"loud\"\n",
      "semantic.conf");
  ASSERT_FALSE(config.ok());
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("semantic.conf:2:1: field 'qp_timeout': 40 "
                                 "must be 0..31"));
  EXPECT_THAT(message, HasSubstr("semantic.conf:3:1: field 'log_level': "
                                 "'loud' is not one of"));
}

TEST(ConfigFileTest, CheckConfigCoversEachKindOfField) {
  v1::DaemonConfig config;
  config.set_transport("udp");
  config.set_socket_mode("0999");
  config.set_socket("relative.sock");
  config.set_peer_listen("no-port");
  config.set_metrics_listen("127.0.0.1:99999");
  config.set_qp_retry_cnt(8);
  std::vector<std::string> fields;
  for (const FieldError& e : CheckConfig(config)) fields.push_back(e.field);
  EXPECT_THAT(fields, ::testing::UnorderedElementsAre(
                          "transport", "socket_mode", "socket", "peer_listen",
                          "metrics_listen", "qp_retry_cnt"));
  auto status = ValidateConfig(config, "command line");
  EXPECT_THAT(status.message(), HasSubstr("command line: field 'transport'"));
}

TEST(ConfigFileTest, DirectoryFields) {
  auto good = ParseConfigText(
      "directory: \"etcd://127.0.0.1:2379,[::1]:2379\"\n"
      "directory_prefix: \"/prod\"\n"
      "directory_lease_ttl_seconds: 5\n"
      "directory_user: \"rdmad\"\n"
      "directory_password_file: \"/etc/rdmad/etcd-password\"\n",
      "dir.conf");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->directory_lease_ttl_seconds(), 5u);

  auto bad = ParseConfigText(
      "directory: \"http://127.0.0.1:2379\"\n"
      "directory_prefix: \"prod/\"\n"
      "directory_lease_ttl_seconds: 1\n"
      "directory_tls_cert_file: \"/c.pem\"\n"
      "directory_user: \"rdmad\"\n",
      "dir.conf");
  ASSERT_FALSE(bad.ok());
  const std::string message(bad.status().message());
  EXPECT_THAT(message, HasSubstr("dir.conf:1:1: field 'directory'"));
  EXPECT_THAT(message, HasSubstr("field 'directory_prefix'"));
  EXPECT_THAT(message, HasSubstr("field 'directory_lease_ttl_seconds'"));
  EXPECT_THAT(message, HasSubstr("directory_tls_key_file"));
  EXPECT_THAT(message, HasSubstr("directory_password_file"));

  v1::DaemonConfig orphan;
  orphan.set_directory_user("rdmad");
  orphan.set_directory_password_file("/p");
  EXPECT_THAT(std::string(ValidateConfig(orphan, "x").message()),
              HasSubstr("no directory"));
}

TEST(ConfigReloadTest, DirectoryChangesNeedARestart) {
  v1::DaemonConfig running;
  v1::DaemonConfig next;
  next.set_directory("etcd://127.0.0.1:2379");
  next.set_directory_lease_ttl_seconds(5);
  const ReloadPlan plan = PlanReload(running, next);
  EXPECT_TRUE(plan.apply.empty());
  EXPECT_EQ(plan.restart.size(), 2u);
}

TEST(ConfigFileTest, MetricsOffByDefaultAndWithOff) {
  v1::DaemonConfig config;
  EXPECT_FALSE(MetricsEnabled(config));
  config.set_metrics_listen("off");
  EXPECT_FALSE(MetricsEnabled(config));
  EXPECT_TRUE(CheckConfig(config).empty());
}

TEST(ConfigFileTest, MissingFileIsNotFoundNamingIt) {
  auto config = LoadConfigFile("/nonexistent/rdmad.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/rdmad.conf"));
}

TEST(ConfigFileTest, ShippedDefaultConfigIsValid) {
  auto config = LoadConfigFile(RDMAD_DEFAULT_CONFIG);
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_TRUE(ValidateConfig(*config, "default").ok());
  EXPECT_EQ(config->socket(), "/run/rdmad/rdmad.sock");
}

TEST(ConfigFileTest, StateDirMustBeAbsolute) {
  auto config = ParseConfigText("state_dir: \"shm/rdmad\"\n", "x.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("x.conf:1:1: field 'state_dir': 'shm/rdmad' must be "
                        "an absolute path"));
  config = ParseConfigText(
      "state_dir: \"/dev/shm/rdmad\"\nkeep_regions_on_restart: false\n",
      "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->has_keep_regions_on_restart());
  EXPECT_FALSE(config->keep_regions_on_restart());
}

TEST(ConfigFileTest, OneUidsShareOfThePeerTableDefaultsToHalf) {
  auto config = ParseConfigText("max_peers: 100\n", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->max_peers_per_uid(), 50u);
  config = ParseConfigText("", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->max_peers_per_uid(), 4096u);
  config = ParseConfigText("max_peers: 1\n", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->max_peers_per_uid(), 1u) << "never 0";
  // More than the table holds is a mistake, with or without max_peers.
  for (const char* text :
       {"max_peers: 8\nmax_peers_per_uid: 9\n", "max_peers_per_uid: 8193\n"}) {
    config = ParseConfigText(text, "x.conf");
    EXPECT_FALSE(config.ok()) << text;
    EXPECT_THAT(config.status().message(),
                HasSubstr("field 'max_peers_per_uid'"));
  }
}

TEST(ConfigFileTest, EngineSpinDefaultsTo50AndZeroTurnsItOff) {
  auto config = ParseConfigText("", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->engine_spin_us(), 50u);
  EXPECT_FALSE(config->engine_spin_when_preempted())
      << "a preempted engine sleeps by default";
  config = ParseConfigText("engine_spin_us: 0\n", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->engine_spin_us(), 0u) << "an explicit 0 is kept";
  config = ParseConfigText("engine_spin_us: 200\n", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->engine_spin_us(), 200u);
}

TEST(ConfigFileTest, PeerBoundsDefaultToWhatAMeshNeeds) {
  auto config = ParseConfigText("", "x.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  ApplyDefaults(*config);
  EXPECT_EQ(config->max_peers(), 8192u) << "a 4,096-node cluster fits";
  EXPECT_EQ(config->new_peers_per_second_per_uid(), 1000u);
  EXPECT_EQ(config->new_peers_burst_per_uid(), 1000u);
  EXPECT_EQ(config->handshakes_in_flight(), 32u);
  EXPECT_EQ(config->handshakes_served_in_flight(), 16u);
  EXPECT_EQ(config->peer_channel_idle_ms(), 10000u);
  config = ParseConfigText("handshakes_in_flight: 5000\n", "x.conf");
  EXPECT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("field 'handshakes_in_flight'"));
}

TEST(ConfigFileTest, ShippedDefaultConfigDocumentsEveryField) {
  std::ifstream in(RDMAD_DEFAULT_CONFIG);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  const auto* descriptor = v1::DaemonConfig::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const std::string& name = descriptor->field(i)->name();
    // Set ("name: ...") or shown commented out ("# name: ...").
    EXPECT_THAT(text, ::testing::AnyOf(
                          HasSubstr(absl::StrCat("\n", name, ": ")),
                          HasSubstr(absl::StrCat("# ", name, ": "))))
        << "systemd/rdmad.conf does not document field " << name;
  }
}

// The example configs under deploy/ are what people copy: they must load.
TEST(ConfigFileTest, DeployExamplesAreValid) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(RDMAD_DEPLOY_DIR) / "examples")) {
    if (entry.path().extension() != ".conf") continue;
    auto config = LoadConfigFile(entry.path().string());
    ASSERT_TRUE(config.ok()) << config.status();
    ++checked;
  }
  EXPECT_GE(checked, 2);  // the two-node example

  // The config inside the Kubernetes ConfigMap: the block under
  // "rdmad.conf: |", indented by four spaces.
  std::ifstream in(std::filesystem::path(RDMAD_DEPLOY_DIR) / "kubernetes" /
                   "rdmad-daemonset.yaml");
  std::string line, text;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("rdmad.conf: |") != std::string::npos) {
      inside = true;
    } else if (inside && line.rfind("    ", 0) == 0) {
      text += line.substr(4) + "\n";
    } else if (inside) {
      break;
    }
  }
  ASSERT_FALSE(text.empty()) << "no rdmad.conf in the ConfigMap";
  auto config = ParseConfigText(text, "rdmad-daemonset.yaml ConfigMap");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_NE(config->max_pinned_bytes(), 0u);
  // The sockets are not every pod's: 0660 and a group that the daemon's
  // pod carries (so it may give the sockets to it) and client pods add.
  EXPECT_EQ(config->socket_mode(), "0660");
  ASSERT_FALSE(config->socket_group().empty());
  std::ifstream yaml(std::filesystem::path(RDMAD_DEPLOY_DIR) / "kubernetes" /
                     "rdmad-daemonset.yaml");
  const std::string all((std::istreambuf_iterator<char>(yaml)),
                        std::istreambuf_iterator<char>());
  EXPECT_THAT(all, HasSubstr(absl::StrCat("supplementalGroups: [",
                                          config->socket_group(), "]")));
  // The image publishes the data port it fixes.
  std::ifstream docker(std::filesystem::path(RDMAD_DEPLOY_DIR) / "Dockerfile");
  const std::string image((std::istreambuf_iterator<char>(docker)),
                          std::istreambuf_iterator<char>());
  EXPECT_THAT(image, HasSubstr("EXPOSE 7471 7472 9471"));
  EXPECT_THAT(image, HasSubstr("\"--data_listen\", \"0.0.0.0:7472\""));
}

// Every kind of malformed config is refused with FILE:LINE:COLUMN and the
// field's name: syntax, unknown and repeated fields, values out of range,
// and the values the daemon would only have choked on at start (peer
// allow-list, socket group, TLS files, addresses).
TEST(ConfigFileTest, EveryMalformedValueNamesItsPlace) {
  const std::string dir = ::testing::TempDir();
  const std::string not_pem = dir + "/not.pem";
  std::ofstream(not_pem) << "hello\n";
  struct Case {
    std::string text;      // the offending line, the config's 2nd line
    std::string fragment;  // in the message after "FILE:2:COL: "
  };
  const std::vector<Case> cases = {
      {"peer_listen \"127.0.0.1:7000\"", "peer_listen"},
      {"peer_lisen: \"127.0.0.1:7000\"", "peer_lisen"},
      {"transport: \"tcp\"", "transport"},  // given twice
      {"qp_timeout: 40", "must be 0..31"},
      {"qp_timeout: -1", "qp_timeout"},
      {"qps_per_peer: 65", "qps_per_peer"},
      {"loop_slice_us: 99", "loop_slice_us': 99 must be 0 (100) or 100..100000"},
      {"loop_slice_us: 100001", "loop_slice_us"},
      {"log_level: \"loud\"", "log_level"},
      {"socket_mode: \"0999\"", "socket_mode"},
      {"socket_mode: \"7777\"", "socket_mode"},
      {"socket: \"relative.sock\"", "absolute path"},
      {"socket: \"/" + std::string(120, 'a') + "\"", "Unix socket address"},
      {"peer_listen: \"no-port\"", "peer_listen"},
      {"peer_listen: \" 127.0.0.1:7000\"", "is not a host"},
      {"data_listen: \"127.0.0.1:99999\"", "data_listen"},
      {"advertise_address: \"host\\000x:7471\"", "advertise_address"},
      {"metrics_listen: \"nowhere\"", "metrics_listen"},
      {"peer_allow: \"banana\"", "peer_allow"},
      {"peer_allow: \"10.0.0.0/33\"", "prefix length"},
      {"socket_group: \"no-such-group-rdmad\"", "not a group"},
      {"tls_ca_file: \"" + not_pem + "\"", "needs all of"},
      {"verbs_chunk_bytes: 1", "verbs_chunk_bytes"},
      {"verbs_read_chunk_bytes: 100", "verbs_read_chunk_bytes"},
      {"device: \"bad name\"", "device"},
      {"rails: \"bad name\"", "not an RDMA device name"},
      {"rail_stripe_bytes: 100", "rail_stripe_bytes"},
      {"rail_pause_seconds: 90000", "rail_pause_seconds"},
      {"rail_pins: { devices: \"rxe0\" }", "region_prefix"},
      {"rail_pins: { region_prefix: \"gpu0/\" }", "names no devices"},
      {"max_pinned_bytes: \"lots\"", "max_pinned_bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto config =
        ParseConfigText("transport: \"tcp\"\n" + c.text + "\n", "x.conf");
    ASSERT_FALSE(config.ok()) << "accepted";
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(config.status().message());
    EXPECT_THAT(message, ::testing::ContainsRegex("^x\\.conf:2:[0-9]+: "));
    EXPECT_THAT(message, HasSubstr(c.fragment));
  }
}

TEST(ConfigFileTest, RailsAreDistinctDevicesWithPausesInOrder) {
  auto config = ParseConfigText(
      "rails: \"rxe0\"\nrails: \"rxe1\"\nrail_stripe_bytes: \"128K\"\n"
      "rail_pause_seconds: 5\nrail_pause_max_seconds: 40\n"
      "rail_pins: { region_prefix: \"gpu0/\" devices: \"rxe1\" }\n",
      "r.conf");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->rails_size(), 2);
  EXPECT_EQ(config->rail_stripe_bytes(), 128u << 10);
  EXPECT_EQ(config->rail_pins(0).devices(0), "rxe1");

  config = ParseConfigText("rails: \"rxe0\"\nrails: \"rxe0\"\n", "r.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("r.conf:2:1: field 'rails': 'rxe0' is listed twice"));
  config = ParseConfigText("device: \"rxe0\"\nrails: \"rxe1\"\n", "r.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("not both"));
  // The first pause may not outlast the longest, given or default (300 s).
  config = ParseConfigText("rail_pause_seconds: 400\n", "r.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("field 'rail_pause_max_seconds'"));
  EXPECT_TRUE(ParseConfigText("rail_pause_seconds: 400\n"
                              "rail_pause_max_seconds: 400\n",
                              "r.conf")
                  .ok());
}

TEST(ConfigFileTest, TlsFilesMustBePemOfTheRightKind) {
  const std::string dir = ::testing::TempDir();
  const std::string cert = dir + "/cert.pem";
  const std::string key = dir + "/key.pem";
  std::ofstream(cert) << "-----BEGIN CERTIFICATE-----\nMIIB\n"
                         "-----END CERTIFICATE-----\n";
  std::ofstream(key) << "-----BEGIN PRIVATE KEY-----\nMIIE\n"
                        "-----END PRIVATE KEY-----\n";
  const auto tls = [&](const std::string& ca, const std::string& c,
                       const std::string& k) {
    return absl::StrCat("tls_ca_file: \"", ca, "\"\ntls_cert_file: \"", c,
                        "\"\ntls_key_file: \"", k, "\"\n");
  };
  EXPECT_TRUE(ParseConfigText(tls(cert, cert, key), "t.conf").ok());
  auto config = ParseConfigText(tls(cert, key, key), "t.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("t.conf:2:1: field 'tls_cert_file'"));
  config = ParseConfigText(tls(cert, cert, dir + "/missing.pem"), "t.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("t.conf:3:1: field 'tls_key_file': cannot read"));
  config = ParseConfigText(tls(dir, cert, key), "t.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("a directory"));
}

TEST(ConfigFileTest, PeerAllowErrorPointsAtTheBadEntry) {
  auto config = ParseConfigText(
      "peer_allow: \"10.0.0.0/8\"\n"
      "peer_allow: \"::1\"\n"
      "peer_allow: \"not-an-address\"\n",
      "allow.conf");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("allow.conf:3:1: field 'peer_allow'"));
  EXPECT_THAT(config.status().message(), HasSubstr("not-an-address"));
}

TEST(ConfigFileTest, OnlyRegularFilesAreRead) {
  // A directory opens and reads as nothing on Linux: it must not pass for
  // an empty (all defaults) config.
  auto config = LoadConfigFile(::testing::TempDir());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("is a directory"));
  config = LoadConfigFile("/dev/zero");  // would never end
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("not a regular file"));
  const std::string big = ::testing::TempDir() + "/big.conf";
  std::ofstream(big) << std::string(kMaxConfigBytes + 1, '#');
  config = LoadConfigFile(big);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("bytes; at most"));
  // An empty file is a valid config: all defaults.
  const std::string empty = ::testing::TempDir() + "/empty.conf";
  std::ofstream(empty).flush();
  EXPECT_TRUE(LoadConfigFile(empty).ok());
}

TEST(ConfigReloadTest, SplitsReloadableFromRestartOnly) {
  v1::DaemonConfig running;
  running.set_log_level("info");
  running.set_peer_listen("0.0.0.0:7471");
  running.set_qps_per_peer(4);
  v1::DaemonConfig next = running;
  next.set_log_level("debug");
  next.set_peer_listen("0.0.0.0:7472");
  next.set_metrics_listen("127.0.0.1:9471");
  const ReloadPlan plan = PlanReload(running, next);
  ASSERT_EQ(plan.apply.size(), 2u);
  EXPECT_EQ(plan.apply[0].field, "log_level");
  EXPECT_EQ(plan.apply[0].before, "\"info\"");
  EXPECT_EQ(plan.apply[0].after, "\"debug\"");
  EXPECT_EQ(plan.apply[1].field, "metrics_listen");
  EXPECT_EQ(plan.apply[1].before, "");
  ASSERT_EQ(plan.restart.size(), 1u);
  EXPECT_EQ(plan.restart[0].field, "peer_listen");

  const v1::DaemonConfig merged = Merge(running, next, plan);
  EXPECT_EQ(merged.log_level(), "debug");
  EXPECT_EQ(merged.metrics_listen(), "127.0.0.1:9471");
  EXPECT_EQ(merged.peer_listen(), "0.0.0.0:7471");  // needs a restart
  EXPECT_EQ(merged.qps_per_peer(), 4u);
}

TEST(ConfigReloadTest, UnchangedIsEmptyAndClearingApplies) {
  v1::DaemonConfig running;
  running.set_metrics_listen("127.0.0.1:9471");
  EXPECT_TRUE(PlanReload(running, running).empty());
  v1::DaemonConfig next;
  const ReloadPlan plan = PlanReload(running, next);
  ASSERT_EQ(plan.apply.size(), 1u);
  EXPECT_EQ(Merge(running, next, plan).metrics_listen(), "");
}

TEST(ConfigReloadTest, OnlyTheListedFieldsAreReloadable) {
  EXPECT_TRUE(IsReloadable("log_level"));
  EXPECT_TRUE(IsReloadable("socket_mode"));
  EXPECT_TRUE(IsReloadable("metrics_listen"));
  EXPECT_FALSE(IsReloadable("socket"));
  EXPECT_FALSE(IsReloadable("transport"));
  EXPECT_FALSE(IsReloadable("max_pinned_bytes"));
}

}  // namespace
}  // namespace rdmad::config
