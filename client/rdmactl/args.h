// rdmactl command line: the commands, their options, and the parser that
// turns argv into a validated Invocation.
//
// The parser is pure (no I/O, no daemon) so every rule is unit-tested:
// global options (--socket, --timeout, --json, --help) may appear anywhere,
// before or after the command; command options (--export, --length, -o) are
// checked against the command; sizes, region names and region addresses are
// validated here, so a malformed line never reaches the daemon.
//
// Example:
//   auto inv = ParseCommandLine({"alloc", "r1", "1M", "--json"},
//                               std::getenv("RDMAD_SOCKET"));
//   if (!inv.ok()) { /* usage error: print inv.status().message(), exit 2 */ }
//   // inv->command == Command::kAlloc, inv->size == 1 << 20
#ifndef RDMAD_CLIENT_RDMACTL_ARGS_H_
#define RDMAD_CLIENT_RDMACTL_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "rdmad/client.h"

namespace rdmad::rdmactl {

inline constexpr char kDefaultSocket[] = "/run/rdmad/rdmad.sock";

// Process exit codes; failures of an operation have one per class of
// error (ExitStatusFor in format.h).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;  // the command line is wrong

// Deadline of each call to the daemon when --timeout is not given.
inline constexpr absl::Duration kDefaultCallTimeout = absl::Seconds(30);

enum class Command {
  kHelp,
  kStatus,
  kDevices,
  kRegions,
  kPeers,
  kQps,
  kQueues,
  kStat,
  kAlloc,
  kFree,
  kExport,
  kChmod,
  kChgrp,
  kDescriptor,
  kPut,
  kGet,
  kCopy,
  kBench,
  kLs,
  kLookup,
  kVersion,  // --version
};

struct GlobalOptions {
  std::string socket_path = kDefaultSocket;
  // --timeout: the whole command must be done within it. Unset: no bound on
  // the whole command, kDefaultCallTimeout on each call to the daemon.
  std::optional<absl::Duration> timeout;
  bool json = false;
};

// A region operand of put/get/copy as typed, and as parsed.
struct RegionOperand {
  std::string text;     // as given on the command line, for messages
  RemoteRegion region;  // peer/name/offset, or an "rdmad1:" descriptor

  // True when it names a region of the local daemon by name (no peer, no
  // descriptor): such regions can be mapped into rdmactl.
  bool is_local() const {
    return region.peer.empty() && region.descriptor.empty();
  }
};

// bench: which transfer it measures.
enum class BenchOp { kWrite, kRead };
// bench: how operations reach the daemon.
enum class BenchPath { kRing, kGrpc };

inline constexpr char kDefaultBenchRegion[] = "rdmad-bench";
// The most operations bench keeps in flight (one thread each).
inline constexpr int kMaxBenchQueueDepth = 256;
// Most operations per Batch call in `rdmactl bench --batch` (the daemon
// takes up to 4096).
inline constexpr int kMaxBenchBatch = 1024;
// Most batches one bench thread keeps in flight (`--window`), and most
// operations: the thread's queue holds them all.
inline constexpr int kMaxBenchWindow = 64;
inline constexpr int kMaxBenchWindowOps = 16384;

// The options of `rdmactl bench`, validated.
struct BenchOptions {
  // "HOST:PORT" of the daemon that exports the region; empty: this daemon's
  // own peer address (a loopback through its transport).
  std::string peer;
  std::string region = kDefaultBenchRegion;
  // Create the region on this daemon (exported rw) if it does not exist;
  // only without `peer`.
  bool create_region = false;
  BenchOp op = BenchOp::kWrite;
  // Transfer sizes in bytes, each >= 1, in the order given.
  std::vector<uint64_t> sizes = {8, 4 << 10, 64 << 10, 1 << 20, 16 << 20};
  int queue_depth = 1;  // operations in flight, 1..kMaxBenchQueueDepth
  int batch = 1;        // operations per call, 1..kMaxBenchBatch
  // Ring path: batches each thread keeps in flight, 1..kMaxBenchWindow; a
  // batch goes out again as soon as its last completion is back.
  int window = 1;
  // Operations per size; without it, each size runs for `duration`.
  std::optional<uint64_t> iterations;
  absl::Duration duration = absl::Seconds(2);
  // ring: each thread its own shared-memory queue; grpc: one Local call per
  // operation (per batch with --batch).
  BenchPath path = BenchPath::kRing;
  // The region is this daemon's and is reached directly (a copy inside the
  // daemon), not through its peer address.
  bool local = false;
  // QueueOptions::spin of each thread's queue (ring path).
  absl::Duration spin = kDefaultQueueSpin;
  // QueueOptions::spin_when_preempted of each thread's queue (ring path).
  bool spin_when_preempted = false;
};

// A validated command line. Only the fields of `command` are meaningful.
struct Invocation {
  GlobalOptions global;
  Command command = Command::kHelp;
  // kHelp: the command whose usage to print; empty for the overview.
  std::string help_topic;
  // alloc, free, export, chmod, chgrp, descriptor.
  std::string name;
  uint64_t size = 0;              // alloc
  Access access = Access::kNone;  // alloc --export, export
  RegionOptions region_options;   // alloc --mode, --group
  std::vector<ExportGrant> allow;  // export --allow
  std::optional<uint32_t> mode;   // chmod
  std::optional<uint32_t> group;  // chgrp
  // regions --peer: list what that daemon exports instead.
  std::string peer;
  // put: the input file; get: the output file. "-" is stdin / stdout.
  std::string file;
  RegionOperand src;   // get, copy, stat
  RegionOperand dest;  // put, copy
  std::optional<uint64_t> length;  // get, copy (--length)
  std::string prefix;              // ls: name prefix ("" = all)
  bool fresh = false;              // lookup --fresh


  BenchOptions bench;  // bench
};

// Parses the arguments after argv[0]. `env_socket` is $RDMAD_SOCKET (may be
// null or empty: then the default socket). On a usage error returns
// INVALID_ARGUMENT whose message is one line that says what is wrong and
// where to look, e.g. "alloc: expected NAME SIZE, got 1 argument (see
// 'rdmactl alloc --help')".
absl::StatusOr<Invocation> ParseCommandLine(
    const std::vector<std::string>& args, const char* env_socket);

// A region mode: octal read/write bits only, e.g. "0640" or "640".
absl::StatusOr<uint32_t> ParseRegionMode(absl::string_view text);
// A group: a number, or a group name of this host.
absl::StatusOr<uint32_t> ParseGroup(absl::string_view text);

// The overview printed by `rdmactl help`.
std::string Usage();
// The help of one command (`rdmactl COMMAND --help`); the overview when
// `command` is not a command.
std::string CommandUsage(absl::string_view command);

}  // namespace rdmad::rdmactl

#endif  // RDMAD_CLIENT_RDMACTL_ARGS_H_
