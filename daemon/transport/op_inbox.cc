#include "daemon/transport/op_inbox.h"

#include <utility>

namespace rdmad::transport {

void OpInbox::Post(const std::shared_ptr<Channel>& channel,
                   runtime::EventLoop& loop, absl::Span<RemoteOp> ops) {
  const bool on_loop = loop.InLoopThread();
  bool closed;
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    closed = closed_;
    if (!closed && !on_loop) {
      first = queued_.empty();
      for (RemoteOp& op : ops) queued_.push_back(std::move(op));
    }
  }
  if (closed) {
    const absl::Status error = channel->ClosedError();
    for (RemoteOp& op : ops) op.done(error);
    return;
  }
  if (on_loop) {
    // An engine or a callback posting from the loop itself.
    channel->StartOps(ops);
  } else if (first) {
    loop.Post([this, channel] {
      std::vector<RemoteOp> batch = TakeAll();
      channel->StartOps(absl::MakeSpan(batch));
    });
  }
}

bool OpInbox::Close() {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  closed_ = true;
  return true;
}

bool OpInbox::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

std::vector<RemoteOp> OpInbox::TakeAll() {
  std::vector<RemoteOp> ops;
  absl::MutexLock lock(&mu_);
  ops.swap(queued_);
  return ops;
}

}  // namespace rdmad::transport
