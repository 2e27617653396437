// The fixture of the notice lab tests (verbs_lab_notice*_test.cc): a sink
// that records notifications, and two daemons' worth of notice receivers,
// buffers and channels on one device (VerbsNoticeLabTest).
#ifndef RDMAD_TESTS_LAB_VERBS_VERBS_LAB_NOTICE_FIXTURE_H_
#define RDMAD_TESTS_LAB_VERBS_VERBS_LAB_NOTICE_FIXTURE_H_

#include "tests/lab/verbs/verbs_lab_fixture.h"

namespace rdmad::verbs {

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
  // on another (taking their receives from `srq` when given).
  void MakePairs(int pairs, std::vector<std::unique_ptr<QueuePair>>* initiators,
                 std::shared_ptr<CompletionQueue>* initiator_cq,
                 std::vector<std::unique_ptr<QueuePair>>* responders,
                 std::shared_ptr<CompletionQueue>* responder_cq,
                 ibv_srq* srq = nullptr) {
    for (auto* cq : {initiator_cq, responder_cq}) {
      auto created = CompletionQueue::Create(device_, 1024);
      ASSERT_TRUE(created.ok()) << created.status();
      *cq = *std::move(created);
    }
    QpConfig config;
    config.port = port_;
    config.gid_index = gid_index_;
    QpConfig responder = config;
    responder.srq = srq;
    for (int i = 0; i < pairs; ++i) {
      auto a = QueuePair::Create(*initiator_cq, config);
      auto b = QueuePair::Create(*responder_cq, responder);
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
                     const std::string& caller = "",
                     std::shared_ptr<NoticeSharedReceives> shared = nullptr) {
    NoticeReceiverOptions options;
    options.shared = std::move(shared);
    options.monitor = monitor_.get();
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
  // takes several WRs) whose peer QPs a receiver serves for `target`,
  // with receives from `shared` when given.
  void StartBoth(std::shared_ptr<NoticeTarget> target,
                 std::shared_ptr<NoticeSharedReceives> shared = nullptr) {
    std::vector<std::unique_ptr<QueuePair>> initiators, responders;
    std::shared_ptr<CompletionQueue> icq, rcq;
    MakePairs(kPairs, &initiators, &icq, &responders, &rcq,
              shared != nullptr ? shared->srq() : nullptr);
    if (HasFatalFailure()) return;
    StartReceiver(rcq, std::move(responders), std::move(target), "",
                  std::move(shared));
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
  // Retires receivers' QPs on a shared queue when a test sets it.
  std::unique_ptr<PortMonitor> monitor_;
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

}  // namespace rdmad::verbs

#endif  // RDMAD_TESTS_LAB_VERBS_VERBS_LAB_NOTICE_FIXTURE_H_
