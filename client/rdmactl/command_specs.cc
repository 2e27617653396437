// The tables of rdmactl's commands and options, and the help made from
// them (command_specs.h).
#include "client/rdmactl/command_specs.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace rdmad::rdmactl {
namespace {

constexpr OptionSpec kOptions[] = {
    {"socket", 0, true, true},      {"timeout", 0, true, true},
    {"json", 0, false, true},       {"help", 'h', false, true},
    {"version", 0, false, true},
    {"export", 0, true, false},     {"length", 0, true, false},
    {"output", 'o', true, false},   {"peer", 0, true, false},
    {"region", 0, true, false},     {"create-region", 0, false, false},
    {"op", 0, true, false},         {"sizes", 0, true, false},
    {"qd", 0, true, false},         {"iters", 0, true, false},
    {"duration", 0, true, false},   {"batch", 0, true, false},
    {"mode", 0, true, false},       {"group", 0, true, false},
    {"fresh", 0, false, false},
    {"path", 0, true, false},       {"local", 0, false, false},
    {"allow", 0, true, false},      {"spin", 0, true, false},
    {"window", 0, true, false},     {"spin-when-preempted", 0, false, false},
};

constexpr CommandSpec kCommands[] = {
    {"status",
     Command::kStatus,
     "",
     "daemon identity, transport and totals",
     "Prints the daemon's version, incarnation, pid, uptime, data transport\n"
     "and why it was chosen, its sockets, and counts of devices, regions,\n"
     "sessions and peers.\n",
     0,
     0,
     {}},
    {"devices",
     Command::kDevices,
     "",
     "RDMA devices: ports, GIDs and limits",
     "Prints each RDMA device with its node GUID, driver, dma-buf support,\n"
     "the receives posted on the shared receive queue peers' notices arrive\n"
     "on, ports (state, link layer, MTU, GID table) and limits. On a node\n"
     "without RDMA devices, says so and names the fallback transport.\n",
     0, 0, {}},
    {"regions", Command::kRegions, "[--peer HOST:PORT]",
     "regions: local ones, or those a peer exports",
     "Prints every region of the daemon: session buffers and daemon-owned\n"
     "named regions, with owner, size, mode, export and keys.\n"
     "With --peer HOST:PORT, prints instead the regions the daemon at that\n"
     "address exports to this node (name, size, export), asked from it\n"
     "through this daemon.\n",
     0, 0, {"peer"}},
    {"peers", Command::kPeers, "", "remote daemons and their transports",
     "Prints the remote daemons this daemon knows, with their state,\n"
     "transport and traffic counters.\n",
     0,
     0,
     {}},
    {"qps",
     Command::kQps,
     "",
     "queue pairs (or TCP connections) per peer",
     "Prints the RC queue pairs (verbs) or data connections (TCP) to each\n"
     "peer with their state and counters.\n",
     0, 0, {}},
    {"queues",
     Command::kQueues,
     "",
     "clients' shared-memory queues",
     "Prints the shared-memory queues open on the daemon (every queue for\n"
     "root, your own otherwise): the process that opened each, its ring\n"
     "sizes, the operations it carried, how often a completion had to wake\n"
     "its client (WAKEUPS; close to COMPLETED means the client's spin is\n"
     "shorter than its operations take) and, for a stopped queue, why.\n",
     0, 0, {}},
    {"stat", Command::kStat, "ADDRESS",
     "size and export of one region (local or remote)",
     "Prints the size and export of the region at ADDRESS: a local region\n"
     "(NAME), one a peer exports (HOST:PORT/NAME; asked from that daemon),\n"
     "or the one a descriptor names (\"rdmad1:...\"). With ADDRESS@OFFSET,\n"
     "also the offset and how many bytes follow it (past the end: exit 7).\n",
     1, 1, {}},
    {"alloc", Command::kAlloc,
     "NAME SIZE [--export r|w|rw] [--mode MODE] [--group GROUP]",
     "create a daemon-owned named region",
     "Creates a region that the daemon keeps until 'rdmactl free' (or until\n"
     "it exits). SIZE takes suffixes: 4096, 4K, 1M, 1Gi (x1024), 1GB (x1000).\n"
     "--export grants remote access at once (default: local only).\n"
     "--mode sets who on this node may use it, like a file mode (octal, read\n"
     "and write bits only; default 0600); --group its group (a name or gid\n"
     "you belong to; default your primary group).\n",
     2,
     2,
     {"export", "mode", "group"}},
    {"free",
     Command::kFree,
     "NAME",
     "free a daemon-owned region",
     "Deregisters and frees a named region.\n",
     1,
     1,
     {}},
    {"export",
     Command::kExport,
     "NAME r|w|rw|none [--allow [UID@]PEER,...]",
     "grant (or with none revoke) remote access",
     "Sets the remote access of a region: r lets peers READ it, w lets them\n"
     "WRITE it, rw both; none makes it local-only again. When it returns, no\n"
     "peer operation under the previous export touches the region any more.\n"
     "--allow limits who: comma-separated PEERs, each '*', an address or\n"
     "CIDR block peers connect from (10.0.0.2, 10.0.0.0/8), or cert:NAME (a\n"
     "peer whose mutual-TLS certificate names NAME), optionally prefixed by\n"
     "the uid that peer acts for (1000@10.0.0.2). Default: any peer, any "
     "uid.\n",
     2, 2, {"allow"}},
    {"chmod", Command::kChmod, "NAME MODE",
     "change who on this node may use a named region",
     "Sets the local permissions of a daemon-owned region, like chmod(1) of\n"
     "a file: MODE is octal read (4) and write (2) bits for owner, group\n"
     "and others, e.g. 0640. Only its owner or root may. Mappings made\n"
     "before keep the access they had.\n",
     2, 2, {}},
    {"chgrp", Command::kChgrp, "NAME GROUP",
     "change the group of a named region",
     "Sets the group of a daemon-owned region, like chgrp(1): a group name or\n"
     "gid you belong to (root: any). Only its owner or root may.\n",
     2, 2, {}},
    {"descriptor", Command::kDescriptor, "NAME",
     "print an exported region's descriptor",
     "Prints the encoded descriptor (\"rdmad1:...\") of an exported region, "
     "to\n"
     "pass to another node, where it is accepted wherever a region address "
     "is.\n",
     1,
     1,
     {}},
    {"put",
     Command::kPut,
     "FILE|- DEST",
     "write a file (or stdin) into a region",
     "Writes the contents of FILE (\"-\": stdin) into region DEST at its offset.\n"
     "A local DEST is mapped and written directly; a remote DEST is written\n"
     "with one-sided WRITEs through a staging buffer (at most 64 MiB at a\n"
     "time). The region's size is checked first: data that does not fit is\n"
     "refused before anything is written (from a pipe larger than 64 MiB,\n"
     "the error says how much was written). On a terminal, progress and\n"
     "rate are shown on stderr.\n",
     2, 2, {}},
    {"get", Command::kGet, "SRC [--length N] [-o FILE|-]",
     "read a region into a file (or stdout)",
     "Reads N bytes of region SRC from its offset into FILE (default and\n"
     "\"-\": stdout). Without --length, reads to the end of the region, local\n"
     "or remote (a remote region's size is asked from its daemon). With\n"
     "--json, give -o FILE: the report goes to stdout. On a terminal,\n"
     "progress and rate are shown on stderr.\n",
     1, 1, {"length", "output"}},
    {"copy", Command::kCopy, "SRC DEST [--length N]",
     "copy between a local region and a region address",
     "Copies N bytes from SRC to DEST through the daemon. One side must be a\n"
     "local region (NAME[@OFFSET]); the other may be local or remote. Between\n"
     "two local regions, you need read on SRC and write on DEST (see chmod);\n"
     "a remote target must be exported for the access the copy needs (w to\n"
     "write into it, r to read from it). Without --length, copies from SRC's\n"
     "offset to its end.\n",
     2, 2, {"length"}},
    {"bench", Command::kBench,
     // Continuation lines line up under "usage: rdmactl bench ".
     "[--peer HOST:PORT | --local] [--op write|read] [--sizes LIST]\n"
     "                     [--qd N] [--batch N [--window K]]\n"
     "                     [--iters N | --duration S] [--region NAME]\n"
     "                     [--create-region] [--path ring|grpc] [--spin TIME]\n"
     "                     [--spin-when-preempted]",
     "measure one-sided transfer bandwidth and latency",
     "Measures one-sided transfers between a buffer that rdmactl allocates\n"
     "through this daemon and region NAME (default rdmad-bench) that the\n"
     "daemon at --peer HOST:PORT exports: --op write (default) sends to it,\n"
     "--op read fetches from it. For each size, after one warm-up transfer\n"
     "that is not counted, it runs --iters N operations, or as many as fit\n"
     "in --duration S seconds (default 2; also 500ms, 1m), with --qd N\n"
     "operations in flight (default 1; one thread each, doing one\n"
     "transfer, or one batch, at a time). A failed transfer stops the run.\n"
     "--path ring (default) puts operations on a shared-memory queue of\n"
     "each thread's own; --path grpc sends each as a Local gRPC call, to\n"
     "compare. With --batch N, each thread submits N operations at once\n"
     "(one Batch call with --path grpc) and waits for all of them; latency\n"
     "is then that of a whole batch. --window K (ring only) keeps K batches\n"
     "in flight on each thread's queue, each submitted again as soon as its\n"
     "last completion is back, as a message-rate test keeps its sends in\n"
     "flight (ib_write_bw's --tx-depth, ucx_perftest's puts); a batch's\n"
     "latency then runs from its submission to its last completion.\n"
     "--spin T (ring only; e.g. 200us, 0) is how long a thread busy-polls\n"
     "for its completions before it sleeps (default 30us; QueueOptions::spin).\n"
     "--spin-when-preempted keeps it spinning after the thread was preempted\n"
     "(by default it then sleeps for a while, another thread wanting its CPU):\n"
     "for a CPU of its own, and on soft-RoCE, whose kernel threads preempt\n"
     "it with the very work it waits for (QueueOptions::spin_when_preempted).\n"
     "\n"
     "Per size it prints the operations done, MB/s (10^6 bytes/s), Gb/s,\n"
     "operations/s, the latency of one operation as rdmactl sees it (the call\n"
     "to the daemon included) at p50, p99 and p99.9 in microseconds, and the\n"
     "transport that carried it. --json prints one JSON object instead. On a\n"
     "terminal, a progress line is shown on stderr.\n"
     "\n"
     "--sizes is a comma-separated list with size suffixes (default\n"
     "8,4K,64K,1M,16M). All operations use the same local buffer, as large as\n"
     "the largest size, and the same remote range at offset 0: the region\n"
     "must hold the largest size and be exported w (write) or r (read). On\n"
     "the peer's node, e.g.: rdmactl alloc rdmad-bench 16M --export rw\n"
     "\n"
     "Without --peer, bench targets this daemon's own peer address (the\n"
     "'peer listen' of 'rdmactl status'): a loopback through its transport,\n"
     "not a local copy. --create-region then creates the region on this\n"
     "daemon (exported rw, as large as the largest size) if it does not\n"
     "exist, and frees it when done; an existing region is used as it is.\n"
     "rdmactl talks only to this daemon, so it cannot create a region on\n"
     "another one: --create-region and --peer do not go together. With\n"
     "--local the region is this daemon's and the daemon copies to or from\n"
     "it directly: the cost of the path from this process to the daemon. As\n"
     "for a copy between local regions, it need not be exported; your\n"
     "permissions on it apply (see chmod).\n",
     0, 0,
     {"peer", "region", "create-region", "op", "sizes", "qd", "batch", "iters",
      "duration", "path", "local", "spin", "window", "spin-when-preempted"}},
    {"ls", Command::kLs, "[PREFIX]",
     "exported regions of the whole cluster (directory)",
     "Lists the regions every daemon of the cluster exports, from the\n"
     "cluster directory on etcd (daemons started with --directory): name,\n"
     "the daemon that holds it, size, access, age and generation. PREFIX\n"
     "keeps the names that start with it (\"kv/\").\n",
     0, 1, {}},
    {"lookup", Command::kLookup, "NAME [--fresh]",
     "which daemon of the cluster holds a region",
     "Looks NAME up in the cluster directory, as a transfer to NAME would:\n"
     "from the daemon's watch-fed cache, or with --fresh from etcd.\n",
     1, 1, {"fresh"}},
    {"help", Command::kHelp, "[COMMAND]", "print help (of one command)", "", 0,
     1, {}},
};

}  // namespace

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& spec : kCommands) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindLongOption(absl::string_view name) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const OptionSpec* FindShortOption(char name) {
  for (const OptionSpec& spec : kOptions) {
    if (spec.short_name != 0 && spec.short_name == name) return &spec;
  }
  return nullptr;
}

