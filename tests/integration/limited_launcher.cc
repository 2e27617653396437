// Runs a program under resource limits and, optionally, another uid: the
// integration tests start rdmad through it to see how the daemon copes with
// a low RLIMIT_NOFILE, a small RLIMIT_FSIZE, or running as its own user.
//
//   rdmad_limited_launcher UID NOFILE FSIZE -- PROGRAM [ARGS...]
//     UID     run as this uid (gid the same, no supplementary groups); "-"
//             keeps the current one (setting it needs root)
//     NOFILE  RLIMIT_NOFILE, soft and hard; "-" keeps it
//     FSIZE   RLIMIT_FSIZE in bytes, soft and hard; "-" keeps it
// The program is exec'd, so it keeps this process's pid.
#include <grp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool SetLimit(int resource, const char* text) {
  if (std::strcmp(text, "-") == 0) return true;
  const rlim_t value = std::strtoull(text, nullptr, 10);
  const rlimit limit{value, value};
  if (::setrlimit(resource, &limit) != 0) {
    std::perror("setrlimit");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[4], "--") != 0) {
    std::fprintf(stderr,
                 "usage: rdmad_limited_launcher UID NOFILE FSIZE -- PROGRAM "
                 "[ARGS...]\n");
    return 2;
  }
  if (!SetLimit(RLIMIT_NOFILE, argv[2]) || !SetLimit(RLIMIT_FSIZE, argv[3])) {
    return 3;
  }
  if (std::strcmp(argv[1], "-") != 0) {
    const uid_t uid = static_cast<uid_t>(std::strtoul(argv[1], nullptr, 10));
    if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 ||
        ::setuid(uid) != 0) {
      std::perror("dropping to the uid");
      return 3;
    }
    // setuid makes the process non-dumpable; keep it inspectable (and
    // LeakSanitizer working) as a normal process would be.
    ::prctl(PR_SET_DUMPABLE, 1);
  }
  ::execv(argv[5], argv + 5);
  std::perror("execv");
  return 127;
}
