// A client process for the access-control integration tests: optionally
// drops to another uid/gid (when started as root), opens a session and runs
// one request against the daemon, printing "CODE MESSAGE" on stdout (CODE
// is the numeric gRPC status). Exit status 0 unless the arguments are bad
// or dropping privileges failed.
//
//   rdmad_access_probe SOCKET UID GID [token=TOKEN] COMMAND [ARGS...]
//     UID/GID "-" keep the current ones; GID may be GID,SUPP1,SUPP2... to
//     set supplementary groups too. token=TOKEN sends TOKEN (someone else's
//     session token) on the call instead of this process's own.
//   COMMANDS (NAME may be #ID to name a region by id)
//     map NAME                 ask for the region's memfd (needs read):
//                              "0 rw writable", or "0 r read-only" when only
//                              read is granted (" upgradable" if mprotect
//                              could make it writable: it must not)
//     free NAME                FreeRegion
//     export NAME              ExportRegion(ACCESS_READ)
//     descriptor NAME          GetDescriptor; prints the encoded descriptor
//                              after the status on success
//     list                     ListRegions
//     send NAME TARGET [PEER]  Write 16 bytes from NAME to exported TARGET
//                              (on PEER, default this daemon); needs read
//     recv NAME TARGET [PEER]  Read 16 bytes from TARGET into NAME (write)
//     send-descriptor NAME D   Write 16 bytes from NAME to descriptor D
//     recv-descriptor NAME D   Read 16 bytes from descriptor D into NAME
//     alloc NAME SIZE MODE     AllocateBuffer daemon_owned with MODE (octal)
//     hoard-fds SESSIONS COUNT HOLD
//                              opens SESSIONS sessions, allocates a buffer in
//                              each and asks COUNT times for its descriptor
//                              without ever receiving one; then prints the
//                              status of a call with the first session's
//                              token, and holds everything for HOLD seconds
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/session_wire.h"
#include "tests/integration/raw_session.h"

namespace {

using rdmad::testing::RawSession;
namespace v1 = rdmad::v1;

int Print(const grpc::Status& status) {
  std::printf("%d %s\n", static_cast<int>(status.error_code()),
              status.error_message().c_str());
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: rdmad_access_probe SOCKET UID GID COMMAND ARGS\n");
  return 2;
}

}  // namespace

// Sets `ref` from NAME or #ID.
void SetRef(const std::string& name, v1::RegionRef* ref) {
  uint64_t id = 0;
  if (name.size() > 1 && name[0] == '#' &&
      absl::SimpleAtoi(name.substr(1), &id)) {
    ref->set_id(id);
  } else {
    ref->set_name(name);
  }
}

