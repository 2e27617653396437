#include "daemon/startup/log_setup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace rdmad::startup {
namespace {

// "%*": the line's priority as journald reads it, "<N>".
class PriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char text[] = {'<', static_cast<char>('0' + SyslogPriority(msg.level)),
                         '>'};
    dest.append(text, text + sizeof(text));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PriorityFlag>();
  }
};

}  // namespace

bool IsJournalStream(const char* journal_stream, int fd) {
  if (journal_stream == nullptr || *journal_stream == '\0') return false;
  uintmax_t device = 0;
  uintmax_t inode = 0;
  int consumed = 0;
  if (std::sscanf(journal_stream, "%" SCNuMAX ":%" SCNuMAX "%n", &device,
                  &inode, &consumed) != 2 ||
      journal_stream[consumed] != '\0') {
    return false;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  return static_cast<uintmax_t>(st.st_dev) == device &&
         static_cast<uintmax_t>(st.st_ino) == inode;
}

int SyslogPriority(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return 7;  // LOG_DEBUG
    case spdlog::level::info:
      return 6;  // LOG_INFO
    case spdlog::level::warn:
      return 4;  // LOG_WARNING
    case spdlog::level::err:
      return 3;  // LOG_ERR
    case spdlog::level::critical:
      return 2;  // LOG_CRIT
    default:
      return 6;
  }
}

std::unique_ptr<spdlog::formatter> JournalFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PriorityFlag>('*').set_pattern("%*%v");
  return formatter;
}

std::unique_ptr<spdlog::formatter> TerminalFormatter() {
  return std::make_unique<spdlog::pattern_formatter>(
      "%Y-%m-%dT%H:%M:%S.%e %^%l%$ rdmad[%P]: %v");
}

void SetUpLogging() {
  const bool journal =
      IsJournalStream(std::getenv("JOURNAL_STREAM"), STDERR_FILENO);
  // No colours into the journal: the escape codes would be stored.
  std::shared_ptr<spdlog::logger> logger =
      journal ? spdlog::stderr_logger_mt("rdmad")
              : spdlog::stderr_color_mt("rdmad");
  logger->set_formatter(journal ? JournalFormatter() : TerminalFormatter());
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace rdmad::startup
