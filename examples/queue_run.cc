// queue_run: 64 WRITEs through a queue of one's own, then the bytes read
// back: what a small program linked against librdmad_client.so
// (pkg-config rdmad-client) looks like. REGION is 256 KiB or more that
// this process may write (rdmactl alloc NAME 256K; PEER/NAME on another
// daemon, exported rw).
//
//   queue_run SOCKET [PEER/]REGION
#include <cstdio>
#include <cstring>
#include <vector>

#include "rdmad/client.h"

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "queue_run: %s\n", status.ToString().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) return Fail(absl::InvalidArgumentError("SOCKET REGION"));
  auto client = rdmad::Client::Connect({.socket_path = argv[1]});
  if (!client.ok()) return Fail(client.status());
  auto region = rdmad::RemoteRegion::Parse(argv[2]);
  if (!region.ok()) return Fail(region.status());
  auto remote = (*client)->OpenRemote(*region);
  if (!remote.ok()) return Fail(remote.status());
  auto queue = (*client)->OpenQueue();
  if (!queue.ok()) return Fail(queue.status());
  auto buf = (*client)->Allocate(512 << 10);  // 256 KiB out, 256 KiB back
  if (!buf.ok()) return Fail(buf.status());
  std::vector<rdmad::Op> ops;
  for (uint64_t i = 0; i < 64; ++i) {
    std::memset(buf->data() + i * 4096, static_cast<int>(i), 4096);
    ops.push_back({.local = &*buf,
                   .local_offset = i * 4096,
                   .remote = &*remote,
                   .remote_offset = region->offset + i * 4096,
                   .length = 4096,
                   .tag = i});
  }
  auto done = (*queue)->Run(ops);  // submit, wait, poll until all are done
  if (!done.ok()) return Fail(done.status());
  auto back = (*client)->Read(*buf, 256 << 10, *region, 0, 256 << 10);
  if (!back.ok()) return Fail(back.status());
  const bool same =
      std::memcmp(buf->data(), buf->data() + (256 << 10), 256 << 10) == 0;
  std::printf("64 WRITEs of 4 KiB over %s, read back: %s\n",
              std::string(rdmad::TransportName((*done)[0].transport)).c_str(),
              same ? "identical" : "DIFFERENT");
  return same ? 0 : 1;
}
