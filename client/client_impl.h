// Internals of rdmad::Client (include/rdmad/client.h), shared by the files
// that implement it: client.cc (session, buffers, regions),
// client_transfer.cc (transfers and queues), client_inspect.cc (inspection),
// and by queue.cc and shared_queue.cc. Not a public header.
#ifndef RDMAD_CLIENT_CLIENT_IMPL_H_
#define RDMAD_CLIENT_CLIENT_IMPL_H_

#include <memory>

#include "client/session_link.h"
#include "client/shared_queue.h"
#include "rdmad/client.h"

namespace rdmad {

// Hidden: librdmad_client.so exports Client's members, not these.
struct __attribute__((visibility("hidden"))) Client::Impl {
  // The session with the daemon; reopened by the first call after the
  // daemon restarted (SessionLink::generation counts the sessions). Shared
  // with the Queues opened from this Client, which close themselves
  // through it and so may outlive the Client.
  std::shared_ptr<client_internal::SessionLink> link;
  // The queue behind Write, Read and Batch (made with the Client).
  std::unique_ptr<client_internal::SharedQueue> transfers;
};

// Frees region `id` of session `generation` through `link`: what a Buffer
// does when it goes, with or without its Client. OK when that session is
// gone already (its regions went with it).
namespace client_internal {
absl::Status FreeRegionIn(SessionLink& link, uint64_t id, uint64_t generation);
}  // namespace client_internal

}  // namespace rdmad

#endif  // RDMAD_CLIENT_CLIENT_IMPL_H_
