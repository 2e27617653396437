// rdmad_stand_in_peers: one process that stands in for many peer daemons,
// so that one real rdmad can be driven to a thousand peers and more on a
// machine that could not run a thousand daemons.
//
// Each stand-in is an identity of its own: a Peer-service address on its
// own loopback address (127.0.x.y, the same port for all), a random
// incarnation, and (over verbs) its own acceptor, so that its QP pools are
// its own. Every call is answered by rdmad's own Peer service
// (service::PeerService) for the identity the caller dialled (the call's
// :authority). What the identities share: one region table with one
// exported region, the TCP data listener on 127.0.0.1, the event loops,
// and the RDMA device.
//
//   rdmad_stand_in_peers --count N [--port P] [--first 127.0.1.1]
//       [--transport tcp|verbs] [--region bench] [--region_size 65536]
//       [--io_threads 2]
//
// Prints one line when every identity serves, then runs until SIGTERM or
// SIGINT:
//   READY first=127.0.1.1 port=P count=N data=127.0.0.1:D
// Identity i (0-based) is at the i-th address from --first, skipping .0
// and .255 in the last byte (127.0.1.1 ... 127.0.1.254, 127.0.2.1 ...).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/secure_random.h"
#include "common/tool_flags.h"
#include "common/unique_fd.h"
#include "daemon/config/config_file.h"
#include "daemon/config/resolved_config.h"
#include "daemon/core/region_table.h"
#include "daemon/runtime/io_runtime.h"
#include "daemon/service/call_helpers.h"
#include "daemon/service/peer_service.h"
#include "daemon/transport/tcp/data_server.h"
#include "daemon/transport_setup.h"
#include "grpcpp/grpcpp.h"
#include "rdmad/v1/rdmad.grpc.pb.h"
#include "spdlog/spdlog.h"

namespace rdmad::testing {
namespace {

struct Args {
  int count = 100;
  int port = 0;
  std::string first = "127.0.1.1";
  std::string transport = "tcp";
  std::string region = "bench";
  uint64_t region_size = 64 << 10;
  int io_threads = 2;
};

constexpr char kProgram[] = "rdmad_stand_in_peers";
constexpr char kUsage[] =
    "--count N [--port P] [--first 127.0.1.1] [--transport tcp|verbs] "
    "[--region NAME] [--region_size BYTES] [--io_threads N]";

[[noreturn]] void Usage(const std::string& why) {
  ToolFlags(kProgram, kUsage).Fail(why);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  ToolFlags(kProgram, kUsage)
      .Number("--count", &args.count, 1, 60000)
      .Number("--port", &args.port, 0, 65535)
      .Text("--first", &args.first)
      .Custom("--transport",
              [&args](const std::string& value) {
                args.transport = value;
                return value == "tcp" || value == "verbs";
              })
      .Text("--region", &args.region)
      .Number<uint64_t>("--region_size", &args.region_size, 1)
      .Number("--io_threads", &args.io_threads, 1)
      .Parse(argc, argv);
  return args;
}

// The `count` loopback addresses from `first`, skipping .0 and .255.
std::vector<std::string> Addresses(const std::string& first, int count) {
  in_addr a{};
  if (::inet_pton(AF_INET, first.c_str(), &a) != 1 ||
      (ntohl(a.s_addr) >> 24) != 127) {
    Usage("--first must be an IPv4 loopback address (127.x.y.z)");
  }
  std::vector<std::string> out;
  uint32_t host = ntohl(a.s_addr);
  while (static_cast<int>(out.size()) < count) {
    const uint32_t last = host & 0xff;
    if (last != 0 && last != 255) {
      in_addr next{htonl(host)};
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &next, text, sizeof(text));
      out.push_back(text);
    }
    if ((++host >> 24) != 127) Usage("--count runs past 127.255.255.254");
  }
  return out;
}

// A port free on the first address a moment ago (the kernel's pick).
int PickPort(const std::string& host) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  socklen_t len = sizeof(addr);
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  return ntohs(addr.sin_port);
}

// One stand-in daemon: what rdmad's Peer service reads of a daemon.
struct Identity {
  service::DaemonIdentity identity;
  std::vector<core::DeviceInfo> devices;
  core::PeerAllowList peer_allow;  // every peer
  std::unique_ptr<verbs::VerbsAcceptor> verbs;
  std::unique_ptr<service::PeerService> service;
};

// rdmad.v1.Peer for every identity: each call goes to the Peer service of
// the identity whose address the caller dialled.
class Dispatcher final : public v1::Peer::CallbackService {
 public:
  void Add(const std::string& authority, Identity* identity) {
    by_authority_[authority] = identity;
  }

  grpc::ServerUnaryReactor* Hello(grpc::CallbackServerContext* context,
                                  const v1::HelloRequest* request,
                                  v1::HelloResponse* response) override {
    Identity* id = Find(context);
    if (id == nullptr) return Unknown(context);
    return id->service->Hello(context, request, response);
  }
  grpc::ServerUnaryReactor* Connect(grpc::CallbackServerContext* context,
                                    const v1::ConnectRequest* request,
                                    v1::ConnectResponse* response) override {
    Identity* id = Find(context);
    if (id == nullptr) return Unknown(context);
    return id->service->Connect(context, request, response);
  }
  grpc::ServerUnaryReactor* Resolve(grpc::CallbackServerContext* context,
                                    const v1::ResolveRequest* request,
                                    v1::ResolveResponse* response) override {
    Identity* id = Find(context);
    if (id == nullptr) return Unknown(context);
    return id->service->Resolve(context, request, response);
  }
  grpc::ServerUnaryReactor* ListExports(
      grpc::CallbackServerContext* context,
      const v1::ListExportsRequest* request,
      v1::ListExportsResponse* response) override {
    Identity* id = Find(context);
    if (id == nullptr) return Unknown(context);
    return id->service->ListExports(context, request, response);
  }

