// Reading a config file: the strict text-format parse with its hints, the
// file's checks (size, kind), and the defaults. The field rules are in
// config_check.cc.
#include "daemon/config/config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/config/size_values.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace rdmad::config {
namespace {

constexpr char kDefaultSocket[] = "/run/rdmad/rdmad.sock";
constexpr char kDefaultPeerListen[] = "0.0.0.0:7471";

// Collects text-format errors as "SOURCE:LINE:COLUMN: message". The
// parser's own messages name unknown fields, but for a malformed value they
// only say what was expected; the field is then taken from the start of the
// offending line, which in this flat format is always "name: value".
class ErrorCollector final : public google::protobuf::io::ErrorCollector {
 public:
  ErrorCollector(const std::string& source, const std::string& text)
      : source_(source), lines_(absl::StrSplit(text, '\n')) {}

  void AddError(int line, int column, const std::string& message) override {
    std::string error =
        absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message);
    const std::string field = FieldOnLine(line);
    if (!field.empty() && message.find(absl::StrCat("\"", field, "\"")) ==
                              std::string::npos) {
      absl::StrAppend(&error, " (field '", field, "')");
    }
    if (const std::string hint = Hint(field, ValueOnLine(line));
        !hint.empty()) {
      absl::StrAppend(&error, ": ", hint);
    }
    errors_.push_back(std::move(error));
  }
  // Warnings (e.g. deprecated syntax) are treated as errors: a config that
  // means something other than it says should not start a daemon.
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Joined() const { return absl::StrJoin(errors_, "; "); }

 private:
  // The text after "name:" on `line`, up to a comment, without blanks.
  std::string ValueOnLine(int line) const {
    if (line < 0 || static_cast<size_t>(line) >= lines_.size()) return "";
    absl::string_view text = lines_[line];
    const size_t colon = text.find(':');
    if (colon == absl::string_view::npos) return "";
    text.remove_prefix(colon + 1);
    text = text.substr(0, text.find('#'));
    return std::string(absl::StripAsciiWhitespace(text));
  }

  std::string FieldOnLine(int line) const {
    if (line < 0 || static_cast<size_t>(line) >= lines_.size()) return "";
    absl::string_view text = absl::StripLeadingAsciiWhitespace(lines_[line]);
    size_t end = 0;
    while (end < text.size() &&
           (absl::ascii_isalnum(text[end]) || text[end] == '_')) {
      ++end;
    }
    return std::string(text.substr(0, end));
  }

  // What to do about the parser's complaint, where the field's type says:
  // its messages say what it expected, not how to write it.
  static std::string Hint(const std::string& field_name,
                          const std::string& value) {
    const auto* field =
        v1::DaemonConfig::descriptor()->FindFieldByName(field_name);
    if (field == nullptr) return "";
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_STRING) {
      return absl::StrCat("quote the value: ", field_name, ": \"",
                          value.empty() ? "..." : value, "\"");
    }
    if (IsSizeField(*field)) {
      return "give bytes or a size like 4G, 512Mi, 1.5G";
    }
    if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_BOOL) {
      return "give true or false";
    }
    return field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_ENUM
               ? ""
               : "give a whole number";
  }

  std::string source_;
  std::vector<std::string> lines_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::StatusOr<v1::DaemonConfig> ParseConfigText(const std::string& raw_text,
                                                 const std::string& source) {
  auto expanded =
      ExpandSizeValues(raw_text, *v1::DaemonConfig::descriptor(), source);
  if (!expanded.ok()) return expanded.status();
  const std::string& text = *expanded;
  v1::DaemonConfig config;
  google::protobuf::TextFormat::Parser parser;
  ErrorCollector collector(source, text);
  parser.RecordErrorsTo(&collector);
  // Unknown fields stay errors (the parser's default): a misspelt field
  // silently ignored is a setting silently not applied.
  google::protobuf::TextFormat::ParseInfoTree locations;
  parser.WriteLocationsTo(&locations);
  if (!parser.ParseFromString(text, &config)) {
    return absl::InvalidArgumentError(collector.Joined());
  }
  std::vector<std::string> lines;
  for (const FieldError& e : CheckConfig(config)) {
    const auto* field =
        v1::DaemonConfig::descriptor()->FindFieldByName(e.field);
    const auto where = field != nullptr
                           ? locations.GetLocation(field, e.index)
                           : google::protobuf::TextFormat::ParseLocation();
    lines.push_back(where.line >= 0
                        ? absl::StrCat(source, ":", where.line + 1, ":",
                                       where.column + 1, ": field '", e.field,
                                       "': ", e.message)
                        : absl::StrCat(source, ": field '", e.field, "': ",
                                       e.message));
  }
  if (!lines.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(lines, "; "));
  }
  return config;
}

