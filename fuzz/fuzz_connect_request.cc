// libFuzzer target: the serving side's validation of a verbs Peer.Connect,
// which another daemon sends. The input is one byte, then a serialized
// rdmad.v1.ConnectRequest (the fuzzer's mutations of valid ones reach every
// field): the request goes through what VerbsAcceptor checks before it
// creates a QP (connect_checks.h: rails, QPs per rail, caller address;
// for a grow, whether it fits a served pool whose QPs per rail the first
// byte sets), then each endpoint through what it checks per QP (FromProto:
// the GID; ResolvePath: QP number, PSN, MTU, GID or LID, READ depth) for a
// RoCE port and an InfiniBand port.
//
// Checks, beyond "no crash, no UB, no leak, no unbounded allocation":
// a request is refused only with INVALID_ARGUMENT (a grow that does not
// fit: or FAILED_PRECONDITION), and one that passes has the shape the
// acceptor relies on; an endpoint that passes ResolvePath is one the QP
// can be moved to RTR with.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "daemon/transport/verbs/connect_checks.h"
#include "daemon/transport/verbs/connect_rails.h"
#include "daemon/transport/verbs/conversions.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/rail_scheduler.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "google/protobuf/stubs/logging.h"
#include "rdmad/v1/rdmad.pb.h"

namespace {

using ::rdmad::verbs::QpEndpoint;

void Check(bool ok) {
  if (!ok) std::abort();
}

// VerbsTransportOptions' default.
constexpr uint32_t kMostPerRail = 64;
constexpr uint32_t kMax24Bit = 0xffffff;

::rdmad::verbs::LocalLimits Port(bool ethernet) {
  ::rdmad::verbs::LocalLimits port;
  port.active_mtu = 1024;
  port.ethernet = ethernet;
  port.max_qp_rd_atom = 16;
  port.max_qp_init_rd_atom = 16;
  return port;
}

// What the acceptor does with one endpoint of a request that passed.
void CheckEndpoint(const rdmad::v1::QpEndpoint& wire) {
  auto endpoint = ::rdmad::verbs::FromProto(wire);
  if (!endpoint.ok()) {
    Check(endpoint.status().code() == absl::StatusCode::kInvalidArgument);
    Check(wire.gid().size() != 16);
    return;
  }
  Check(wire.gid().size() == 16);
  for (const bool ethernet : {true, false}) {
    auto path = ::rdmad::verbs::ResolvePath(::rdmad::verbs::QpConfig{},
                                            Port(ethernet), *endpoint);
    if (!path.ok()) {
      Check(path.status().code() == absl::StatusCode::kInvalidArgument);
      continue;
    }
    Check(endpoint->qpn != 0 && endpoint->qpn <= kMax24Bit);
    Check(endpoint->psn <= kMax24Bit);
    Check(::rdmad::verbs::MtuFromBytes(endpoint->mtu).ok());
    Check(::rdmad::verbs::MtuToBytes(path->path_mtu) <= 1024);
    Check(path->max_rd_atomic >= 1 && path->max_rd_atomic <= 16);
    Check(ethernet ? !::rdmad::verbs::IsZeroGid(endpoint->gid)
                   : endpoint->lid != 0);
  }
}

}  // namespace

// Invalid UTF-8 in string fields is rejected by the parser, which also logs
// it; at fuzzing rates that log would be most of the run time.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rdmad::verbs;
  if (size < 1) return 0;
  rdmad::v1::ConnectRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;

  const absl::Status shape = CheckConnectRequest(request, kMostPerRail);
  if (!shape.ok()) {
    Check(shape.code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const size_t rails = 1 + static_cast<size_t>(request.extra_rails_size());
  Check(rails <= kMaxRails);
  Check(!request.address().empty());
  size_t offered = 0;
  for (size_t r = 0; r < rails; ++r) {
    const auto& qps = RailQpsOf(request, r);
    Check(static_cast<uint32_t>(qps.size()) <= kMostPerRail);
    offered += !qps.empty();
    for (const auto& wire : qps) CheckEndpoint(wire);
  }
  Check(offered > 0);

  if (request.grow()) {
    // A served pool: the first byte's low 6 bits are its QPs on each rail
    // (0: the rail is not served), its top bits how many rails it has.
    const std::vector<size_t> served(data[0] >> 6 == 0 ? rails : data[0] >> 6,
                                     data[0] & 0x3f);
    const absl::Status fits = CheckGrowFits(request, served, kMostPerRail);
    if (!fits.ok()) {
      Check(fits.code() == absl::StatusCode::kInvalidArgument ||
            fits.code() == absl::StatusCode::kFailedPrecondition);
      return 0;
    }
    for (size_t r = 0; r < rails; ++r) {
      const size_t adding = static_cast<size_t>(RailQpsOf(request, r).size());
      if (adding == 0) continue;
      Check(r < served.size() && served[r] > 0);
      Check(served[r] + adding <= kMostPerRail);
    }
  }
  return 0;
}
