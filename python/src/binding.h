// The Python binding of the rdmad client library (the `rdmad._rdmad`
// extension module): what its source files share.
//
// Object graph (each arrow holds a std::shared_ptr, so the Client outlives
// every Buffer and Queue made from it, as rdmad/client.h requires):
//
//   Python Client  ──> ClientState (the rdmad::Client, the remote handles,
//                       the registry of live buffers by id)
//   Python Buffer  ──> BufferCore (one rdmad::Buffer) ──> ClientState
//   Python Queue   ──> QueueState (one rdmad::Queue)  ──> ClientState
//
// Threads: every entry point runs with the GIL held unless it says it
// releases it (calls to the daemon and waits do). What a call that released
// the GIL still uses it owns through shared_ptrs taken before; the buffer
// registry has its own mutex because a BufferCore may go (and unregister)
// on a thread without the GIL.
#ifndef RDMAD_PYTHON_BINDING_H_
#define RDMAD_PYTHON_BINDING_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rdmad/client.h"

namespace rdmad::python {

namespace py = pybind11;

// Raises the rdmad.Error subclass of `status`'s code (rdmad/errors.py)
// with its message. Never called with an OK status.
[[noreturn]] void ThrowStatus(const absl::Status& status);

// Raises unless `status` is OK.
inline void Check(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T Unwrap(absl::StatusOr<T>&& value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

// "r", "w", "rw", "none" or None (no export) to an Access.
Access AccessFromPython(const py::object& text);

struct BufferCore;

// What a Client and everything made from it share.
struct ClientState {
  explicit ClientState(std::unique_ptr<Client> c) : client(std::move(c)) {}
  ~ClientState();

  // Declared first: destroyed last, after whatever refers to it.
  std::unique_ptr<Client> client;

  // Remote handles this client opened and not closed, by id. Only with the
  // GIL held; a call that releases it keeps shared_ptrs to those it uses.
  std::unordered_map<uint64_t, std::shared_ptr<const RemoteHandle>> handles;

  // Live buffers by region id. Not owned: a BufferCore adds itself when made
  // and removes itself when destroyed.
  std::mutex buffers_mu;
  std::unordered_map<uint64_t, BufferCore*> buffers;  // under buffers_mu
};

// One rdmad::Buffer, shared by its Python Buffer and by the batches that
// run with the GIL released (Queue.run), so that neither frees it under
// the other.
struct BufferCore : std::enable_shared_from_this<BufferCore> {
  BufferCore(std::shared_ptr<ClientState> c, Buffer b);
  ~BufferCore();  // frees (owned) or unmaps (view) the buffer
  BufferCore(const BufferCore&) = delete;
  BufferCore& operator=(const BufferCore&) = delete;

  const std::shared_ptr<ClientState> client;
  Buffer buffer;
  const uint64_t id;
};

// Registers the classes of the other files in module `m`.
void DefineClient(py::module_& m);
void DefineBuffer(py::module_& m);
void DefineQueue(py::module_& m);

// Wraps a new Buffer for Python (buffer.cc).
py::object WrapBuffer(std::shared_ptr<ClientState> client, Buffer buffer);

// Opens a queue of `client` and wraps it for Python (queue.cc).
py::object OpenQueue(std::shared_ptr<ClientState> client,
                     const QueueOptions& options);

}  // namespace rdmad::python

#endif  // RDMAD_PYTHON_BINDING_H_
