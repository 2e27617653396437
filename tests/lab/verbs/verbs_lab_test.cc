// The verbs layer against a real RDMA device: Linux soft-RoCE (rxe0) inside
// the lab VM (tests/lab/labvm), or any device a developer machine has.
//
// Resources are built in layers, like rdma-core's own tests: device ->
// PD/CQ/MR -> two connected QPs (loopback through one device) -> traffic,
// checked byte for byte.
//
// Outside the lab (RDMAD_LAB unset) a host without a device skips every test
// with a message; inside the lab (RDMAD_LAB=1) a missing device fails.
// Environment set by the lab: LAB_RXE_DEV (device name), LAB_GID_INDEX
// (the RoCEv2 IPv4 GID index the lab expects), LAB_IP, LAB_NETDEV.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/transport/verbs/completion_queue.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/gid_selection.h"
#include "daemon/transport/verbs/notice_buffers.h"
#include "daemon/transport/verbs/notice_receiver.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/registrar.h"
#include "daemon/transport/verbs/verbs_channel.h"
#include "daemon/transport/verbs/verbs_notice.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

// Generous: soft-RoCE under QEMU's TCG moves about 20 MB/s.
constexpr absl::Duration kCompletionTimeout = absl::Seconds(60);

std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

bool InLab() { return Env("RDMAD_LAB").value_or("") == "1"; }

// A deterministic, position-dependent byte pattern, so a shifted or
// truncated copy never matches by accident.
void FillPattern(uint8_t* data, size_t length, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < length; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    data[i] = static_cast<uint8_t>(x ^ (i >> 8));
  }
}

// Empty if equal, else where and how the first difference looks.
std::string Compare(const uint8_t* got, const uint8_t* want, size_t length) {
  if (std::memcmp(got, want, length) == 0) return "";
  size_t i = 0;
  while (got[i] == want[i]) ++i;
  size_t bad = 0;
  for (size_t j = 0; j < length; ++j) bad += got[j] != want[j];
  return absl::StrCat("first difference at byte ", i, " of ", length, " (got ",
                      got[i], ", want ", want[i], "); ", bad, " bytes differ");
}

// Empty if [data, data+length) is all `value`.
std::string CheckFilled(const uint8_t* data, size_t length, uint8_t value,
                        absl::string_view what) {
  for (size_t i = 0; i < length; ++i) {
    if (data[i] != value) {
      return absl::StrCat(what, ": byte ", i, " was overwritten (", data[i],
                          " instead of ", value, ")");
    }
  }
  return "";
}

// Resource counts of one device from `rdma resource show DEV` (netlink),
// e.g. {"pd": 1, "cq": 2, "qp": 1, "mr": 0, ...}; empty if the tool is
// missing or its output is not understood.
std::map<std::string, int> ResourceCounts(const std::string& device) {
  std::map<std::string, int> counts;
  const std::string command =
      absl::StrCat("rdma resource show ", device, " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return counts;
  std::string output;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  pclose(pipe);
  // "0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 1 srq 0"
  std::vector<std::string> words =
      absl::StrSplit(output, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    int name_as_number = 0;
    int n = 0;
    if (!absl::SimpleAtoi(words[i], &name_as_number) &&
        absl::SimpleAtoi(words[i + 1], &n)) {
      counts[words[i]] = n;
      ++i;
    }
  }
  return counts;
}

// Layer 1: the device. Finds it, picks the active port and the GID.
class VerbsLabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<core::DeviceInfo>> devices = DiscoverDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    if (devices->empty()) {
      if (InLab()) {
        FAIL() << "RDMAD_LAB=1 but DiscoverDevices found no RDMA device: the "
                  "lab VM should have created "
               << Env("LAB_RXE_DEV").value_or("rxe0")
               << " (see the labvm console log)";
      }
      GTEST_SKIP() << "no RDMA device on this host; run this test inside the "
                      "soft-RoCE lab: tests/lab/labvm -- <this binary>";
    }
    const std::optional<std::string> wanted = Env("LAB_RXE_DEV");
    for (const core::DeviceInfo& device : *devices) {
      if (!wanted.has_value() || device.name == *wanted) {
        info_ = device;
        break;
      }
    }
    ASSERT_FALSE(info_.name.empty())
        << "device " << *wanted << " (LAB_RXE_DEV) not found";

    absl::StatusOr<uint32_t> port = ChooseActivePort(info_);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    absl::StatusOr<uint32_t> gid_index =
        ChooseGidIndex(info_.ports[port_ - 1], std::nullopt);
    ASSERT_TRUE(gid_index.ok()) << gid_index.status();
    gid_index_ = *gid_index;

    absl::StatusOr<std::shared_ptr<Device>> device = OpenDevice(info_.name);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
  }

  QpConfig Config() const {
    QpConfig config;
    config.port = port_;
    config.gid_index = gid_index_;
    return config;
  }

  core::DeviceInfo info_;
  uint32_t port_ = 0;
  uint32_t gid_index_ = 0;
  std::shared_ptr<Device> device_;
};

// Layer 2 and 3: a CQ per QP, two QPs connected to each other through the
// same device (loopback), and a registrar for buffers.
class LoopbackTest : public VerbsLabTest {
 protected:
  void SetUp() override {
    VerbsLabTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    registrar_ = std::make_unique<VerbsRegistrar>(
        std::vector<std::shared_ptr<Device>>{device_});
    for (auto* cq : {&cq_a_, &cq_b_}) {
      absl::StatusOr<std::shared_ptr<CompletionQueue>> created =
          CompletionQueue::Create(device_, 256);
      ASSERT_TRUE(created.ok()) << created.status();
      *cq = *std::move(created);
    }
    absl::StatusOr<std::unique_ptr<QueuePair>> a =
        QueuePair::Create(cq_a_, Config());
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *std::move(a);
    absl::StatusOr<std::unique_ptr<QueuePair>> b =
        QueuePair::Create(cq_b_, Config());
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *std::move(b);
    ConnectPair();
  }

  void ConnectPair() {
    absl::StatusOr<QpEndpoint> ea = a_->LocalEndpoint();
    ASSERT_TRUE(ea.ok()) << ea.status();
    absl::StatusOr<QpEndpoint> eb = b_->LocalEndpoint();
    ASSERT_TRUE(eb.ok()) << eb.status();
    absl::Status status = a_->Connect(*eb);
    ASSERT_TRUE(status.ok()) << status;
    status = b_->Connect(*ea);
    ASSERT_TRUE(status.ok()) << status;
  }

  // A heap buffer registered on the device with `remote` access.
  struct Buffer {
    std::vector<uint8_t> bytes;
    std::unique_ptr<VerbsRegistration> registration;
    uint8_t* data() { return bytes.data(); }
    uint32_t lkey() const { return registration->regions()[0]->lkey(); }
    uint32_t rkey() const { return registration->regions()[0]->rkey(); }
    uint64_t addr(size_t offset) {
      return reinterpret_cast<uintptr_t>(bytes.data() + offset);
    }
  };

  Buffer MakeBuffer(size_t size, core::RemoteAccess remote) {
    Buffer buffer;
    buffer.bytes.assign(size, 0);
    absl::StatusOr<std::unique_ptr<VerbsRegistration>> registration =
        registrar_->RegisterVerbs(buffer.bytes.data(), size, remote);
    EXPECT_TRUE(registration.ok()) << registration.status();
    if (registration.ok()) buffer.registration = *std::move(registration);
    return buffer;
  }

  absl::Status WaitA(ibv_wc* wc = nullptr) {
    return cq_a_->WaitOne(absl::Now() + kCompletionTimeout, wc);
  }

  void ExpectState(const QueuePair& qp, ibv_qp_state want) {
    absl::StatusOr<ibv_qp_state> state = qp.QueryState();
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_EQ(QpStateName(*state), QpStateName(want));
  }

  std::unique_ptr<VerbsRegistrar> registrar_;
  std::shared_ptr<CompletionQueue> cq_a_;
  std::shared_ptr<CompletionQueue> cq_b_;
  std::unique_ptr<QueuePair> a_;
  std::unique_ptr<QueuePair> b_;
};

// --- Discovery -------------------------------------------------------------

TEST_F(VerbsLabTest, DiscoversActiveRocePortWithRoceV2Gid) {
  if (const auto wanted = Env("LAB_RXE_DEV")) {
    EXPECT_EQ(info_.name, *wanted);
  }
  EXPECT_EQ(info_.transport, "InfiniBand");  // RoCE devices report IB
  EXPECT_EQ(info_.node_guid.size(), 19u) << info_.node_guid;
  ASSERT_FALSE(info_.ports.empty());
  const core::PortInfo& port = info_.ports[port_ - 1];
  EXPECT_EQ(port.state, core::PortState::kActive);
  EXPECT_EQ(port.link_layer, "Ethernet");
  EXPECT_TRUE(MtuFromBytes(port.active_mtu).ok()) << port.active_mtu;
  EXPECT_TRUE(MtuFromBytes(port.max_mtu).ok()) << port.max_mtu;
  EXPECT_LE(port.active_mtu, port.max_mtu);
  EXPECT_GE(port.max_msg_size, 1u << 20);

  const auto roce_v2 = std::find_if(
      port.gids.begin(), port.gids.end(), [](const core::GidInfo& gid) {
        return gid.type == "RoCEv2" && IsIpv4MappedGid(gid.raw);
      });
  ASSERT_NE(roce_v2, port.gids.end()) << "no RoCEv2 IPv4 GID";
  EXPECT_EQ(gid_index_, roce_v2->index);
  if (const auto ip = Env("LAB_IP")) {
    EXPECT_EQ(roce_v2->text, "::ffff:" + *ip);
  }
  if (const auto netdev = Env("LAB_NETDEV")) {
    EXPECT_EQ(roce_v2->netdev, *netdev);
  }
  if (const auto lab_index = Env("LAB_GID_INDEX")) {
    EXPECT_EQ(absl::StrCat(gid_index_), *lab_index)
        << "ChooseGidIndex disagrees with the lab's GID index";
  }
  for (const core::GidInfo& gid : port.gids) {
    EXPECT_EQ(GidToText(gid.raw), gid.text);
    EXPECT_FALSE(IsZeroGid(gid.raw));
  }

  const core::DeviceLimits& limits = info_.limits;
  EXPECT_GT(limits.max_qp, 0u);
  EXPECT_GT(limits.max_qp_wr, 0u);
  EXPECT_GT(limits.max_cq, 0u);
  EXPECT_GT(limits.max_cqe, 0u);
  EXPECT_GT(limits.max_mr, 0u);
  EXPECT_GT(limits.max_pd, 0u);
  EXPECT_GT(limits.max_mr_size, 0u);
  EXPECT_GT(limits.max_qp_rd_atom, 0u);
  EXPECT_GT(limits.max_qp_init_rd_atom, 0u);
}

