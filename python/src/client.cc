// rdmad.Client and rdmad.RemoteHandle: the session with the local daemon,
// its buffers and named regions, and remote regions opened for queues.
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "binding.h"

namespace rdmad::python {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }
double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

py::dict RegionDict(const RegionInfo& r) {
  py::dict d;
  d["id"] = r.id;
  d["name"] = r.name;
  d["size"] = r.size;
  d["owner"] = std::string(RegionOwnerName(r.owner));
  d["session_id"] = r.session_id;
  d["owner_uid"] = r.owner_uid;
  d["owner_gid"] = r.owner_gid;
  d["mode"] = r.mode;
  d["export"] = std::string(AccessName(r.export_access));
  d["backing"] = r.backing;
  d["devices"] = r.keys.size();
  d["created"] = UnixSeconds(r.created);
  return d;
}

py::dict StatusDict(const DaemonStatus& s) {
  py::dict d;
  d["version"] = s.version;
  d["incarnation"] = s.incarnation;
  d["transport"] = std::string(TransportName(s.transport));
  d["transport_reason"] = s.transport_reason;
  d["local_socket"] = s.local_socket;
  d["peer_address"] = s.peer_address;
  d["device_count"] = s.device_count;
  d["region_count"] = s.region_count;
  d["region_bytes"] = s.region_bytes;
  d["session_count"] = s.session_count;
  d["peer_count"] = s.peer_count;
  d["uptime"] = Seconds(s.uptime);
  d["pid"] = s.pid;
  d["pinned_bytes"] = s.pinned_bytes;
  d["data_listen"] = s.data_listen;
  return d;
}

py::dict QueueDict(const QueueInfo& q) {
  py::dict d;
  d["id"] = q.id;
  d["session_id"] = q.session_id;
  d["pid"] = q.pid;
  d["uid"] = q.uid;
  d["submission_entries"] = q.submission_entries;
  d["completion_entries"] = q.completion_entries;
  d["notifications"] = q.notifications;
  d["in_flight"] = q.in_flight;
  d["submitted"] = q.submitted;
  d["completed"] = q.completed;
  d["failed"] = q.failed;
  d["notified"] = q.notified;
  d["stopped"] =
      q.stop_reason.ok() ? std::string() : std::string(q.stop_reason.message());
  return d;
}

AllocateOptions Options(const std::optional<std::string>& name,
                        const py::object& export_access) {
  return {.name = name.value_or(""),
          .export_access = AccessFromPython(export_access)};
}

// Runs `call` on `client` with the GIL released and unwraps its result (a
// StatusOr, or a Status).
template <typename F>
auto CallWithoutGil(Client& client, F&& call) {
  using R = decltype(call(client));
  std::optional<R> result;
  {
    py::gil_scoped_release unlocked;
    result.emplace(call(client));
  }
  if constexpr (std::is_same_v<R, absl::Status>) {
    Check(*result);
  } else {
    return Unwrap(std::move(*result));
  }
}

// A remote region opened for queue operations. Copies what the daemon said;
// the client keeps the handle itself until close().
class PyRemoteHandle {
 public:
  PyRemoteHandle(std::shared_ptr<ClientState> client,
                 std::shared_ptr<const RemoteHandle> handle, uint64_t offset)
      : client_(std::move(client)),
        handle_(std::move(handle)),
        offset_(offset) {}

  uint64_t id() const { return handle_->id(); }
  uint64_t size() const { return handle_->size(); }
  std::string access() const {
    return std::string(AccessName(handle_->access()));
  }
  std::string transport() const {
    return std::string(TransportName(handle_->transport()));
  }
  const std::string& peer() const { return handle_->peer(); }
  const std::string& name() const { return handle_->name(); }
  uint64_t offset() const { return offset_; }
  bool closed() const { return closed_; }

  void Close() {
    if (closed_) return;
    closed_ = true;
    client_->handles.erase(handle_->id());
    const RemoteHandle handle = *handle_;
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = client_->client->CloseRemote(handle);
    }
    Check(s);
  }

 private:
  std::shared_ptr<ClientState> client_;
  std::shared_ptr<const RemoteHandle> handle_;
  uint64_t offset_;
  bool closed_ = false;
};

