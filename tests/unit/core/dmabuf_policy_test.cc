// The dma-buf registration policy (daemon/core/dmabuf_policy.h) and the
// verbs probe (daemon/transport/verbs/dmabuf_probe.h), with fakes in place
// of devices: the probe's three outcomes, registration on every device
// that supports dma-buf and none other, all or nothing when one fails, and
// what the daemon says when it can serve a dma-buf in no way.
#include "daemon/core/dmabuf_policy.h"

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/transport/verbs/dmabuf_probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rdmad {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// The probe

// What the fake verbs answer, and what they were asked.
struct FakeVerbs {
  ibv_mr* result = nullptr;
  int error = 0;
  int reg_calls = 0;
  int fd_asked = 0;
  std::vector<ibv_mr*> deregistered;
};
FakeVerbs* fake = nullptr;

ibv_mr* FakeReg(ibv_pd*, uint64_t, size_t, uint64_t, int fd, int) {
  ++fake->reg_calls;
  fake->fd_asked = fd;
  errno = fake->error;
  return fake->result;
}

int FakeDereg(ibv_mr* mr) {
  fake->deregistered.push_back(mr);
  return 0;
}

class DmabufProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = &verbs_; }
  void TearDown() override { fake = nullptr; }

  core::DmabufCapability Probe() {
    verbs::DmabufProbeVerbs v;
    v.reg_dmabuf_mr = FakeReg;
    v.dereg_mr = FakeDereg;
    return verbs::ProbeDmabuf(nullptr, "dev0", "drv", v);
  }

  FakeVerbs verbs_;
};

TEST_F(DmabufProbeTest, EopnotsuppMeansUnsupported) {
  verbs_.error = EOPNOTSUPP;
  const core::DmabufCapability c = Probe();
  EXPECT_FALSE(c.supported);
  EXPECT_EQ(c.device, "dev0");
  EXPECT_EQ(c.driver, "drv");
  EXPECT_THAT(c.probe, HasSubstr("EOPNOTSUPP"));
  // It asks with descriptor -1, so that nothing can be registered.
  EXPECT_EQ(verbs_.reg_calls, 1);
  EXPECT_EQ(verbs_.fd_asked, -1);
  EXPECT_TRUE(verbs_.deregistered.empty());
}

TEST_F(DmabufProbeTest, EprotonosupportMeansUnsupported) {
  verbs_.error = EPROTONOSUPPORT;
  EXPECT_FALSE(Probe().supported);
}

TEST_F(DmabufProbeTest, AnyOtherErrorMeansTheVerbExists) {
  for (int error : {EBADF, EINVAL, EACCES}) {
    verbs_.error = error;
    const core::DmabufCapability c = Probe();
    EXPECT_TRUE(c.supported) << error;
    EXPECT_THAT(c.probe, HasSubstr("supported")) << error;
  }
}

TEST_F(DmabufProbeTest, AnMrItGotAnywayIsDeregisteredAndMeansSupported) {
  ibv_mr mr{};
  verbs_.result = &mr;
  EXPECT_TRUE(Probe().supported);
  EXPECT_THAT(verbs_.deregistered, ElementsAre(&mr));
}

// ---------------------------------------------------------------------------
// Registration on every capable device

// A registration on one fake device; counts how many are alive.
struct FakeMr {
  explicit FakeMr(std::string d, int* live) : device(std::move(d)), live(live) {
    ++*live;
  }
  ~FakeMr() { --*live; }
  std::string device;
  int* live;
};

std::vector<core::DmabufCapability> Devices(
    std::initializer_list<std::pair<const char*, bool>> devices) {
  std::vector<core::DmabufCapability> out;
  for (const auto& [name, supported] : devices) {
    core::DmabufCapability c;
    c.device = name;
    c.driver = supported ? "mlx5_core" : "rxe";
    c.supported = supported;
    c.probe = supported ? "ibv_reg_dmabuf_mr: supported"
                        : "ibv_reg_dmabuf_mr: Operation not supported "
                          "(EOPNOTSUPP)";
    out.push_back(std::move(c));
  }
  return out;
}

