// Unpredictable numbers from the kernel (getrandom(2)) for session tokens,
// TCP region keys, incarnation ids and starting PSNs. absl::BitGen is fast
// but not meant to be unguessable; these values must be.
#ifndef RDMAD_COMMON_SECURE_RANDOM_H_
#define RDMAD_COMMON_SECURE_RANDOM_H_

#include <cstdint>
#include <string>

namespace rdmad {

// 64 random bits. Never returns 0, so 0 can mean "unset" in the protocol.
uint64_t SecureRandom64();

// `bytes` random bytes as lowercase hex (2*bytes characters).
std::string SecureRandomHex(size_t bytes);

}  // namespace rdmad

#endif  // RDMAD_COMMON_SECURE_RANDOM_H_