TEST_F(VerbsLabTest, OpenedDeviceDescribesItselfLikeDiscovery) {
  absl::StatusOr<core::DeviceInfo> described = device_->Describe();
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->name, info_.name);
  EXPECT_EQ(described->node_guid, info_.node_guid);
  ASSERT_EQ(described->ports.size(), info_.ports.size());
  EXPECT_EQ(described->ports[port_ - 1].gids.size(),
            info_.ports[port_ - 1].gids.size());
  absl::StatusOr<ibv_gid_entry> gid = device_->QueryGid(port_, gid_index_);
  ASSERT_TRUE(gid.ok()) << gid.status();
  EXPECT_EQ(gid->gid_type, static_cast<uint32_t>(IBV_GID_TYPE_ROCE_V2));
}

TEST_F(VerbsLabTest, EmptyGidSlotIsNotFound) {
  absl::StatusOr<ibv_port_attr> port = device_->QueryPort(port_);
  ASSERT_TRUE(port.ok()) << port.status();
  // The last slot of the table is empty on a fresh lab VM.
  const uint32_t last = static_cast<uint32_t>(port->gid_tbl_len) - 1;
  for (const core::GidInfo& gid : info_.ports[port_ - 1].gids) {
    if (gid.index == last) GTEST_SKIP() << "the GID table is full";
  }
  EXPECT_EQ(device_->QueryGid(port_, last).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(VerbsLabTest, OpenUnknownDeviceListsPresentOnes) {
  absl::StatusOr<std::shared_ptr<Device>> device = OpenDevice("nosuchdev9");
  EXPECT_EQ(device.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(device.status().message(), HasSubstr(info_.name));
}

// --- RAII ------------------------------------------------------------------

TEST_F(VerbsLabTest, CreateAndDestroyManyTimesLeaksNothing) {
  const std::map<std::string, int> before = ResourceCounts(info_.name);
  std::vector<uint8_t> memory(1 << 16);
  for (int i = 0; i < 100; ++i) {
    // Declared parent first, destroyed child first, like the daemon does.
    absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
        CompletionQueue::Create(device_, 64);
    ASSERT_TRUE(cq.ok()) << "iteration " << i << ": " << cq.status();
    absl::StatusOr<std::unique_ptr<QueuePair>> qp =
        QueuePair::Create(*cq, Config());
    ASSERT_TRUE(qp.ok()) << "iteration " << i << ": " << qp.status();
    ASSERT_TRUE((*qp)->ModifyToInit().ok());
    absl::StatusOr<std::unique_ptr<MemoryRegion>> mr =
        MemoryRegion::Register(device_, memory.data(), memory.size(),
                               MrAccessFlags(core::RemoteAccess::kReadWrite));
    ASSERT_TRUE(mr.ok()) << "iteration " << i << ": " << mr.status();
    if (i == 0 && !before.empty()) {
      // Proves the counts see our objects, so equal counts below mean
      // something.
      const std::map<std::string, int> during = ResourceCounts(info_.name);
      for (const char* kind : {"cq", "qp", "mr"}) {
        ASSERT_TRUE(during.count(kind)) << kind;
        EXPECT_EQ(during.at(kind), before.at(kind) + 1) << kind;
      }
    }
  }
  // Owners released in the "wrong" order: the shared_ptrs keep parents
  // alive until the last child is gone.
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<std::shared_ptr<Device>> device = OpenDevice(info_.name);
    ASSERT_TRUE(device.ok()) << device.status();
    absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
        CompletionQueue::Create(*device, 16);
    ASSERT_TRUE(cq.ok()) << cq.status();
    absl::StatusOr<std::unique_ptr<QueuePair>> qp =
        QueuePair::Create(*cq, Config());
    ASSERT_TRUE(qp.ok()) << qp.status();
    device->reset();
    cq->reset();
    qp->reset();
  }
  const std::map<std::string, int> after = ResourceCounts(info_.name);
  if (before.empty()) {
    std::cout << "note: `rdma resource show` unavailable; checked only that "
                 "every create and destroy succeeded\n";
    return;
  }
  for (const char* kind : {"pd", "cq", "qp", "mr"}) {
    ASSERT_TRUE(before.count(kind)) << kind;
    EXPECT_EQ(after.at(kind), before.at(kind)) << kind << " count changed";
  }
  std::cout << "resource counts before/after: pd " << before.at("pd") << "/"
            << after.at("pd") << ", cq " << before.at("cq") << "/"
            << after.at("cq") << ", qp " << before.at("qp") << "/"
            << after.at("qp") << ", mr " << before.at("mr") << "/"
            << after.at("mr") << "\n";
}

// --- QP state machine ------------------------------------------------------

TEST_F(VerbsLabTest, QpStateMachineResetInitRtrRts) {
  absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
      CompletionQueue::Create(device_, 64);
  ASSERT_TRUE(cq.ok()) << cq.status();
  absl::StatusOr<std::unique_ptr<QueuePair>> a =
      QueuePair::Create(*cq, Config());
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<QueuePair>> b =
      QueuePair::Create(*cq, Config());
  ASSERT_TRUE(b.ok()) << b.status();
  QueuePair& qa = **a;
  QueuePair& qb = **b;

  auto state = [](const QueuePair& qp) {
    absl::StatusOr<ibv_qp_state> s = qp.QueryState();
    return s.ok() ? QpStateName(*s) : s.status().ToString();
  };
  EXPECT_EQ(state(qa), "RESET");
  EXPECT_EQ(state(qb), "RESET");

  absl::StatusOr<QpEndpoint> ea = qa.LocalEndpoint();
  ASSERT_TRUE(ea.ok()) << ea.status();
  absl::StatusOr<QpEndpoint> eb = qb.LocalEndpoint();
  ASSERT_TRUE(eb.ok()) << eb.status();
  EXPECT_EQ(ea->qpn, qa.qpn());
  EXPECT_NE(ea->qpn, eb->qpn);
  EXPECT_LT(ea->psn, 1u << 24);
  EXPECT_EQ(ea->gid_index, gid_index_);
  EXPECT_FALSE(IsZeroGid(ea->gid));
  if (const auto ip = Env("LAB_IP")) {
    EXPECT_EQ(GidToText(ea->gid), "::ffff:" + *ip);
  }
  EXPECT_EQ(ea->mtu, info_.ports[port_ - 1].active_mtu);
  EXPECT_GE(ea->max_rd_atomic, 1u);

  ASSERT_TRUE(qa.ModifyToInit().ok());
  ASSERT_TRUE(qb.ModifyToInit().ok());
  EXPECT_EQ(state(qa), "INIT");
  EXPECT_EQ(qa.ModifyToRts().code(), absl::StatusCode::kFailedPrecondition);

  absl::Status status = qa.ModifyToRtr(*eb);
  ASSERT_TRUE(status.ok()) << status;
  status = qb.ModifyToRtr(*ea);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(state(qa), "RTR");
  EXPECT_EQ(state(qb), "RTR");

  status = qa.ModifyToRts();
  ASSERT_TRUE(status.ok()) << status;
  status = qb.ModifyToRts();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(state(qa), "RTS");
  EXPECT_EQ(state(qb), "RTS");

  // Connect refuses a QP that is already connected.
  EXPECT_EQ(qa.Connect(*eb).code(), absl::StatusCode::kFailedPrecondition);
  // Reset brings it back to RESET with a new PSN, ready to connect again.
  ASSERT_TRUE(qa.Reset().ok());
  EXPECT_EQ(state(qa), "RESET");
}

TEST_F(VerbsLabTest, ConnectRejectsBadRemoteEndpoint) {
  absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
      CompletionQueue::Create(device_, 16);
  ASSERT_TRUE(cq.ok());
  absl::StatusOr<std::unique_ptr<QueuePair>> qp =
      QueuePair::Create(*cq, Config());
  ASSERT_TRUE(qp.ok());
  QpEndpoint remote;  // all zero: QPN 0
  absl::Status status = (*qp)->Connect(remote);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("QPN"));
}

TEST_F(VerbsLabTest, CreateRejectsGidIndexOutsideTheTable) {
  absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
      CompletionQueue::Create(device_, 16);
  ASSERT_TRUE(cq.ok());
  QpConfig config = Config();
  config.gid_index = 100000;
  absl::StatusOr<std::unique_ptr<QueuePair>> qp =
      QueuePair::Create(*cq, config);
  EXPECT_EQ(qp.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(qp.status().message(), HasSubstr("GID index 100000"));
  config = Config();
  config.port = 9;
  qp = QueuePair::Create(*cq, config);
  EXPECT_EQ(qp.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(VerbsLabTest, WaitWithNothingPostedHitsTheDeadline) {
  absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
      CompletionQueue::Create(device_, 16);
  ASSERT_TRUE(cq.ok());
  const absl::Time start = absl::Now();
  absl::Status status = (*cq)->WaitOne(start + absl::Milliseconds(300));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_GE(waited, absl::Milliseconds(300));
  EXPECT_LT(waited, absl::Seconds(5));
}

// --- One-sided WRITE and READ ----------------------------------------------

struct TransferCase {
  size_t length;
  size_t local_offset;
  size_t remote_offset;
};

class TransferTest : public LoopbackTest,
                     public ::testing::WithParamInterface<TransferCase> {};

constexpr size_t kGuard = 64;
constexpr uint8_t kUntouched = 0xEE;

TEST_P(TransferTest, WriteThenReadByteForByte) {
  const TransferCase& c = GetParam();
  Buffer local =
      MakeBuffer(c.local_offset + c.length + kGuard, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(c.remote_offset + c.length + kGuard,
                             core::RemoteAccess::kReadWrite);
  ASSERT_NE(local.registration, nullptr);
  ASSERT_NE(remote.registration, nullptr);

  // WRITE: local[local_offset, +length) -> remote[remote_offset, +length).
  FillPattern(local.data() + c.local_offset, c.length, 1);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  absl::Status status =
      a_->PostWrite({.wr_id = 1,
                     .local_addr = local.data() + c.local_offset,
                     .length = static_cast<uint32_t>(c.length),
                     .lkey = local.lkey(),
                     .remote_addr = remote.addr(c.remote_offset),
                     .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 1u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(Compare(remote.data() + c.remote_offset,
                    local.data() + c.local_offset, c.length),
            "");
  EXPECT_EQ(CheckFilled(remote.data(), c.remote_offset, kUntouched,
                        "before the written range"),
            "");
  EXPECT_EQ(CheckFilled(remote.data() + c.remote_offset + c.length, kGuard,
                        kUntouched, "after the written range"),
            "");

  // READ: remote[remote_offset, +length) -> local[local_offset, +length),
  // with fresh contents on the remote side.
  FillPattern(remote.data() + c.remote_offset, c.length, 2);
  std::fill(local.bytes.begin(), local.bytes.end(), kUntouched);
  status = a_->PostRead({.wr_id = 2,
                         .local_addr = local.data() + c.local_offset,
                         .length = static_cast<uint32_t>(c.length),
                         .lkey = local.lkey(),
                         .remote_addr = remote.addr(c.remote_offset),
                         .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 2u);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, c.length);
  EXPECT_EQ(Compare(local.data() + c.local_offset,
                    remote.data() + c.remote_offset, c.length),
            "");
  EXPECT_EQ(CheckFilled(local.data(), c.local_offset, kUntouched,
                        "before the read range"),
            "");
  EXPECT_EQ(CheckFilled(local.data() + c.local_offset + c.length, kGuard,
                        kUntouched, "after the read range"),
            "");
}

std::vector<TransferCase> TransferCases() {
  std::vector<TransferCase> cases;
  for (size_t length :
       {size_t{1}, size_t{4095}, size_t{65536}, size_t{(1 << 20) + 7}}) {
    cases.push_back({length, 0, 0});
    cases.push_back({length, 1, 3});     // both sides unaligned
    cases.push_back({length, 4093, 7});  // local crosses a page boundary
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TransferTest, ::testing::ValuesIn(TransferCases()),
    [](const ::testing::TestParamInfo<TransferCase>& info) {
      return absl::StrCat(info.param.length, "B_local", info.param.local_offset,
                          "_remote", info.param.remote_offset);
    });

TEST_F(LoopbackTest, InlineWriteNeedsNoRegisteredSource) {
  ASSERT_GE(a_->max_inline_data(), 16u);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kWrite);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  // An unregistered stack buffer and no lkey: inline data is copied into
  // the work request, and the buffer is free as soon as the post returns.
  uint8_t source[64];
  const uint32_t length = std::min<uint32_t>(a_->max_inline_data(), 64);
  FillPattern(source, length, 3);
  uint8_t expected[64];
  std::memcpy(expected, source, length);
  absl::Status status = a_->PostWrite({.wr_id = 9,
                                       .local_addr = source,
                                       .length = length,
                                       .lkey = 0,
                                       .remote_addr = remote.addr(5),
                                       .rkey = remote.rkey(),
                                       .inline_data = true});
  ASSERT_TRUE(status.ok()) << status;
  std::memset(source, 0, sizeof(source));
  status = WaitA();
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Compare(remote.data() + 5, expected, length), "");
  EXPECT_EQ(CheckFilled(remote.data() + 5 + length, 16, kUntouched, "after"),
            "");
}

TEST_F(LoopbackTest, InlineChecksAreLocal) {
  uint8_t source[8] = {};
  absl::Status status = a_->PostRead({.local_addr = source,
                                      .length = 8,
                                      .remote_addr = 0,
                                      .rkey = 0,
                                      .inline_data = true});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::vector<uint8_t> big(a_->max_inline_data() + 1);
  status = a_->PostWrite({.local_addr = big.data(),
                          .length = static_cast<uint32_t>(big.size()),
                          .inline_data = true});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("max_inline_data"));
  // Nothing reached the NIC: the QP is still usable.
  ExpectState(*a_, IBV_QPS_RTS);
}

TEST_F(LoopbackTest, ChainWithSelectiveSignalingCompletesOnce) {
  constexpr int kPieces = 16;
  constexpr uint32_t kPiece = 1000;
  Buffer local = MakeBuffer(kPieces * kPiece, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(kPieces * kPiece, core::RemoteAccess::kWrite);
  FillPattern(local.data(), local.bytes.size(), 4);
  std::vector<RdmaOp> ops;
  for (int i = 0; i < kPieces; ++i) {
    ops.push_back({.opcode = RdmaOp::Opcode::kWrite,
                   .wr_id = static_cast<uint64_t>(100 + i),
                   .local_addr = local.data() + i * kPiece,
                   .length = kPiece,
                   .lkey = local.lkey(),
                   .remote_addr = remote.addr(i * kPiece),
                   .rkey = remote.rkey(),
                   .signaled = i == kPieces - 1});
  }
  absl::Status status = a_->Post(ops);
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(wc.wr_id, 100u + kPieces - 1);
  // RC completes in order: the last one done means all are done.
  EXPECT_EQ(Compare(remote.data(), local.data(), local.bytes.size()), "");
  // No completion for the unsignaled ones.
  status = cq_a_->WaitOne(absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
}

TEST_F(LoopbackTest, ZeroLengthWriteCompletes) {
  Buffer remote = MakeBuffer(64, core::RemoteAccess::kWrite);
  absl::Status status = a_->PostWrite({.wr_id = 5,
                                       .length = 0,
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_TRUE(status.ok()) << status;
}

// --- Failures ----------------------------------------------------------------

TEST_F(LoopbackTest, WrongRkeyFailsWithRemoteAccessErrorAndQpGoesToError) {
  Buffer local = MakeBuffer(4096, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(4096, core::RemoteAccess::kReadWrite);
  FillPattern(local.data(), 4096, 5);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  // Flipping the low byte (the key part of an rkey) names no MR.
  absl::Status status = a_->PostWrite({.wr_id = 7,
                                       .local_addr = local.data(),
                                       .length = 4096,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey() ^ 0xff});
  ASSERT_TRUE(status.ok()) << status;
  ibv_wc wc{};
  status = WaitA(&wc);
  std::cout << "wrong rkey -> " << status << "\n";
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(),
              HasSubstr(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
  EXPECT_THAT(status.message(), HasSubstr("rkey"));
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(CheckFilled(remote.data(), 4096, kUntouched, "target"), "");
  ExpectState(*a_, IBV_QPS_ERR);

  // Work posted on a QP in ERR is flushed (or refused), never executed.
  status = a_->PostWrite({.wr_id = 8,
                          .local_addr = local.data(),
                          .length = 16,
                          .lkey = local.lkey(),
                          .remote_addr = remote.addr(0),
                          .rkey = remote.rkey()});
  if (status.ok()) {
    status = WaitA(&wc);
    std::cout << "post after error -> " << status << "\n";
    EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
    EXPECT_THAT(status.message(),
                HasSubstr(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR)));
  } else {
    std::cout << "post after error refused -> " << status << "\n";
  }
  EXPECT_EQ(CheckFilled(remote.data(), 4096, kUntouched, "target"), "");

  // Recovery as the pool will do it: reset both ends, exchange fresh
  // endpoints, connect again, and the same transfer works.
  ASSERT_TRUE(a_->Reset().ok());
  ASSERT_TRUE(b_->Reset().ok());
  while (cq_b_->Poll(absl::MakeSpan(&wc, 1)).value_or(0) > 0) {
  }
  while (cq_a_->Poll(absl::MakeSpan(&wc, 1)).value_or(0) > 0) {
  }
  ConnectPair();
  status = a_->PostWrite({.wr_id = 10,
                          .local_addr = local.data(),
                          .length = 4096,
                          .lkey = local.lkey(),
                          .remote_addr = remote.addr(0),
                          .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA(&wc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Compare(remote.data(), local.data(), 4096), "");
}

TEST_F(LoopbackTest, ReadOnlyRegionRefusesRemoteWrite) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kRead);
  std::fill(remote.bytes.begin(), remote.bytes.end(), kUntouched);
  FillPattern(local.data(), 256, 6);
  absl::Status status = a_->PostWrite({.wr_id = 11,
                                       .local_addr = local.data(),
                                       .length = 256,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_EQ(CheckFilled(remote.data(), 256, kUntouched, "read-only target"),
            "");
}

TEST_F(LoopbackTest, WriteOnlyRegionRefusesRemoteRead) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kWrite);
  absl::Status status = a_->PostRead({.wr_id = 12,
                                      .local_addr = local.data(),
                                      .length = 256,
                                      .lkey = local.lkey(),
                                      .remote_addr = remote.addr(0),
                                      .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

TEST_F(LoopbackTest, WritePastTheRegionEndIsRefused) {
  Buffer local = MakeBuffer(8192, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(4096, core::RemoteAccess::kReadWrite);
  absl::Status status = a_->PostWrite({.wr_id = 13,
                                       .local_addr = local.data(),
                                       .length = 4097,
                                       .lkey = local.lkey(),
                                       .remote_addr = remote.addr(0),
                                       .rkey = remote.rkey()});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

TEST_F(LoopbackTest, DeregisteredRegionRevokesItsRkey) {
  Buffer local = MakeBuffer(256, core::RemoteAccess::kNone);
  Buffer remote = MakeBuffer(256, core::RemoteAccess::kReadWrite);
  const uint32_t stale_rkey = remote.rkey();
  const uint64_t stale_addr = remote.addr(0);
  remote.registration.reset();  // ibv_dereg_mr
  absl::Status status = a_->PostWrite({.wr_id = 14,
                                       .local_addr = local.data(),
                                       .length = 256,
                                       .lkey = local.lkey(),
                                       .remote_addr = stale_addr,
                                       .rkey = stale_rkey});
  ASSERT_TRUE(status.ok()) << status;
  status = WaitA();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
}

// Layer 4: a VerbsChannel on an event loop of the I/O runtime, over QP a
// (connected to b on the same device), posting into a buffer registered
// for b's side.
class VerbsChannelLabTest : public LoopbackTest {
 protected:
  void SetUp() override {
    LoopbackTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto runtime = runtime::IoRuntime::Start({.threads = 1});
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
    regions_ = std::make_unique<core::RegionTable>(registrar_.get(),
                                                   core::RegionLimits{});
    core::AllocateOptions o;
    o.size = 1 << 20;
    o.name = "local";
    o.daemon_owned = true;
    auto region = regions_->Allocate(core::Caller{1, 0, 0, 1}, o);
    ASSERT_TRUE(region.ok()) << region.status();
    local_ = *region;
    remote_ = MakeBuffer(1 << 20, core::RemoteAccess::kReadWrite);
    target_ = std::make_shared<core::RemoteRegionInfo>();
    target_->peer = "self";
    target_->name = "remote";
    target_->length = 1 << 20;
    target_->access = core::RemoteAccess::kReadWrite;
    target_->addr = remote_.addr(0);
    target_->rkeys.push_back({info_.name, 0, remote_.rkey()});
    VerbsChannelOptions options;
    options.loop = runtime_->loop(0);
    options.peer = "self";
    options.local_device = info_.name;
    options.remote_device = info_.name;
    options.max_chain = 16;
    std::vector<std::unique_ptr<QueuePair>> qps;
    qps.push_back(std::move(a_));
    auto channel = VerbsChannel::Create(options, cq_a_, std::move(qps), {0});
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *std::move(channel);
  }

  void TearDown() override {
    channel_.reset();
    if (runtime_) runtime_->Stop();
  }

  // `n` WRITEs of `len` bytes at local and remote offset i * len, posted
  // as one batch; returns their statuses.
  std::vector<absl::Status> WriteBatch(int n, uint32_t len,
                                       transport::RemoteKey key) {
    std::vector<absl::Status> out(n, absl::UnknownError("not done"));
    absl::Notification all;
    auto left = std::make_shared<std::atomic<int>>(n);
    std::vector<transport::RemoteOp> ops(n);
    for (int i = 0; i < n; ++i) {
      transport::RemoteOp& op = ops[i];
      op.op = core::OpType::kWrite;
      op.local = local_;
      op.local_addr = local_->data() + i * len;
      op.length = len;
      op.remote = target_;
      op.key = key;
      op.remote_offset = i * len;
      op.deadline = absl::Now() + kCompletionTimeout;
      op.done = [&out, &all, left, i](absl::Status s) {
        out[i] = std::move(s);
        if (left->fetch_sub(1) == 1) all.Notify();
      };
    }
    channel_->Post(absl::MakeSpan(ops));
    EXPECT_TRUE(all.WaitForNotificationWithTimeout(kCompletionTimeout));
    return out;
  }

  // One operation of `len` bytes between local and remote offsets.
  absl::Status PostOne(core::OpType kind, uint64_t local_offset,
                       uint64_t remote_offset, uint64_t len,
                       transport::RemoteKey key) {
    auto result = std::make_shared<absl::Status>(absl::UnknownError("not done"));
    auto done = std::make_shared<absl::Notification>();
    std::vector<transport::RemoteOp> ops(1);
    transport::RemoteOp& op = ops[0];
    op.op = kind;
    op.local = local_;
    op.local_addr = local_->data() + local_offset;
    op.length = len;
    op.remote = target_;
    op.key = key;
    op.remote_offset = remote_offset;
    op.deadline = absl::Now() + kCompletionTimeout;
    op.done = [result, done](absl::Status s) {
      *result = std::move(s);
      done->Notify();
    };
    channel_->Post(absl::MakeSpan(ops));
    EXPECT_TRUE(done->WaitForNotificationWithTimeout(kCompletionTimeout));
    return *result;
  }

  std::unique_ptr<runtime::IoRuntime> runtime_;
  std::unique_ptr<core::RegionTable> regions_;
  std::shared_ptr<core::Region> local_;
  Buffer remote_;
  std::shared_ptr<core::RemoteRegionInfo> target_;
  std::unique_ptr<VerbsChannel> channel_;
};

TEST_F(VerbsChannelLabTest, ABatchGoesOutAsChainsAndLands) {
  for (int i = 0; i < 1 << 20; ++i) local_->data()[i] = static_cast<char>(i * 13);
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->base, remote_.addr(0));
  constexpr int kOps = 64;
  constexpr uint32_t kLen = 200;
  for (const absl::Status& s : WriteBatch(kOps, kLen, *key)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(std::memcmp(remote_.data(), local_->data(), kOps * kLen), 0);
  const transport::ChannelInfo info = channel_->Describe();
  ASSERT_EQ(info.connections.size(), 1u);
  EXPECT_EQ(info.connections[0].posted, uint64_t{kOps});
  // Chains of up to 16: 4 ibv_post_send calls for the batch (a few more if
  // completions freed slots while it was being posted).
  EXPECT_LE(info.connections[0].post_calls, uint64_t{kOps / 8});
  EXPECT_EQ(info.connections[0].qp_state, "RTS");
  EXPECT_EQ(info.state, transport::ChannelState::kReady);
}

// A READ goes out in work requests of read_chunk_bytes (64 KiB by
// default), a WRITE in chunk_bytes (1 MiB): a READ's response is a burst
// from the peer that a lossy link makes costly to lose.
TEST_F(VerbsChannelLabTest, ReadsGoOutInSmallerWorkRequestsThanWrites) {
  constexpr uint64_t kHalf = 512 << 10;
  for (uint64_t i = 0; i < kHalf; ++i) local_->data()[i] = static_cast<char>(i * 7 + 1);
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(PostOne(core::OpType::kWrite, 0, 0, kHalf, *key).ok());
  EXPECT_EQ(channel_->Describe().connections[0].posted, 1u)
      << "512 KiB WRITE: one work request";
  ASSERT_TRUE(PostOne(core::OpType::kRead, kHalf, 0, kHalf, *key).ok());
  EXPECT_EQ(channel_->Describe().connections[0].posted,
            1u + kHalf / kDefaultReadChunkBytes)
      << "512 KiB READ: one work request per 64 KiB";
  EXPECT_EQ(std::memcmp(local_->data() + kHalf, local_->data(), kHalf), 0)
      << "what was read back differs from what was written";
}

TEST_F(VerbsChannelLabTest, ARegionWithoutAnRkeyForThePeersDeviceIsRefused) {
  core::RemoteRegionInfo other = *target_;
  other.rkeys = {{"some-other-device", 0, 7}};
  auto key = channel_->KeyFor(other);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(key.status().message(), ::testing::HasSubstr("not exported over verbs"));
}

TEST_F(VerbsChannelLabTest, AWrongRkeyFailsTheOpAndTheChannelNeedsReconnect) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  transport::RemoteKey wrong = *key;
  wrong.key += 1;
  std::vector<absl::Status> out = WriteBatch(1, 64, wrong);
  EXPECT_EQ(out[0].code(), absl::StatusCode::kPermissionDenied) << out[0];
  EXPECT_TRUE(channel_->NeedsReconnect());
  out = WriteBatch(1, 64, *key);  // refused until rebuilt
  EXPECT_EQ(out[0].code(), absl::StatusCode::kUnavailable) << out[0];
}

TEST_F(VerbsChannelLabTest, AForcedQpErrorMakesTheChannelAskForAReconnect) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(WriteBatch(1, 64, *key)[0].ok());
  channel_->ForceError(0);
  for (int i = 0; i < 100 && !channel_->NeedsReconnect(); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(channel_->NeedsReconnect());
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kError);
  std::vector<absl::Status> out = WriteBatch(1, 64, *key);
  EXPECT_EQ(out[0].code(), absl::StatusCode::kUnavailable) << out[0];
  EXPECT_THAT(std::string(out[0].message()), ::testing::HasSubstr("rebuilt"));
}

// An operation whose peer stops answering fails at its deadline, and only
// after its QP went to the error state (the NIC no longer touches its
// memory). The earlier deadline was posted after a later one: the
// channel's one deadline timer must be re-armed for it, or the operation
// would fail only when the QP gives up retrying (UNAVAILABLE, ~7 s).
TEST_F(VerbsChannelLabTest, AnOperationPastItsDeadlineFailsAfterItsQpIsFlushed) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(WriteBatch(1, 64, *key)[0].ok()) << "the pair works";
  b_.reset();  // the responder is gone: WRITEs are retried, never ACKed
  struct Result {
    absl::Status status = absl::UnknownError("not done");
    absl::Notification done;
  };
  std::vector<std::shared_ptr<Result>> results = {std::make_shared<Result>(),
                                                  std::make_shared<Result>()};
  std::vector<transport::RemoteOp> ops(2);
  for (size_t i = 0; i < ops.size(); ++i) {
    transport::RemoteOp& op = ops[i];
    op.op = core::OpType::kWrite;
    op.local = local_;
    op.local_addr = local_->data() + i * 64;
    op.length = 64;
    op.remote = target_;
    op.key = *key;
    op.remote_offset = i * 64;
    op.done = [result = results[i]](absl::Status s) {
      result->status = std::move(s);
      result->done.Notify();
    };
  }
  ops[0].deadline = absl::Now() + kCompletionTimeout;
  ops[1].deadline = absl::Now() + absl::Milliseconds(300);
  channel_->Post(absl::MakeSpan(ops));
  ASSERT_TRUE(results[1]->done.WaitForNotificationWithTimeout(kCompletionTimeout));
  EXPECT_EQ(results[1]->status.code(), absl::StatusCode::kDeadlineExceeded)
      << results[1]->status;
  EXPECT_THAT(std::string(results[1]->status.message()),
              ::testing::HasSubstr("did not complete within its deadline"));
  EXPECT_TRUE(channel_->NeedsReconnect()) << "its QP went to the error state";
  // The other WRITE was on the same QP: flushed, it fails too, long before
  // its own deadline.
  ASSERT_TRUE(results[0]->done.WaitForNotificationWithTimeout(kCompletionTimeout));
  EXPECT_EQ(results[0]->status.code(), absl::StatusCode::kUnavailable)
      << results[0]->status;
}

TEST_F(VerbsChannelLabTest, CloseFailsLaterPostsAndStopsTheChannel) {
  auto key = channel_->KeyFor(*target_);
  ASSERT_TRUE(key.ok());
  channel_->Close();
  std::vector<absl::Status> out = WriteBatch(2, 64, *key);
  for (const absl::Status& s : out) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  }
  EXPECT_EQ(channel_->Describe().state, transport::ChannelState::kClosed);
}

// --- WRITE with an immediate: notices -------------------------------------

// Records what the notice receiver announces.
class RecordingSink final : public core::NotificationSink {
 public:
  struct Note {
    uint64_t region = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    uint32_t immediate = 0;
    core::TransportKind transport = core::TransportKind::kNone;
    std::string writer;
  };
  void Notify(const core::Region& region, uint64_t offset, uint64_t length,
              uint32_t immediate,
              const core::NotificationWriter& writer) override {
    absl::MutexLock lock(&mu_);
    notes_.push_back({region.id(), offset, length, immediate, writer.transport,
                      writer.address != nullptr ? *writer.address : ""});
  }
  std::vector<Note> notes() const {
    absl::MutexLock lock(&mu_);
    return notes_;
  }
  size_t count() const {
    absl::MutexLock lock(&mu_);
    return notes_.size();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Note> notes_;
};

// Layer 4 with both halves of the notice protocol: `kPairs` QP pairs on
// the device; the initiators are a VerbsChannel's pool, the responders a
// NoticeReceiver's (as VerbsAcceptor builds them), on two loops, in front
// of a region table with exported regions and a recording sink.
class VerbsNoticeLabTest : public VerbsLabTest {
 protected:
  static constexpr int kPairs = 2;

  void SetUp() override {
    VerbsLabTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto runtime = runtime::IoRuntime::Start({.threads = 2});
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = *std::move(runtime);
    registrar_ = std::make_unique<VerbsRegistrar>(
        std::vector<std::shared_ptr<Device>>{device_});
    regions_ = std::make_unique<core::RegionTable>(registrar_.get(),
                                                   core::RegionLimits{});
    local_ = Allocate("local", 1 << 20, core::RemoteAccess::kNone);
    inbox_ = Allocate("inbox", 1 << 20, core::RemoteAccess::kReadWrite);
    ASSERT_NE(local_, nullptr);
    ASSERT_NE(inbox_, nullptr);
    target_ = InfoOf(*inbox_);
    notices_ = std::make_shared<NoticeTarget>();
    notices_->Set(regions_.get(), &sink_);
  }

  void TearDown() override {
    channel_.reset();
    receiver_.reset();
    if (runtime_) runtime_->Stop();
  }

  std::shared_ptr<core::Region> Allocate(const std::string& name,
                                         uint64_t size,
                                         core::RemoteAccess access) {
    core::AllocateOptions o;
    o.size = size;
    o.name = name;
    o.daemon_owned = true;
    o.export_access = access;
    auto region = regions_->Allocate(core::Caller{1, 0, 0, 1}, o);
    EXPECT_TRUE(region.ok()) << region.status();
    return region.ok() ? *region : nullptr;
  }

  // What a peer's Resolve would say about `region`.
  std::shared_ptr<core::RemoteRegionInfo> InfoOf(const core::Region& region) {
    auto info = std::make_shared<core::RemoteRegionInfo>();
    info->peer = "self";
    info->region_id = region.id();
    info->name = region.name();
    info->length = region.size();
    info->access = region.exported().access;
    info->addr = reinterpret_cast<uintptr_t>(region.data());
    info->rkeys = region.exported().keys;
    return info;
  }

  // `pairs` connected QP pairs: the initiators on one CQ, the responders
  // on another.
  void MakePairs(int pairs, std::vector<std::unique_ptr<QueuePair>>* initiators,
                 std::shared_ptr<CompletionQueue>* initiator_cq,
                 std::vector<std::unique_ptr<QueuePair>>* responders,
                 std::shared_ptr<CompletionQueue>* responder_cq) {
    for (auto* cq : {initiator_cq, responder_cq}) {
      auto created = CompletionQueue::Create(device_, 1024);
      ASSERT_TRUE(created.ok()) << created.status();
      *cq = *std::move(created);
    }
    QpConfig config;
    config.port = port_;
    config.gid_index = gid_index_;
    for (int i = 0; i < pairs; ++i) {
      auto a = QueuePair::Create(*initiator_cq, config);
      auto b = QueuePair::Create(*responder_cq, config);
      ASSERT_TRUE(a.ok() && b.ok());
      auto ea = (*a)->LocalEndpoint();
      auto eb = (*b)->LocalEndpoint();
      ASSERT_TRUE(ea.ok() && eb.ok());
      ASSERT_TRUE((*b)->Connect(*ea).ok());
      ASSERT_TRUE((*a)->Connect(*eb).ok());
      initiators->push_back(*std::move(a));
      responders->push_back(*std::move(b));
    }
  }

  // A NoticeReceiver on the responders, on loop 1, for a caller whose
  // Connect named it kCaller and came from `caller` ("" = unknown).
  static constexpr const char* kCaller = "192.0.2.7:7471";
  void StartReceiver(std::shared_ptr<CompletionQueue> cq,
                     std::vector<std::unique_ptr<QueuePair>> qps,
                     std::shared_ptr<NoticeTarget> target,
                     const std::string& caller = "") {
    NoticeReceiverOptions options;
    options.loop = runtime_->loop(1);
    options.peer = kCaller;
    options.caller = caller;
    options.device = info_.name;
    options.target = std::move(target);
    auto receiver =
        NoticeReceiver::Start(std::move(options), std::move(cq), std::move(qps));
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = *std::move(receiver);
  }

  // The full setup: a channel of kPairs QPs (small chunks, so one WRITE
  // takes several WRs) whose peer QPs a receiver serves for `target`.
  void StartBoth(std::shared_ptr<NoticeTarget> target) {
    std::vector<std::unique_ptr<QueuePair>> initiators, responders;
    std::shared_ptr<CompletionQueue> icq, rcq;
    MakePairs(kPairs, &initiators, &icq, &responders, &rcq);
    if (HasFatalFailure()) return;
    StartReceiver(rcq, std::move(responders), std::move(target));
    if (HasFatalFailure()) return;
    VerbsChannelOptions options;
    options.loop = runtime_->loop(0);
    options.peer = "self";
    options.local_device = info_.name;
    options.remote_device = info_.name;
    options.chunk_bytes = 4096;
    auto channel = VerbsChannel::Create(options, icq, std::move(initiators),
                                        std::vector<uint32_t>(kPairs, 0));
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *std::move(channel);
  }

  // A raw QP plays a peer that sends whatever it likes to a receiver (for
  // `caller`); it keeps receives posted for the acks.
  void StartRawPeer(const std::string& caller = "") {
    std::vector<std::unique_ptr<QueuePair>> raw, responders;
    std::shared_ptr<CompletionQueue> rcq;
    MakePairs(1, &raw, &raw_cq_, &responders, &rcq);
    if (HasFatalFailure()) return;
    StartReceiver(rcq, std::move(responders), notices_, caller);
    if (HasFatalFailure()) return;
    raw_qp_ = std::move(raw[0]);
    auto slots = NoticeBuffers::Create(device_, 4 * kNoticeCredits);
    ASSERT_TRUE(slots.ok()) << slots.status();
    raw_slots_ = *std::move(slots);
    for (size_t k = 0; k < kNoticeCredits; ++k) {
      ASSERT_TRUE(raw_slots_->PostRecv(*raw_qp_, k, kRawRecv | k).ok());
    }
    raw_next_send_ = kNoticeCredits;
  }

  // SENDs `length` bytes from the raw peer (slots are not reused: a test
  // sends at most 3 * kNoticeCredits).
  void RawSend(const uint8_t* bytes, size_t length) {
    ASSERT_LE(length, kNoticeSlotBytes);
    ASSERT_LT(raw_next_send_, 4 * kNoticeCredits);
    uint8_t* at = raw_slots_->mutable_slot(raw_next_send_++);
    std::memcpy(at, bytes, length);
    RdmaOp op;
    op.opcode = RdmaOp::Opcode::kSend;
    op.wr_id = raw_next_send_;
    op.local_addr = at;
    op.length = static_cast<uint32_t>(length);
    op.lkey = raw_slots_->lkey();
    ASSERT_TRUE(raw_qp_->Post(absl::MakeConstSpan(&op, 1)).ok());
  }
  void RawSendNotice(const Notice& n) {
    const auto bytes = EncodeNotice(n);
    RawSend(bytes.data(), bytes.size());
  }

  // The next `count` acks the raw peer receives (fewer at the timeout).
  std::vector<NoticeAck> RawAcks(size_t count) {
    std::vector<NoticeAck> acks;
    const absl::Time end = absl::Now() + kCompletionTimeout;
    while (acks.size() < count && absl::Now() < end) {
      ibv_wc wcs[16];
      auto got = raw_cq_->Wait(absl::MakeSpan(wcs), end);
      if (!got.ok()) break;
      for (size_t i = 0; i < *got; ++i) {
        EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS) << CompletionStatus(wcs[i]);
        if ((wcs[i].wr_id & kRawRecv) == 0) continue;  // our SENDs
        const size_t slot = wcs[i].wr_id & ~kRawRecv;
        auto ack = DecodeNoticeAck(
            absl::MakeConstSpan(raw_slots_->slot(slot), wcs[i].byte_len));
        EXPECT_TRUE(ack.ok()) << ack.status();
        if (ack.ok()) acks.push_back(*ack);
        EXPECT_TRUE(raw_slots_->PostRecv(*raw_qp_, slot, wcs[i].wr_id).ok());
      }
    }
    return acks;
  }

  // A notice of a WRITE into [offset, +length) of `region` under its
  // current export.
  static Notice NoticeFor(const core::Region& region, uint64_t offset,
                          uint64_t length, uint64_t tag) {
    Notice n;
    n.tag = tag;
    n.region_id = region.id();
    n.rkey =
        region.exported().keys.empty() ? 0 : region.exported().keys[0].rkey;
    n.offset = offset;
    n.length = length;
    n.immediate = static_cast<uint32_t>(1000 + tag);
    return n;
  }

  struct Result {
    absl::Status status = absl::UnknownError("not done");
    size_t notes_when_done = 0;  // what the sink had when `done` ran
  };

  // A batch in flight and what became of its operations.
  struct Pending {
    std::vector<Result> out;
    absl::Notification all;
    std::atomic<size_t> left{0};
  };
  using Ops = std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint32_t>>;

  // Posts WRITEs of `ops` = {local offset, remote offset, length,
  // immediate}, as one batch, to `target`.
  std::shared_ptr<Pending> PostWithImmediates(
      const Ops& ops, std::shared_ptr<core::RemoteRegionInfo> target) {
    auto pending = std::make_shared<Pending>();
    pending->out.resize(ops.size());
    pending->left = ops.size();
    auto key = channel_->KeyFor(*target);
    EXPECT_TRUE(key.ok()) << key.status();
    if (!key.ok()) {
      pending->all.Notify();
      return pending;
    }
    std::vector<transport::RemoteOp> batch(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& [local_offset, remote_offset, length, immediate] = ops[i];
      transport::RemoteOp& op = batch[i];
      op.op = core::OpType::kWrite;
      op.local = local_;
      op.local_addr = local_->data() + local_offset;
      op.length = length;
      op.remote = target;
      op.key = *key;
      op.remote_offset = remote_offset;
      op.immediate = immediate;
      op.deadline = absl::Now() + kCompletionTimeout;
      op.done = [this, pending, i](absl::Status s) {
        pending->out[i].notes_when_done = sink_.count();
        pending->out[i].status = std::move(s);
        if (pending->left.fetch_sub(1) == 1) pending->all.Notify();
      };
    }
    channel_->Post(absl::MakeSpan(batch));
    return pending;
  }

  static std::vector<Result> Await(Pending& pending) {
    EXPECT_TRUE(pending.all.WaitForNotificationWithTimeout(
        kCompletionTimeout + absl::Seconds(30)));
    return pending.out;
  }

  std::vector<Result> WriteWithImmediates(
      const Ops& ops, std::shared_ptr<core::RemoteRegionInfo> target) {
    return Await(*PostWithImmediates(ops, std::move(target)));
  }

  // Waits (bounded) until `done` holds.
  template <typename F>
  static bool Eventually(F done) {
    const absl::Time end = absl::Now() + kCompletionTimeout;
    while (!done() && absl::Now() < end) absl::SleepFor(absl::Milliseconds(10));
    return done();
  }

  std::unique_ptr<runtime::IoRuntime> runtime_;
  std::unique_ptr<VerbsRegistrar> registrar_;
  std::unique_ptr<core::RegionTable> regions_;
  std::shared_ptr<core::Region> local_;
  std::shared_ptr<core::Region> inbox_;
  std::shared_ptr<core::RemoteRegionInfo> target_;
  RecordingSink sink_;
  std::shared_ptr<NoticeTarget> notices_;
  std::unique_ptr<NoticeReceiver> receiver_;
  std::unique_ptr<VerbsChannel> channel_;
  // The raw peer (StartRawPeer). Its receives' wr_ids carry kRawRecv.
  static constexpr uint64_t kRawRecv = uint64_t{1} << 40;
  std::shared_ptr<CompletionQueue> raw_cq_;
  std::unique_ptr<QueuePair> raw_qp_;
  std::unique_ptr<NoticeBuffers> raw_slots_;
  size_t raw_next_send_ = 0;
};

TEST_F(VerbsNoticeLabTest, AnImmediateReachesTheOwnerAfterTheDataAndBeforeTheCompletion) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  FillPattern(reinterpret_cast<uint8_t*>(local_->data()), 1 << 20, 7);
  // 17 chunks of 4 KiB (the last one short) and the notice, on one QP.
  constexpr uint64_t kLength = 16 * 4096 + 100;
  std::vector<Result> done =
      WriteWithImmediates({{0, 1000, kLength, 0xfeed}}, target_);
  ASSERT_EQ(done.size(), 1u);
  ASSERT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(done[0].notes_when_done, 1u)
      << "the WRITE completed before its owner was told";
  const std::vector<RecordingSink::Note> notes = sink_.notes();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].region, inbox_->id());
  EXPECT_EQ(notes[0].offset, 1000u);
  EXPECT_EQ(notes[0].length, kLength);
  EXPECT_EQ(notes[0].immediate, 0xfeedu);
  EXPECT_EQ(notes[0].transport, core::TransportKind::kVerbs);
  EXPECT_EQ(notes[0].writer, kCaller)
      << "the writer, as the Connect that made these QPs named it";
  EXPECT_EQ(Compare(reinterpret_cast<uint8_t*>(inbox_->data()) + 1000,
                    reinterpret_cast<uint8_t*>(local_->data()), kLength),
            "");
  EXPECT_EQ(notices_->counts().delivered, 1u);
  EXPECT_EQ(notices_->counts().rejected, 0u);
}

TEST_F(VerbsNoticeLabTest, MoreNoticesThanCreditsWaitForAcksAndAllArrive) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  // Three times the credits of the whole pool, in one batch.
  constexpr int kOps = 3 * kPairs * static_cast<int>(kNoticeCredits);
  Ops ops;
  for (int i = 0; i < kOps; ++i) {
    ops.emplace_back(i * 64, i * 64, 64, 1000 + i);
  }
  std::vector<Result> done = WriteWithImmediates(ops, target_);
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(done[i].status.ok()) << i << ": " << done[i].status;
  }
  std::vector<bool> seen(kOps, false);
  for (const RecordingSink::Note& n : sink_.notes()) {
    ASSERT_GE(n.immediate, 1000u);
    ASSERT_LT(n.immediate, 1000u + kOps);
    const int i = static_cast<int>(n.immediate - 1000);
    EXPECT_FALSE(seen[i]) << "immediate " << n.immediate << " twice";
    seen[i] = true;
    EXPECT_EQ(n.offset, uint64_t(i) * 64);
    EXPECT_EQ(n.length, 64u);
  }
  EXPECT_EQ(sink_.count(), size_t(kOps));
  // The channel is still healthy: the credits all came back.
  EXPECT_FALSE(channel_->NeedsReconnect());
  done = WriteWithImmediates({{0, 0, 8, 1}}, target_);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
}

TEST_F(VerbsNoticeLabTest, ARefusedNoticeFailsTheWriteWithTheReason) {
  StartBoth(notices_);
  if (HasFatalFailure()) return;
  // The NIC accepts the WRITE (inbox's address and rkey), but the notice
  // names another region, whose export that rkey is not: the receiver
  // refuses it, and the ack's reason fails the operation.
  auto other = Allocate("other", 4096, core::RemoteAccess::kReadWrite);
  ASSERT_NE(other, nullptr);
  auto mixed = InfoOf(*inbox_);
  mixed->region_id = other->id();
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, mixed);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kPermissionDenied)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("does not match the current export"));
  EXPECT_EQ(sink_.count(), 0u) << "a refused notice was announced";
  EXPECT_EQ(notices_->counts().rejected, 1u);
  // Not a QP failure: the channel carries on.
  EXPECT_FALSE(channel_->NeedsReconnect());
  done = WriteWithImmediates({{0, 0, 64, 6}}, target_);
  EXPECT_TRUE(done[0].status.ok()) << done[0].status;
  EXPECT_EQ(sink_.count(), 1u);
}

TEST_F(VerbsNoticeLabTest, NoticesBeforeTheDaemonServesThemAreRefusedNotLost) {
  StartBoth(std::make_shared<NoticeTarget>());  // no regions, no sink yet
  if (HasFatalFailure()) return;
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, target_);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kUnavailable)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()), HasSubstr("not serving"));
  EXPECT_EQ(sink_.count(), 0u);
}

