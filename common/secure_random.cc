#include "common/secure_random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "absl/strings/escaping.h"

namespace rdmad {
namespace {

void Fill(void* data, size_t length) {
  auto* out = static_cast<unsigned char*>(data);
  while (length > 0) {
    const ssize_t got = ::getrandom(out, length, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      // getrandom only fails for bad arguments or before the pool is seeded
      // at boot; continuing with predictable keys would be worse than dying.
      std::abort();
    }
    out += got;
    length -= static_cast<size_t>(got);
  }
}

}  // namespace

uint64_t SecureRandom64() {
  uint64_t value = 0;
  while (value == 0) Fill(&value, sizeof(value));
  return value;
}

std::string SecureRandomHex(size_t bytes) {
  std::vector<char> raw(bytes);
  Fill(raw.data(), raw.size());
  return absl::BytesToHexString(absl::string_view(raw.data(), raw.size()));
}

}  // namespace rdmad
