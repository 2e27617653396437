// PortMonitor: whether each port of the daemon's RDMA devices is ACTIVE, as
// the devices report it, and who is told when that changes.
//
// A device reports its ports going down and coming back as asynchronous
// events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE on the context's
// async_fd: a link set down, a cable pulled, a switch port that flaps).
// The monitor reads them on a thread of its own, keeps the state of every
// port, and tells each subscribed PortListener (RailChannel pauses the rail
// on that port at once instead of waiting for its QPs' retries to run out).
//
// It also tells whoever asked (WatchLastWqe) when a QP attached to a shared
// receive queue reports IBV_EVENT_QP_LAST_WQE_REACHED: after the QP went to
// the error state, it will take no more receives from the SRQ, so the
// receives it took can all be found in its CQ.
//
// Every event read is acknowledged at once, whatever it is (QP events
// included): ibv_destroy_qp waits until the events reported for its QP were
// acknowledged, so the reader must never wait on a thread that destroys
// QPs. Hence its own thread, which does nothing but this and stops when the
// monitor is destroyed (an eventfd wakes it).
//
// Thread-safe. Listeners are held weakly and called on the monitor's
// thread (or in Report's caller); they must not block.
//
// Example:
//   RDMAD_ASSIGN_OR_RETURN(auto monitor, PortMonitor::Start(devices));
//   monitor->Subscribe(channel);  // a std::shared_ptr<RailChannel>
//   monitor->Active("rxe1", 1);
#ifndef RDMAD_DAEMON_TRANSPORT_VERBS_PORT_MONITOR_H_
#define RDMAD_DAEMON_TRANSPORT_VERBS_PORT_MONITOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"

namespace rdmad::verbs {

class Device;

// Told when a port goes down (active false) or comes back.
class PortListener {
 public:
  virtual ~PortListener() = default;
  virtual void OnPortChange(const std::string& device, uint32_t port,
                            bool active) = 0;
};

class PortMonitor {
 public:
  // Takes the state of every port of `devices` (ibv_query_port) and starts
  // reading their events. The devices are kept open while it runs.
  static absl::StatusOr<std::unique_ptr<PortMonitor>> Start(
      std::vector<std::shared_ptr<Device>> devices);
  // A monitor of no device, whose ports change only by Report (tests).
  PortMonitor() = default;
  ~PortMonitor();  // stops and joins its thread

  PortMonitor(const PortMonitor&) = delete;
  PortMonitor& operator=(const PortMonitor&) = delete;

  // Whether the port is ACTIVE; a port it does not know is taken as ACTIVE
  // (its QPs will tell).
  bool Active(const std::string& device, uint32_t port) const;

  void Subscribe(std::weak_ptr<PortListener> listener);

  // Records a port's new state and tells the listeners if it changed (the
  // thread calls this for every port event).
  void Report(const std::string& device, uint32_t port, bool active);

  // Calls `reached` once, on the monitor's thread (it must not block), when
  // the QP numbered `qp_num` on `device` reports
  // IBV_EVENT_QP_LAST_WQE_REACHED. UnwatchLastWqe forgets it (a QP
  // destroyed without the event); watching again replaces it.
  void WatchLastWqe(const std::string& device, uint32_t qp_num,
                    absl::AnyInvocable<void()> reached);
  void UnwatchLastWqe(const std::string& device, uint32_t qp_num);
  // What the thread does with a QP's IBV_EVENT_QP_LAST_WQE_REACHED.
  void ReportLastWqe(const std::string& device, uint32_t qp_num);

 private:
  void Run();
  // Reads and acknowledges every event queued on device `index`.
  void DrainEvents(size_t index);

  std::vector<std::shared_ptr<Device>> devices_;
  UniqueFd stop_;  // eventfd: written to stop the thread
  std::thread thread_;

  mutable absl::Mutex mu_;
  // "device/port" -> ACTIVE.
  absl::flat_hash_map<std::string, bool> active_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<PortListener>> listeners_ ABSL_GUARDED_BY(mu_);
  // "device/qp_num" -> who waits for its last WQE.
  absl::flat_hash_map<std::string, absl::AnyInvocable<void()>> last_wqe_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace rdmad::verbs

#endif  // RDMAD_DAEMON_TRANSPORT_VERBS_PORT_MONITOR_H_