TEST_F(VerbsNoticeLabTest, AnImmediateToAPeerWithoutReceivesFailsFast) {
  // The peer QP posts no receive, as an rdmad without notices: the notice
  // meets RNR, and rnr_retry is bounded.
  std::vector<std::unique_ptr<QueuePair>> initiators, responders;
  std::shared_ptr<CompletionQueue> icq, rcq;
  MakePairs(1, &initiators, &icq, &responders, &rcq);
  if (HasFatalFailure()) return;
  VerbsChannelOptions options;
  options.loop = runtime_->loop(0);
  options.peer = "old-peer";
  options.local_device = info_.name;
  options.remote_device = info_.name;
  auto channel = VerbsChannel::Create(options, icq, std::move(initiators), {0});
  ASSERT_TRUE(channel.ok()) << channel.status();
  channel_ = *std::move(channel);
  const absl::Time start = absl::Now();
  std::vector<Result> done = WriteWithImmediates({{0, 0, 64, 5}}, target_);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kFailedPrecondition)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("does not accept notifications"));
  EXPECT_LT(absl::Now() - start, kCompletionTimeout)
      << "failed only at its deadline";
  EXPECT_TRUE(channel_->NeedsReconnect());
  // The data itself went out before the notice.
  EXPECT_EQ(std::memcmp(inbox_->data(), local_->data(), 64), 0);
}

