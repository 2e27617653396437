// NotificationSink: where a WRITE with an immediate, once its data is in a
// region of this daemon, is announced: to the session(s) that own the
// region, on the queue each registered for notifications (daemon/ring).
// The core and both transports' serving sides only know this interface.
#ifndef RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_
#define RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "daemon/core/region.h"
#include "daemon/core/transport_kind.h"

namespace rdmad::core {

// Who wrote, as the notification tells its receiver.
struct NotificationWriter {
  // How the write came: kLocal (a client of this daemon), kTcp or kVerbs.
  TransportKind transport = TransportKind::kLocal;
  // The writing daemon's Peer address ("HOST:PORT"), as its data
  // connection or verbs handshake named it (checked for form: a remote
  // daemon's word, as the uid it vouches for in Resolve); for a TCP peer
  // that does not name itself, the address its connection comes from.
  // Null for a local writer: the sink fills in this daemon's own. Shared
  // by every notification of one connection, so that a backlog of them
  // holds one copy.
  std::shared_ptr<const std::string> address;
  // A local writer's uid, as the kernel told the daemon; none for a
  // remote writer.
  std::optional<uint32_t> uid;
};

class NotificationSink {
 public:
  virtual ~NotificationSink() = default;
  // [offset, offset+length) of `region` was written with `immediate` by
  // `writer`. Thread-safe, never blocks, never fails: called after the
  // data is in place, the notification is the sink's job from then on. It
  // reaches the owner's notification queue at once or later, in order (a
  // bounded backlog per uid, also for an owner with no notification queue
  // open yet); past the bound it is counted lost, and the count reaches
  // the owner in its place.
  virtual void Notify(const Region& region, uint64_t offset, uint64_t length,
                      uint32_t immediate, const NotificationWriter& writer) = 0;
};

// The RESOURCE_EXHAUSTED with which an rdmad from before the backlog
// refused a verbs notice it found no room for (NoticeResult::kNotTold);
// `region` is a label, as Region::Label. rdmad itself never answers so.
absl::Status OwnerNotToldError(absl::string_view region);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_NOTIFICATION_SINK_H_