std::string Usage() {
  std::string text =
      "usage: rdmactl [--socket PATH] [--timeout DURATION] [--json] COMMAND "
      "[ARGS...]\n"
      "\n"
      "Inspect an rdmad daemon and move data through it.\n"
      "\n"
      "Commands:\n";
  for (const CommandSpec& spec : kCommands) {
    std::string line = absl::StrCat("  ", spec.name);
    // A synopsis of several lines shows its first one here.
    const size_t newline = spec.synopsis.find('\n');
    if (newline != absl::string_view::npos) {
      absl::StrAppend(&line, " ", spec.synopsis.substr(0, newline), " ...");
    } else if (!spec.synopsis.empty()) {
      absl::StrAppend(&line, " ", spec.synopsis);
    }
    if (line.size() < 42) {
      line.resize(42, ' ');
    } else {
      absl::StrAppend(&line, "\n", std::string(42, ' '));
    }
    absl::StrAppend(&text, line, spec.summary, "\n");
  }
  absl::StrAppend(
      &text,
      "\n"
      "Region addresses: [HOST:PORT/]NAME[@OFFSET] (OFFSET takes size "
      "suffixes),\n"
      "e.g. cache, cache@4K, 10.0.0.2:7471/kv@1M, [::1]:7471/kv; or a "
      "descriptor\n"
      "printed by 'rdmactl descriptor' (\"rdmad1:...\", also with @OFFSET). "
      "No\n"
      "HOST:PORT: this daemon.\n"
      "\n"
      "Options (anywhere on the line):\n"
      "  --socket PATH       the daemon's socket (default: $RDMAD_SOCKET, "
      "else\n"
      "                      ",
      kDefaultSocket,
      ")\n"
      "  --timeout DURATION  the whole command must finish within it: 30s, "
      "500ms,\n"
      "                      2m (default: no bound; each call to the daemon "
      "30s)\n"
      "  --json              print the answer as JSON, errors included (every "
      "command)\n"
      "  -h, --help          print help; 'rdmactl COMMAND --help' for one "
      "command\n"
      "  --version           print rdmactl's version\n"
      "\n"
      "Exit status: 0 done; 1 other failure; 2 usage error; 3 unavailable\n"
      "(daemon or peer unreachable); 4 not found; 5 permission denied; 6 "
      "already\n"
      "exists; 7 invalid argument or out of range; 8 resource exhausted; 9 "
      "timed\n"
      "out; 10 failed precondition (e.g. not exported, daemon restarted).\n");
  return text;
}

std::string CommandUsage(absl::string_view command) {
  const CommandSpec* spec = FindCommand(command);
  if (spec == nullptr || spec->command == Command::kHelp) return Usage();
  std::string text = absl::StrCat("usage: rdmactl ", spec->name);
  if (!spec->synopsis.empty()) absl::StrAppend(&text, " ", spec->synopsis);
  absl::StrAppend(&text, "\n\n", spec->summary, ".\n\n", spec->details,
                  "\nGlobal options: --socket PATH, --timeout DURATION, "
                  "--json (see 'rdmactl help').\n");
  return text;
}

}  // namespace rdmad::rdmactl
