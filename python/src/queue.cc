// rdmad.Queue: a client's shared-memory queue (rdmad/queue.h), driven with
// arrays of fixed records (records.h) instead of one Python object per
// operation.
//
// submit(ops) copies each 64-byte record, checks it, turns it into an
// rdmad::Op (ids looked up once per run of equal ids) and submits them all
// in one Queue::Submit; poll() turns the completions into one array. One
// lock per queue serializes every call on the rdmad::Queue (which is not
// thread-safe); wait() and run() hold it with the GIL released.
#include <poll.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "binding.h"
#include "records.h"

namespace rdmad::python {
namespace {

// A borrowed, C-contiguous view of any object with the buffer protocol.
class RecordView {
 public:
  explicit RecordView(py::handle ops) {
    if (PyObject_GetBuffer(ops.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
      throw py::error_already_set();
    }
    if (view_.len % static_cast<Py_ssize_t>(sizeof(OpRecord)) != 0) {
      const Py_ssize_t len = view_.len;
      PyBuffer_Release(&view_);
      ThrowStatus(absl::InvalidArgumentError(
          absl::StrCat("operations are ", sizeof(OpRecord),
                       "-byte records (rdmad.OP_DTYPE, "
                       "rdmad.ops()): got ",
                       len, " bytes")));
    }
  }
  ~RecordView() { PyBuffer_Release(&view_); }
  RecordView(const RecordView&) = delete;
  RecordView& operator=(const RecordView&) = delete;

  size_t size() const { return view_.len / sizeof(OpRecord); }
  OpRecord operator()(size_t i) const {
    OpRecord r;  // copied: the array is the caller's, and may be unaligned
    std::memcpy(&r, static_cast<const char*>(view_.buf) + i * sizeof(r),
                sizeof(r));
    return r;
  }

 private:
  Py_buffer view_;
};

Completion::Kind KindOf(const Completion& c) { return c.kind; }

class PyQueue {
 public:
  PyQueue(std::shared_ptr<ClientState> client, std::unique_ptr<Queue> queue,
          uint32_t capacity)
      : client_(std::move(client)),
        queue_(std::move(queue)),
        capacity_(capacity) {}

  // Turns the `n` records `records(i)` gives into ops_ (under mu_ and the
  // registry's lock). With `keep`, also holds what they name, for a call
  // without the GIL.
  template <typename Records>
  void Resolve(size_t n, const Records& records,
               std::vector<std::shared_ptr<BufferCore>>* keep_buffers,
               std::vector<std::shared_ptr<const RemoteHandle>>* keep_handles) {
    ops_.clear();
    ops_.reserve(n);
    std::lock_guard<std::mutex> registry(client_->buffers_mu);
    uint64_t last_local = 0;
    BufferCore* local = nullptr;
    uint64_t last_remote = 0;
    const RemoteHandle* remote = nullptr;
    for (size_t i = 0; i < n; ++i) {
      const OpRecord r = records(i);
      auto refuse = [&](auto&&... what) {
        ThrowStatus(absl::InvalidArgumentError(
            absl::StrCat("operation ", i, " (tag ", r.tag, ") of ", n,
                         ", nothing submitted: ", what...)));
      };
      if (r.kind != kKindWrite && r.kind != kKindRead) {
        refuse("kind ", r.kind, " is neither rdmad.WRITE (", kKindWrite,
               ") nor rdmad.READ (", kKindRead, ")");
      }
      if ((r.flags & ~kKnownFlags) != 0) {
        refuse("unknown flags 0x", absl::Hex(r.flags));
      }
      if (local == nullptr || r.local != last_local) {
        auto it = client_->buffers.find(r.local);
        if (it == client_->buffers.end()) {
          refuse("local buffer #", r.local,
                 " is no live Buffer of the queue's Client (freed, or "
                 "another client's)");
        }
        local = it->second;
        last_local = r.local;
        if (keep_buffers != nullptr) {
          keep_buffers->push_back(local->shared_from_this());
        }
      }
      if (remote == nullptr || r.remote != last_remote) {
        auto it = client_->handles.find(r.remote);
        if (it == client_->handles.end()) {
          refuse("remote handle ", r.remote,
                 " is no open RemoteHandle of the queue's Client "
                 "(Client.open_remote)");
        }
        remote = it->second.get();
        last_remote = r.remote;
        if (keep_handles != nullptr) keep_handles->push_back(it->second);
      }
      Op& op = ops_.emplace_back();
      op.kind = r.kind == kKindWrite ? Op::Kind::kWrite : Op::Kind::kRead;
      op.local = &local->buffer;
      op.local_offset = r.local_offset;
      op.remote = remote;
      op.remote_offset = r.remote_offset;
      op.length = r.length;
      op.tag = r.tag;
      if ((r.flags & kFlagImmediate) != 0) op.immediate = r.immediate;
      if (r.timeout_ms != 0) op.timeout = absl::Milliseconds(r.timeout_ms);
    }
  }