TEST(RegisterOnDmabufDevicesTest, RegistersOnEveryDeviceThatSupportsIt) {
  const auto devices =
      Devices({{"mlx5_0", true}, {"rxe0", false}, {"mlx5_1", true}});
  int live = 0;
  std::vector<size_t> asked;
  auto made = core::RegisterOnDmabufDevices<std::unique_ptr<FakeMr>>(
      devices, [&](size_t i) -> absl::StatusOr<std::unique_ptr<FakeMr>> {
        asked.push_back(i);
        return std::make_unique<FakeMr>(devices[i].device, &live);
      });
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_THAT(asked, ElementsAre(0, 2));
  ASSERT_EQ(made->size(), 2u);
  EXPECT_EQ((*made)[0]->device, "mlx5_0");
  EXPECT_EQ((*made)[1]->device, "mlx5_1");
  EXPECT_EQ(live, 2);
}

TEST(RegisterOnDmabufDevicesTest, APartialFailureUndoesEveryRegistration) {
  const auto devices =
      Devices({{"mlx5_0", true}, {"mlx5_1", true}, {"mlx5_2", true}});
  int live = 0;
  int most_alive = 0;
  auto made = core::RegisterOnDmabufDevices<std::unique_ptr<FakeMr>>(
      devices, [&](size_t i) -> absl::StatusOr<std::unique_ptr<FakeMr>> {
        if (i == 2) {
          return absl::ResourceExhaustedError(
              "ibv_reg_dmabuf_mr(mlx5_2): Cannot allocate memory");
        }
        auto mr = std::make_unique<FakeMr>(devices[i].device, &live);
        most_alive = std::max(most_alive, live);
        return mr;
      });
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(most_alive, 2);
  EXPECT_EQ(live, 0) << "a registration survived the failure";
  EXPECT_EQ(made.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("on mlx5_2 failed"));
  EXPECT_THAT(std::string(made.status().message()),
              HasSubstr("2 other device(s)"));
}

TEST(RegisterOnDmabufDevicesTest, AFirstFailureLeavesNothingToUndo) {
  const auto devices = Devices({{"mlx5_0", true}, {"mlx5_1", true}});
  int live = 0;
  int calls = 0;
  auto made = core::RegisterOnDmabufDevices<std::unique_ptr<FakeMr>>(
      devices, [&](size_t) -> absl::StatusOr<std::unique_ptr<FakeMr>> {
        ++calls;
        return absl::InvalidArgumentError("refused");
      });
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(calls, 1) << "it went on after a failure";
  EXPECT_EQ(live, 0);
  EXPECT_THAT(std::string(made.status().message()), Not(HasSubstr("undone")));
}

// ---------------------------------------------------------------------------
// Whether the daemon can serve a dma-buf at all

TEST(CheckDmabufServableTest, OneCapableDeviceIsEnoughMappedOrNot) {
  const auto devices = Devices({{"rxe0", false}, {"mlx5_0", true}});
  EXPECT_TRUE(core::CheckDmabufServable(devices, "").ok());
  EXPECT_TRUE(
      core::CheckDmabufServable(devices, "mmap of the dma-buf: No such device")
          .ok());
}

TEST(CheckDmabufServableTest, DevicesWithoutSupportNameThemselvesAndTheWayOut) {
  const auto devices = Devices({{"rxe0", false}, {"rxe1", false}});
  const absl::Status mapped = core::CheckDmabufServable(devices, "");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(mapped.message()),
              StartsWith("no device supports dma-buf: "));
  EXPECT_THAT(std::string(mapped.message()),
              HasSubstr("rxe0 (driver rxe): ibv_reg_dmabuf_mr: Operation "
                        "not supported (EOPNOTSUPP)"));
  EXPECT_THAT(std::string(mapped.message()), HasSubstr("rxe1 (driver rxe)"));
  EXPECT_THAT(std::string(mapped.message()), HasSubstr("(mlx5, efa)"));
  EXPECT_THAT(std::string(mapped.message()), HasSubstr("--transport tcp"));
  EXPECT_THAT(std::string(mapped.message()), HasSubstr("this one can"));

  const absl::Status unmapped =
      core::CheckDmabufServable(devices, "mmap of the dma-buf: No such device");
  EXPECT_EQ(unmapped.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(unmapped.message()),
              HasSubstr("this one cannot: mmap of the dma-buf: No such "
                        "device"));
}

TEST(CheckDmabufServableTest, WithoutDevicesTheCpuMustMapIt) {
  EXPECT_TRUE(core::CheckDmabufServable({}, "").ok());
  const absl::Status status =
      core::CheckDmabufServable({}, "mmap of the dma-buf: No such device");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()),
              StartsWith("no device supports dma-buf: "));
  EXPECT_THAT(std::string(status.message()), HasSubstr("no RDMA device"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("No such device"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("(mlx5, efa)"));
}

}  // namespace
}  // namespace rdmad
