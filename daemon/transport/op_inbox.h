// OpInbox: how a data channel takes operations from any thread and starts
// them on its event loop. A caller already on the loop starts its
// operations at once (no hop); others queue them, and the first of a batch
// posts the one loop task that starts everything queued by then. Once the
// channel is closed, new operations fail at once with its closed error.
//
// Thread-safe. The channel owns its inbox; the loop task keeps the channel
// (and so the inbox) alive through the shared_ptr it captures.
#ifndef RDMAD_DAEMON_TRANSPORT_OP_INBOX_H_
#define RDMAD_DAEMON_TRANSPORT_OP_INBOX_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/runtime/event_loop.h"
#include "daemon/transport/transport.h"

namespace rdmad::transport {

class OpInbox {
 public:
  // The channel an inbox feeds.
  class Channel {
   public:
    virtual ~Channel() = default;
    // On the loop thread: starts `ops`, or fails each of them when the
    // channel has been torn down since they were queued.
    virtual void StartOps(absl::Span<RemoteOp> ops) = 0;
    // What an operation posted after Close() fails with.
    virtual absl::Status ClosedError() const = 0;
  };

  // Hands `ops` to `channel` on `loop`; see the file comment.
  void Post(const std::shared_ptr<Channel>& channel, runtime::EventLoop& loop,
            absl::Span<RemoteOp> ops);

  // Refuses operations from now on. Returns false when already closed.
  bool Close();
  bool closed() const;

  // What is queued and not yet started, for a teardown to fail.
  std::vector<RemoteOp> TakeAll();

 private:
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<RemoteOp> queued_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_OP_INBOX_H_
