"""Mooncake Transfer Engine's Python API on rdmad.

An inference server's Mooncake code runs on rdmad by changing one import::

    # from mooncake.engine import TransferEngine
    from rdmad.compat.mooncake import TransferEngine

    engine = TransferEngine()
    engine.initialize(hostname, "P2PHANDSHAKE", "rdma", "")
    port = engine.get_rpc_port()                 # tell peers HOST:port
    base = engine.allocate_managed_buffer(size)  # memory rdmad registered
    engine.batch_register_memory([base], [size])
    ret = engine.batch_transfer_sync_write(f"{peer_host}:{peer_port}",
                                           src_addrs, peer_addrs, lengths)

The argument conventions are Mooncake's: a session is ``"HOST:PORT"``
from the peer engine's hostname and ``get_rpc_port()``; remote addresses
are the peer's virtual addresses of memory it registered; 0 means success
and a negative value failure (here: minus the rdmad status code, with the
reason logged on the ``rdmad.compat.mooncake`` logger and kept in
``last_error``).

How it maps onto rdmad: each engine opens a session with its node's daemon
($RDMAD_SOCKET, else the default socket) and serves a small handshake on
its RPC port: which address ranges it registered, in which of its exported
rdmad regions, and the daemon's peer address. A sender fetches that once
per session (again when an address is not in it), opens each region once,
and translates every remote address into (region, offset) with numpy, so a
batch costs no Python work per descriptor. Transfers run on a queue per
calling thread with the GIL released.

What differs from Mooncake (docs/PYTHON.md has the whole list): rdmad
registers only memory it can share with the daemon, so memory must come
from ``allocate_managed_buffer`` (or, with rdmad.cuda, a CUDA allocation);
``register_memory`` of other memory (malloc, numpy, torch CPU tensors)
fails with a message saying so. The metadata server must be
"P2PHANDSHAKE"; protocol and device name are the daemon's choice.
"""

import enum
import itertools
import json
import logging
import os
import socket
import socketserver
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import rdmad
from rdmad import cuda

log = logging.getLogger(__name__)

_HANDSHAKE = "P2PHANDSHAKE"


class TransferOpcode(enum.IntEnum):
    READ = 0
    WRITE = 1


class TransferNotify:
    """Mooncake's notification object (name, msg). Accepted, not sent."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg


class _Ranges:
    """Address ranges, each inside one rdmad region, looked up with numpy:
    address -> (region or handle id, offset in the region)."""

    def __init__(self, rows=()):
        rows = sorted(rows)
        self.rows = rows
        self.starts = np.array([r[0] for r in rows], np.uint64)
        self.ends = np.array([r[0] + r[1] for r in rows], np.uint64)
        self.ids = np.array([r[2] for r in rows], np.uint64)
        self.offsets = np.array([r[3] for r in rows], np.uint64)

    def find(self, addresses, lengths):
        """(ids, offsets, bad): bad indexes the addresses not inside."""
        if not self.rows:
            return None, None, np.arange(len(addresses))
        i = np.searchsorted(self.starts, addresses, side="right")
        i = i.astype(np.int64) - 1
        inside = i >= 0
        j = np.where(inside, i, 0)
        inside &= addresses + lengths <= self.ends[j]
        bad = np.flatnonzero(~inside)
        return self.ids[j], addresses - self.starts[j] + self.offsets[j], bad


class _Peer:
    """What a peer engine's handshake said, and the regions opened."""

    def __init__(self, ranges, daemon):
        self.ranges = ranges
        self.daemon = daemon


class _HandshakeHandler(socketserver.StreamRequestHandler):
    def handle(self):
        try:
            request = json.loads(self.rfile.readline(4096) or b"{}")
        except ValueError:
            return
        if request.get("get") == "segment":
            reply = self.server.engine._segment()
            self.wfile.write(json.dumps(reply).encode() + b"\n")


