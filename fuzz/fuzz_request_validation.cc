// libFuzzer target: validation of Local requests. The input is taken as a
// serialized rdmad.v1.TransferOp (the fuzzer's mutations of valid ones reach
// every field) and goes through what the Local service does with it: the
// decoding and checks (service/transfer_decoder), then the transfer
// engine's permission and bounds checks against a region table holding a
// few regions with different owners and modes, for callers of several uids.
// Local transfers run for real (memmove inside the regions), so a bounds
// mistake shows up as an ASan report. The ACL and allow-list parsers get
// the raw bytes too.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/access_control.h"
#include "daemon/core/peer_allow_list.h"
#include "daemon/core/region_table.h"
#include "daemon/core/transfer_engine.h"
#include "daemon/service/transfer_decoder.h"
#include "rdmad/v1/rdmad.pb.h"
#include "google/protobuf/stubs/logging.h"

namespace {

using namespace rdmad;

struct World {
  core::NullRegistrar registrar;
  core::RegionTable regions{&registrar, core::RegionLimits{64 << 20, 1 << 30}};
  core::TransferEngine engine{&regions, nullptr};
  std::vector<core::Caller> callers;

  World() {
    const core::Caller owner{1, 1000, 100, 1, {}};
    callers = {owner, core::Caller{2, 1001, 100, 2, {}},
               core::Caller{3, 1002, 200, 3, {100}}, core::Caller{4, 0, 0, 4, {}},
               core::Caller{0, ~0u, ~0u, 0, {}}};
    struct Spec {
      const char* name;
      uint64_t size;
      uint32_t mode;
      core::RemoteAccess access;
    };
    for (const Spec& s : {Spec{"a", 4096, 0600, core::RemoteAccess::kReadWrite},
                          Spec{"b", 1, 0640, core::RemoteAccess::kRead},
                          Spec{"c", 70000, 0666, core::RemoteAccess::kWrite},
                          Spec{"d", 100, 0604, core::RemoteAccess::kNone}}) {
      core::AllocateOptions o;
      o.name = s.name;
      o.size = s.size;
      o.daemon_owned = true;
      o.mode = s.mode;
      o.export_access = s.access;
      if (!regions.Allocate(owner, o).ok()) std::abort();
    }
    core::AllocateOptions session;
    session.size = 333;
    if (!regions.Allocate(owner, session).ok()) std::abort();
  }
};

}  // namespace

// Invalid UTF-8 in string fields is rejected by the parser, which also logs
// it; at fuzzing rates that log would be most of the run time.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static World* world = new World();
  const std::string bytes(reinterpret_cast<const char*>(data), size);

  v1::TransferOp op;
  if (op.ParseFromString(bytes)) {
    for (core::OpType type : {core::OpType::kWrite, core::OpType::kRead}) {
      auto request =
          service::DecodeTransfer(op, type, absl::InfiniteFuture());
      if (!request.ok()) continue;
      // Only local targets: there is no remote transport in here.
      request->remote.peer.clear();
      request->remote.descriptor = nullptr;
      const uint64_t length = request->length;
      for (const core::Caller& caller : world->callers) {
        bool called = false;
        world->engine.Submit(caller, *request,
                             [&](absl::StatusOr<core::TransferResult> r) {
                               called = true;
                               if (r.ok() && r->bytes != length) {
                                 std::abort();
                               }
                             });
        if (!called) std::abort();  // local transfers complete inline
      }
    }
  }

  // Mode/group of a new region, from the first bytes.
  if (size >= 8) {
    uint32_t mode = 0, group = 0;
    std::memcpy(&mode, data, 4);
    std::memcpy(&group, data + 4, 4);
    for (const core::Caller& caller : world->callers) {
      auto acl = core::MakeAcl(caller, mode, group);
      if (acl.ok() && (acl->mode & ~0666u) != 0) std::abort();
      if (acl.ok()) {
        const uint32_t bits = core::PermittedBits(caller, *acl);
        if ((bits & ~6u) != 0) std::abort();
      }
    }
  }
  // The peer allow-list parser.
  auto list = core::PeerAllowList::Parse({bytes});
  if (list.ok()) {
    (void)list->AllowsAddress(bytes);
    (void)list->AllowsGrpcPeer(bytes);
  }
  return 0;
}
