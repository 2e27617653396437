// rdmad.Buffer: a region mapped into this process, seen by Python through
// the buffer protocol (memoryview, numpy.frombuffer and torch.frombuffer
// share its memory, no copy).
//
// A view must never outlive the mapping it points into. Each view holds a
// reference to the Buffer (the buffer protocol's `obj`), so dropping the
// Buffer keeps the mapping until the last view goes; an explicit free()
// while views exist is refused (rdmad.BufferInUse), as Python's own mmap
// refuses close(). The views are counted in bf_getbuffer/bf_releasebuffer,
// installed on the type by hand: pybind11's def_buffer has no release hook.
#include <Python.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "binding.h"

namespace rdmad::python {
namespace {

class PyBuffer {
 public:
  explicit PyBuffer(std::shared_ptr<BufferCore> core)
      : core_(std::move(core)),
        id_(core_->buffer.id()),
        size_(core_->buffer.size()),
        name_(core_->buffer.name()),
        owned_(core_->buffer.owned()),
        writable_(core_->buffer.writable()) {}

  uint64_t id() const { return id_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool owned() const { return owned_; }
  bool writable() const { return writable_; }
  bool freed() const { return core_ == nullptr; }
  int views() const { return views_; }
  uintptr_t address() const {
    return reinterpret_cast<uintptr_t>(Live().buffer.data());
  }

  void Free() {
    if (core_ == nullptr) return;  // twice is harmless, as for files
    if (views_ > 0) {
      ThrowInUse(absl::StrCat(
          Describe(), " has ", views_,
          " live view(s) (memoryview, numpy or torch arrays of it): delete "
          "them before freeing it, or drop the Buffer and it is freed with "
          "its last view"));
    }
    // Queue.run holds the core while its batch runs without the GIL.
    if (core_.use_count() > 1) {
      ThrowInUse(absl::StrCat(
          Describe(),
          " is used by a batch running on a queue (Queue.run in another "
          "thread): free it after that returns"));
    }
    std::shared_ptr<BufferCore> core = std::move(core_);
    absl::Status released;
    {
      py::gil_scoped_release unlocked;
      released = core->buffer.Release();
      core.reset();
    }
    Check(released);
  }

  // bf_getbuffer and bf_releasebuffer.
  static int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
    PyBuffer* buffer = nullptr;
    try {
      buffer = py::handle(self).cast<PyBuffer*>();
    } catch (const py::cast_error&) {
      PyErr_SetString(PyExc_BufferError, "not an rdmad.Buffer");
      view->obj = nullptr;
      return -1;
    }
    if (buffer->core_ == nullptr) {
      PyErr_SetString(PyExc_BufferError,
                      absl::StrCat(buffer->Describe(),
                                   " was freed: it has no memory to view")
                          .c_str());
      view->obj = nullptr;
      return -1;
    }
    if (buffer->core_->buffer.data() == nullptr) {
      PyErr_SetString(
          PyExc_BufferError,
          absl::StrCat(buffer->Describe(),
                       " is a dma-buf (GPU memory): it is not mapped in this "
                       "process; reach it through its allocator (torch, "
                       "CuPy)")
              .c_str());
      view->obj = nullptr;
      return -1;
    }
    // Refuses a writable view of a read-only mapping (PyBUF_WRITABLE).
    if (PyBuffer_FillInfo(view, self, buffer->core_->buffer.data(),
                          static_cast<Py_ssize_t>(buffer->size_),
                          buffer->writable_ ? 0 : 1, flags) != 0) {
      return -1;
    }
    ++buffer->views_;
    return 0;
  }

  static void ReleaseBuffer(PyObject* self, Py_buffer*) {
    // `self` is alive: the view held a reference to it until now.
    py::handle(self).cast<PyBuffer*>()->views_--;
  }

  std::string Describe() const {
    return name_.empty() ? absl::StrCat("buffer #", id_)
                         : absl::StrCat("buffer #", id_, " (", name_, ")");
  }

