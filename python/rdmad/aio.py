"""Awaitable rdmad queue operations on asyncio.

An ``rdmad.aio.Queue`` wraps an ``rdmad.Queue``: operations are submitted
at once (many awaits on one queue share its ring), and the queue's
wake-up eventfd sits in the event loop (``loop.add_reader``). The daemon
makes it readable only after ``arm()``, and once per batch of completions:
one wake of the loop polls every completion that is ready and resolves all
their futures. An operation whose completion is ready before its caller
awaits it costs no wake at all; one alone in flight waits up to `spin`
(30 us, as the C++ queue spins) for its completion before yielding to the
loop, which then usually needs no wake either (``spin=0``: never hold the
loop).

Example::

    q = rdmad.aio.open_queue(client)
    n = await q.write(buf, 0, kv, 0, 8)            # bytes moved
    await q.read(buf, 0, kv, 0, 8)
    done = await q.run(rdmad.make_ops(rdmad.WRITE, buf, offsets, kv,
                                      offsets, 4096))
    async for note in q.notifications():           # needs notifications=True
        print(note["region"], note["offset"], note["immediate"])

A Queue belongs to one event loop (the one running when it is first used)
and is not thread-safe, like asyncio itself.
"""

import asyncio
import collections

import numpy as np

from . import _rdmad
from ._records import COMPLETION_DTYPE, OP_DTYPE, Completions, make_ops
from .errors import Cancelled, ResourceExhausted, error_class

# An internal tag: the batch's number in the high 32 bits, the operation's
# index in it in the low 32 (a batch holds at most 2**32 operations).
_INDEX_BITS = 32
_INDEX_MASK = (1 << _INDEX_BITS) - 1
# Up to this many completions are dispatched one by one in Python; more
# with numpy.
_SMALL = 32


class _Batch:
    """The operations of one await: a future and their completions."""

    __slots__ = ("future", "results", "messages", "remaining", "user_tags",
                 "single")

    def __init__(self, future, count, user_tags, single):
        self.future = future
        self.results = None if single else np.zeros(count, COMPLETION_DTYPE)
        self.messages = {}
        self.remaining = count
        self.user_tags = user_tags
        self.single = single


class Stats:
    """What the event loop did for a queue: `wakes` (reader callbacks),
    `empty_wakes` (of those, ones that found nothing), `completions`."""

    __slots__ = ("wakes", "empty_wakes", "completions")

    def __init__(self):
        self.wakes = 0
        self.empty_wakes = 0
        self.completions = 0


