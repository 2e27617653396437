#include "daemon/transport/tcp/receive_buffer.h"

#include <cstring>

namespace rdmad::tcp {

iovec ReceiveBuffer::Space() {
  if (bytes_ == nullptr) bytes_ = std::make_unique_for_overwrite<uint8_t[]>(kCapacity);
  if (begin_ > 0) {
    std::memmove(bytes_.get(), bytes_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {bytes_.get() + end_, kCapacity - end_};
}

}  // namespace rdmad::tcp
