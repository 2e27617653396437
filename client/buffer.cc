// Implementation of rdmad::Buffer (include/rdmad/client.h): a mapping of a
// region, unmapped (and for an owned buffer, freed) when it goes.
#include <sys/mman.h>

#include <utility>

#include "client/buffer_impl.h"
#include "client/client_impl.h"
#include "rdmad/client.h"

namespace rdmad {
namespace {

// What the accessors of a Buffer without a mapping (moved from) return.
const std::string& NoName() {
  static const std::string* const kEmpty = new std::string();
  return *kEmpty;
}

}  // namespace

Buffer::Buffer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Buffer::Buffer(Buffer&& other) noexcept = default;

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    (void)Release();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Buffer::~Buffer() { (void)Release(); }

char* Buffer::data() const { return impl_ != nullptr ? impl_->data : nullptr; }
size_t Buffer::size() const { return impl_ != nullptr ? impl_->size : 0; }
uint64_t Buffer::id() const { return impl_ != nullptr ? impl_->id : 0; }
const std::string& Buffer::name() const {
  return impl_ != nullptr ? impl_->name : NoName();
}
bool Buffer::owned() const { return impl_ != nullptr && impl_->owned; }
bool Buffer::writable() const { return impl_ == nullptr || impl_->writable; }

absl::Status Buffer::Release() {
  if (impl_ == nullptr || impl_->client == nullptr) return absl::OkStatus();
  if (impl_->data != nullptr) ::munmap(impl_->data, impl_->mapped_size);
  impl_->data = nullptr;
  // A buffer of a session before a daemon restart is gone from the daemon
  // already, and its id may name another region of the new one:
  // FreeRegionIn frees only in the buffer's own session.
  const absl::Status status =
      impl_->owned ? client_internal::FreeRegionIn(*impl_->link, impl_->id,
                                                   impl_->generation)
                   : absl::OkStatus();
  impl_->client = nullptr;
  impl_->link.reset();
  return status;
}

}  // namespace rdmad
