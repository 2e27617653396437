// Helpers for the restart tests (kept named regions, docs/RESTART.md): a
// state directory on a tmpfs, byte patterns, and what a process holds
// (descriptors, resident memory) and a directory contains, for leak checks.
#ifndef RDMAD_TESTS_INTEGRATION_RESTART_HELPERS_H_
#define RDMAD_TESTS_INTEGRATION_RESTART_HELPERS_H_

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/sanitized.h"

namespace rdmad::testing {

inline bool IsWritableTmpfs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 &&
         static_cast<uint64_t>(fs.f_type) == TMPFS_MAGIC &&
         ::access(path.c_str(), W_OK) == 0;
}

// A fresh directory for state_dir on a tmpfs where one can be relied on
// (/dev/shm, else /run/user/UID, else /run), else under `fallback` (a
// test's temporary directory) with a note on stderr: rdmad then warns that
// it is a disk, and the tests still hold. Removed with its contents.
class StateDirBase {
 public:
  explicit StateDirBase(const std::string& fallback) {
    const std::string user = absl::StrCat("/run/user/", ::getuid());
    for (const std::string& base :
         {std::string("/dev/shm"), user, std::string("/run")}) {
      if (!IsWritableTmpfs(base)) continue;
      std::string pattern = base + "/rdmad-state-XXXXXX";
      if (::mkdtemp(pattern.data()) != nullptr) {
        path_ = pattern;
        return;
      }
    }
    path_ = fallback + "/state-base";
    std::filesystem::create_directories(path_);
    std::cerr << "note: no writable tmpfs at /dev/shm, " << user
              << " or /run: state_dir is on the filesystem of " << fallback
              << " (rdmad warns about it; the test still holds)\n";
  }
  ~StateDirBase() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  StateDirBase(const StateDirBase&) = delete;
  StateDirBase& operator=(const StateDirBase&) = delete;

  // The state directory itself (created by rdmad).
  std::string state_dir() const { return path_ + "/state"; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A reproducible pattern: byte i of (seed) for any offset.
inline char PatternByte(uint64_t seed, uint64_t i) {
  uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (seed * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  return static_cast<char>(x);
}
inline void FillPattern(char* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i) p[i] = PatternByte(seed, i);
}
// The first offset where `p` differs from the pattern, or -1.
inline int64_t PatternMismatch(const char* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; ++i) {
    if (p[i] != PatternByte(seed, i)) return static_cast<int64_t>(i);
  }
  return -1;
}

// Open descriptors of `pid`.
inline int FdCount(pid_t pid) {
  std::error_code ec;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator(
           absl::StrCat("/proc/", pid, "/fd"), ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Resident memory of `pid` in bytes (VmRSS), 0 if unknown.
inline uint64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "VmRSS:")) {
      rest = absl::StripAsciiWhitespace(rest);
      absl::ConsumeSuffix(&rest, " kB");
      uint64_t kb = 0;
      if (absl::SimpleAtoi(rest, &kb)) return kb * 1024;
    }
  }
  return 0;
}

struct DirUsage {
  int files = 0;       // regular files, recursively
  uint64_t bytes = 0;  // allocated (st_blocks), recursively
};
inline DirUsage UsageOf(const std::string& dir) {
  DirUsage usage;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      ++usage.files;
      usage.bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return usage;
}

// The slot of region `name` in a state directory ("" if none), from the
// records' "name" lines.
inline std::string SlotOf(const std::string& state_dir,
                          const std::string& name) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.size() != 20 || !absl::EndsWith(file, ".rec")) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (line == "name " + name) return file.substr(0, 16);
    }
  }
  return "";
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether the sanitizers' runtime (and its memory use) is in this build.
inline bool SanitizerBuild() {
#ifdef RDMAD_SANITIZED
  return true;
#else
  return false;
#endif
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_RESTART_HELPERS_H_
