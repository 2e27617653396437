// The one place a transfer request from the Local service is decoded and
// validated as a message (core/transfer.h says what that guarantees): the
// layers below trust the TransferSpec it gives and never check these
// fields again.
#ifndef RDMAD_DAEMON_SERVICE_TRANSFER_DECODER_H_
#define RDMAD_DAEMON_SERVICE_TRANSFER_DECODER_H_

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/core/transfer.h"
#include "rdmad/v1/rdmad.pb.h"

namespace rdmad::service {

// The far side of a transfer or of a remote handle (Local.OpenRemote), at
// offset 0. INVALID_ARGUMENT, saying which field is wrong and how, for: a
// malformed peer address, no remote region, a bad region name, a descriptor
// that does not decode, a descriptor and a peer that disagree.
absl::StatusOr<core::TransferTarget> DecodeRemoteRegion(
    const v1::RemoteRegion& remote);

// INVALID_ARGUMENT, saying which field is wrong and how, for: no local
// region, a zero length, a malformed peer address, no remote region, a bad
// region name, a descriptor that does not decode, a descriptor and a peer
// that disagree.
absl::StatusOr<core::TransferSpec> DecodeTransfer(const v1::TransferOp& op,
                                                  core::OpType type,
                                                  absl::Time deadline);

}  // namespace rdmad::service

#endif  // RDMAD_DAEMON_SERVICE_TRANSFER_DECODER_H_
