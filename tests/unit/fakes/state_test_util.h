// Helpers for the tests of daemon/state and of state-directory memory: a
// scratch directory, on a tmpfs where one is at hand (as a real state_dir
// would be), removed with its contents at the end.
#ifndef RDMAD_TESTS_UNIT_FAKES_STATE_TEST_UTIL_H_
#define RDMAD_TESTS_UNIT_FAKES_STATE_TEST_UTIL_H_

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace rdmad::testing {

class ScratchDir {
 public:
  ScratchDir() {
    for (std::string base : {std::string("/dev/shm"), TempBase()}) {
      std::string pattern = base + "/rdmad-unit-XXXXXX";
      if (::mkdtemp(pattern.data()) != nullptr) {
        path_ = pattern;
        break;
      }
    }
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const {
    return path_ + "/" + name;
  }

 private:
  static std::string TempBase() {
    const char* tmp = std::getenv("TMPDIR");
    return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Names in `dir` (not recursive), sorted.
inline std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_UNIT_FAKES_STATE_TEST_UTIL_H_
