#include "daemon/peer/transfer_flow.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/size.h"
#include "daemon/peer/retry_policy.h"
#include "spdlog/spdlog.h"

namespace rdmad::peer {
namespace {

absl::Status TooLate(const std::string& peer) {
  return absl::DeadlineExceededError(absl::StrCat(
      "peer ", peer, ": the transfer's deadline passed before it could be "
      "sent"));
}

}  // namespace

TransferFlow::TransferFlow(FindPeer find, runtime::Timers* timers)
    : find_(std::move(find)), timers_(timers) {}

absl::Status TransferFlow::Attach(Running& r) {
  auto peer = find_(r.address(), r.t.uid);
  if (!peer.ok()) return peer.status();
  r.peer = *std::move(peer);
  r.peer->in_flight++;
  // The coarse clock: a peer idle for minutes is what this is for.
  r.peer->last_used_ns = absl::ToUnixNanos(timers_->CoarseNow());
  return absl::OkStatus();
}

void TransferFlow::SubmitBatch(absl::Span<core::Transfer> transfers) {
  // Ops bound for the same channel, posted together at the end. Inline:
  // most batches go to one channel, and one operation at a time is the
  // latency case, where each allocation shows.
  struct Group {
    std::shared_ptr<transport::DataChannel> channel;
    absl::InlinedVector<transport::RemoteOp, 4> ops;
  };
  absl::InlinedVector<Group, 1> groups;
  // The transfers of a batch mostly go to one peer and one region: its
  // peer, ready link and named target are looked up once for a run of
  // them (a lock each, per transfer, otherwise), and the next transfer of
  // the same caller to the same place reuses them.
  struct Run {
    std::string address;
    uint32_t uid = 0;
    std::shared_ptr<RemotePeer> peer;
    std::optional<Link> link;
    std::optional<std::string> name;  // the name `target` was found for
    ResolvedRegion target;
  };
  std::optional<Run> run;
  for (core::Transfer& t : transfers) {
    auto r = std::make_unique<Running>();
    r->t = std::move(t);
    if (draining_.load()) {
      Finish(std::move(r), absl::UnavailableError(
                               "this daemon is shutting down: no new transfers"));
      continue;
    }
    if (run.has_value() && run->uid == r->t.uid &&
        run->address == r->address()) {
      r->peer = run->peer;
      r->peer->in_flight++;
      r->peer->last_used_ns = absl::ToUnixNanos(timers_->CoarseNow());
    } else {
      if (absl::Status s = Attach(*r); !s.ok()) {
        Finish(std::move(r), std::move(s));
        continue;
      }
      run.emplace(Run{.address = r->address(),
                      .uid = r->t.uid,
                      .peer = r->peer,
                      .link = r->peer->connection->ReadyLink()});
    }
    // The fast path: a ready link and a known target.
    const std::optional<Link>& link = run->link;
    ResolvedRegion target;
    if (link.has_value()) {
      if (r->t.remote.descriptor != nullptr) {
        if (r->t.remote.descriptor->incarnation == link->incarnation) {
          target = r->t.remote.descriptor;
        }
      } else {
        if (run->name != r->t.remote.name) {
          run->target = r->peer->names->Find(r->t.remote.name, r->t.uid,
                                             link->incarnation);
          run->name = r->t.remote.name;
        }
        target = run->target;
        r->from_cache = target != nullptr;
      }
    }
    if (target == nullptr) {
      Begin(std::move(r));
      continue;
    }
    std::optional<transport::RemoteOp> op =
        MakeOp(std::move(r), *link, target);
    if (!op.has_value()) continue;
    Group* group = nullptr;
    for (Group& g : groups) {
      if (g.channel == link->channel) group = &g;
    }
    if (group == nullptr) {
      group = &groups.emplace_back();
      group->channel = link->channel;
    }
    group->ops.push_back(*std::move(op));
  }
  for (Group& g : groups) g.channel->Post(absl::MakeSpan(g.ops));
}

void TransferFlow::Resolve(const core::TransferTarget& target, uint32_t uid,
                           absl::Time deadline, Callback<Resolved> done) {
  // The same steps as a transfer's, with a transfer that carries nothing:
  // the answer goes to `done` instead of an operation being sent.
  auto r = std::make_unique<Running>();
  r->t.remote = target;
  r->t.uid = uid;
  r->t.deadline = deadline;
  r->t.start = timers_->Now();
  r->resolve_only = std::make_shared<Callback<Resolved>>(std::move(done));
  if (draining_.load()) {
    return Finish(std::move(r),
                  absl::UnavailableError("this daemon is shutting down"));
  }
  if (absl::Status s = Attach(*r); !s.ok()) {
    return Finish(std::move(r), std::move(s));
  }
  Begin(std::move(r));
}

void TransferFlow::Begin(RunningPtr r) {
  if (timers_->DeadlinePassed(r->t.deadline)) {
    const std::string address = r->address();
    return Finish(std::move(r), TooLate(address));
  }
  // Read before the callback takes `r` (argument order is unspecified).
  std::shared_ptr<PeerConnection> connection = r->peer->connection;
  const absl::Time deadline = r->t.deadline;
  // A name not known yet is resolved in the handshake's own round trip,
  // unless the holder must first prove who it is (CheckHolder): then the
  // name goes nowhere before the answer says who answered.
  std::optional<NameRequest> name;
  if (r->t.remote.descriptor == nullptr &&
      r->t.remote.holder_trust == nullptr) {
    name = NameRequest{r->t.remote.name, r->t.uid};
  }
  connection->Acquire(
      deadline,
      [this, r = std::move(r)](absl::StatusOr<Link> link) mutable {
        OnLink(std::move(r), std::move(link));
      },
      std::move(name));
}

void TransferFlow::OnLink(RunningPtr r, absl::StatusOr<Link> link) {
  // Handshake failures are not retried here: the handshake itself just
  // tried to reach the peer.
  if (!link.ok()) return Finish(std::move(r), link.status());
  const core::TransferTarget& remote = r->t.remote;
  if (remote.descriptor != nullptr) {
    const core::RemoteRegionInfo& d = *remote.descriptor;
    if (d.incarnation == link->incarnation) {
      return Send(std::move(r), *link, remote.descriptor);
    }
    if (r->retries_left > 0) {
      // Maybe the peer restarted and we have not noticed yet (the
      // descriptor is newer than what we know): ask it.
      --r->retries_left;
      r->peer->connection->MarkStale(absl::UnavailableError(
          "a descriptor names another run of this peer"));
      return Begin(std::move(r));
    }
    return Finish(std::move(r),
                  absl::NotFoundError(absl::StrFormat(
                      "the descriptor of %s was issued by an earlier run of "
                      "peer %s (incarnation %x; it now runs %x): the region "
                      "is gone; get a new descriptor from that node",
                      core::RemoteRegionLabel(d), d.peer, d.incarnation,
                      link->incarnation)));
  }
  // Not even the name goes to a holder this daemon does not trust for it.
  if (absl::Status trusted = CheckHolder(*r, *link); !trusted.ok()) {
    return Finish(std::move(r), std::move(trusted));
  }
  if (ResolvedRegion cached =
          r->peer->names->Find(remote.name, r->t.uid, link->incarnation)) {
    r->from_cache = true;
    return Send(std::move(r), *link, cached);
  }
  r->from_cache = false;
  std::shared_ptr<NameCache> names = r->peer->names;
  const std::string name = remote.name;
  const uint32_t uid = r->t.uid;
  const absl::Time deadline = r->t.deadline;
  names->Lookup(name, uid, link->incarnation, deadline,
                [this, r = std::move(r), link = *std::move(link)](
                    absl::StatusOr<ResolvedRegion> target) mutable {
                  if (!target.ok()) {
                    if (target.status().code() ==
                        absl::StatusCode::kUnavailable) {
                      r->peer->connection->MarkStale(target.status());
                    }
                    return Fail(std::move(r), target.status());
                  }
                  Send(std::move(r), link, *target);
                });
}

absl::Status TransferFlow::CheckHolder(const Running& r, const Link& link) {
  const core::TransferTarget& remote = r.t.remote;
  if (remote.holder_trust == nullptr) return absl::OkStatus();
  std::shared_ptr<const core::PeerIdentity> presented =
      r.peer->connection->IdentityOf(link.incarnation);
  return remote.holder_trust->CheckHolder(
      remote.name, r.peer->address, remote.expect_identity, presented.get());
}

std::optional<transport::RemoteOp> TransferFlow::MakeOp(
    RunningPtr r, const Link& link, const ResolvedRegion& target) {
  const core::Transfer& t = r->t;
  const std::string& peer = r->peer->address;
  if (timers_->DeadlinePassed(t.deadline)) {
    Finish(std::move(r), TooLate(peer));
    return std::nullopt;
  }
  // Named only in errors: not built for every operation.
  auto label = [&] { return core::RemoteRegionLabel(*target); };
  // A target found in the cluster directory must still be the region the
  // directory named; NOT_FOUND sends the caller back to the directory (and
  // a cached resolution is dropped and retried by Fail).
  if (t.remote.expect_incarnation != 0 &&
      (target->incarnation != t.remote.expect_incarnation ||
       target->region_id != t.remote.expect_region_id)) {
    Fail(std::move(r),
         absl::NotFoundError(absl::StrFormat(
             "%s on %s is no longer the region the cluster directory listed "
             "(%x/#%d there, %x/#%d listed)",
             label(), peer, target->incarnation, target->region_id,
             t.remote.expect_incarnation, t.remote.expect_region_id)));
    return std::nullopt;
  }
  if (absl::Status trusted = CheckHolder(*r, link); !trusted.ok()) {
    Finish(std::move(r), std::move(trusted));
    return std::nullopt;
  }
  if (!RangeInside(target->length, t.remote.offset, t.length)) {
    Finish(std::move(r),
           absl::OutOfRangeError(absl::StrCat(
               "remote range [", t.remote.offset, ", ", t.remote.offset, "+",
               t.length, ") does not fit in ", label(), " on ", peer, " (",
               target->length, " bytes)")));
    return std::nullopt;
  }
  const bool write = t.op == core::OpType::kWrite;
  if (!core::Allows(target->access, write ? core::RemoteAccess::kWrite
                                          : core::RemoteAccess::kRead)) {
    const char* how =
        target->access == core::RemoteAccess::kRead    ? "exported read-only"
        : target->access == core::RemoteAccess::kWrite ? "exported write-only"
                                                       : "not exported";
    // A cached answer may predate a re-export: Fail retries it.
    Fail(std::move(r), absl::PermissionDeniedError(
                           absl::StrCat(label(), " on ", peer, " is ", how)));
    return std::nullopt;
  }
  if (link.kind == core::TransportKind::kTcp &&
      !t.local->memory().cpu_mapped()) {
    Finish(std::move(r),
           absl::FailedPreconditionError(absl::StrCat(
               "local region #", t.local->id(),
               " is a dma-buf this daemon "
               "cannot map for the CPU (GPU memory), and ",
               peer,
               " is reached over TCP: only RDMA devices can move its bytes. "
               "Use the verbs transport between these nodes")));
    return std::nullopt;
  }
  auto key = link.channel->KeyFor(*target);
  if (!key.ok()) {
    Finish(std::move(r), key.status());
    return std::nullopt;
  }
  r->kind = link.kind;
  transport::RemoteOp op;
  op.op = t.op;
  op.local = t.local;
  op.local_addr = t.local_data();
  op.length = t.length;
  op.remote = target;
  op.key = *key;
  op.remote_offset = t.remote.offset;
  op.deadline = t.deadline;
  op.immediate = t.immediate;
  if (link.kind == core::TransportKind::kTcp && t.local->memory().is_dmabuf()) {
    // The TCP channel reads or writes the dma-buf with the CPU: bracketed
    // for its exporter until the operation is over.
    t.local->memory().BeginCpuAccess();
    op.done = [this, r = std::move(r),
               local = t.local](absl::Status status) mutable {
      local->memory().EndCpuAccess();
      OnSent(std::move(r), std::move(status));
    };
    return op;
  }
  op.done = [this, r = std::move(r)](absl::Status status) mutable {
    OnSent(std::move(r), std::move(status));
  };
  return op;
}

void TransferFlow::Send(RunningPtr r, const Link& link,
                        const ResolvedRegion& target) {
  if (r->resolve_only != nullptr) {
    auto done = std::move(r->resolve_only);
    r->peer->in_flight--;
    r->peer = nullptr;  // not a transfer: nothing to count
    return (*done)(Resolved{target, link.kind});
  }
  std::optional<transport::RemoteOp> op =
      MakeOp(std::move(r), link, target);
  if (op.has_value()) link.channel->Post(absl::MakeSpan(&*op, 1));
}

void TransferFlow::OnSent(RunningPtr r, absl::Status status) {
  if (status.ok()) return Finish(std::move(r), std::move(status));
  Fail(std::move(r), std::move(status));
}

void TransferFlow::Fail(RunningPtr r, absl::Status status) {
  const Retry retry = RetryFor(status, r->from_cache);
  if (retry == Retry::kReconnect) {
    r->peer->connection->MarkStale(status);
  } else if (retry == Retry::kReresolve) {
    r->peer->names->Invalidate(r->t.remote.name);
    // And through a new Hello (retry_policy.h): a refused key may mean the
    // peer restarted while this daemon was idle, when no connection failed
    // under a transfer to say so. Only a Hello finds the new run; a Resolve
    // under the old one fails UNAVAILABLE "restarted since Hello".
    r->peer->connection->MarkStale(status);
  }
  // A WRITE with an immediate is not idempotent: when the connection was
  // lost under it, the peer may have placed it and told the region's owner
  // already, and a retry would tell the owner twice. Notifications are at
  // most once; the writer learns that this one is in doubt.
  if (retry == Retry::kReconnect && r->t.immediate.has_value()) {
    return Finish(
        std::move(r),
        absl::UnavailableError(absl::StrCat(
            "a WRITE with an immediate is not retried (its data may be in "
            "place and its owner told; write it again only if the owner can "
            "take the notification twice): ",
            status.message())));
  }
  if (retry != Retry::kNo && r->retries_left > 0 && !draining_.load() &&
      timers_->Now() < r->t.deadline) {
    --r->retries_left;
    r->from_cache = false;
    spdlog::debug("retrying a transfer to {} after: {}", r->peer->address,
                  status.ToString());
    return Begin(std::move(r));
  }
  Finish(std::move(r), std::move(status));
}

void TransferFlow::Finish(RunningPtr r, absl::Status status) {
  if (r->resolve_only != nullptr) {
    if (r->peer != nullptr) {
      r->peer->in_flight--;
      // Not a transfer, so not counted; but it is what went wrong with
      // this peer last (a queue's handle names a region it lacks...).
      if (!status.ok()) r->peer->connection->RecordError(status);
    }
    auto done = std::move(r->resolve_only);
    return (*done)(status.ok() ? absl::InternalError("resolved nothing")
                               : std::move(status));
  }
  core::TransferDone done = std::move(r->t.done);
  RemotePeer* peer = r->peer.get();
  if (peer != nullptr) peer->in_flight--;
  if (!status.ok()) {
    if (peer != nullptr) {
      peer->ops_failed++;
      peer->connection->RecordError(status);
    }
    done(std::move(status));
    return;
  }
  core::TransferResult result;
  result.bytes = r->t.length;
  result.transport = r->kind;
  result.latency = timers_->Now() - r->t.start;
  if (r->t.op == core::OpType::kWrite) {
    peer->bytes_written += result.bytes;
  } else {
    peer->bytes_read += result.bytes;
  }
  peer->ops_completed++;
  done(std::move(result));
}

}  // namespace rdmad::peer