TEST_F(VerbsNoticeLabTest, AForgedNoticeIsDroppedAndNeverNotifies) {
  StartRawPeer();
  if (HasFatalFailure()) return;
  auto ro = Allocate("ro", 4096, core::RemoteAccess::kRead);
  ASSERT_NE(ro, nullptr);
  Notice good;
  good.region_id = inbox_->id();
  good.rkey = target_->rkeys[0].rkey;
  good.offset = 128;
  good.length = 64;
  good.immediate = 77;

  // Not notices at all: dropped without an answer.
  std::array<uint8_t, kNoticeBytes> bad_magic = EncodeNotice(good);
  bad_magic[0] ^= 0xff;
  RawSend(bad_magic.data(), bad_magic.size());
  RawSend(bad_magic.data(), 10);
  std::array<uint8_t, kNoticeBytes> future = EncodeNotice(good);
  future[4] = 9;  // version 9
  RawSend(future.data(), future.size());
  // Notices that fail the check: refused in the ack, never announced.
  Notice n = good;
  n.tag = 1;
  n.rkey = good.rkey + 1;
  RawSendNotice(n);
  n = good;
  n.tag = 2;
  n.offset = inbox_->size() - 8;  // runs past the end
  RawSendNotice(n);
  n = good;
  n.tag = 3;
  n.region_id = 987654;
  RawSendNotice(n);
  n = good;
  n.tag = 4;
  n.region_id = ro->id();
  n.rkey = ro->exported().keys[0].rkey;
  RawSendNotice(n);
  // After all that, a good one still gets through.
  n = good;
  n.tag = 5;
  RawSendNotice(n);

  std::vector<NoticeAck> acks = RawAcks(5);
  ASSERT_EQ(acks.size(), 5u) << "acks of the five decodable notices";
  const NoticeResult want[] = {NoticeResult::kKeyMismatch,
                               NoticeResult::kOutOfRange,
                               NoticeResult::kNotExported,
                               NoticeResult::kReadOnly,
                               NoticeResult::kDelivered};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(acks[i].tag, i + 1);
    EXPECT_EQ(acks[i].result, want[i]) << NoticeResultName(acks[i].result);
  }
  const std::vector<RecordingSink::Note> notes = sink_.notes();
  ASSERT_EQ(notes.size(), 1u) << "only the good notice is announced";
  EXPECT_EQ(notes[0].region, inbox_->id());
  EXPECT_EQ(notes[0].offset, 128u);
  EXPECT_EQ(notes[0].immediate, 77u);
  NoticeCounts counts = notices_->counts();
  EXPECT_EQ(counts.malformed, 3u);
  EXPECT_EQ(counts.rejected, 4u);
  EXPECT_EQ(counts.delivered, 1u);

  // A SEND longer than a receive slot breaks that receive (and the QP);
  // the receiver counts it and carries on.
  std::vector<uint8_t> big(200, 0xab);
  auto mr = MemoryRegion::Register(device_, big.data(), big.size(),
                                   MrAccessFlags(core::RemoteAccess::kNone));
  ASSERT_TRUE(mr.ok()) << mr.status();
  RdmaOp op;
  op.opcode = RdmaOp::Opcode::kSend;
  op.wr_id = 999;
  op.local_addr = big.data();
  op.length = static_cast<uint32_t>(big.size());
  op.lkey = (*mr)->lkey();
  ASSERT_TRUE(raw_qp_->Post(absl::MakeConstSpan(&op, 1)).ok());
  EXPECT_TRUE(Eventually([&] { return notices_->counts().malformed == 4; }))
      << notices_->counts().malformed;
  EXPECT_EQ(sink_.count(), 1u);
}

