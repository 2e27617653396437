#include "daemon/config/config_reload.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace rdmad::config {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

constexpr const char* kReloadable[] = {"log_level", "socket_mode",
                                       "metrics_listen"};

// The field's value as text-format would print it ("" when unset).
std::string ValueText(const v1::DaemonConfig& config,
                      const FieldDescriptor* field) {
  const Reflection* reflection = config.GetReflection();
  std::vector<std::string> parts;
  const int count = field->is_repeated()
                        ? reflection->FieldSize(config, field)
                        : (reflection->HasField(config, field) ? 1 : 0);
  for (int i = 0; i < count; ++i) {
    std::string text;
    google::protobuf::TextFormat::PrintFieldValueToString(
        config, field, field->is_repeated() ? i : -1, &text);
    parts.push_back(std::move(text));
  }
  if (field->is_repeated()) return "[" + absl::StrJoin(parts, ", ") + "]";
  return parts.empty() ? "" : parts.front();
}

}  // namespace

bool IsReloadable(const std::string& field) {
  return std::find(std::begin(kReloadable), std::end(kReloadable), field) !=
         std::end(kReloadable);
}

ReloadPlan PlanReload(const v1::DaemonConfig& running,
                      const v1::DaemonConfig& next) {
  ReloadPlan plan;
  const auto* descriptor = v1::DaemonConfig::descriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    FieldChange change{field->name(), ValueText(running, field),
                       ValueText(next, field)};
    if (change.before == change.after) continue;
    (IsReloadable(field->name()) ? plan.apply : plan.restart)
        .push_back(std::move(change));
  }
  return plan;
}

v1::DaemonConfig Merge(const v1::DaemonConfig& running,
                       const v1::DaemonConfig& next, const ReloadPlan& plan) {
  v1::DaemonConfig merged = running;
  v1::DaemonConfig donor = next;
  std::vector<const FieldDescriptor*> fields;
  for (const FieldChange& change : plan.apply) {
    if (const FieldDescriptor* field =
            v1::DaemonConfig::descriptor()->FindFieldByName(change.field)) {
      fields.push_back(field);
    }
  }
  // Exactly these fields (set or cleared) move from `next`; the rest of
  // `running` stays as it is.
  merged.GetReflection()->SwapFields(&merged, &donor, fields);
  return merged;
}

}  // namespace rdmad::config