absl::StatusOr<v1::DaemonConfig> LoadConfigFile(const std::string& path) {
  // Opened once and checked through the descriptor, so that what is
  // checked is what is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read config file ", path,
                                            ": ", std::strerror(errno)));
  }
  std::string text;
  absl::Status status = absl::OkStatus();
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    status = absl::NotFoundError(absl::StrCat("cannot read config file ", path,
                                              ": ", std::strerror(errno)));
  } else if (!S_ISREG(st.st_mode)) {
    status = absl::InvalidArgumentError(absl::StrCat(
        path, ": the config file is ",
        S_ISDIR(st.st_mode) ? "a directory" : "not a regular file",
        ": give the path of a text-format rdmad.v1.DaemonConfig file"));
  } else if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    status = absl::InvalidArgumentError(
        absl::StrCat(path, ": the config file is ", st.st_size,
                     " bytes; at most ", kMaxConfigBytes, " are read"));
  } else {
    char buffer[8192];
    for (;;) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = absl::NotFoundError(absl::StrCat(
            "cannot read config file ", path, ": ", std::strerror(errno)));
        break;
      }
      if (n == 0) break;
      text.append(buffer, static_cast<size_t>(n));
      if (text.size() > kMaxConfigBytes) {
        status = absl::InvalidArgumentError(
            absl::StrCat(path, ": the config file grew past ", kMaxConfigBytes,
                         " bytes while being read"));
        break;
      }
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return ParseConfigText(text, path);
}

void ApplyDefaults(v1::DaemonConfig& config) {
  if (config.socket().empty()) config.set_socket(kDefaultSocket);
  if (config.peer_listen().empty()) config.set_peer_listen(kDefaultPeerListen);
  if (config.transport().empty()) config.set_transport("auto");
  if (config.log_level().empty()) config.set_log_level("info");
  if (config.socket_mode().empty()) config.set_socket_mode("0666");
  if (config.io_threads() == 0) config.set_io_threads(2);
  if (config.max_peers() == 0) config.set_max_peers(kDefaultMaxPeers);
  if (config.max_peers_per_uid() == 0) {
    config.set_max_peers_per_uid(std::max(1u, config.max_peers() / 2));
  }
  if (config.new_peers_per_second_per_uid() == 0) {
    config.set_new_peers_per_second_per_uid(1000);
  }
  if (config.new_peers_burst_per_uid() == 0) {
    config.set_new_peers_burst_per_uid(1000);
  }
  if (config.handshakes_in_flight() == 0) config.set_handshakes_in_flight(32);
  if (config.peer_channel_idle_ms() == 0) {
    config.set_peer_channel_idle_ms(10000);
  }
  if (config.handshakes_served_in_flight() == 0) {
    config.set_handshakes_served_in_flight(16);
  }
  if (config.engine_threads() == 0) config.set_engine_threads(1);
  // 0 is a choice (no spin): only an unset field takes the default.
  if (!config.has_engine_spin_us()) config.set_engine_spin_us(50);
  if (config.loop_slice_us() == 0) config.set_loop_slice_us(100);
  if (config.notification_backlog() == 0) {
    config.set_notification_backlog(16384);
  }
  if (config.data_listen().empty()) {
    // Same host as the Peer service, any free port: peers learn it from
    // Peer.Connect.
    const std::string& peer = config.peer_listen();
    config.set_data_listen(
        absl::StrCat(peer.substr(0, peer.rfind(':')), ":0"));
  }
}

bool MetricsEnabled(const v1::DaemonConfig& config) {
  return !config.metrics_listen().empty() && config.metrics_listen() != "off";
}

}  // namespace rdmad::config
