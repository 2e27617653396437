// RpcPath: transfers as Local gRPC calls (Write, Read, Batch), the path
// the shared-memory queue replaced. Not a public API: it is here to be
// measured against the queue (rdmactl bench --path grpc) and to drive the
// daemon's gRPC transfer calls through the client library in tests.
// Applications use Client::Write, Read and Batch.
#ifndef RDMAD_CLIENT_RPC_PATH_H_
#define RDMAD_CLIENT_RPC_PATH_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rdmad/client.h"

namespace rdmad::client_internal {

struct RpcPath {
  // What Client::Batch does, with one Local call: Write or Read for one op,
  // Batch for more. Ops name their remote by RemoteRegion, and carry no
  // immediate (the calls have neither handles nor immediates:
  // INVALID_ARGUMENT); their timeouts are the call's. Result i belongs to
  // ops[i]; the Batch call reports no transport or daemon time.
  static absl::StatusOr<std::vector<Completion>> Run(Client& client,
                                                     absl::Span<const Op> ops);
};

}  // namespace rdmad::client_internal

#endif  // RDMAD_CLIENT_RPC_PATH_H_