class PyClient {
 public:
  static PyClient Connect(const std::optional<std::string>& socket,
                          double timeout) {
    ClientOptions options;
    if (socket.has_value()) options.socket_path = *socket;
    options.timeout = absl::Seconds(timeout);
    absl::StatusOr<std::unique_ptr<Client>> client;
    {
      py::gil_scoped_release unlocked;
      client = Client::Connect(options);
    }
    return PyClient(std::make_shared<ClientState>(Unwrap(std::move(client))));
  }

  py::object Allocate(uint64_t size, const std::optional<std::string>& name,
                      const py::object& export_access) {
    const AllocateOptions options = Options(name, export_access);
    return Wrap(Call([&](Client& c) { return c.Allocate(size, options); }));
  }

  py::object Register(int memfd, uint64_t size,
                      const std::optional<std::string>& name,
                      const py::object& export_access) {
    const AllocateOptions options = Options(name, export_access);
    return Wrap(
        Call([&](Client& c) { return c.Register(memfd, size, options); }));
  }

  py::object RegisterDmabuf(int fd, uint64_t offset, uint64_t length,
                            const std::optional<std::string>& name,
                            const py::object& export_access) {
    const AllocateOptions options = Options(name, export_access);
    return Wrap(Call([&](Client& c) {
      return c.RegisterDmabuf(fd, offset, length, options);
    }));
  }

  py::object MapRegion(const std::string& name) {
    return Wrap(Call([&](Client& c) { return c.MapRegion(name); }));
  }

  PyRemoteHandle OpenRemote(const std::string& address) {
    const RemoteRegion remote = Unwrap(RemoteRegion::Parse(address));
    RemoteHandle handle = Call([&](Client& c) { return c.OpenRemote(remote); });
    auto shared = std::make_shared<const RemoteHandle>(std::move(handle));
    State().handles[shared->id()] = shared;
    return PyRemoteHandle(state_, shared, remote.offset);
  }

  uint64_t Transfer(Op::Kind kind, py::handle buffer, uint64_t offset,
                    const std::string& address, uint64_t remote_offset,
                    uint64_t length) {
    const RemoteRegion remote = Unwrap(RemoteRegion::Parse(address));
    std::shared_ptr<BufferCore> core = Core(buffer);
    const Completion done = Call([&](Client& c) {
      return kind == Op::Kind::kWrite
                 ? c.Write(core->buffer, offset, remote, remote_offset, length)
                 : c.Read(core->buffer, offset, remote, remote_offset, length);
    });
    return done.bytes;
  }

  py::dict Status() {
    return StatusDict(Call([](Client& c) { return c.GetStatus(); }));
  }

  py::list Regions() {
    py::list out;
    for (const RegionInfo& r :
         Call([](Client& c) { return c.ListRegions(); })) {
      out.append(RegionDict(r));
    }
    return out;
  }

  py::list Queues() {
    py::list out;
    for (const QueueInfo& q : Call([](Client& c) { return c.ListQueues(); })) {
      out.append(QueueDict(q));
    }
    return out;
  }

  py::dict CreateRegion(const std::string& name, uint64_t size,
                        const py::object& export_access, uint32_t mode,
                        std::optional<uint32_t> group) {
    const Access access = AccessFromPython(export_access);
    const RegionOptions options{.mode = mode, .group = group};
    return RegionDict(Call([&](Client& c) {
      return c.CreateRegion(name, size, access, options);
    }));
  }

  void FreeRegion(const std::string& name) {
    Call([&](Client& c) { return c.FreeRegion(name); });
  }

  py::dict Export(const std::string& name, const py::object& access_text) {
    const Access access = AccessFromPython(access_text);
    return RegionDict(Call([&](Client& c) { return c.Export(name, access); }));
  }

  std::string Descriptor(const std::string& name) {
    return Call([&](Client& c) { return c.GetDescriptor(name); });
  }

