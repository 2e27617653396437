// The callers unit tests act as: two users, each in a session of its own.
#ifndef RDMAD_TESTS_UNIT_FAKES_CALLERS_H_
#define RDMAD_TESTS_UNIT_FAKES_CALLERS_H_

#include "daemon/core/region.h"

namespace rdmad::core::testing {

// {session, uid, gid, pid}
inline const Caller kAlice{1, 1000, 1000, 11, {}};
inline const Caller kBob{2, 2000, 2000, 22, {}};

}  // namespace rdmad::core::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_CALLERS_H_