  size_t Submit(py::handle ops) {
    const RecordView records(ops);
    auto lock = Lock();
    Resolve(records.size(), records, nullptr, nullptr);
    return Unwrap(Live().Submit(ops_));
  }

  // One operation without a record array: the path of rdmad.aio's single
  // awaits, where building an array would cost more than the operation.
  size_t SubmitOne(uint8_t kind, uint64_t local, uint64_t local_offset,
                   uint64_t remote, uint64_t remote_offset, uint64_t length,
                   uint64_t tag, std::optional<uint32_t> immediate,
                   uint32_t timeout_ms) {
    OpRecord r{};
    r.kind = kind;
    r.flags = immediate.has_value() ? kFlagImmediate : 0;
    r.immediate = immediate.value_or(0);
    r.tag = tag;
    r.local = local;
    r.local_offset = local_offset;
    r.remote = remote;
    r.remote_offset = remote_offset;
    r.length = length;
    r.timeout_ms = timeout_ms;
    auto lock = Lock();
    Resolve(
        1, [&r](size_t) { return r; }, nullptr, nullptr);
    return Unwrap(Live().Submit(ops_));
  }

  py::object Run(py::handle ops, std::optional<double> timeout) {
    const RecordView records(ops);
    std::vector<std::shared_ptr<BufferCore>> buffers;
    std::vector<std::shared_ptr<const RemoteHandle>> handles;
    auto lock = Lock();
    Resolve(records.size(), records, &buffers, &handles);
    const absl::Time deadline = timeout.has_value()
                                    ? absl::Now() + absl::Seconds(*timeout)
                                    : absl::InfiniteFuture();
    absl::StatusOr<std::vector<Completion>> done;
    {
      py::gil_scoped_release unlocked;
      done = Live().Run(ops_, deadline);
    }
    // What Run kept (notifications) Poll returns later.
    return Completions(Unwrap(std::move(done)));
  }

  py::object Poll(std::optional<size_t> max) {
    auto lock = Lock();
    const size_t want = max.value_or(capacity_);
    std::vector<Completion> out;
    while (!stashed_.empty() && out.size() < want) {
      out.push_back(std::move(stashed_.front()));
      stashed_.pop_front();
    }
    Drain(want - out.size(), &out, &notes_);
    return Completions(out);
  }

  py::object PollNotifications(std::optional<size_t> max) {
    auto lock = Lock();
    const size_t want = max.value_or(capacity_);
    if (notes_.size() < want) {
      std::vector<Completion> completions;
      Drain(want - notes_.size(), &completions, &notes_);
      for (Completion& c : completions) stashed_.push_back(std::move(c));
    }
    const size_t n = std::min(want, notes_.size());
    py::array out = Records("_notifications", n);
    auto* records = static_cast<NotificationRecord*>(out.mutable_data());
    for (size_t i = 0; i < n; ++i) {
      records[i] = notes_.front();
      notes_.pop_front();
    }
    return out;
  }

  bool Wait(std::optional<double> timeout) {
    std::unique_lock<std::mutex> lock;
    absl::Status waited;
    {
      py::gil_scoped_release unlocked;
      lock = std::unique_lock<std::mutex>(mu_);
      if (!stashed_.empty() || !notes_.empty()) return true;
      Queue& queue = LiveNoGil();
      waited = queue.Wait(timeout.has_value() ? absl::Seconds(*timeout)
                                              : absl::InfiniteDuration());
    }
    if (absl::IsDeadlineExceeded(waited)) return false;
    Check(waited);
    return true;
  }

  bool Arm() {
    auto lock = Lock();
    if (!stashed_.empty() || !notes_.empty()) return false;
    return Live().Arm();
  }

