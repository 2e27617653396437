"""The record arrays of rdmad.Queue: operations in, completions and
notifications out. The layouts come from the extension module (declared
once, in python/src/records.h)."""

import numpy as np

from . import _rdmad
from .errors import error_class


def _dtype(layout, size):
    names, formats, offsets = zip(*layout)
    return np.dtype({"names": list(names), "formats": list(formats),
                     "offsets": list(offsets), "itemsize": size})


#: One operation (64 bytes): kind (WRITE or READ), flags (FLAG_IMMEDIATE
#: when `immediate` is set), immediate, tag, local (Buffer.id),
#: local_offset, remote (RemoteHandle.id), remote_offset, length,
#: timeout_ms (0: the queue's default).
OP_DTYPE = _dtype(_rdmad.OP_LAYOUT, _rdmad.OP_SIZE)
#: One completion: tag, bytes, daemon_ns, code (0: OK; else a status code,
#: see rdmad.errors), transport (TRANSPORTS[transport]).
COMPLETION_DTYPE = _dtype(_rdmad.COMPLETION_LAYOUT, _rdmad.COMPLETION_SIZE)
#: One notification: region (Buffer.id), offset, bytes, immediate, writer
#: (the writing daemon's Peer address, bytes) and writer_uid (a local
#: writer's uid; -1 for a remote one). A record with lost > 0 says that
#: many notifications were lost there (the daemon's backlog was full).
NOTIFICATION_DTYPE = _dtype(_rdmad.NOTIFICATION_LAYOUT,
                            _rdmad.NOTIFICATION_SIZE)
#: Names of Completions' `transport` values.
TRANSPORTS = ("-", "verbs", "tcp", "local")


class Completions(np.ndarray):
    """Completions of queue operations: a numpy array of COMPLETION_DTYPE
    (tag, bytes, daemon_ns, code, transport) as Queue.poll and Queue.run
    return it. ``messages`` maps the index of each failed one (code != 0)
    to the daemon's message; ``check()`` raises the first failure."""

    def __array_finalize__(self, obj):
        # Slices and copies share no indices with the original: only the
        # array poll() made carries the messages.
        self.messages = {}

    @property
    def ok(self):
        """True when every one succeeded."""
        return not np.any(self["code"])

    def error(self, i):
        """The exception of completion `i` (None if it succeeded)."""
        code = int(self["code"][i])
        if code == 0:
            return None
        return error_class(code)(code, self.messages.get(i, ""))

    def check(self):
        """Raises the exception of the first failed completion, if any."""
        failed = np.flatnonzero(self["code"])
        if failed.size:
            raise self.error(int(failed[0]))


def _completions(n):
    return np.zeros(n, COMPLETION_DTYPE).view(Completions)


def _notifications(n):
    return np.zeros(n, NOTIFICATION_DTYPE)


def ops(n):
    """An array of `n` zeroed operation records (kind 0 is invalid: set it)."""
    return np.zeros(n, OP_DTYPE)


def make_ops(kind, local, local_offset, remote, remote_offset, length,
             tag=None, immediate=None, timeout=None):
    """Operation records from columns (scalars or arrays, broadcast).

    `kind` is rdmad.WRITE or rdmad.READ, `local` a Buffer (or its id),
    `remote` a RemoteHandle (or its id); `tag` defaults to 0..n-1,
    `immediate` (WRITE only) sets FLAG_IMMEDIATE, `timeout` is in seconds.
    """
    local = getattr(local, "id", local)
    remote = getattr(remote, "id", remote)
    given = [c for c in (tag, immediate, timeout) if c is not None]
    columns = np.broadcast(kind, local, local_offset, remote, remote_offset,
                           length, *given)
    out = np.zeros(columns.size if columns.shape else 1, OP_DTYPE)
    out["kind"] = kind
    out["local"] = local
    out["local_offset"] = local_offset
    out["remote"] = remote
    out["remote_offset"] = remote_offset
    out["length"] = length
    out["tag"] = np.arange(out.size) if tag is None else tag
    if immediate is not None:
        out["immediate"] = immediate
        out["flags"] |= _rdmad.FLAG_IMMEDIATE
    if timeout is not None:
        out["timeout_ms"] = np.ceil(np.asarray(timeout) * 1000)
    return out
