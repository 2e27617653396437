// ThreadMigrations: how often a thread moved between CPUs, as the kernel
// counts it (se.nr_migrations in /proc/PID/task/TID/sched). The count
// rises before a sched_setaffinity that leaves the thread's CPU returns,
// so a test can see a move even when the thread is moved back before it
// looks at its CPU.
#ifndef RDMAD_TESTS_THREAD_MIGRATIONS_H_
#define RDMAD_TESTS_THREAD_MIGRATIONS_H_

#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rdmad::testing {

// Thread `tid` of process `pid`'s migrations so far, or -1 where the
// kernel does not show them.
inline int64_t ThreadMigrations(pid_t pid, pid_t tid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/task/", tid, "/sched"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "se.nr_migrations")) continue;
    const size_t colon = line.find(':');
    int64_t count;
    if (colon != std::string::npos &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(colon + 1)),
                         &count)) {
      return count;
    }
  }
  return -1;
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_THREAD_MIGRATIONS_H_
