// Client-side helpers of the cluster directory's integration tests: a
// region named by name alone, waiting for a daemon's directory to connect,
// writing by name, reading what a daemon holds, the cluster's listing.
#ifndef RDMAD_TESTS_INTEGRATION_DIRECTORY_HELPERS_H_
#define RDMAD_TESTS_INTEGRATION_DIRECTORY_HELPERS_H_

#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rdmad/client.h"
#include "tests/integration/client_helpers.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// A name as any client addresses it: no peer.
inline RemoteRegion ByName(const std::string& name) {
  RemoteRegion r;
  r.name = name;
  return r;
}

// Waits (generously: the machine may be busy) until `daemon` says its
// directory is connected.
inline bool WaitDirectoryConnected(const DaemonProcess& daemon,
                                   absl::Duration timeout = absl::Seconds(60)) {
  auto client = Connect(daemon);
  if (client == nullptr) return false;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    auto status = client->GetStatus();
    if (status.ok() && status->directory.has_value() &&
        status->directory->state == DirectoryState::kConnected) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

// Writes `text` into `name` from a client of `from`, by name alone.
inline absl::Status WriteByName(const DaemonProcess& from,
                                const std::string& name,
                                const std::string& text) {
  auto client = Connect(from);
  if (client == nullptr) return absl::UnavailableError("no client");
  auto buffer = client->Allocate(text.size());
  if (!buffer.ok()) return buffer.status();
  std::memcpy(buffer->data(), text.data(), text.size());
  return client->Write(*buffer, 0, ByName(name), 0, text.size()).status();
}

// What `daemon` holds in its own region `name` (first `n` bytes).
inline std::string ReadLocal(const DaemonProcess& daemon,
                             const std::string& name, size_t n) {
  auto client = Connect(daemon);
  if (client == nullptr) return "";
  auto mapped = client->MapRegion(name);
  EXPECT_TRUE(mapped.ok()) << mapped.status();
  if (!mapped.ok()) return "";
  return std::string(mapped->data(), n);
}

// The cluster's entry for `name` as `daemon` lists it (read from etcd);
// nullopt if none.
inline std::optional<ClusterRegion> Listed(const DaemonProcess& daemon,
                                           const std::string& name) {
  auto client = Connect(daemon);
  if (client == nullptr) return std::nullopt;
  auto list = client->ListClusterRegions(name);
  EXPECT_TRUE(list.ok()) << list.status();
  if (!list.ok()) return std::nullopt;
  for (const ClusterRegion& r : list->regions) {
    if (r.name == name) return r;
  }
  return std::nullopt;
}

}  // namespace rdmad::testing

#endif  // RDMAD_TESTS_INTEGRATION_DIRECTORY_HELPERS_H_
