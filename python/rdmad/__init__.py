"""rdmad from Python: registered buffers, shared-memory queues and
one-sided RDMA WRITE/READ through the node's rdmad daemon.

Example::

    import numpy as np
    import rdmad

    client = rdmad.Client.connect()          # $RDMAD_SOCKET, else the default
    buf = client.allocate(1 << 20)           # registered, shared memory
    data = np.frombuffer(buf, np.uint8)      # the same memory, no copy
    data[:4096] = 7
    kv = client.open_remote("10.0.0.2:7471/kv")
    q = client.open_queue()
    done = q.run(rdmad.make_ops(rdmad.WRITE, buf, 0, kv, 0, 4096))
    print(done["bytes"])                     # [4096]

``rdmad.aio`` awaits the same queues on asyncio;
``rdmad.compat.mooncake`` offers Mooncake Transfer Engine's calls.
"""

from . import errors
from .errors import (Aborted, AlreadyExists, BufferInUse, Cancelled,
                     DataLoss, DeadlineExceeded, Error, FailedPrecondition,
                     Internal, InvalidArgument, NotFound, OutOfRange,
                     PermissionDenied, ResourceExhausted, Unauthenticated,
                     Unavailable, Unimplemented, Unknown)
from ._rdmad import (FLAG_IMMEDIATE, READ, WRITE, Buffer, Client, Queue,
                     RemoteHandle, __version__, default_socket)
from ._records import (COMPLETION_DTYPE, NOTIFICATION_DTYPE, OP_DTYPE,
                       TRANSPORTS, Completions, make_ops, ops)

__all__ = [
    "Aborted", "AlreadyExists", "Buffer", "BufferInUse", "Cancelled",
    "Client", "COMPLETION_DTYPE", "Completions", "DataLoss",
    "DeadlineExceeded", "Error", "FailedPrecondition", "FLAG_IMMEDIATE",
    "Internal", "InvalidArgument", "NOTIFICATION_DTYPE", "NotFound",
    "OP_DTYPE", "OutOfRange", "PermissionDenied", "Queue", "READ",
    "RemoteHandle", "ResourceExhausted", "TRANSPORTS", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown", "WRITE", "default_socket",
    "errors", "make_ops", "ops",
]
