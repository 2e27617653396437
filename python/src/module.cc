// rdmad._rdmad: the extension module (see binding.h). This file: the
// module itself, status-to-exception conversion and the record layouts.
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "binding.h"
#include "records.h"

namespace rdmad::python {
namespace {

using Field = std::tuple<const char*, const char*, size_t>;

// (name, numpy format, offset) of each field of a record.
py::list Layout(const std::vector<Field>& fields) {
  py::list out;
  for (const auto& [name, format, offset] : fields) {
    out.append(py::make_tuple(name, format, offset));
  }
  return out;
}

}  // namespace

void ThrowStatus(const absl::Status& status) {
  // rdmad.errors maps each code to its class; looked up at the first error
  // (the package imports it before this module).
  static py::object* by_code = nullptr;
  if (by_code == nullptr) {
    by_code =
        new py::object(py::module_::import("rdmad.errors").attr("_by_code"));
  }
  py::object error = (*by_code)(static_cast<int>(status.code()),
                                std::string(status.message()));
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                  error.ptr());
  throw py::error_already_set();
}

Access AccessFromPython(const py::object& text) {
  if (text.is_none()) return Access::kNone;
  return Unwrap(ParseAccess(py::cast<std::string>(text)));
}

PYBIND11_MODULE(_rdmad, m) {
  m.doc() = "rdmad client library binding (use the rdmad package)";
  m.attr("__version__") = RDMAD_VERSION;
  m.attr("WRITE") = kKindWrite;
  m.attr("READ") = kKindRead;
  m.attr("FLAG_IMMEDIATE") = kFlagImmediate;
  m.attr("OP_LAYOUT") = Layout({
      {"kind", "u1", offsetof(OpRecord, kind)},
      {"flags", "u1", offsetof(OpRecord, flags)},
      {"immediate", "u4", offsetof(OpRecord, immediate)},
      {"tag", "u8", offsetof(OpRecord, tag)},
      {"local", "u8", offsetof(OpRecord, local)},
      {"local_offset", "u8", offsetof(OpRecord, local_offset)},
      {"remote", "u8", offsetof(OpRecord, remote)},
      {"remote_offset", "u8", offsetof(OpRecord, remote_offset)},
      {"length", "u8", offsetof(OpRecord, length)},
      {"timeout_ms", "u4", offsetof(OpRecord, timeout_ms)},
  });
  m.attr("OP_SIZE") = sizeof(OpRecord);
  m.attr("COMPLETION_LAYOUT") = Layout({
      {"tag", "u8", offsetof(CompletionRecord, tag)},
      {"bytes", "u8", offsetof(CompletionRecord, bytes)},
      {"daemon_ns", "u8", offsetof(CompletionRecord, daemon_ns)},
      {"code", "i4", offsetof(CompletionRecord, code)},
      {"transport", "u1", offsetof(CompletionRecord, transport)},
  });
  m.attr("COMPLETION_SIZE") = sizeof(CompletionRecord);
  m.attr("NOTIFICATION_LAYOUT") = Layout({
      {"region", "u8", offsetof(NotificationRecord, region)},
      {"offset", "u8", offsetof(NotificationRecord, offset)},
      {"bytes", "u8", offsetof(NotificationRecord, bytes)},
      {"lost", "u8", offsetof(NotificationRecord, lost)},
      {"immediate", "u4", offsetof(NotificationRecord, immediate)},
      {"writer_uid", "i8", offsetof(NotificationRecord, writer_uid)},
      {"writer", "S64", offsetof(NotificationRecord, writer)},
  });
  m.attr("NOTIFICATION_SIZE") = sizeof(NotificationRecord);
  m.def("default_socket", &DefaultSocketPath,
        "The daemon's socket when none is given: $RDMAD_SOCKET, else "
        "/run/rdmad/rdmad.sock.");
  // For the tests of the exception classes: raises what a status of
  // `code` with `message` raises anywhere in this module.
  m.def("_raise_status", [](int code, const std::string& message) {
    if (code == 0) throw py::value_error("code 0 is OK: nothing to raise");
    ThrowStatus(absl::Status(static_cast<absl::StatusCode>(code), message));
  });
  DefineClient(m);
  DefineBuffer(m);
  DefineQueue(m);
}

}  // namespace rdmad::python