// A notice replayed after the export it was sent under was revoked is
// refused and never announced: after unexport (not exported), after a
// re-export and after a chmod that takes rights away (the old rkey is not
// the current export's), after free (no such region). Replayed while its
// export stands, it is announced again: only the holder of the region's
// rkey with write access could send it, and it could as well write again.
TEST_F(VerbsNoticeLabTest, ReplayedNoticesAfterARevocationAreRefused) {
  StartRawPeer();
  if (HasFatalFailure()) return;
  auto region = Allocate("replayed", 4096, core::RemoteAccess::kReadWrite);
  ASSERT_NE(region, nullptr);
  const core::Caller owner{1, 0, 0, 1};
  const core::RegionKey key{region->id(), ""};
  uint64_t tag = 0;
  // Sends `n` once more under a new tag; returns what the ack said.
  auto replay = [&](Notice n) {
    n.tag = ++tag;
    RawSendNotice(n);
    std::vector<NoticeAck> acks = RawAcks(1);
    EXPECT_EQ(acks.size(), 1u);
    if (acks.empty()) return NoticeResult::kNotServed;
    EXPECT_EQ(acks[0].tag, tag);
    return acks[0].result;
  };

  const Notice first = NoticeFor(*region, 0, 64, 0);
  EXPECT_EQ(replay(first), NoticeResult::kDelivered);
  EXPECT_EQ(replay(first), NoticeResult::kDelivered) << "export unchanged";
  ASSERT_TRUE(regions_->SetPermissions(owner, key, 0400, std::nullopt).ok());
  EXPECT_EQ(replay(first), NoticeResult::kKeyMismatch) << "after chmod";

  const Notice second = NoticeFor(*region, 64, 64, 0);  // the new rkey
  EXPECT_EQ(replay(second), NoticeResult::kDelivered);
  ASSERT_TRUE(regions_->Export(owner, key, core::RemoteAccess::kNone).ok());
  EXPECT_EQ(replay(second), NoticeResult::kNotExported) << "after unexport";
  ASSERT_TRUE(
      regions_->Export(owner, key, core::RemoteAccess::kReadWrite).ok());
  EXPECT_EQ(replay(second), NoticeResult::kKeyMismatch) << "after re-export";

  const Notice third = NoticeFor(*region, 128, 64, 0);
  EXPECT_EQ(replay(third), NoticeResult::kDelivered);
  ASSERT_TRUE(regions_->Free(owner, key).ok());
  EXPECT_EQ(replay(third), NoticeResult::kNotExported) << "after free";

  EXPECT_EQ(sink_.count(), 4u) << "only the notices under a live export";
  EXPECT_EQ(notices_->counts().rejected, 4u);
}

