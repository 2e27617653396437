// The verbs layer against a real device, the device itself: discovery
// compared with what the lab set up, RAII owners that leak nothing, the
// QP state machine and its checks, a CQ's growth.
#include "tests/lab/verbs/verbs_lab_fixture.h"

namespace rdmad::verbs {
namespace {

using ::testing::HasSubstr;

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

// --- Completion queues -----------------------------------------------------

TEST_F(VerbsLabTest, CqGrowsUpToMaxCqeAndNotPast) {
  absl::StatusOr<std::shared_ptr<CompletionQueue>> cq =
      CompletionQueue::Create(device_, 64);
  ASSERT_TRUE(cq.ok()) << cq.status();
  CompletionQueue& queue = **cq;
  const int before = queue.capacity();
  const int max_cqe = device_->attributes().max_cqe;
  ASSERT_GT(max_cqe, 256);

  const absl::Status past = queue.Grow(max_cqe + 1);
  EXPECT_EQ(past.code(), absl::StatusCode::kResourceExhausted) << past;
  EXPECT_THAT(past.message(), HasSubstr(absl::StrCat("max_cqe ", max_cqe)));
  EXPECT_EQ(queue.capacity(), before) << "a refused grow changes nothing";

  const absl::Status grown = queue.Grow(256);
  ASSERT_TRUE(grown.ok()) << grown;
  EXPECT_GE(queue.capacity(), 256);
}

}  // namespace
}  // namespace rdmad::verbs
