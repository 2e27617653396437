// Shared by the verbs lab tests (verbs_lab_*_test.cc): what the lab sets
// in the environment, patterns to check transfers byte for byte, the
// device's resource counts, and the fixtures that build resources in layers
// (VerbsLabTest: the device; LoopbackTest: PD/CQ/MRs and two QPs connected
// through it).
//
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
#ifndef RDMAD_TESTS_LAB_VERBS_VERBS_LAB_FIXTURE_H_
#define RDMAD_TESTS_LAB_VERBS_VERBS_LAB_FIXTURE_H_

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

// Generous: soft-RoCE under QEMU's TCG moves about 20 MB/s.
inline constexpr absl::Duration kCompletionTimeout = absl::Seconds(60);

inline std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

inline bool InLab() { return Env("RDMAD_LAB").value_or("") == "1"; }

// A deterministic, position-dependent byte pattern, so a shifted or
// truncated copy never matches by accident.
inline void FillPattern(uint8_t* data, size_t length, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < length; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    data[i] = static_cast<uint8_t>(x ^ (i >> 8));
  }
}

// Empty if equal, else where and how the first difference looks.
inline std::string Compare(const uint8_t* got, const uint8_t* want,
                           size_t length) {
  if (std::memcmp(got, want, length) == 0) return "";
  size_t i = 0;
  while (got[i] == want[i]) ++i;
  size_t bad = 0;
  for (size_t j = 0; j < length; ++j) bad += got[j] != want[j];
  return absl::StrCat("first difference at byte ", i, " of ", length, " (got ",
                      got[i], ", want ", want[i], "); ", bad, " bytes differ");
}

// Empty if [data, data+length) is all `value`.
inline std::string CheckFilled(const uint8_t* data, size_t length,
                               uint8_t value, absl::string_view what) {
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
inline std::map<std::string, int> ResourceCounts(const std::string& device) {
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

// A WRITE of `length` bytes from `local` to `target` at the same
// `offset` in both, due kCompletionTimeout from now; no callback yet.
inline transport::RemoteOp SameOffsetWrite(
    const std::shared_ptr<core::Region>& local,
    const std::shared_ptr<core::RemoteRegionInfo>& target,
    transport::RemoteKey key, uint64_t offset, uint32_t length) {
  transport::RemoteOp op;
  op.op = core::OpType::kWrite;
  op.local = local;
  op.local_addr = local->data() + offset;
  op.length = length;
  op.remote = target;
  op.key = key;
  op.remote_offset = offset;
  op.deadline = absl::Now() + kCompletionTimeout;
  return op;
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

}  // namespace rdmad::verbs

#endif  // RDMAD_TESTS_LAB_VERBS_VERBS_LAB_FIXTURE_H_
