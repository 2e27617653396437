"""The exceptions rdmad raises: one class per status code of the daemon.

Every failure of the client library or the daemon arrives as an
``rdmad.Error`` subclass named after its status code (abseil's canonical
codes, as gRPC uses them), carrying the daemon's message::

    try:
        client.map_region("kv")
    except rdmad.NotFound as e:
        print(e.code, e.message)   # 5, "no region named 'kv' ..."

``rdmad.BufferInUse`` is the ``FailedPrecondition`` of freeing a Buffer that
live views (memoryview, numpy, torch) or a running batch still use; it is a
``BufferError`` too, as Python's mmap raises for the same mistake.
"""


class Error(Exception):
    """A failed rdmad call: ``code`` (int), ``code_name`` and ``message``."""

    code = 2
    code_name = "UNKNOWN"

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self):
        return f"{self.code_name}: {self.message}"


class Cancelled(Error):
    code, code_name = 1, "CANCELLED"


class Unknown(Error):
    code, code_name = 2, "UNKNOWN"


class InvalidArgument(Error):
    code, code_name = 3, "INVALID_ARGUMENT"


class DeadlineExceeded(Error):
    code, code_name = 4, "DEADLINE_EXCEEDED"


class NotFound(Error):
    code, code_name = 5, "NOT_FOUND"


class AlreadyExists(Error):
    code, code_name = 6, "ALREADY_EXISTS"


class PermissionDenied(Error):
    code, code_name = 7, "PERMISSION_DENIED"


class ResourceExhausted(Error):
    code, code_name = 8, "RESOURCE_EXHAUSTED"


class FailedPrecondition(Error):
    code, code_name = 9, "FAILED_PRECONDITION"


class Aborted(Error):
    code, code_name = 10, "ABORTED"


class OutOfRange(Error):
    code, code_name = 11, "OUT_OF_RANGE"


class Unimplemented(Error):
    code, code_name = 12, "UNIMPLEMENTED"


class Internal(Error):
    code, code_name = 13, "INTERNAL"


class Unavailable(Error):
    code, code_name = 14, "UNAVAILABLE"


class DataLoss(Error):
    code, code_name = 15, "DATA_LOSS"


class Unauthenticated(Error):
    code, code_name = 16, "UNAUTHENTICATED"


class BufferInUse(FailedPrecondition, BufferError):
    """Freeing a Buffer that views or a running batch still use."""


_CLASSES = (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
            AlreadyExists, PermissionDenied, ResourceExhausted,
            FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
            Unavailable, DataLoss, Unauthenticated)
_BY_CODE = {cls.code: cls for cls in _CLASSES}


def _by_code(code, message):
    """The exception for status `code` (the extension module raises it)."""
    return _BY_CODE.get(code, Unknown)(code, message)


def error_class(code):
    """The rdmad.Error subclass of status `code` (Unknown for codes unknown)."""
    return _BY_CODE.get(code, Unknown)
