#include "daemon/core/session_table.h"

#include "absl/strings/str_cat.h"
#include "common/secure_random.h"
#include "common/status_macros.h"

namespace rdmad::core {

SessionTable::Opened SessionTable::Open(uint32_t uid, uint32_t gid,
                                        int32_t pid,
                                        std::vector<uint32_t> groups) {
  // 128 bits: tokens are bearer credentials on the local socket.
  std::string token = SecureRandomHex(16);
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  by_id_[id] = SessionInfo{id, uid, gid, pid, absl::Now(), std::move(groups)};
  by_token_[token] = id;
  token_of_[id] = token;
  return Opened{id, std::move(token)};
}

bool SessionTable::Contains(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  return by_id_.contains(id);
}

bool SessionTable::Close(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = token_of_.find(id);
  if (it == token_of_.end()) return false;
  by_token_.erase(it->second);
  token_of_.erase(it);
  by_id_.erase(id);
  return true;
}

absl::StatusOr<Caller> SessionTable::Authenticate(absl::string_view token) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = by_token_.find(token);
  if (it == by_token_.end()) {
    return absl::UnauthenticatedError(
        "unknown or expired rdmad session token: the session ended (did the "
        "daemon restart?); reconnect with the client library");
  }
  const SessionInfo& info = by_id_.at(it->second);
  return Caller{info.id, info.uid, info.gid, info.pid, info.groups};
}

absl::StatusOr<Caller> SessionTable::AuthenticateFrom(absl::string_view token,
                                                      int32_t pid,
                                                      uint32_t uid) const {
  RDMAD_ASSIGN_OR_RETURN(Caller caller, Authenticate(token));
  if (caller.pid != pid || caller.uid != uid) {
    // Says nothing about the session's owner: the caller is not it.
    return absl::PermissionDeniedError(absl::StrCat(
        "this session token was not issued to this process (pid ", pid,
        ", uid ", uid,
        "): a token is valid only in the process that opened "
        "the session on the session socket; open your own session (the "
        "client library does)"));
  }
  return caller;
}

size_t SessionTable::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return by_id_.size();
}

std::vector<SessionInfo> SessionTable::List() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<SessionInfo> out;
  for (const auto& [id, info] : by_id_) out.push_back(info);
  return out;
}

}  // namespace rdmad::core
