// CRC-32C (Castagnoli), the checksum of kept-region records: it catches a
// torn or bit-flipped record, so that damage is reported instead of used.
// Not a defence against someone who can write the record (the state
// directory's permissions and the fd store's access rules are).
#ifndef RDMAD_DAEMON_STATE_CHECKSUM_H_
#define RDMAD_DAEMON_STATE_CHECKSUM_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace rdmad::state {

// CRC-32C of `data` (e.g. "123456789" -> 0xe3069283). Thread-safe.
uint32_t Crc32c(absl::string_view data);

}  // namespace rdmad::state

#endif  // RDMAD_DAEMON_STATE_CHECKSUM_H_