 private:
  Identity* Find(grpc::CallbackServerContext* context) const {
    const grpc::string_ref authority = context->ExperimentalGetAuthority();
    auto it =
        by_authority_.find(std::string(authority.data(), authority.size()));
    return it == by_authority_.end() ? nullptr : it->second;
  }
  static grpc::ServerUnaryReactor* Unknown(
      grpc::CallbackServerContext* context) {
    return service::Done(
        context, absl::NotFoundError(absl::StrCat(
                     "no stand-in peer at ",
                     std::string(context->ExperimentalGetAuthority().data(),
                                 context->ExperimentalGetAuthority().size()))));
  }

  // Written before the server starts; read-only after.
  absl::flat_hash_map<std::string, Identity*> by_authority_;
};

void RaiseFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Run(const Args& args) {
  RaiseFileLimit();
  // SIGTERM and SIGINT end the run (sigwait below); blocked before any
  // thread starts, so that every thread inherits the mask.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const std::vector<std::string> hosts = Addresses(args.first, args.count);
  const int port = args.port != 0 ? args.port : PickPort(hosts[0]);
  if (port == 0) {
    std::fprintf(stderr, "no free port on %s\n", hosts[0].c_str());
    return 1;
  }

  v1::DaemonConfig config;
  config.set_transport(args.transport);
  config.set_data_listen("127.0.0.1:0");
  config.set_io_threads(static_cast<uint32_t>(args.io_threads));
  config::ApplyDefaults(config);
  auto resolved = config::ResolveConfig(config);
  if (!resolved.ok()) {
    std::fprintf(stderr, "%s\n", resolved.status().ToString().c_str());
    return 1;
  }
  auto runtime = runtime::IoRuntime::Start({.threads = args.io_threads});
  if (!runtime.ok()) {
    std::fprintf(stderr, "%s\n", runtime.status().ToString().c_str());
    return 1;
  }
  auto transports = OpenTransports(config, *resolved, runtime->get());
  if (!transports.ok()) {
    std::fprintf(stderr, "%s\n", transports.status().ToString().c_str());
    return 1;
  }
  core::RegionTable regions(transports->registrar.get(), core::RegionLimits{});
  core::AllocateOptions region;
  region.size = args.region_size;
  region.name = args.region;
  region.daemon_owned = true;
  region.export_access = core::RemoteAccess::kReadWrite;
  if (auto made = regions.Allocate(core::Caller{1, 0, 0, 1}, region);
      !made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }

  // One data listener for every identity, with room for all of them.
  tcp::TcpDataServerOptions data;
  data.listen = "127.0.0.1:0";
  data.max_open_connections = 64u * static_cast<uint32_t>(args.count) + 1024;
  data.max_connections_per_address = 0;
  auto data_server = tcp::TcpDataServer::Start(&regions, data, runtime->get());
  if (!data_server.ok()) {
    std::fprintf(stderr, "%s\n", data_server.status().ToString().c_str());
    return 1;
  }

  std::vector<std::unique_ptr<Identity>> identities;
  Dispatcher dispatcher;
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::vector<int> bound(hosts.size(), 0);
  for (size_t i = 0; i < hosts.size(); ++i) {
    auto id = std::make_unique<Identity>();
    service::DaemonIdentity& who = id->identity;
    who.version = "stand-in";
    who.incarnation = SecureRandom64();
    who.transport = transports->choice.kind;
    who.peer_listen = absl::StrCat(hosts[i], ":", port);
    who.data_listen = (*data_server)->address();
    who.started = absl::Now();
    id->devices = transports->devices;
    if (transports->fabric != nullptr) {
      id->verbs = std::make_unique<verbs::VerbsAcceptor>(transports->fabric,
                                                         runtime->get());
      id->verbs->ServeNotices(&regions, nullptr);
    }
    id->service = std::make_unique<service::PeerService>(
        service::PeerServiceDeps{.identity = &id->identity,
                                 .devices = &id->devices,
                                 .peer_allow = &id->peer_allow,
                                 .regions = &regions,
                                 .tcp_acceptor = data_server->get(),
                                 .verbs_acceptor = id->verbs.get()});
    dispatcher.Add(who.peer_listen, id.get());
    builder.AddListeningPort(who.peer_listen, grpc::InsecureServerCredentials(),
                             &bound[i]);
    identities.push_back(std::move(id));
  }
  builder.RegisterService(&dispatcher);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (server == nullptr || bound[i] != port) {
      std::fprintf(stderr, "cannot listen on %s:%d\n", hosts[i].c_str(), port);
      return 1;
    }
  }
  std::printf("READY first=%s port=%d count=%d data=%s\n", hosts[0].c_str(),
              port, args.count, (*data_server)->address().c_str());
  std::fflush(stdout);

  int signal = 0;
  sigwait(&stop, &signal);
  server->Shutdown(std::chrono::system_clock::now());
  (*data_server)->Stop();
  for (auto& id : identities) {
    if (id->verbs != nullptr) id->verbs->Clear();
  }
  (*runtime)->Stop();
  return 0;
}

}  // namespace
}  // namespace rdmad::testing

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  return rdmad::testing::Run(rdmad::testing::ParseArgs(argc, argv));
}
