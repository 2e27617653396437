// ReceiveBuffer: the bytes one TCP data connection has read but not yet
// taken apart, so that one read system call brings in every small frame
// the socket holds (a batch of 64 8-byte WRITEs is 3.5 KiB of requests and
// 2 KiB of replies) instead of one readv per frame.
//
// A frame's header, an error message and a small payload are taken from
// the buffer; a payload larger than what is buffered is read straight to
// its place in region memory, with the buffer as the second iovec of the
// same readv to catch the frames behind it.
//
// Not thread-safe: it belongs to its connection's event loop.
#ifndef RDMAD_DAEMON_TRANSPORT_TCP_RECEIVE_BUFFER_H_
#define RDMAD_DAEMON_TRANSPORT_TCP_RECEIVE_BUFFER_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"

namespace rdmad::tcp {

class ReceiveBuffer {
 public:
  // Large enough for a few hundred small frames per read, small enough
  // that an idle connection costs little (allocated on first use).
  static constexpr size_t kCapacity = 16 << 10;

  ReceiveBuffer() = default;
  ReceiveBuffer(const ReceiveBuffer&) = delete;
  ReceiveBuffer& operator=(const ReceiveBuffer&) = delete;

  // The bytes read and not yet consumed.
  absl::Span<const uint8_t> data() const {
    return {bytes_.get() + begin_, end_ - begin_};
  }
  size_t size() const { return end_ - begin_; }
  bool empty() const { return begin_ == end_; }
  void Consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  // Where the next read lands: the free space after the unconsumed bytes,
  // moved to the front first so that the space is as large as it can be.
  iovec Space();
  // `n` bytes landed in Space().
  void Commit(size_t n) { end_ += n; }
  // Forgets what it holds (the connection closed); keeps the memory.
  void Clear() { begin_ = end_ = 0; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace rdmad::tcp

#endif  // RDMAD_DAEMON_TRANSPORT_TCP_RECEIVE_BUFFER_H_
