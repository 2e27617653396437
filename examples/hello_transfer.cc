// hello_transfer: the smallest useful rdmad client.
//
//   hello_transfer LOCAL_SOCKET PEER/REGION [MESSAGE]
//
// Connects to the local rdmad, puts MESSAGE in a registered buffer, WRITEs
// it one-sided into REGION on the daemon at PEER, READs it back into a
// second buffer and prints what came back and which transport moved it.
#include <cstdio>
#include <cstring>
#include <string>

#include "rdmad/client.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s LOCAL_SOCKET PEER/REGION [MESSAGE]\n",
                 argv[0]);
    return 2;
  }
  const std::string message =
      argc > 3 ? argv[3] : "hello from rdmad's client library";
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto remote = rdmad::RemoteRegion::Parse(argv[2]);
  if (!remote.ok()) {
    std::fprintf(stderr, "%s\n", remote.status().ToString().c_str());
    return 2;
  }
  auto out = (*client)->Allocate(4096);
  auto in = (*client)->Allocate(4096);
  if (!out.ok() || !in.ok()) {
    std::fprintf(stderr, "allocate: %s\n",
                 (out.ok() ? in.status() : out.status()).ToString().c_str());
    return 1;
  }
  // The buffer is the registered memory itself: no copy on the way out.
  std::memcpy(out->data(), message.data(), message.size());
  auto written = (*client)->Write(*out, 0, *remote, 0, message.size());
  if (!written.ok()) {
    std::fprintf(stderr, "write: %s\n", written.status().ToString().c_str());
    return 1;
  }
  auto read = (*client)->Read(*in, 0, *remote, 0, message.size());
  if (!read.ok()) {
    std::fprintf(stderr, "read: %s\n", read.status().ToString().c_str());
    return 1;
  }
  const bool same = std::memcmp(in->data(), out->data(), message.size()) == 0;
  std::printf("wrote %zu bytes to %s over %s and read back: \"%.*s\" (%s)\n",
              message.size(), argv[2],
              std::string(rdmad::TransportName(written->transport)).c_str(),
              static_cast<int>(message.size()), in->data(),
              same ? "identical" : "MISMATCH");
  return same ? 0 : 1;
}