int main(int argc, char** argv) {
  std::string foreign_token;
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() > 4 && args[4].rfind("token=", 0) == 0) {
    foreign_token = args[4].substr(6);
    args.erase(args.begin() + 4);
  }
  if (args.size() < 5) return Usage();
  const std::string socket = args[1];
  const std::string uid_text = args[2];
  const std::string gid_text = args[3];
  const std::string command = args[4];
  const std::string name = args.size() > 5 ? args[5] : "";
  argc = static_cast<int>(args.size());
  if (gid_text != "-") {
    // GID[,SUPPLEMENTARY...]
    std::vector<gid_t> groups;
    for (absl::string_view part : absl::StrSplit(gid_text, ',')) {
      uint32_t g = 0;
      if (!absl::SimpleAtoi(part, &g)) return Usage();
      groups.push_back(g);
    }
    // Supplementary groups first, while still privileged.
    if (::setgroups(groups.size() - 1, groups.data() + 1) != 0 ||
        ::setgid(groups[0]) != 0) {
      std::perror("setgroups/setgid");
      return 3;
    }
  }
  if (uid_text != "-") {
    uint32_t uid = 0;
    if (!absl::SimpleAtoi(uid_text, &uid)) return Usage();
    if (::setuid(uid) != 0) {
      std::perror("setuid");
      return 3;
    }
    // setuid makes the process non-dumpable, which stops LeakSanitizer
    // (the ASan pass of the suite) from inspecting it at exit.
    ::prctl(PR_SET_DUMPABLE, 1);
  }
  if (command == "hoard-fds") {
    if (argc < 8) return Usage();
    const int sessions = std::atoi(args[5].c_str());
    const int count = std::atoi(args[6].c_str());
    const int hold = std::atoi(args[7].c_str());
    std::vector<std::unique_ptr<RawSession>> held;
    for (int i = 0; i < sessions; ++i) {
      auto opened = RawSession::Open(socket);
      if (!opened.ok()) break;  // refused: what is held is held
      RawSession& s = **opened;
      grpc::ClientContext context;
      s.Authorize(&context);
      v1::AllocateBufferRequest request;
      request.set_size(4096);
      v1::AllocateBufferResponse response;
      if (!s.stub().AllocateBuffer(&context, request, &response).ok()) break;
      for (int n = 0; n < count; ++n) {
        if (!s.AskFd(response.region().id()).ok()) break;
      }
      held.push_back(*std::move(opened));
    }
    if (held.empty()) {
      std::printf("14 no session could be opened\n");
    } else {
      // The daemon serves the session socket on its own thread: give it
      // time to act on what was sent (30 s at most).
      grpc::Status status;
      for (int attempt = 0; attempt < 300; ++attempt) {
        grpc::ClientContext context;
        held[0]->Authorize(&context);
        v1::AllocateBufferRequest request;
        request.set_size(4096);
        v1::AllocateBufferResponse response;
        status = held[0]->stub().AllocateBuffer(&context, request, &response);
        if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) break;
        ::usleep(100 * 1000);
      }
      Print(status);
    }
    std::fflush(stdout);
    ::sleep(static_cast<unsigned>(hold));
    return 0;
  }
  auto session = RawSession::Open(socket);
  if (!session.ok()) {
    std::printf("%d %s\n", static_cast<int>(session.status().code()),
                std::string(session.status().message()).c_str());
    return 0;
  }
  RawSession& s = **session;
  if (!foreign_token.empty()) s.UseToken(foreign_token);
  grpc::ClientContext context;
  s.Authorize(&context);
  if (command == "list") {
    v1::ListRegionsResponse list;
    return Print(s.stub().ListRegions(&context, {}, &list));
  }
  if (name.empty()) return Usage();
  if (command == "map") {
    // Through the library's own path: GetFd on the session socket needs the
    // region id, which ListRegions shows.
    v1::ListRegionsResponse list;
    grpc::Status st = s.stub().ListRegions(&context, {}, &list);
    if (!st.ok()) return Print(st);
    for (const auto& region : list.regions()) {
      if (region.name() != name) continue;
      auto mapped = s.GetFd(region.id());
      if (!mapped.ok()) {
        std::printf("%d %s\n", static_cast<int>(mapped.status().code()),
                    std::string(mapped.status().message()).c_str());
        return 0;
      }
      // A read-only grant must be read-only for real: the descriptor cannot
      // be mapped writable, nor a read-only mapping made writable.
      const size_t size = region.mapped_size();
      void* rw = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                        mapped->fd.get(), 0);
      const bool writable = rw != MAP_FAILED;
      if (writable) ::munmap(rw, size);
      void* ro = ::mmap(nullptr, size, PROT_READ, MAP_SHARED,
                        mapped->fd.get(), 0);
      if (ro == MAP_FAILED) {
        std::printf("13 cannot map the descriptor even read-only\n");
        return 0;
      }
      const bool upgradable = ::mprotect(ro, size, PROT_READ | PROT_WRITE) == 0;
      ::munmap(ro, size);
      std::printf("0 %s%s\n", mapped->access.c_str(),
                  writable     ? " writable"
                  : upgradable ? " read-only upgradable"
                               : " read-only");
      return 0;
    }
    std::printf("5 no region named %s listed\n", name.c_str());
    return 0;
  }
  if (command == "free") {
    v1::FreeRegionRequest request;
    SetRef(name, request.mutable_region());
    v1::FreeRegionResponse response;
    return Print(s.stub().FreeRegion(&context, request, &response));
  }
  if (command == "export") {
    v1::ExportRegionRequest request;
    request.mutable_region()->set_name(name);
    request.set_access(v1::ACCESS_READ);
    v1::ExportRegionResponse response;
    return Print(s.stub().ExportRegion(&context, request, &response));
  }
  if (command == "descriptor") {
    v1::GetDescriptorRequest request;
    SetRef(name, request.mutable_region());
    v1::GetDescriptorResponse response;
    grpc::Status status = s.stub().GetDescriptor(&context, request, &response);
    if (!status.ok()) return Print(status);
    std::printf("0 %s\n", response.encoded().c_str());
    return 0;
  }
  if ((command == "send" || command == "recv" || command == "send-descriptor" ||
       command == "recv-descriptor") &&
      argc >= 7) {
    v1::TransferRequest request;
    SetRef(name, request.mutable_op()->mutable_local());
    v1::RemoteRegion* remote = request.mutable_op()->mutable_remote();
    if (command == "send" || command == "recv") {
      remote->set_name(args[6]);
      if (argc >= 8) remote->set_peer(args[7]);
    } else {
      remote->set_encoded_descriptor(args[6]);
    }
    request.mutable_op()->set_length(16);
    v1::TransferResponse response;
    return Print(command.rfind("send", 0) == 0
                     ? s.stub().Write(&context, request, &response)
                     : s.stub().Read(&context, request, &response));
  }
  if (command == "alloc" && argc >= 8) {
    v1::AllocateBufferRequest request;
    uint64_t size = 0;
    if (!absl::SimpleAtoi(args[6], &size)) return Usage();
    request.set_name(name);
    request.set_size(size);
    request.set_daemon_owned(true);
    request.set_mode(
        static_cast<uint32_t>(std::strtoul(args[7].c_str(), nullptr, 8)));
    v1::AllocateBufferResponse response;
    return Print(s.stub().AllocateBuffer(&context, request, &response));
  }
  return Usage();
}
