#include "daemon/startup/port_check.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/unique_fd.h"

namespace rdmad::startup {
namespace {

constexpr char kListenState[] = "0A";  // TCP_LISTEN in /proc/net/tcp

// Inodes of sockets listening on `port` in one /proc/net/tcp-style table.
std::vector<std::string> ListeningInodes(const std::string& table,
                                         uint16_t port) {
  std::vector<std::string> inodes;
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    if (fields.size() < 10 || fields[3] != kListenState) continue;
    const size_t colon = fields[1].rfind(':');
    if (colon == absl::string_view::npos) continue;
    uint32_t local_port = 0;
    if (!absl::SimpleHexAtoi(fields[1].substr(colon + 1), &local_port) ||
        local_port != port) {
      continue;
    }
    if (fields[9] != "0") inodes.emplace_back(fields[9]);
  }
  return inodes;
}

std::string ReadComm(const std::string& dir) {
  std::ifstream in(dir + "/comm");
  std::string comm;
  std::getline(in, comm);
  return std::string(absl::StripAsciiWhitespace(comm));
}

// The host and port of "HOST:PORT" / "[V6]:PORT"; false if malformed.
bool SplitHostPort(const std::string& listen, std::string& host,
                   std::string& port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  host = listen.substr(0, colon);
  port = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return !port.empty();
}

std::string InUseMessage(absl::string_view what, absl::string_view setting,
                         const std::string& listen, uint16_t port) {
  std::string holder = "another process";
  if (std::optional<PortHolder> found = FindPortHolder(port)) {
    holder = absl::StrCat("pid ", found->pid, " (", found->command, ")");
  }
  return absl::StrCat("cannot listen on ", listen, " for ", what, " (",
                      setting, "): port ", port, " is in use by ", holder,
                      ": stop it, or give this daemon another port");
}

}  // namespace

std::optional<PortHolder> FindPortHolder(uint16_t port,
                                         const std::string& proc_root) {
  std::vector<std::string> inodes =
      ListeningInodes(proc_root + "/net/tcp", port);
  for (std::string& inode : ListeningInodes(proc_root + "/net/tcp6", port)) {
    inodes.push_back(std::move(inode));
  }
  if (inodes.empty()) return std::nullopt;
  std::vector<std::string> wanted;
  for (const std::string& inode : inodes) {
    wanted.push_back(absl::StrCat("socket:[", inode, "]"));
  }
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir(proc_root.c_str()),
                                           &::closedir);
  if (proc == nullptr) return std::nullopt;
  while (const dirent* entry = ::readdir(proc.get())) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid <= 0) continue;
    const std::string dir = absl::StrCat(proc_root, "/", entry->d_name);
    const std::string fd_dir = dir + "/fd";
    std::unique_ptr<DIR, int (*)(DIR*)> fds(::opendir(fd_dir.c_str()),
                                            &::closedir);
    if (fds == nullptr) continue;  // gone, or not ours to look at
    while (const dirent* fd = ::readdir(fds.get())) {
      if (fd->d_name[0] == '.') continue;
      char target[128];
      const std::string link = absl::StrCat(fd_dir, "/", fd->d_name);
      const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      const absl::string_view points_to(target, static_cast<size_t>(n));
      for (const std::string& socket : wanted) {
        if (points_to == socket) return PortHolder{pid, ReadComm(dir)};
      }
    }
  }
  return std::nullopt;
}

absl::Status CheckPortFree(absl::string_view what, absl::string_view setting,
                           const std::string& listen) {
  std::string host;
  std::string port_text;
  uint32_t number = 0;
  if (!SplitHostPort(listen, host, port_text) ||
      !absl::SimpleAtoi(port_text, &number) || number == 0 || number > 65535) {
    return absl::OkStatus();  // port 0, or malformed: checked elsewhere
  }
  const uint16_t port = static_cast<uint16_t>(number);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(),
                    &hints, &found) != 0) {
    return absl::OkStatus();  // the server reports what it cannot resolve
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found,
                                                           &::freeaddrinfo);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    UniqueFd probe(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                            a->ai_protocol));
    if (!probe) continue;
    // As the servers do, so that connections of a previous run in
    // TIME_WAIT do not count as a holder; a listener still does.
    const int one = 1;
    ::setsockopt(probe.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(probe.get(), a->ai_addr, a->ai_addrlen) != 0 &&
        errno == EADDRINUSE) {
      return absl::AlreadyExistsError(InUseMessage(what, setting, listen, port));
    }
  }
  return absl::OkStatus();
}

absl::Status ListenFailure(absl::string_view what, absl::string_view setting,
                           const std::string& listen) {
  if (absl::Status taken = CheckPortFree(what, setting, listen); !taken.ok()) {
    return taken;
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot listen on ", listen, " for ", what, " (", setting,
      "): check that the address belongs to this host"));
}

}  // namespace rdmad::startup
