// Byte units for unit tests' sizes.
#ifndef RDMAD_TESTS_UNIT_FAKES_SIZES_H_
#define RDMAD_TESTS_UNIT_FAKES_SIZES_H_

#include <cstdint>

namespace rdmad::testing {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_SIZES_H_