// A peer the export's access list does not admit (by the address its QP
// pool was made for) cannot tell the owner of anything, whatever rkey it
// holds; once the list admits it, it can.
TEST_F(VerbsNoticeLabTest, ANoticeFromAPeerTheAccessListDoesNotAdmitIsRefused) {
  StartRawPeer("192.0.2.200");
  if (HasFatalFailure()) return;
  const core::Caller owner{1, 0, 0, 1};
  const core::RegionKey key{inbox_->id(), ""};
  auto only = [](const std::string& who) {
    auto list = core::ExportAccessList::Parse({{who, std::nullopt}});
    EXPECT_TRUE(list.ok()) << list.status();
    return std::make_shared<core::ExportAccessList>(*list);
  };
  ASSERT_TRUE(regions_
                  ->Export(owner, key, core::RemoteAccess::kReadWrite,
                           only("192.0.2.1"))
                  .ok());
  RawSendNotice(NoticeFor(*inbox_, 0, 64, 1));
  std::vector<NoticeAck> acks = RawAcks(1);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, NoticeResult::kNotAdmitted)
      << NoticeResultName(acks[0].result);
  EXPECT_EQ(sink_.count(), 0u);

  ASSERT_TRUE(regions_
                  ->Export(owner, key, core::RemoteAccess::kReadWrite,
                           only("192.0.2.200"))
                  .ok());
  RawSendNotice(NoticeFor(*inbox_, 0, 64, 2));
  acks = RawAcks(1);
  ASSERT_EQ(acks.size(), 1u);
  EXPECT_EQ(acks[0].result, NoticeResult::kDelivered)
      << NoticeResultName(acks[0].result);
  EXPECT_EQ(sink_.count(), 1u);
}

