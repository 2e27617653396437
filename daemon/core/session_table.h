// SessionTable: the local client sessions, keyed by id and by token.
//
// A session is created when a client connects to the session socket; its
// identity (uid/gid/pid) is what the kernel reported for that connection.
// gRPC calls name their session with the token the daemon sent on that
// socket, and are bound to the process that received it: a stolen token is
// useless in any other process (AuthenticateFrom).
#ifndef RDMAD_DAEMON_CORE_SESSION_TABLE_H_
#define RDMAD_DAEMON_CORE_SESSION_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/core/region.h"

namespace rdmad::core {

struct SessionInfo {
  uint64_t id = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
  absl::Time opened;
  std::vector<uint32_t> groups;  // supplementary groups (SO_PEERGROUPS)
};

// Thread-safe.
class SessionTable {
 public:
  struct Opened {
    uint64_t id;
    std::string token;
  };

  // Opens a session for a process whose credentials the kernel reported.
  // `groups`: its supplementary groups, for region group permissions.
  Opened Open(uint32_t uid, uint32_t gid, int32_t pid,
              std::vector<uint32_t> groups = {});

  // Closes a session; returns false if it was not open.
  bool Close(uint64_t id);

  // Whether session `id` is open.
  bool Contains(uint64_t id) const;

  // The caller behind `token`. UNAUTHENTICATED for unknown or closed ones.
  absl::StatusOr<Caller> Authenticate(absl::string_view token) const;

  // Authenticate, for a call that arrived on a connection whose other end
  // the kernel reports as process `pid` of `uid`: a token is good only in
  // the process it was issued to (the one that opened the session), so
  // PERMISSION_DENIED if `pid` or `uid` differ, whoever else holds it, even
  // a process of the same uid.
  absl::StatusOr<Caller> AuthenticateFrom(absl::string_view token, int32_t pid,
                                          uint32_t uid) const;

  size_t size() const;
  std::vector<SessionInfo> List() const;

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, SessionInfo> by_id_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> by_token_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::string> token_of_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_SESSION_TABLE_H_
