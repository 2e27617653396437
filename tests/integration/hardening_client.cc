// A client process for the access-control integration tests: optionally
// drops to another uid/gid (when started as root), opens a session and runs
// one request against the daemon, printing "CODE MESSAGE" on stdout (CODE
// is the numeric gRPC status). Exit status 0 unless the arguments are bad
// or dropping privileges failed.
//
//   rdmad_hardening_client SOCKET UID GID COMMAND [ARGS...]
//     UID/GID "-" keep the current ones; GID may be GID,SUPP1,SUPP2... to
//     set supplementary groups too.
//   COMMANDS
//     map NAME                 ask for the region's memfd (needs read):
//                              "0 rw writable", or "0 r read-only" when only
//                              read is granted (" upgradable" if mprotect
//                              could make it writable: it must not)
//     free NAME                FreeRegion
//     export NAME              ExportRegion(ACCESS_READ)
//     descriptor NAME          GetDescriptor
//     send NAME TARGET         Write 16 bytes from NAME to exported TARGET
//                              on the same daemon (needs read on NAME)
//     recv NAME TARGET         Read 16 bytes from TARGET into NAME (write)
//     alloc NAME SIZE MODE     AllocateBuffer daemon_owned with MODE (octal)
#include <grp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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
               "usage: rdmad_hardening_client SOCKET UID GID COMMAND ARGS\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) return Usage();
  const std::string socket = argv[1];
  const std::string uid_text = argv[2];
  const std::string gid_text = argv[3];
  const std::string command = argv[4];
  const std::string name = argv[5];
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
  auto session = RawSession::Open(socket);
  if (!session.ok()) {
    std::printf("%d %s\n", static_cast<int>(session.status().code()),
                std::string(session.status().message()).c_str());
    return 0;
  }
  RawSession& s = **session;
  grpc::ClientContext context;
  s.Authorize(&context);
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
    request.mutable_region()->set_name(name);
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
    request.mutable_region()->set_name(name);
    v1::GetDescriptorResponse response;
    return Print(s.stub().GetDescriptor(&context, request, &response));
  }
  if ((command == "send" || command == "recv") && argc >= 7) {
    v1::TransferRequest request;
    request.mutable_op()->mutable_local()->set_name(name);
    request.mutable_op()->mutable_remote()->set_name(argv[6]);
    request.mutable_op()->set_length(16);
    v1::TransferResponse response;
    return Print(command == "send"
                     ? s.stub().Write(&context, request, &response)
                     : s.stub().Read(&context, request, &response));
  }
  if (command == "alloc" && argc >= 8) {
    v1::AllocateBufferRequest request;
    uint64_t size = 0;
    if (!absl::SimpleAtoi(argv[6], &size)) return Usage();
    request.set_name(name);
    request.set_size(size);
    request.set_daemon_owned(true);
    request.set_mode(static_cast<uint32_t>(std::strtoul(argv[7], nullptr, 8)));
    v1::AllocateBufferResponse response;
    return Print(s.stub().AllocateBuffer(&context, request, &response));
  }
  return Usage();
}
