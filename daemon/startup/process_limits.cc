#include "daemon/startup/process_limits.h"

#include <sys/resource.h>

namespace rdmad::startup {

OpenFilesLimit RaiseOpenFilesLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
  OpenFilesLimit result{limit.rlim_cur, limit.rlim_cur};
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) result.now = limit.rlim_cur;
  }
  return result;
}

}  // namespace rdmad::startup
