// Compiles the "Example:" blocks of the public headers (include/rdmad/),
// extracted at build time by cmake/ExtractExample.cmake, so that the code a
// user copies from a header is code that builds. Never run: building it is
// the check. tests/integration/package_test.sh does the same against the
// installed rdmad-dev package.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "rdmad/client.h"

// Not static: an unused function with external linkage draws no warning.
// include/rdmad/client.h
absl::Status ClientHeaderExample(const char* payload, size_t n) {
#include "client_h_example.inc"
  return absl::OkStatus();
}

// include/rdmad/info.h
absl::Status InfoHeaderExample(
    absl::StatusOr<std::unique_ptr<rdmad::Client>>& client) {
#include "info_h_example.inc"
  return absl::OkStatus();
}

// include/rdmad/queue.h
absl::Status QueueHeaderExample() {
#include "queue_h_example.inc"
  return absl::OkStatus();
}

int main() { return 0; }