  py::object OpenQueueOf(uint32_t depth, uint32_t completion_depth,
                         bool notifications, std::optional<double> spin,
                         double default_timeout, bool spin_when_preempted) {
    QueueOptions options{.depth = depth,
                         .completion_depth = completion_depth,
                         .default_timeout = absl::Seconds(default_timeout),
                         .notifications = notifications,
                         .spin_when_preempted = spin_when_preempted};
    if (spin.has_value()) options.spin = absl::Seconds(*spin);
    return OpenQueue(shared_state(), options);
  }

  uint64_t session_id() { return State().client->session_id(); }
  std::string socket() { return State().client->options().socket_path; }
  void Close() { state_.reset(); }

  ClientState& State() {
    if (state_ == nullptr) {
      ThrowStatus(absl::FailedPreconditionError(
          "this rdmad.Client was closed: connect a new one"));
    }
    return *state_;
  }
  std::shared_ptr<ClientState> shared_state() {
    State();
    return state_;
  }

 private:
  explicit PyClient(std::shared_ptr<ClientState> state)
      : state_(std::move(state)) {}

  // Runs `call` on the rdmad::Client without the GIL; unwraps its result.
  template <typename F>
  auto Call(F&& call)
      -> decltype(CallWithoutGil(std::declval<Client&>(), call)) {
    std::shared_ptr<ClientState> keep = state_;
    return CallWithoutGil(*State().client, std::forward<F>(call));
  }

  py::object Wrap(Buffer buffer) {
    return WrapBuffer(state_, std::move(buffer));
  }

  std::shared_ptr<BufferCore> Core(py::handle buffer) {
    const uint64_t id = py::cast<uint64_t>(buffer.attr("id"));
    std::lock_guard<std::mutex> lock(State().buffers_mu);
    auto it = state_->buffers.find(id);
    if (it == state_->buffers.end() || py::cast<bool>(buffer.attr("freed"))) {
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "buffer #", id, " is not a live buffer of this client")));
    }
    return it->second->shared_from_this();
  }

  std::shared_ptr<ClientState> state_;  // null once closed
};

}  // namespace

ClientState::~ClientState() = default;

