// How rdmad writes its log: to stderr, in one of two formats.
//
//   - On a terminal or into a file: "2026-11-28T20:46:31.123 info
//     rdmad[1234]: message", with a timestamp and the pid.
//   - Under systemd, where stderr is a stream to journald (the service
//     manager sets JOURNAL_STREAM to its device:inode): "<6>message". The
//     "<N>" prefix is the line's syslog priority (sd-daemon(3)), so
//     `journalctl -p warning -u rdmad` filters by it; journald adds the
//     time and pid itself, so the line carries neither.
//
// Example:
//   rdmad::startup::SetUpLogging();   // once, first thing in main()
//   spdlog::warn("...");              // "<4>..." under systemd
#ifndef RDMAD_DAEMON_STARTUP_LOG_SETUP_H_
#define RDMAD_DAEMON_STARTUP_LOG_SETUP_H_

#include <memory>
#include <string>

#include "spdlog/common.h"
#include "spdlog/pattern_formatter.h"

namespace rdmad::startup {

// True when `journal_stream` (the value of $JOURNAL_STREAM, "DEV:INODE",
// or null) names the file that `fd` is open on: the process's output goes
// to journald. A child that inherited the variable but writes elsewhere
// (redirected to a file) gets false.
bool IsJournalStream(const char* journal_stream, int fd);

// The syslog priority of an spdlog level: trace and debug 7, info 6,
// warn 4, error 3, critical 2.
int SyslogPriority(spdlog::level::level_enum level);

// The formatter of each format: for journald ("<N>message") or for people
// (timestamp, level, rdmad[pid]).
std::unique_ptr<spdlog::formatter> JournalFormatter();
std::unique_ptr<spdlog::formatter> TerminalFormatter();

// Makes the default logger "rdmad" on stderr, in the journald format when
// stderr is the journal's stream, else the terminal's.
void SetUpLogging();

}  // namespace rdmad::startup

#endif  // RDMAD_DAEMON_STARTUP_LOG_SETUP_H_
