// Transfers to a region named without a daemon ("kv/shard-7"): the cluster
// directory says which daemon holds it, and the transfer goes there.
//
// TransferEngine::SubmitBatch calls RouteThroughDirectory for a name that
// is not exported on this daemon when a directory is configured.
#ifndef RDMAD_DAEMON_CORE_DIRECTORY_ROUTE_H_
#define RDMAD_DAEMON_CORE_DIRECTORY_ROUTE_H_

#include "daemon/core/holder_trust.h"
#include "daemon/core/region_resolver.h"
#include "daemon/core/transfer.h"
#include "daemon/core/transfer_engine.h"

namespace rdmad::core {

// Resolves transfer.remote.name through `directory`, then submits the
// transfer to the holder through `remote` with the entry's holder
// incarnation and region id as fences (TransferTarget::expect_*). If it
// fails NOT_FOUND or UNAVAILABLE — the region was freed, moved or its
// daemon restarted or died since the entry was read — the name is resolved
// once more, skipping the failed generation, and the transfer is retried
// once if the directory now names another generation. With `trust`, the
// entry must pass trust->CheckRecord (else it is looked up once more, then
// the transfer fails FAILED_PRECONDITION without reaching anyone), and the
// holder must pass trust->CheckHolder when it answers (the peer layer
// checks it: TransferTarget::holder_trust). Runs transfer.done exactly
// once. Never blocks: look-ups that miss the cache are asynchronous.
// `directory`, `trust` (may be null: every holder trusted) and `remote`
// are not owned and must outlive the transfer.
void RouteThroughDirectory(RegionResolver* directory, const HolderTrust* trust,
                           RemoteTransfers* remote, Transfer transfer);

}  // namespace rdmad::core

#endif  // RDMAD_DAEMON_CORE_DIRECTORY_ROUTE_H_