 private:
  const BufferCore& Live() const {
    if (core_ == nullptr) {
      ThrowStatus(absl::FailedPreconditionError(
          absl::StrCat(Describe(), " was freed")));
    }
    return *core_;
  }

  [[noreturn]] static void ThrowInUse(const std::string& message) {
    py::object error =
        py::module_::import("rdmad.errors")
            .attr("BufferInUse")(
                static_cast<int>(absl::StatusCode::kFailedPrecondition),
                message);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                    error.ptr());
    throw py::error_already_set();
  }

  std::shared_ptr<BufferCore> core_;  // null once freed
  const uint64_t id_;
  const size_t size_;
  const std::string name_;
  const bool owned_;
  const bool writable_;
  int views_ = 0;  // live buffer-protocol views; under the GIL
};

}  // namespace

BufferCore::BufferCore(std::shared_ptr<ClientState> c, Buffer b)
    : client(std::move(c)), buffer(std::move(b)), id(buffer.id()) {
  std::lock_guard<std::mutex> lock(client->buffers_mu);
  client->buffers[id] = this;
}

BufferCore::~BufferCore() {
  std::lock_guard<std::mutex> lock(client->buffers_mu);
  auto it = client->buffers.find(id);
  if (it != client->buffers.end() && it->second == this) {
    client->buffers.erase(it);
  }
}

py::object WrapBuffer(std::shared_ptr<ClientState> client, Buffer buffer) {
  auto core =
      std::make_shared<BufferCore>(std::move(client), std::move(buffer));
  return py::cast(new PyBuffer(std::move(core)),
                  py::return_value_policy::take_ownership);
}

void DefineBuffer(py::module_& m) {
  py::class_<PyBuffer> cls(m, "Buffer", R"doc(
A region of the daemon mapped into this process (Client.allocate,
Client.register, Client.map_region). It supports the buffer protocol:
memoryview(buf), numpy.frombuffer(buf, dtype) and torch.frombuffer(buf,
dtype=...) see its memory without a copy; what is written there is what
the daemon sends, and what it receives appears there. Queue operations
name it by `id`.

free() frees it now (owned) or unmaps it (map_region). It is refused with
rdmad.BufferInUse while views of it exist; otherwise the buffer goes with
its last reference, views included. Usable as a context manager.)doc");
  cls.def_property_readonly("id", &PyBuffer::id,
                            "The region's id: what an operation's `local` "
                            "field names.")
      .def_property_readonly("size", &PyBuffer::size)
      .def("__len__", &PyBuffer::size)
      .def_property_readonly("name", &PyBuffer::name)
      .def_property_readonly("owned", &PyBuffer::owned,
                             "True when this session owns the region "
                             "(allocate, register); False for a mapped "
                             "named region.")
      .def_property_readonly("writable", &PyBuffer::writable)
      .def_property_readonly("freed", &PyBuffer::freed)
      .def_property_readonly("views", &PyBuffer::views,
                             "How many buffer-protocol views of it exist.")
      .def_property_readonly("address", &PyBuffer::address,
                             "The mapping's address in this process (0 for "
                             "a dma-buf, which is not mapped here).")
      .def("free", &PyBuffer::Free)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyBuffer& self, py::args) {
             self.Free();
             return false;
           })
      .def("__repr__", [](const PyBuffer& self) {
        return absl::StrCat("<rdmad.Buffer ", self.Describe().substr(7), ", ",
                            self.size(), " bytes",
                            self.freed() ? ", freed" : "",
                            self.writable() ? "" : ", read-only", ">");
      });
  // pybind11 made a heap type: give it our buffer procs.
  auto* type = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  type->as_buffer.bf_getbuffer = &PyBuffer::GetBuffer;
  type->as_buffer.bf_releasebuffer = &PyBuffer::ReleaseBuffer;
  type->ht_type.tp_as_buffer = &type->as_buffer;
}

}  // namespace rdmad::python
