#include "daemon/transport/tcp/data_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "spdlog/spdlog.h"

namespace rdmad::tcp {
namespace {

// How long Stop waits for the loops to let go of the connections.
constexpr absl::Duration kStopTimeout = absl::Seconds(10);

}  // namespace

TcpDataServer::TcpDataServer(const core::RegionTable* regions,
                             TcpDataServerOptions options)
    : regions_(regions),
      options_(std::move(options)),
      slots_(options_.max_connections_per_address) {
  context_.regions = regions_;
  context_.options = &options_;
  context_.counters = &counters_;
}

absl::StatusOr<std::unique_ptr<TcpDataServer>> TcpDataServer::Start(
    const core::RegionTable* regions, TcpDataServerOptions options,
    runtime::IoRuntime* runtime) {
  RDMAD_ASSIGN_OR_RETURN(HostPort listen,
                         ParseHostPort(options.listen, AddressUse::kListen));
  auto server = std::unique_ptr<TcpDataServer>(
      new TcpDataServer(regions, std::move(options)));
  auto listener = Listen(listen);
  if (!listener.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", server->options_.listen,
        " for TCP data connections (", listener.status().message(),
        "): is the port in use? pick another --data_listen"));
  }
  server->port_ = LocalPortOf(listener->get());
  server->address_ = JoinHostPort(listen.host, server->port_);
  server->advertise_host_ = server->options_.advertise_host;
  if (server->advertise_host_.empty() && !IsWildcardHost(listen.host)) {
    server->advertise_host_ = listen.host;
  }
  // The loops that serve peers (all of them when every loop is an engine).
  const size_t first = runtime->engines() < runtime->size() ? runtime->engines() : 0;
  for (size_t i = first; i < runtime->size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->loop = runtime->loop(i);
    server->shards_.push_back(std::move(shard));
  }
  server->listener_ = *std::move(listener);
  TcpDataServer* self = server.get();
  runtime::EventLoop* loop = server->shards_[0]->loop;
  RDMAD_RETURN_IF_ERROR(runtime::RunOnLoop(loop, [self, loop]() -> absl::Status {
    RDMAD_ASSIGN_OR_RETURN(
        self->listener_watch_,
        loop->Watch(self->listener_.get(), EPOLLIN,
                    [self](uint32_t) { self->OnListenerReadable(); }));
    return absl::OkStatus();
  }));
  spdlog::info("TCP data listener on {}", server->address_);
  return server;
}

TcpDataServer::~TcpDataServer() { Stop(); }

void TcpDataServer::OnListenerReadable() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      const int error = errno;
      if (error == EINTR || error == ECONNABORTED) continue;
      if (runtime::AcceptBackoff::ShortOfResources(error)) {
        backoff_.FailedAndLog(error, "TCP data listener " + address_,
                              "peers");
        PauseAccepting();
      }
      return;  // EAGAIN: all taken
    }
    backoff_.Succeeded();
    // AF_UNSPEC if it cannot be named (gone already): refused by an
    // allow-list, and uncapped below (the connection dies anyway).
    sockaddr_storage peer{};
    socklen_t length = sizeof(peer);
    if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&peer),
                      &length) != 0) {
      peer.ss_family = AF_UNSPEC;
    }
    if (!options_.allow.empty() && (peer.ss_family == AF_UNSPEC ||
                                    !options_.allow.AllowsSockaddr(peer))) {
      Refuse(fd.get(), "not in peer_allow");
      continue;  // closes it
    }
    if (counters_.connections_open.load() >= options_.max_open_connections) {
      Refuse(fd.get(), "too many open data connections");
      continue;
    }
    // Loopback is not capped unless asked (data_server.h says why).
    const std::string host = HostOf(peer);
    const bool capped =
        !host.empty() && (options_.cap_loopback || !IsLoopbackHost(host));
    std::optional<AddressSlots::Slot> slot =
        capped ? slots_.TryTake(host) : AddressSlots::Slot();
    if (!slot.has_value()) {
      Refuse(fd.get(), absl::StrCat("its address already holds ",
                                    options_.max_connections_per_address,
                                    " data connections (the most one "
                                    "address may)"));
      continue;
    }
    TuneSocket(fd.get(), options_.tuning);
    counters_.connections_accepted++;
    Shard* shard = shards_[next_shard_++ % shards_.size()].get();
    if (shard->loop->InLoopThread()) {
      AddConnection(shard, &context_, std::move(fd), *std::move(slot));
    } else {
      // The slot goes with the task: returned if the loop drops it.
      struct Accepted {
        UniqueFd fd;
        AddressSlots::Slot slot;
      };
      auto moved = std::make_shared<Accepted>(
          Accepted{std::move(fd), *std::move(slot)});
      shard->loop->Post([shard, context = &context_, moved] {
        AddConnection(shard, context, std::move(moved->fd),
                      std::move(moved->slot));
      });
    }
  }
}

