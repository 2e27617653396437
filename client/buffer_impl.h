// Internals of rdmad::Buffer (include/rdmad/client.h), shared by buffer.cc,
// client.cc (which maps buffers and maps views again after a daemon
// restart) and queue.cc (which names buffers on the ring). Not a public
// header.
#ifndef RDMAD_CLIENT_BUFFER_IMPL_H_
#define RDMAD_CLIENT_BUFFER_IMPL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "client/session_link.h"
#include "rdmad/client.h"

namespace rdmad {

// One mapping of a region. Owned by its Buffer; used by the thread that
// uses the Buffer. Hidden: librdmad_client.so exports Buffer's members,
// not these.
struct __attribute__((visibility("hidden"))) Buffer::Impl {
  // Which Client it came from (compared, never followed: the Client may be
  // gone). Null once released.
  const Client* client = nullptr;
  // The session it frees its region through.
  std::shared_ptr<client_internal::SessionLink> link;
  // A view re-mapped after a daemon restart gets the new region's id and
  // the new session's generation (Client::Usable).
  uint64_t id = 0;
  std::string name;
  char* data = nullptr;  // null once unmapped
  size_t size = 0;
  size_t mapped_size = 0;
  bool owned = false;
  bool writable = true;
  // The session it was created in (a count of the Client's sessions).
  uint64_t generation = 0;
};

}  // namespace rdmad

#endif  // RDMAD_CLIENT_BUFFER_IMPL_H_
