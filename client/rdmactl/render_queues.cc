// How rdmactl shows the clients' shared-memory queues (`rdmactl queues`),
// as text and as JSON (render.h).
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/rdmactl/format.h"
#include "client/rdmactl/render.h"

namespace rdmad::rdmactl {
namespace {

// "running", or "stopped: CODE: message".
std::string StateText(const QueueInfo& q) {
  if (q.stop_reason.ok()) return "running";
  return absl::StrCat("stopped: ", q.stop_reason.ToString());
}

}  // namespace

std::string RenderQueues(const std::vector<QueueInfo>& queues,
                         absl::Time now) {
  if (queues.empty()) return "no queues\n";
  // HELD: notifications the daemon holds for the queue (its client is
  // behind); LOST: those lost for it past its uid's backlog.
  Table table({"QUEUE", "SESSION", "PID", "UID", "ENTRIES", "ENGINE", "AGE",
               "IN FLIGHT", "SUBMITTED", "COMPLETED", "FAILED", "NOTIFIED",
               "HELD", "LOST", "WAKEUPS", "DOORBELLS", "STATE"});
  for (size_t column : {0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
    table.AlignRight(column);
  }
  for (const QueueInfo& q : queues) {
    // "256/512" submission/completion entries; "+n" marks the session's
    // notification queue.
    std::string entries =
        absl::StrCat(q.submission_entries, "/", q.completion_entries);
    if (q.notifications) entries += " +n";
    table.AddRow(
        {absl::StrCat(q.id), absl::StrCat(q.session_id), absl::StrCat(q.pid),
         absl::StrCat(q.uid), entries, q.engine, HumanDuration(now - q.opened),
         absl::StrCat(q.in_flight), absl::StrCat(q.submitted),
         absl::StrCat(q.completed), absl::StrCat(q.failed),
         absl::StrCat(q.notified), absl::StrCat(q.notifications_held),
         absl::StrCat(q.notifications_lost), absl::StrCat(q.client_wakeups),
         absl::StrCat(q.doorbells), StateText(q)});
  }
  return table.Render();
}

Json QueuesJson(const std::vector<QueueInfo>& queues, absl::Time now) {
  Json list = Json::Array();
  for (const QueueInfo& q : queues) {
    Json entry = Json::Object();
    entry.Set("queue", q.id)
        .Set("session", q.session_id)
        .Set("pid", q.pid)
        .Set("uid", q.uid)
        .Set("submission_entries", q.submission_entries)
        .Set("completion_entries", q.completion_entries)
        .Set("notifications", q.notifications)
        .Set("engine", q.engine)
        .Set("age_ms", absl::ToInt64Milliseconds(now - q.opened))
        .Set("in_flight", q.in_flight)
        .Set("submitted", q.submitted)
        .Set("completed", q.completed)
        .Set("failed", q.failed)
        .Set("notified", q.notified)
        .Set("held", q.notifications_held)
        .Set("lost", q.notifications_lost)
        .Set("wakeups", q.client_wakeups)
        .Set("doorbells", q.doorbells)
        .Set("state", q.stop_reason.ok() ? "running" : "stopped");
    if (!q.stop_reason.ok()) {
      entry.Set("stop_code", absl::StatusCodeToString(q.stop_reason.code()))
          .Set("stop_message", std::string(q.stop_reason.message()));
    } else {
      entry.Set("stop_code", Json()).Set("stop_message", Json());
    }
    list.Push(std::move(entry));
  }
  Json out = Json::Object();
  out.Set("queues", std::move(list));
  return out;
}

}  // namespace rdmad::rdmactl