void TcpDataServer::PauseAccepting() {
  runtime::EventLoop* loop = shards_[0]->loop;
  loop->Rewatch(listener_watch_, 0).IgnoreError();
  if (resume_timer_ != 0) return;
  resume_timer_ = loop->RunAt(backoff_.resume_at(), [this, loop] {
    resume_timer_ = 0;
    if (listener_watch_ != 0) {
      loop->Rewatch(listener_watch_, EPOLLIN).IgnoreError();
    }
  });
}

void TcpDataServer::AddConnection(Shard* shard,
                                  const DataServerContext* context,
                                  UniqueFd fd, AddressSlots::Slot slot) {
  auto connection = std::make_unique<DataConnection>(
      std::move(fd), shard->loop, context,
      [shard](DataConnection* c) { shard->connections.erase(c); });
  if (absl::Status s = connection->Start(); !s.ok()) {
    spdlog::warn("tcp data server: cannot watch a new connection: {}",
                 s.ToString());
    return;
  }
  DataConnection* key = connection.get();
  shard->connections.emplace(key,
                             Held{std::move(connection), std::move(slot)});
}

// Counts a connection closed at accept. Logs the first and then every
// 1000th, so that a peer knocking in a loop cannot flood the log.
void TcpDataServer::Refuse(int fd, absl::string_view why) {
  const uint64_t n = ++counters_.refused;
  if (n % 1000 == 1) {
    spdlog::warn("tcp data server: refused a connection from {}: {} ({} "
                 "refused so far)",
                 RemoteAddressOf(fd), std::string(why), n);
  }
}

void TcpDataServer::Stop() {
  if (stopped_.exchange(true)) return;
  // The listener first, so no new connection arrives while the others
  // close. Each step runs on the loop that owns what it touches; a loop
  // that has already finished runs nothing more, and then nothing of ours
  // is left running on it either.
  // Shared with the tasks, which may outlive this call if it times out.
  struct Countdown {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu) = 0;
    void Done() {
      absl::MutexLock lock(&mu);
      --left;
    }
  };
  auto countdown = std::make_shared<Countdown>();
  {
    absl::MutexLock lock(&countdown->mu);
    countdown->left = static_cast<int>(shards_.size());
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard* shard = shards_[i].get();
    const bool listener = i == 0;
    const bool posted = shard->loop->Post([this, shard, listener, countdown] {
      if (listener) {
        if (listener_watch_ != 0) shard->loop->Unwatch(listener_watch_);
        if (resume_timer_ != 0) shard->loop->CancelTimer(resume_timer_);
        listener_watch_ = resume_timer_ = 0;
      }
      std::vector<DataConnection*> all;
      for (auto& [key, c] : shard->connections) all.push_back(key);
      for (DataConnection* c : all) c->Close("");
      // Behind the closes' own tasks, which destroy the connections.
      if (!shard->loop->Post([countdown] { countdown->Done(); })) {
        countdown->Done();
      }
    });
    if (!posted) countdown->Done();
  }
  absl::MutexLock lock(&countdown->mu);
  if (!countdown->mu.AwaitWithTimeout(
          absl::Condition(
              +[](int* left) { return *left == 0; }, &countdown->left),
          kStopTimeout)) {
    // A loop that runs no task for this long is wedged. Leaking the shards
    // is safe; freeing what it may still touch is not.
    spdlog::error("tcp data server: the I/O loops did not release its "
                  "connections within {}; leaving them",
                  absl::FormatDuration(kStopTimeout));
    for (auto& shard : shards_) shard.release();
    shards_.clear();
    return;
  }
  listener_.reset();
  for (auto& shard : shards_) shard->connections.clear();
}

absl::Status TcpDataServer::Accept(const v1::ConnectRequest& request,
                                   const std::string& /*caller*/,
                                   v1::ConnectResponse* response) {
  if (stopped_.load()) {
    return absl::UnavailableError("the TCP data listener is shutting down");
  }
  v1::TcpEndpoint* tcp = response->mutable_tcp();
  tcp->set_host(advertise_host_);
  tcp->set_port(port_);
  const uint32_t wanted =
      request.tcp_connections() == 0 ? 1 : request.tcp_connections();
  tcp->set_connections(std::min(wanted, options_.max_connections_per_peer));
  tcp->set_identify(true);
  return absl::OkStatus();
}

TcpDataServer::Stats TcpDataServer::stats() const {
  Stats s;
  s.connections_accepted = counters_.connections_accepted.load();
  s.connections_open = counters_.connections_open.load();
  s.requests = counters_.requests.load();
  s.rejected = counters_.rejected.load();
  s.bytes_written = counters_.bytes_written.load();
  s.bytes_read = counters_.bytes_read.load();
  s.protocol_errors = counters_.protocol_errors.load();
  s.refused = counters_.refused.load();
  s.stalled = counters_.stalled.load();
  return s;
}

}  // namespace rdmad::tcp