void DefineClient(py::module_& m) {
  py::class_<PyRemoteHandle>(m, "RemoteHandle", R"doc(
A region of another daemon (or of this one) opened once for queue
operations (Client.open_remote): what an operation's `remote` field names
by `id`. Offsets in operations count from the region's start; `offset` is
the one the opened address named, for the caller to add.)doc")
      .def_property_readonly("id", &PyRemoteHandle::id)
      .def_property_readonly("size", &PyRemoteHandle::size)
      .def_property_readonly("access", &PyRemoteHandle::access,
                             "What its export grants: 'r', 'w', 'rw'.")
      .def_property_readonly("transport", &PyRemoteHandle::transport,
                             "'verbs', 'tcp' or 'local' (this daemon).")
      .def_property_readonly("peer", &PyRemoteHandle::peer)
      .def_property_readonly("name", &PyRemoteHandle::name)
      .def_property_readonly("offset", &PyRemoteHandle::offset)
      .def_property_readonly("closed", &PyRemoteHandle::closed)
      .def("close", &PyRemoteHandle::Close)
      .def("__repr__", [](const PyRemoteHandle& h) {
        return absl::StrCat("<rdmad.RemoteHandle ", h.id(), " ",
                            h.peer().empty() ? "local" : h.peer(), "/",
                            h.name(), ", ", h.size(), " bytes, ", h.access(),
                            ", ", h.transport(), ">");
      });

  // Client.write and Client.read: one transfer of `kind` each.
  auto transfer = [](Op::Kind kind) {
    return [kind](PyClient& c, py::handle buf, uint64_t offset,
                  const std::string& address, uint64_t remote_offset,
                  uint64_t length) {
      return c.Transfer(kind, buf, offset, address, remote_offset, length);
    };
  };
  py::class_<PyClient>(m, "Client", py::dynamic_attr(), R"doc(
A session with the rdmad daemon of this node (Client.connect). The daemon
frees what the session owns when this process exits. Calls to the daemon
release the GIL. Methods raise rdmad.Error subclasses (rdmad.NotFound,
rdmad.PermissionDenied, rdmad.Unavailable...) with the daemon's message.)doc")
      .def_static("connect", &PyClient::Connect, py::arg("socket") = py::none(),
                  py::arg("timeout") = 30.0,
                  "Connects to the daemon at `socket` (default: "
                  "$RDMAD_SOCKET, else /run/rdmad/rdmad.sock); `timeout` in "
                  "seconds bounds every call.")
      .def("allocate", &PyClient::Allocate, py::arg("size"),
           py::arg("name") = py::none(), py::arg("export") = py::none(),
           "A new registered buffer of `size` bytes owned by this session; "
           "`export`: None, 'r', 'w' or 'rw' (needs a name).")
      .def("register", &PyClient::Register, py::arg("memfd"), py::arg("size"),
           py::arg("name") = py::none(), py::arg("export") = py::none(),
           "Registers the first `size` bytes of a memfd this process made "
           "(os.memfd_create with MFD_ALLOW_SEALING).")
      .def("register_dmabuf", &PyClient::RegisterDmabuf, py::arg("fd"),
           py::arg("offset"), py::arg("length"), py::arg("name") = py::none(),
           py::arg("export") = py::none(),
           "Registers `length` bytes from `offset` of the dma-buf `fd` (GPU "
           "memory: see rdmad.cuda). The Buffer names the region in "
           "operations; it has no CPU mapping here (no buffer protocol). "
           "The caller keeps `fd`.")
      .def("map_region", &PyClient::MapRegion, py::arg("name"),
           "Maps a daemon-owned named region (read-only where its mode "
           "grants only read).")
      .def("open_remote", &PyClient::OpenRemote, py::arg("address"),
           "Opens '[PEER/]NAME[@OFFSET]' or an 'rdmad1:' descriptor for "
           "queue operations.")
      .def("write", transfer(Op::Kind::kWrite), py::arg("buffer"),
           py::arg("offset"), py::arg("address"), py::arg("remote_offset"),
           py::arg("length"),
           "One WRITE from `buffer` to the region `address` names; returns "
           "the bytes moved. For many, use a Queue.")
      .def("read", transfer(Op::Kind::kRead), py::arg("buffer"),
           py::arg("offset"), py::arg("address"), py::arg("remote_offset"),
           py::arg("length"))
      .def("open_queue", &PyClient::OpenQueueOf, py::arg("depth") = 256,
           py::arg("completion_depth") = 0, py::arg("notifications") = false,
           py::arg("spin") = py::none(), py::arg("default_timeout") = 30.0,
           py::arg("spin_when_preempted") = false,
           "A queue of this client's own (see rdmad.Queue): `depth` "
           "submission entries, `completion_depth` completion entries "
           "(0: twice depth), `notifications` to receive WRITEs with an "
           "immediate into this session's buffers, `spin` seconds of "
           "busy-polling in wait() (None: the library's default), "
           "`default_timeout` seconds for operations that set none, "
           "`spin_when_preempted` to go on spinning after the thread was "
           "preempted (for a CPU of its own, or soft-RoCE).")
      .def("status", &PyClient::Status, "The daemon's status, as a dict.")
      .def("regions", &PyClient::Regions)
      .def("queues", &PyClient::Queues)
      .def("create_region", &PyClient::CreateRegion, py::arg("name"),
           py::arg("size"), py::arg("export") = py::none(), py::arg("mode") = 0,
           py::arg("group") = py::none(),
           "A daemon-owned named region (it outlives this session).")
      .def("free_region", &PyClient::FreeRegion, py::arg("name"))
      .def("export", &PyClient::Export, py::arg("name"), py::arg("access"))
      .def("descriptor", &PyClient::Descriptor, py::arg("name"))
      .def_property_readonly("session_id", &PyClient::session_id)
      .def_property_readonly("socket", &PyClient::socket)
      .def("close", &PyClient::Close,
           "Lets go of the session; it ends with the last Buffer and Queue "
           "made from it.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyClient& c, py::args) {
        c.Close();
        return false;
      });
}

}  // namespace rdmad::python