  // Consumes the wake-up eventfd's counter, if it is readable.
  bool Ack() {
    auto lock = Lock();
    pollfd p{Live().event_fd(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return false;
    uint64_t count = 0;
    return ::read(p.fd, &count, sizeof(count)) == sizeof(count);
  }

  void CheckStatus() {
    auto lock = Lock();
    Check(Live().status());
  }
  int event_fd() { return Live().event_fd(); }
  uint64_t id() { return Live().id(); }
  uint32_t depth() { return Live().depth(); }
  uint32_t capacity() const { return capacity_; }
  uint32_t in_flight() {
    auto lock = Lock();
    return Live().in_flight();
  }
  bool closed() const { return queue_ == nullptr; }
  // Notifications poll() took off the ring, for poll_notifications().
  size_t notifications_ready() {
    auto lock = Lock();
    return notes_.size();
  }

  void Close() {
    auto lock = Lock();
    std::unique_ptr<Queue> queue = std::move(queue_);
    py::gil_scoped_release unlocked;
    queue.reset();  // closes it in the daemon
  }

 private:
  // Takes mu_; waits for it without the GIL if wait() or run() holds it.
  std::unique_lock<std::mutex> Lock() {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {
      py::gil_scoped_release unlocked;
      lock.lock();
    }
    return lock;
  }

  Queue& Live() {
    if (queue_ == nullptr) {
      ThrowStatus(absl::FailedPreconditionError(
          "this rdmad.Queue was closed: open a new one"));
    }
    return *queue_;
  }
  // The same, where raising (a Python call) must wait for the GIL.
  Queue& LiveNoGil() {
    if (queue_ == nullptr) {
      py::gil_scoped_acquire locked;
      Live();
    }
    return *queue_;
  }

  // Takes up to `want` entries off the ring: completions to `completions`,
  // notifications to `notes`.
  void Drain(size_t want, std::vector<Completion>* completions,
             std::deque<NotificationRecord>* notes) {
    if (want == 0) return;
    Queue& queue = Live();
    if (scratch_.size() < want) scratch_.resize(want);
    const size_t n = queue.Poll(absl::MakeSpan(scratch_.data(), want));
    for (size_t i = 0; i < n; ++i) {
      Completion& c = scratch_[i];
      if (KindOf(c) == Completion::Kind::kNotification) {
        NotificationRecord& note = notes->emplace_back(NotificationRecord{
            .region = c.region,
            .offset = c.offset,
            .bytes = c.bytes,
            .immediate = c.immediate,
            .writer_uid = c.writer_uid.has_value()
                              ? static_cast<int64_t>(*c.writer_uid)
                              : -1,
        });
        // A Peer address is far shorter; one that is not is cut, not
        // overrun.
        c.writer.copy(note.writer, sizeof(note.writer));
      } else if (KindOf(c) == Completion::Kind::kNotificationsLost) {
        notes->push_back({.lost = c.lost, .writer_uid = -1});
      } else {
        completions->push_back(std::move(c));
      }
    }
  }

  // An array made by rdmad._records.`factory`(n).
  static py::array Records(const char* factory, size_t n) {
    static py::object* records = nullptr;
    if (records == nullptr) {
      records = new py::object(py::module_::import("rdmad._records"));
    }
    return records->attr(factory)(n).cast<py::array>();
  }

  // An rdmad.Completions array of `done`, with the failures' messages.
  static py::object Completions(const std::vector<Completion>& done) {
    py::array out = Records("_completions", done.size());
    auto* records = static_cast<CompletionRecord*>(out.mutable_data());
    py::dict messages;
    for (size_t i = 0; i < done.size(); ++i) {
      const Completion& c = done[i];
      CompletionRecord& r = records[i];
      r.tag = c.tag;
      r.bytes = c.bytes;
      r.daemon_ns =
          static_cast<uint64_t>(absl::ToInt64Nanoseconds(c.daemon_time));
      r.code = static_cast<int32_t>(c.status.code());
      r.transport = static_cast<uint8_t>(c.transport);
      if (!c.status.ok())
        messages[py::int_(i)] = std::string(c.status.message());
    }
    if (!messages.empty()) out.attr("messages") = messages;
    return out;
  }

  const std::shared_ptr<ClientState> client_;
  std::mutex mu_;  // serializes every use of queue_ and the members below
  std::unique_ptr<Queue> queue_;  // null once closed
  const uint32_t capacity_;       // completion entries: the most in flight
  std::vector<Op> ops_;
  std::vector<Completion> scratch_;
  // Polled off the ring by the other kind of poll.
  std::deque<Completion> stashed_;
  std::deque<NotificationRecord> notes_;
};

}  // namespace

py::object OpenQueue(std::shared_ptr<ClientState> client,
                     const QueueOptions& options) {
  absl::StatusOr<std::unique_ptr<Queue>> queue;
  absl::StatusOr<std::vector<QueueInfo>> listed;
  {
    py::gil_scoped_release unlocked;
    queue = client->client->OpenQueue(options);
    // How many completion entries the daemon gave it (its rounding of
    // completion_depth): the most operations in flight at once.
    if (queue.ok()) listed = client->client->ListQueues();
  }
  std::unique_ptr<Queue> opened = Unwrap(std::move(queue));
  uint32_t capacity = 2 * opened->depth();
  for (const QueueInfo& info : Unwrap(std::move(listed))) {
    if (info.id == opened->id()) capacity = info.completion_entries;
  }
  return py::cast(new PyQueue(std::move(client), std::move(opened), capacity),
                  py::return_value_policy::take_ownership);
}

void DefineQueue(py::module_& m) {
  py::class_<PyQueue>(m, "Queue", R"doc(
A queue of operations in memory shared with the daemon (Client.open_queue).
Operations go in as one array of records (rdmad.OP_DTYPE: kind, flags,
immediate, tag, local, local_offset, remote, remote_offset, length,
timeout_ms; rdmad.ops() makes one) and results come back as one
rdmad.Completions array (tag, bytes, daemon_ns, code, transport) whose
`messages` say why each failed one failed.

One lock serializes the calls on a queue; wait() and run() hold it with the
GIL released. For threads that submit at once, open a queue per thread.)doc")
      .def("submit", &PyQueue::Submit, py::arg("ops"),
           "Submits as many of `ops` as fit, in order, and returns how many "
           "(fewer when the queue is full: poll, then submit the rest). "
           "Raises rdmad.InvalidArgument, naming the record, for a bad kind "
           "or flags, or ids of no live buffer or open handle of this "
           "client; rdmad.ResourceExhausted when not even the first fits.")
      .def("submit_one", &PyQueue::SubmitOne, py::arg("kind"), py::arg("local"),
           py::arg("local_offset"), py::arg("remote"), py::arg("remote_offset"),
           py::arg("length"), py::arg("tag") = 0,
           py::arg("immediate") = py::none(), py::arg("timeout_ms") = 0,
           "One operation by its fields (ids, not objects).")
      .def("run", &PyQueue::Run, py::arg("ops"),
           py::arg("timeout") = py::none(),
           "Runs all of `ops` (any number) with the GIL released: submits "
           "what fits, waits, polls, until all completed; returns their "
           "Completions in `ops` order. Raises the error of the first op "
           "that failed. The queue must have nothing in flight.")
      .def("poll", &PyQueue::Poll, py::arg("max") = py::none(),
           "The completions ready now (at most `max`), as rdmad.Completions; "
           "notifications polled meanwhile wait for poll_notifications().")
      .def("poll_notifications", &PyQueue::PollNotifications,
           py::arg("max") = py::none(),
           "Notifications (WRITEs with an immediate into this session's "
           "buffers) ready now, as an array of rdmad.NOTIFICATION_DTYPE: "
           "region, offset, bytes, immediate. Needs "
           "open_queue(notifications=True).")
      .def("wait", &PyQueue::Wait, py::arg("timeout") = py::none(),
           "Waits (GIL released) until poll() or poll_notifications() has "
           "something; False if `timeout` seconds passed first. Raises why "
           "the queue stopped, and FailedPrecondition at once when nothing "
           "is in flight (and the queue takes no notifications).")
      .def("arm", &PyQueue::Arm,
           "Asks for event_fd to become readable at the next completion; "
           "False when something is ready already (poll it, then arm again) "
           "or the queue stopped (check()).")
      .def("ack", &PyQueue::Ack,
           "Reads event_fd's counter if it is readable (after a wake-up).")
      .def_property_readonly("event_fd", &PyQueue::event_fd)
      .def("check", &PyQueue::CheckStatus,
           "Raises why the daemon stopped this queue, if it did.")
      .def_property_readonly("id", &PyQueue::id)
      .def_property_readonly("depth", &PyQueue::depth)
      .def_property_readonly("capacity", &PyQueue::capacity,
                             "Completion entries: the most operations in "
                             "flight at once.")
      .def_property_readonly("in_flight", &PyQueue::in_flight)
      .def_property_readonly("closed", &PyQueue::closed)
      .def_property_readonly("notifications_ready",
                             &PyQueue::notifications_ready,
                             "How many notifications poll() set aside for "
                             "poll_notifications().")
      .def("close", &PyQueue::Close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyQueue& q, py::args) {
        q.Close();
        return false;
      });
}

}  // namespace rdmad::python