class Queue:
    """Awaitable operations on an rdmad.Queue (see the module's doc)."""

    def __init__(self, queue, spin=30e-6):
        self._q = queue
        self._spin = spin
        self._capacity = queue.capacity
        self._loop = None
        self._batches = {}
        self._next_batch = 1
        self._in_flight = 0
        self._backlog = collections.deque()  # records not submitted yet
        self._reader = False
        self._notes = collections.deque()
        self._note_waiter = None
        self._closed = False
        self.stats = Stats()

    @property
    def queue(self):
        """The rdmad.Queue underneath."""
        return self._q

    # -- operations ----------------------------------------------------

    async def write(self, local, local_offset, remote, remote_offset, length,
                    *, immediate=None, timeout=None):
        """WRITEs `length` bytes of `local` (a Buffer) at `local_offset` to
        `remote` (a RemoteHandle) at `remote_offset`; returns the bytes
        moved, or raises the operation's rdmad.Error."""
        return await self._single(_rdmad.WRITE, local, local_offset, remote,
                                  remote_offset, length, immediate, timeout)

    async def read(self, local, local_offset, remote, remote_offset, length,
                   *, timeout=None):
        """READs `length` bytes of `remote` at `remote_offset` into `local`
        at `local_offset`; returns the bytes moved."""
        return await self._single(_rdmad.READ, local, local_offset, remote,
                                  remote_offset, length, None, timeout)

    async def run(self, ops):
        """Runs every operation of `ops` (records of rdmad.OP_DTYPE, any
        number: what does not fit now goes in as room comes back) and
        returns their Completions in `ops` order, with their own tags. A
        failed operation fails nothing else: check() the result."""
        ops = np.asarray(ops, OP_DTYPE)
        if ops.ndim != 1:
            raise ValueError("ops must be a 1-D array of rdmad.OP_DTYPE")
        if ops.size == 0:
            return np.zeros(0, COMPLETION_DTYPE).view(Completions)
        if ops.size > _INDEX_MASK:
            raise ValueError("at most 2**32 operations per run")
        batch_id, future = self._new_batch()
        batch = _Batch(future, ops.size, ops["tag"].copy(), single=False)
        self._batches[batch_id] = batch
        records = ops.copy()
        records["tag"] = (batch_id << _INDEX_BITS) + np.arange(
            ops.size, dtype=np.uint64)
        self._backlog.append(records)
        self._pump()
        return await future

    def notifications(self):
        """Notifications as they arrive (WRITEs with an immediate into this
        session's buffers; the queue must have been opened with
        notifications=True): an async iterator of records of
        rdmad.NOTIFICATION_DTYPE (region, offset, bytes, immediate, writer,
        writer_uid, lost)."""
        return _Notifications(self)

    def close(self):
        """Fails what still waits (rdmad.Cancelled) and closes the queue."""
        if self._closed:
            return
        self._closed = True
        if self._reader:
            self._loop.remove_reader(self._q.event_fd)
            self._reader = False
        self._fail_all(Cancelled(1, "the rdmad.aio.Queue was closed"))
        self._q.close()

    # -- internals -----------------------------------------------------

    def _new_batch(self):
        if self._closed:
            raise Cancelled(1, "the rdmad.aio.Queue was closed")
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        batch_id = self._next_batch
        self._next_batch = batch_id + 1 if batch_id < (1 << 31) else 1
        return batch_id, self._loop.create_future()

    async def _single(self, kind, local, local_offset, remote, remote_offset,
                      length, immediate, timeout):
        batch_id, future = self._new_batch()
        self._batches[batch_id] = _Batch(future, 1, None, single=True)
        tag = batch_id << _INDEX_BITS
        local_id = getattr(local, "id", local)
        remote_id = getattr(remote, "id", remote)
        timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        submitted = 0
        if not self._backlog and self._in_flight < self._capacity:
            try:
                submitted = self._q.submit_one(kind, local_id, local_offset,
                                               remote_id, remote_offset,
                                               length, tag, immediate,
                                               timeout_ms)
            except ResourceExhausted:
                submitted = 0
            except BaseException:
                del self._batches[batch_id]
                raise
        if submitted:
            self._in_flight += 1
            # Alone in flight, its completion is worth waiting for briefly
            # (GIL released): it usually comes sooner than a wake of the
            # loop would, as the C++ queue's Wait spins before it sleeps.
            if self._in_flight == 1 and self._spin > 0:
                self._q.wait(self._spin)
        else:
            record = make_ops(kind, local_id, local_offset, remote_id,
                              remote_offset, length, tag=tag,
                              immediate=immediate)
            record["timeout_ms"] = timeout_ms
            self._backlog.append(record)
        self._pump()
        return await future

    def _submit_backlog(self):
        """Submits what the backlog holds, as far as the queue has room."""
        while self._backlog and self._in_flight < self._capacity:
            records = self._backlog[0]
            room = self._capacity - self._in_flight
            try:
                n = self._q.submit(records[:room])
            except ResourceExhausted:
                return
            except Exception as e:  # noqa: BLE001 (a refused record)
                self._backlog.popleft()
                self._fail_records(records, e)
                continue
            self._in_flight += n
            if n == len(records):
                self._backlog.popleft()
            else:
                self._backlog[0] = records[n:]
                if n == 0:
                    return

    def _pump(self):
        """Submits, polls and dispatches until nothing is ready, then arms
        the eventfd if anything is still awaited."""
        if self._closed:
            return
        while True:
            self._submit_backlog()
            found = self._poll()
            if not self._waiting():
                return
            if found:
                continue
            if self._q.arm():
                self._install_reader()
                return
            # Nothing polled and nothing to arm for: the queue stopped.
            try:
                self._q.check()
            except Exception as e:  # noqa: BLE001
                self._fail_all(e)
                return
            self._loop.call_soon(self._pump)
            return

    def _waiting(self):
        return bool(self._batches) or self._note_waiter is not None

    def _install_reader(self):
        if not self._reader:
            self._loop.add_reader(self._q.event_fd, self._on_readable)
            self._reader = True

    def _on_readable(self):
        self.stats.wakes += 1
        self._q.ack()
        before = self.stats.completions + len(self._notes)
        self._pump()
        if self.stats.completions + len(self._notes) == before:
            self.stats.empty_wakes += 1

    def _poll(self):
        """Polls completions and notifications once; True if any."""
        done = self._q.poll()
        notes = (self._q.poll_notifications()
                 if self._q.notifications_ready else ())
        if len(notes):
            self._notes.extend(notes)
            waiter = self._note_waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if len(done):
            self._in_flight -= len(done)
            self.stats.completions += len(done)
            self._dispatch(done)
        return bool(len(done) or len(notes))

    def _dispatch(self, done):
        rows = done.view(np.ndarray)  # no Completions view per field read
        if len(rows) <= _SMALL:
            # A few: plain Python values are cheaper than numpy calls.
            for i, (tag, nbytes, _, code, _) in enumerate(rows.tolist()):
                batch_id = tag >> _INDEX_BITS
                batch = self._batches.get(batch_id)
                if batch is None:
                    continue  # a batch already failed or cancelled
                message = done.messages.get(i, "") if code else None
                if batch.single:
                    del self._batches[batch_id]
                    self._settle_single(batch, nbytes, code, message)
                else:
                    batch.results[tag & _INDEX_MASK] = rows[i]
                    if code:
                        batch.messages[tag & _INDEX_MASK] = message
                    batch.remaining -= 1
                    if batch.remaining == 0:
                        self._settle_batch(batch_id, batch)
            return
        batch_ids = rows["tag"] >> np.uint64(_INDEX_BITS)
        for batch_id in np.unique(batch_ids):
            where = np.flatnonzero(batch_ids == batch_id)
            self._complete(int(batch_id), rows, done.messages, where)

    def _complete(self, batch_id, rows, messages, where):
        batch = self._batches.get(batch_id)
        if batch is None:
            return  # a batch already failed or cancelled
        if batch.single:
            del self._batches[batch_id]
            row = int(where[0])
            code = int(rows["code"][row])
            self._settle_single(batch, int(rows["bytes"][row]), code,
                                messages.get(row, "") if code else None)
            return
        mine = rows[where]
        indices = mine["tag"] & np.uint64(_INDEX_MASK)
        batch.results[indices] = mine
        if messages:
            for i, row in zip(indices, where):
                message = messages.get(int(row))
                if message is not None:
                    batch.messages[int(i)] = message
        batch.remaining -= len(mine)
        if batch.remaining == 0:
            self._settle_batch(batch_id, batch)

    @staticmethod
    def _settle_single(batch, nbytes, code, message):
        if batch.future.done():
            return
        if code == 0:
            batch.future.set_result(nbytes)
        else:
            batch.future.set_exception(error_class(code)(code, message))

    def _settle_batch(self, batch_id, batch):
        del self._batches[batch_id]
        results = batch.results.view(Completions)
        results["tag"] = batch.user_tags
        results.messages = batch.messages
        if not batch.future.done():
            batch.future.set_result(results)

    def _fail_records(self, records, error):
        for batch_id in np.unique(records["tag"] >> _INDEX_BITS):
            batch = self._batches.pop(int(batch_id), None)
            if batch is not None and not batch.future.done():
                batch.future.set_exception(error)

    def _fail_all(self, error):
        batches, self._batches = self._batches, {}
        self._backlog.clear()
        for batch in batches.values():
            if not batch.future.done():
                batch.future.set_exception(error)
        waiter = self._note_waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)


class _Notifications:
    """The async iterator of Queue.notifications()."""

    def __init__(self, queue):
        self._queue = queue

    def __aiter__(self):
        return self

    async def __anext__(self):
        q = self._queue
        while not q._notes:
            if q._closed:
                raise StopAsyncIteration
            if q._loop is None:
                q._loop = asyncio.get_running_loop()
            q._note_waiter = q._loop.create_future()
            try:
                q._pump()
                if not q._notes:
                    await q._note_waiter
            finally:
                q._note_waiter = None
        return q._notes.popleft()


def open_queue(client, spin=30e-6, **options):
    """Opens a queue of `client` (rdmad.Client.open_queue's options) for
    asyncio. `spin`: how long (seconds) an operation alone in flight waits
    for its completion before its coroutine yields to the loop; 0 never
    holds the loop."""
    if spin > 0:
        options.setdefault("spin", spin)
    return Queue(client.open_queue(**options), spin=spin)