// A peer that kept the rkey of an export keeps writing with it, one WRITE
// at a time, while the owner revokes the export (unexport, re-export, a
// chmod that takes rights away, free). Once the revoking call returns,
// nothing more lands: the region's bytes then are its bytes for good, and
// the peer's next WRITE fails with a remote access error.
TEST_F(VerbsNoticeLabTest, AKeptRkeyWritesNothingOnceItsRevocationReturns) {
  const core::Caller owner{1, 0, 0, 1};
  constexpr size_t kSlot = 4096;
  constexpr size_t kSlots = 8;
  const struct {
    const char* name;
    std::function<absl::Status(const core::RegionKey&)> revoke;
  } cases[] = {
      {"unexport",
       [&](const core::RegionKey& key) {
         return regions_->Export(owner, key, core::RemoteAccess::kNone)
             .status();
       }},
      {"re-export",
       [&](const core::RegionKey& key) {
         return regions_->Export(owner, key, core::RemoteAccess::kReadWrite)
             .status();
       }},
      {"chmod",
       [&](const core::RegionKey& key) {
         return regions_->SetPermissions(owner, key, 0400, std::nullopt)
             .status();
       }},
      {"free",
       [&](const core::RegionKey& key) { return regions_->Free(owner, key); }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto target = Allocate(absl::StrCat("kept-", c.name), kSlot * kSlots,
                           core::RemoteAccess::kReadWrite);
    ASSERT_NE(target, nullptr);
    const uint32_t rkey = target->exported().keys[0].rkey;
    const uint64_t base = reinterpret_cast<uintptr_t>(target->data());
    std::vector<std::unique_ptr<QueuePair>> initiators, responders;
    std::shared_ptr<CompletionQueue> icq, rcq;
    MakePairs(1, &initiators, &icq, &responders, &rcq);
    if (HasFatalFailure()) return;
    QueuePair& peer = *initiators[0];
    std::vector<uint8_t> source(kSlot);
    auto mr = MemoryRegion::Register(device_, source.data(), source.size(),
                                     MrAccessFlags(core::RemoteAccess::kNone));
    ASSERT_TRUE(mr.ok()) << mr.status();

    // The peer: WRITE i puts byte i into slot i % kSlots, until one fails.
    std::atomic<int> landed{0};
    absl::Status refused;
    std::thread writer([&] {
      const absl::Time end = absl::Now() + kCompletionTimeout;
      for (uint32_t i = 1; absl::Now() < end; ++i) {
        std::fill(source.begin(), source.end(), static_cast<uint8_t>(i));
        absl::Status s =
            peer.PostWrite({.wr_id = i,
                            .local_addr = source.data(),
                            .length = static_cast<uint32_t>(kSlot),
                            .lkey = (*mr)->lkey(),
                            .remote_addr = base + (i % kSlots) * kSlot,
                            .rkey = rkey});
        if (s.ok()) s = icq->WaitOne(end);
        if (!s.ok()) {
          refused = s;
          return;
        }
        landed.fetch_add(1);
      }
      refused = absl::DeadlineExceededError("never refused");
    });
    // Some WRITEs land first, so that the revocation races them.
    EXPECT_TRUE(Eventually([&] { return landed.load() >= 3; }));
    // (EXPECT: the writer must be joined whatever happens.)
    const absl::Status revoked = c.revoke({target->id(), ""});
    EXPECT_TRUE(revoked.ok()) << revoked;
    const auto* bytes = reinterpret_cast<const uint8_t*>(target->data());
    const std::vector<uint8_t> then(bytes, bytes + kSlot * kSlots);
    writer.join();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_EQ(Compare(bytes, then.data(), then.size()), "")
        << "a WRITE landed after the revoking call returned (" << landed.load()
        << " landed before)";
  }
}

TEST_F(VerbsNoticeLabTest, AChannelSurvivesAPeerThatSkipsOrInventsAcks) {
  // A raw QP plays the serving peer: it reads the notices and answers as
  // it likes.
  std::vector<std::unique_ptr<QueuePair>> initiators, raw;
  std::shared_ptr<CompletionQueue> icq, raw_cq;
  MakePairs(1, &initiators, &icq, &raw, &raw_cq);
  if (HasFatalFailure()) return;
  QueuePair& peer = *raw[0];
  auto slots = NoticeBuffers::Create(device_, 2 * kNoticeCredits);
  ASSERT_TRUE(slots.ok()) << slots.status();
  constexpr uint64_t kRecv = uint64_t{1} << 40;
  for (size_t k = 0; k < kNoticeCredits; ++k) {
    ASSERT_TRUE((*slots)->PostRecv(peer, k, kRecv | k).ok());
  }
  VerbsChannelOptions options;
  options.loop = runtime_->loop(0);
  options.peer = "odd-peer";
  options.local_device = info_.name;
  options.remote_device = info_.name;
  auto channel = VerbsChannel::Create(options, icq, std::move(initiators), {0});
  ASSERT_TRUE(channel.ok()) << channel.status();
  channel_ = *std::move(channel);

  std::shared_ptr<Pending> pending =
      PostWithImmediates({{0, 64, 32, 11}, {32, 96, 32, 12}}, target_);
  // The two notices, as the channel encoded them.
  std::vector<Notice> notices;
  const absl::Time end = absl::Now() + kCompletionTimeout;
  while (notices.size() < 2 && absl::Now() < end) {
    ibv_wc wcs[8];
    auto got = raw_cq->Wait(absl::MakeSpan(wcs), end);
    if (!got.ok()) break;
    for (size_t i = 0; i < *got; ++i) {
      ASSERT_EQ(wcs[i].status, IBV_WC_SUCCESS) << CompletionStatus(wcs[i]);
      if ((wcs[i].wr_id & kRecv) == 0) continue;
      auto notice = DecodeNotice(absl::MakeConstSpan(
          (*slots)->slot(wcs[i].wr_id & ~kRecv), wcs[i].byte_len));
      ASSERT_TRUE(notice.ok()) << notice.status();
      notices.push_back(*notice);
    }
  }
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[0].region_id, inbox_->id());
  EXPECT_EQ(notices[0].offset, 64u);
  EXPECT_EQ(notices[0].length, 32u);
  EXPECT_EQ(notices[0].immediate, 11u);
  EXPECT_EQ(notices[0].rkey, target_->rkeys[0].rkey);
  EXPECT_EQ(notices[1].immediate, 12u);
  EXPECT_LT(notices[0].tag, notices[1].tag);
  EXPECT_EQ(std::memcmp(inbox_->data() + 64, local_->data(), 64), 0)
      << "the data is in place when the notice is received";

  size_t next_send = kNoticeCredits;
  auto answer = [&](uint64_t tag, NoticeResult result) {
    const auto bytes = EncodeNoticeAck(NoticeAck{tag, result});
    uint8_t* at = (*slots)->mutable_slot(next_send++);
    std::memcpy(at, bytes.data(), bytes.size());
    RdmaOp op;
    op.opcode = RdmaOp::Opcode::kSend;
    op.wr_id = next_send;
    op.local_addr = at;
    op.length = static_cast<uint32_t>(bytes.size());
    op.lkey = (*slots)->lkey();
    ASSERT_TRUE(peer.Post(absl::MakeConstSpan(&op, 1)).ok());
  };
  // An ack for a notice never sent is ignored; skipping the first notice's
  // ack and answering the second fails the first, and only it.
  answer(notices[1].tag + 1000, NoticeResult::kDelivered);
  answer(notices[1].tag, NoticeResult::kDelivered);
  std::vector<Result> done = Await(*pending);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status.code(), absl::StatusCode::kUnavailable)
      << done[0].status;
  EXPECT_THAT(std::string(done[0].status.message()),
              HasSubstr("did not acknowledge"));
  EXPECT_TRUE(done[1].status.ok()) << done[1].status;
  EXPECT_FALSE(channel_->NeedsReconnect());
}

}  // namespace
}  // namespace rdmad::verbs