class _HandshakeServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class TransferEngine:
    """Mooncake Transfer Engine's calls on rdmad (see the module's doc)."""

    def __init__(self):
        self._client = None
        self._lock = threading.Lock()
        # Memory this engine may move: base address -> Buffer. A managed
        # buffer is registered whole, as Mooncake's pool is, so the ranges
        # given to register_memory only have to lie inside one.
        self._managed = {}
        self._registered = {}    # address -> length, as registered
        self._local = _Ranges()
        self._peer_lock = threading.Lock()
        self._peers = {}         # session -> _Peer
        self._handles = {}       # "PEER/NAME" -> RemoteHandle
        self._queues = threading.local()
        self._server = None
        self._hostname = None
        self._id = uuid.uuid4().hex[:12]
        self._names = itertools.count()
        self._batches = {}
        self._batch_ids = itertools.count(1)
        self._pool = None
        self._timeout = float(os.environ.get("MC_TRANSFER_TIMEOUT", "30"))
        self.last_error = ""

    # -- set-up ----------------------------------------------------------

    def initialize(self, local_hostname, metadata_server, protocol,
                   device_name):
        """Connects to this node's rdmad and starts the handshake listener
        on `local_hostname` ("HOST" or "HOST:PORT"). `metadata_server`
        must be "P2PHANDSHAKE"; `protocol` ("rdma", "tcp") and
        `device_name` are left to the daemon, which picks the transport
        and the devices itself. Returns 0, or a negative value."""
        if metadata_server != _HANDSHAKE:
            return self._fail(-rdmad.Unimplemented.code,
                              f"metadata server {metadata_server!r}: rdmad's "
                              f"Mooncake engine takes {_HANDSHAKE!r} only "
                              "(peers find each other by HOST:PORT)")
        host, _, port = local_hostname.rpartition(":")
        if not host or not port.isdigit():
            host, port = local_hostname, "0"
        try:
            self._client = rdmad.Client.connect()
            self._daemon = self._client.status()["peer_address"]
            self._server = _HandshakeServer((host, int(port)),
                                            _HandshakeHandler)
        except (rdmad.Error, OSError) as e:
            return self._fail(-_code(e), f"initialize: {e}")
        self._server.engine = self
        self._hostname = host
        threading.Thread(target=self._server.serve_forever, args=(0.05,),
                         name="rdmad-mooncake-handshake", daemon=True).start()
        log.info("rdmad Mooncake engine on %s:%d (daemon %s, protocol %s "
                 "chosen by rdmad)", host, self.get_rpc_port(), self._daemon,
                 protocol)
        return 0

    def initialize_ext(self, local_hostname, metadata_server, protocol,
                       device_name, metadata_type=None):
        return self.initialize(local_hostname, metadata_server, protocol,
                               device_name)

    def get_rpc_port(self):
        """The handshake port peers name in their session ids."""
        return self._server.server_address[1] if self._server else 0

    def get_engine(self):
        return self

    def close(self):
        """Stops the listener and frees the managed buffers."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._managed.clear()
        self._registered.clear()
        self._handles.clear()

    # -- memory ----------------------------------------------------------

    def allocate_managed_buffer(self, length):
        """Registered memory of `length` bytes (an rdmad buffer this
        engine's peers may read and write); its address, or 0."""
        try:
            buf = self._client.allocate(
                length, name=f"mooncake-{self._id}-{next(self._names)}",
                export="rw")
        except rdmad.Error as e:
            self._fail(-e.code, f"allocate_managed_buffer({length}): {e}")
            return 0
        with self._lock:
            self._managed[buf.address] = buf
            self._rebuild()
        return buf.address

    def free_managed_buffer(self, buffer_addr, length):
        with self._lock:
            buf = self._managed.pop(buffer_addr, None)
            if buf is None:
                return self._fail(-rdmad.NotFound.code,
                                  f"free_managed_buffer: {buffer_addr:#x} is "
                                  "no buffer of allocate_managed_buffer")
            for address in [a for a, n in self._registered.items()
                            if buffer_addr <= a < buffer_addr + buf.size]:
                del self._registered[address]
            self._rebuild()
        try:
            buf.free()
        except rdmad.Error as e:
            return self._fail(-e.code, f"free_managed_buffer: {e}")
        return 0

    def register_memory(self, buffer_addr, capacity):
        """Registers [buffer_addr, +capacity): it must lie inside memory
        from allocate_managed_buffer. Returns 0, or a negative value."""
        return self.batch_register_memory([buffer_addr], [capacity])

    def batch_register_memory(self, buffer_addresses, capacities):
        if len(buffer_addresses) != len(capacities):
            return self._fail(-rdmad.InvalidArgument.code,
                              "batch_register_memory: as many addresses as "
                              "capacities, please")
        with self._lock:
            for address, capacity in zip(buffer_addresses, capacities):
                address, capacity = int(address), int(capacity)
                if self._containing(address, capacity) is None:
                    failed = self._register_gpu(address, capacity)
                    if failed is not None:
                        # No CUDA here: then it is no GPU memory either.
                        code = (rdmad.InvalidArgument.code
                                if isinstance(failed, cuda.NoCuda)
                                else failed.code)
                        return self._fail(
                            -code,
                            f"register_memory({address:#x}, {capacity}): "
                            "rdmad registers only memory it shares with its "
                            "daemon or a GPU's dma-buf, and this is neither "
                            f"({failed.message}): allocate it with "
                            "TransferEngine.allocate_managed_buffer(length) "
                            "(malloc'ed, numpy and torch CPU memory cannot "
                            "be registered)")
                self._registered[address] = capacity
            self._rebuild()
        return 0

    def _register_gpu(self, address, capacity):
        """Registers the CUDA allocation holding the range (rdmad.cuda);
        None, or the error that says why not."""
        try:
            reg = cuda.cache(self._client).register(
                address, capacity,
                name=f"mooncake-{self._id}-{next(self._names)}", export="rw")
        except rdmad.Error as e:
            return e
        # The whole allocation is registered (and reachable) from now on.
        self._managed[reg.base] = reg.buffer
        return None

    def unregister_memory(self, buffer_addr):
        return self.batch_unregister_memory([buffer_addr])

    def batch_unregister_memory(self, buffer_addresses):
        # Managed memory stays registered (and reachable) until it is
        # freed, as Mooncake's managed pool does.
        with self._lock:
            for address in buffer_addresses:
                if (self._registered.pop(int(address), None) is None
                        and int(address) not in self._managed):
                    return self._fail(-rdmad.NotFound.code,
                                      f"unregister_memory({int(address):#x}):"
                                      " not registered")
        return 0

    def write_bytes_to_buffer(self, dest_address, src_ptr, length):
        view = self._view(dest_address, length)
        if view is None:
            return -rdmad.InvalidArgument.code
        view[:] = bytes(src_ptr)[:length]
        return 0

    def read_bytes_from_buffer(self, source_address, length):
        view = self._view(source_address, length)
        return b"" if view is None else bytes(view)

    def get_first_buffer_address(self, segment_name):
        """The lowest registered address of the engine at `segment_name`
        ("HOST:PORT"), or 0."""
        try:
            peer = self._peer(segment_name, refresh=True)
        except (OSError, ValueError, rdmad.Error) as e:
            self._fail(-_code(e), f"get_first_buffer_address: {e}")
            return 0
        return int(peer.ranges.starts[0]) if peer.ranges.rows else 0

    # -- transfers -------------------------------------------------------

    def transfer_sync_write(self, target_hostname, buffer,
                            peer_buffer_address, length, transport_hint=""):
        return self.batch_transfer_sync(target_hostname, [buffer],
                                        [peer_buffer_address], [length],
                                        TransferOpcode.WRITE)

    def transfer_sync_read(self, target_hostname, buffer,
                           peer_buffer_address, length, transport_hint=""):
        return self.batch_transfer_sync(target_hostname, [buffer],
                                        [peer_buffer_address], [length],
                                        TransferOpcode.READ)

    def transfer_sync(self, target_hostname, buffer, peer_buffer_address,
                      length, opcode, notify=None, transport_hint=""):
        return self.batch_transfer_sync(target_hostname, [buffer],
                                        [peer_buffer_address], [length],
                                        opcode, notify)

    def batch_transfer_sync_write(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        return self.batch_transfer_sync(target_hostname, buffers,
                                        peer_buffer_addresses, lengths,
                                        TransferOpcode.WRITE)

    def batch_transfer_sync_read(self, target_hostname, buffers,
                                 peer_buffer_addresses, lengths,
                                 transport_hint=""):
        return self.batch_transfer_sync(target_hostname, buffers,
                                        peer_buffer_addresses, lengths,
                                        TransferOpcode.READ)

    def batch_transfer_sync(self, target_hostname, buffers,
                            peer_buffer_addresses, lengths, opcode,
                            notify=None, transport_hint=""):
        """Runs every transfer of the batch; 0 when all succeeded, else
        minus the status code of the first that failed."""
        try:
            ops = self._ops(target_hostname, buffers, peer_buffer_addresses,
                            lengths, opcode)
            if len(ops):
                self._queue().run(ops, timeout=self._timeout + 5)
        except (rdmad.Error, OSError, ValueError) as e:
            return self._fail(-_code(e), f"transfer to {target_hostname}: {e}")
        return 0

    def transfer_submit_write(self, target_hostname, buffer,
                              peer_buffer_address, length, transport_hint=""):
        return self.batch_transfer_async(target_hostname, [buffer],
                                         [peer_buffer_address], [length],
                                         TransferOpcode.WRITE)

    def batch_transfer_async_write(self, target_hostname, buffers,
                                   peer_buffer_addresses, lengths,
                                   transport_hint=""):
        return self.batch_transfer_async(target_hostname, buffers,
                                         peer_buffer_addresses, lengths,
                                         TransferOpcode.WRITE)

    def batch_transfer_async_read(self, target_hostname, buffers,
                                  peer_buffer_addresses, lengths,
                                  transport_hint=""):
        return self.batch_transfer_async(target_hostname, buffers,
                                         peer_buffer_addresses, lengths,
                                         TransferOpcode.READ)

    def batch_transfer_async(self, target_hostname, buffers,
                             peer_buffer_addresses, lengths, opcode,
                             transport_hint=""):
        """Starts the batch and returns its id (0 on failure) for
        transfer_check_status and get_batch_transfer_status."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=4, thread_name_prefix="rdmad-mooncake")
            batch_id = next(self._batch_ids)
            self._batches[batch_id] = self._pool.submit(
                self.batch_transfer_sync, target_hostname,
                list(buffers), list(peer_buffer_addresses), list(lengths),
                opcode)
        return batch_id

    def transfer_check_status(self, batch_id):
        """1 done, 0 still running, -1 failed (unknown ids fail)."""
        future = self._batches.get(batch_id)
        if future is None:
            return -1
        if not future.done():
            return 0
        del self._batches[batch_id]
        return 1 if future.result() == 0 else -1

    def get_batch_transfer_status(self, batch_ids):
        """Waits for the batches; 0 if all succeeded, else -1."""
        result = 0
        for batch_id in batch_ids:
            future = self._batches.pop(batch_id, None)
            if future is None or future.result() != 0:
                result = -1
        return result

    # -- internals -------------------------------------------------------

    def _fail(self, code, message):
        self.last_error = message
        log.error("%s", message)
        return code

    def _containing(self, address, length):
        """(Buffer, offset) of the managed buffer holding the range."""
        for base, buf in self._managed.items():
            if base <= address and address + length <= base + buf.size:
                return buf, address - base
        return None

    def _view(self, address, length):
        with self._lock:
            found = self._containing(int(address), int(length))
        if found is None:
            self._fail(-rdmad.InvalidArgument.code,
                       f"{int(address):#x} (+{length}) is not in a buffer of "
                       "allocate_managed_buffer")
            return None
        buf, offset = found
        try:
            return memoryview(buf)[offset:offset + length]
        except BufferError as e:  # GPU memory has no CPU mapping here
            self._fail(-rdmad.InvalidArgument.code, str(e))
            return None

    def _rebuild(self):
        self._local = _Ranges((base, buf.size, buf.id, 0)
                              for base, buf in self._managed.items())

    def _segment(self):
        """What this engine tells a peer's handshake: its memory's address
        ranges and the names of their exported regions."""
        with self._lock:
            rows = [(base, buf.size, buf.name, 0)
                    for base, buf in self._managed.items()]
        host, _, port = self._daemon.rpartition(":")
        if host in ("", "0.0.0.0", "[::]", "::"):
            host = self._hostname
        return {"engine": self._id, "daemon": f"{host}:{port}",
                "ranges": rows}

    def _peer(self, session, refresh=False):
        with self._lock:
            peer = self._peers.get(session)
        if peer is not None and not refresh:
            return peer
        with self._peer_lock:  # one handshake at a time
            return self._handshake(session)

    def _handshake(self, session):
        host, _, port = session.rpartition(":")
        with socket.create_connection((host, int(port)),
                                      timeout=self._timeout) as s:
            s.sendall(b'{"get": "segment"}\n')
            reply = json.loads(s.makefile("rb").readline())
        rows = []
        for address, length, name, offset in reply["ranges"]:
            key = f"{reply['daemon']}/{name}"
            handle = self._handles.get(key)
            if handle is None:
                handle = self._client.open_remote(key)
                self._handles[key] = handle
            rows.append((address, length, handle.id, offset))
        peer = _Peer(_Ranges(rows), reply["daemon"])
        with self._lock:
            self._peers[session] = peer
        return peer

    def _ops(self, session, buffers, peer_addresses, lengths, opcode):
        src = np.asarray(buffers, np.uint64)
        dst = np.asarray(peer_addresses, np.uint64)
        size = np.asarray(lengths, np.uint64)
        if not src.shape == dst.shape == size.shape:
            raise rdmad.InvalidArgument(
                rdmad.InvalidArgument.code,
                "as many local addresses, peer addresses and lengths, please")
        local = self._local
        local_ids, local_offsets, bad = local.find(src, size)
        if len(bad):
            raise rdmad.InvalidArgument(
                rdmad.InvalidArgument.code,
                f"local range {int(src[bad[0]]):#x} (+{int(size[bad[0]])}) is "
                "not registered memory: register_memory it, inside a buffer "
                "of allocate_managed_buffer")
        peer = self._peer(session)
        remote_ids, remote_offsets, bad = peer.ranges.find(dst, size)
        if len(bad):  # registered since the last handshake?
            peer = self._peer(session, refresh=True)
            remote_ids, remote_offsets, bad = peer.ranges.find(dst, size)
        if len(bad):
            raise rdmad.InvalidArgument(
                rdmad.InvalidArgument.code,
                f"peer range {int(dst[bad[0]]):#x} (+{int(size[bad[0]])}) is "
                f"not memory the engine at {session} registered")
        ops = rdmad.ops(len(src))
        ops["kind"] = (rdmad.WRITE if opcode == TransferOpcode.WRITE
                       else rdmad.READ)
        ops["local"] = local_ids
        ops["local_offset"] = local_offsets
        ops["remote"] = remote_ids
        ops["remote_offset"] = remote_offsets
        ops["length"] = size
        ops["tag"] = np.arange(len(src))
        ops["timeout_ms"] = int(self._timeout * 1000)
        return ops

    def _queue(self):
        """This thread's queue (an rdmad.Queue serves one thread at once)."""
        q = getattr(self._queues, "queue", None)
        if q is None:
            q = self._client.open_queue(depth=1024)
            self._queues.queue = q
        return q


def _code(error):
    """The rdmad status code of `error` (UNAVAILABLE for socket errors)."""
    if isinstance(error, rdmad.Error):
        return error.code
    if isinstance(error, OSError):
        return rdmad.Unavailable.code
    return rdmad.InvalidArgument.code
