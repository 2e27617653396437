// PostBatch: lets a data channel hold back the operations one thread posts
// in a burst and hand them to the device together.
//
// A verbs channel that posts every operation as it arrives rings the NIC's
// doorbell once per operation. When a caller submits many small operations
// at once (Local.Batch), it opens a PostBatch on its thread for the burst:
// channels then only queue the operations (DataChannel::Post with a batch
// open) and the batch's end flushes each channel once, so that the queued
// operations go out as ibv_post_send chains, one per QP.
//
// Only operations posted synchronously on the batch's thread are held back;
// anything posted later, or from another thread, goes out at once. The
// batch keeps every channel it holds operations for alive until it flushes
// it, so a channel replaced in the meantime is still flushed (and fails the
// operations with its own status if it was closed).
//
//   {
//     transport::PostBatch batch;
//     for (const auto& op : ops) Submit(op);  // may reach channel->Post
//   }  // each channel that was posted to is flushed here, once
#ifndef RDMAD_DAEMON_TRANSPORT_POST_BATCH_H_
#define RDMAD_DAEMON_TRANSPORT_POST_BATCH_H_

#include <algorithm>
#include <memory>
#include <vector>

namespace rdmad::transport {

// What PostBatch needs from a channel: a way to post what it held back.
class Flushable {
 public:
  virtual ~Flushable() = default;
  // Posts everything queued while a batch was open. Never blocks.
  virtual void Flush() = 0;
};

class PostBatch {
 public:
  PostBatch() : outer_(current_) { current_ = this; }
  ~PostBatch() {
    current_ = outer_;
    // A flush may complete operations whose callbacks post again: those go
    // to the enclosing batch (or straight out), not to this one.
    for (const std::shared_ptr<Flushable>& channel : channels_) {
      channel->Flush();
    }
  }
  PostBatch(const PostBatch&) = delete;
  PostBatch& operator=(const PostBatch&) = delete;

  // Called by a channel's Post: true if a batch is open on this thread, in
  // which case the channel queues the operation without posting it and the
  // batch will call channel->Flush() at its end. False (post now) without
  // a batch, or when the channel is not owned by a shared_ptr.
  static bool Defer(const std::weak_ptr<Flushable>& channel) {
    if (current_ == nullptr) return false;
    std::shared_ptr<Flushable> owned = channel.lock();
    if (owned == nullptr) return false;
    auto& held = current_->channels_;
    if (std::find(held.begin(), held.end(), owned) == held.end()) {
      held.push_back(std::move(owned));
    }
    return true;
  }

  // Whether a batch is open on this thread.
  static bool Open() { return current_ != nullptr; }

 private:
  static inline thread_local PostBatch* current_ = nullptr;
  PostBatch* const outer_;
  std::vector<std::shared_ptr<Flushable>> channels_;
};

}  // namespace rdmad::transport

#endif  // RDMAD_DAEMON_TRANSPORT_POST_BATCH_H_
