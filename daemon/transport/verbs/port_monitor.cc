#include "daemon/transport/verbs/port_monitor.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/transport/verbs/device.h"
#include "spdlog/spdlog.h"

namespace rdmad::verbs {
namespace {

std::string PortKey(const std::string& device, uint32_t port) {
  return absl::StrCat(device, "/", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PortMonitor>> PortMonitor::Start(
    std::vector<std::shared_ptr<Device>> devices) {
  auto monitor = std::make_unique<PortMonitor>();
  for (const auto& device : devices) {
    for (uint32_t port = 1; port <= device->attributes().phys_port_cnt;
         ++port) {
      auto attr = device->QueryPort(port);
      absl::MutexLock lock(&monitor->mu_);
      monitor->active_[PortKey(device->name(), port)] =
          attr.ok() && attr->state == IBV_PORT_ACTIVE;
    }
    // Read without blocking: the thread polls the descriptors.
    const int fd = device->context()->async_fd;
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("fcntl(O_NONBLOCK) on the async event fd of ",
                              device->name()));
    }
  }
  monitor->stop_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (monitor->stop_.get() < 0) return absl::ErrnoToStatus(errno, "eventfd");
  monitor->devices_ = std::move(devices);
  monitor->thread_ = std::thread([raw = monitor.get()] { raw->Run(); });
  return monitor;
}

PortMonitor::~PortMonitor() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_.get(), &one, sizeof(one)) < 0) {
      spdlog::error("port monitor: cannot wake its thread to stop");
    }
    thread_.join();
  }
}

bool PortMonitor::Active(const std::string& device, uint32_t port) const {
  absl::MutexLock lock(&mu_);
  auto it = active_.find(PortKey(device, port));
  return it == active_.end() || it->second;
}

void PortMonitor::Subscribe(std::weak_ptr<PortListener> listener) {
  absl::MutexLock lock(&mu_);
  // Forget the listeners that are gone while at it.
  std::erase_if(listeners_, [](const std::weak_ptr<PortListener>& l) {
    return l.expired();
  });
  listeners_.push_back(std::move(listener));
}

void PortMonitor::Report(const std::string& device, uint32_t port,
                         bool active) {
  std::vector<std::shared_ptr<PortListener>> told;
  {
    absl::MutexLock lock(&mu_);
    bool& state = active_[PortKey(device, port)];
    if (state == active) return;
    state = active;
    for (const auto& weak : listeners_) {
      if (auto listener = weak.lock()) told.push_back(std::move(listener));
    }
  }
  if (active) {
    spdlog::info("RDMA device {} port {} is ACTIVE again", device, port);
  } else {
    spdlog::warn("RDMA device {} port {} is down: its rails are paused",
                 device, port);
  }
  for (const auto& listener : told) listener->OnPortChange(device, port, active);
}

void PortMonitor::WatchLastWqe(const std::string& device, uint32_t qp_num,
                               absl::AnyInvocable<void()> reached) {
  absl::MutexLock lock(&mu_);
  last_wqe_[absl::StrCat(device, "/", qp_num)] = std::move(reached);
}

void PortMonitor::UnwatchLastWqe(const std::string& device, uint32_t qp_num) {
  absl::AnyInvocable<void()> dropped;  // destroyed outside the lock
  absl::MutexLock lock(&mu_);
  auto it = last_wqe_.find(absl::StrCat(device, "/", qp_num));
  if (it == last_wqe_.end()) return;
  dropped = std::move(it->second);
  last_wqe_.erase(it);
}

void PortMonitor::ReportLastWqe(const std::string& device, uint32_t qp_num) {
  absl::AnyInvocable<void()> reached;
  {
    absl::MutexLock lock(&mu_);
    auto it = last_wqe_.find(absl::StrCat(device, "/", qp_num));
    if (it == last_wqe_.end()) return;
    reached = std::move(it->second);
    last_wqe_.erase(it);
  }
  reached();
}

void PortMonitor::Run() {
  pthread_setname_np(pthread_self(), "rdmad-ports");
  std::vector<pollfd> fds(devices_.size() + 1);
  for (size_t i = 0; i < devices_.size(); ++i) {
    fds[i] = pollfd{devices_[i]->context()->async_fd, POLLIN, 0};
  }
  fds.back() = pollfd{stop_.get(), POLLIN, 0};
  for (;;) {
    // No deadline: the thread only waits for events, and the destructor
    // wakes it through stop_.
    const int n = poll(fds.data(), fds.size(), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("port monitor: poll failed (errno {}): port changes "
                    "are no longer followed",
                    errno);
      return;
    }
    if (fds.back().revents != 0) return;
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (fds[i].revents != 0) DrainEvents(i);
    }
  }
}

void PortMonitor::DrainEvents(size_t index) {
  const Device& device = *devices_[index];
  for (;;) {
    ibv_async_event event;
    if (ibv_get_async_event(device.context(), &event) != 0) return;
    const ibv_event_type type = event.event_type;
    const uint32_t port =
        type == IBV_EVENT_PORT_ACTIVE || type == IBV_EVENT_PORT_ERR
            ? static_cast<uint32_t>(event.element.port_num)
            : 0;
    // Read before the ack: the QP may be destroyed once it is acknowledged.
    const std::optional<uint32_t> last_wqe_qp =
        type == IBV_EVENT_QP_LAST_WQE_REACHED && event.element.qp != nullptr
            ? std::optional<uint32_t>(event.element.qp->qp_num)
            : std::nullopt;
    // At once, before anything else: see the header.
    ibv_ack_async_event(&event);
    if (last_wqe_qp.has_value()) {
      ReportLastWqe(device.name(), *last_wqe_qp);
    } else if (port != 0) {
      Report(device.name(), port, type == IBV_EVENT_PORT_ACTIVE);
    } else {
      spdlog::debug("RDMA device {}: event {}", device.name(),
                    ibv_event_type_str(type));
    }
  }
}

}  // namespace rdmad::verbs
