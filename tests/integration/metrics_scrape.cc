#include "tests/integration/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/integration/daemon_process.h"

namespace rdmad::testing {

// The metrics address a daemon logged ("metrics on http://H:P/metrics"),
// waiting for it up to 30 s; "" if it never came.
std::string MetricsAddress(const std::string& log) {
  static const std::regex kLine(
      R"(metrics on http://([0-9.]+:[0-9]+)/metrics)");
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::smatch match;
    const std::string text = ReadTextFile(log);
    if (std::regex_search(text, match, kLine)) return match[1];
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

// GET http://ADDRESS/metrics over a plain loopback socket; the body, or ""
// on any failure.
std::string Scrape(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return "";
  }
  std::string response;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  char buf[8192];
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    pollfd pfd{fd, POLLIN, 0};
    if (left <= absl::ZeroDuration() ||
        ::poll(&pfd, 1,
               static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) {
      break;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 ||
      response.find(" 200 ") == std::string::npos ||
      body == std::string::npos) {
    return "";
  }
  return response.substr(body + 4);
}

// Sum of the samples of `name` whose labels include all of `want`; -1 if
// there is none.
double Value(const std::string& scrape, const std::string& name,
             const Labels& want) {
  static const std::regex kSample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ([^ ]+)$)");
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)")re");
  double sum = 0;
  bool found = false;
  for (absl::string_view view : absl::StrSplit(scrape, '\n')) {
    const std::string line(view);
    std::smatch match;
    if (line.empty() || line[0] == '#' ||
        !std::regex_match(line, match, kSample) || match[1] != name) {
      continue;
    }
    Labels labels;
    const std::string text = match[3];
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kLabel);
         it != std::sregex_iterator(); ++it) {
      labels[(*it)[1]] = (*it)[2];
    }
    bool matches = true;
    for (const auto& [key, value] : want) {
      auto at = labels.find(key);
      matches = matches && at != labels.end() && at->second == value;
    }
    double value = 0;
    if (matches && absl::SimpleAtod(std::string(match[4]), &value)) {
      sum += value;
      found = true;
    }
  }
  return found ? sum : -1;
}

}  // namespace rdmad::testing
