// NoticeReceiver: the responder's half of WRITE with an immediate over
// verbs (verbs_notice.h).
//
// The QPs a VerbsAcceptor creates for a peer only answer one-sided WRITEs
// and READs, which the NIC executes alone; the notices that follow a WRITE
// with an immediate are SENDs and need software. A NoticeReceiver takes
// over those QPs and their CQ: their receives come from the device's shared
// receive queue (notice_srq.h; the completion's qp_num names the QP), or,
// where the device has none, it keeps kNoticeCredits receives posted per
// QP. On its event loop it copies each notice out of its receive buffer,
// re-posts the receive, checks the notice against the region table
// (CheckNotice), tells the region's owner through the NotificationSink
// (naming the caller, whose handshake made these QPs, as the writer), and
// answers with an ack on the same QP. A notice that does not decode is
// counted and dropped without an answer; one that fails the check is
// counted, never notified, and answered with the reason. Nothing a peer
// sends can make it notify a region the peer could not write, crash, or
// block the loop.
//
// The CQ is watched through its completion channel and polled on every
// turn of the loop only while completions keep coming: an idle receiver
// costs nothing.
//
// Example (VerbsAcceptor::Accept):
//   RDMAD_ASSIGN_OR_RETURN(
//       pool.receiver,
//       NoticeReceiver::Start({.loop = runtime->PickServing(),
//                              .peer = caller, .device = "rxe0",
//                              .target = target},
//                             std::move(cq), std::move(qps)));
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_RECEIVER_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_RECEIVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/notification_sink.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/verbs/completion_queue.h"
#include "daemon/transport/verbs/notice_srq.h"
#include "daemon/transport/verbs/port_monitor.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/verbs_notice.h"

namespace rdmad::verbs {

// What the receivers of a daemon did with the notices they got.
struct NoticeCounts {
  uint64_t delivered = 0;     // checked and handed to the owner
  uint64_t rejected = 0;      // decoded, failed the check: refused in the ack
  uint64_t malformed = 0;     // did not decode, or broke a receive: dropped
  uint64_t acks_dropped = 0;  // an ack that could not be sent
};

// Where the notices of every receiver of a daemon go, and their counts.
// The regions and the sink are set once the daemon has them (ServeNotices);
// until then notices are answered kNotServed. Thread-safe.
class NoticeTarget {
 public:
  // Both not owned; they must outlive every receiver's last notice (the
  // daemon stops its receivers before it destroys them).
  void Set(const core::RegionTable* regions, core::NotificationSink* sink);
  const core::RegionTable* regions() const { return regions_.load(); }
  core::NotificationSink* sink() const { return sink_.load(); }

  NoticeCounts counts() const;
  void CountResult(NoticeResult result);
  void CountMalformed() { malformed_.fetch_add(1); }
  void CountAckDropped() { acks_dropped_.fetch_add(1); }

 private:
  std::atomic<const core::RegionTable*> regions_{nullptr};
  std::atomic<core::NotificationSink*> sink_{nullptr};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> malformed_{0};
  std::atomic<uint64_t> acks_dropped_{0};
};

struct NoticeReceiverOptions {
  // The loop the receiver lives on. Not owned; outlives the receiver's
  // teardown (the daemon stops its runtime last).
  runtime::EventLoop* loop = nullptr;
  // The caller's Peer address (its Connect's, checked by the Peer
  // service): for logs, and as the writer its notifications name.
  std::string peer;
  // The IP address the Peer.Connect that made these QPs came from, as this
  // daemon saw it: notices on them are held to the exports' access lists
  // by it (CheckNotice). Empty: unknown, admitted only by exports without
  // a list.
  std::string caller;
  std::string device;  // the local device: picks the export's rkey
  std::shared_ptr<NoticeTarget> target;
  // The device's shared receive queue the QPs were created with
  // (QpConfig::srq); null: the receiver posts kNoticeCredits receives on
  // each QP itself.
  std::shared_ptr<NoticeSharedReceives> shared;
  // Where the device's IBV_EVENT_QP_LAST_WQE_REACHED arrive (not owned;
  // outlives the receiver's teardown). With `shared`, the QPs are retired
  // through it (see ~NoticeReceiver); null: destroyed at once.
  PortMonitor* monitor = nullptr;
};

// How long a retiring QP waits for IBV_EVENT_QP_LAST_WQE_REACHED before it
// is destroyed anyway.
inline constexpr absl::Duration kLastWqeWait = absl::Seconds(2);

class NoticeReceiver {
 public:
  // Takes the connected QPs of one accepted pool (RTR or RTS; their peer
  // sends nothing before it has our answer) and the CQ all their
  // completions go to, posts kNoticeCredits receives on each (unless they
  // share options.shared's), and joins the loop. FAILED_PRECONDITION when a
  // QP's receive queue is too short (QpConfig::max_recv_wr).
  static absl::StatusOr<std::unique_ptr<NoticeReceiver>> Start(
      NoticeReceiverOptions options, std::shared_ptr<CompletionQueue> cq,
      std::vector<std::unique_ptr<QueuePair>> qps);
  // Leaves the loop and destroys the QPs there (soon after, not before
  // this returns): peers' WRs on them fail. QPs on a shared receive queue
  // are retired first, so that no receive of the queue is lost with them:
  // moved to the error state, they are destroyed once each reported
  // IBV_EVENT_QP_LAST_WQE_REACHED (or kLastWqeWait passed), and the
  // receives their CQ still holds (a notice half received, flushed) go
  // back to the queue.
  ~NoticeReceiver();

  NoticeReceiver(const NoticeReceiver&) = delete;
  NoticeReceiver& operator=(const NoticeReceiver&) = delete;

  // The QPs, for ListQps. Valid until the receiver is destroyed; only
  // their const queries may be used from other threads.
  const std::vector<std::unique_ptr<QueuePair>>& qps() const;

 private:
  class Impl;
  explicit NoticeReceiver(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_NOTICE_RECEIVER_H_
