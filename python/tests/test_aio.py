"""rdmad.aio: awaitable operations, many at once on one queue, one wake of
the event loop per batch of completions, and notifications."""

import asyncio

import numpy as np
import pytest

import rdmad
import rdmad.aio
from conftest import scaled


@pytest.fixture
def remote(daemon_a, daemon_b, unique):
    """(client of A, B's region as a numpy array, its handle on A)."""
    name = unique("aio")
    owner = daemon_b.connect()
    region = owner.allocate(1 << 20, name=name, export="rw")
    client = daemon_a.connect()
    kv = client.open_remote(f"{daemon_b.peer_address}/{name}")
    yield client, np.frombuffer(region, np.uint8), kv, owner, region


def test_1000_concurrent_awaits_on_one_queue(remote):
    client, landed, kv, _, _ = remote
    n = scaled(1000, 100)
    src = client.allocate(n * 64)
    dst = client.allocate(n * 64)
    source = np.frombuffer(src, np.uint8)
    source[:] = np.random.default_rng(3).integers(0, 256, n * 64,
                                                  dtype=np.uint8)

    async def main():
        q = rdmad.aio.open_queue(client, depth=64, completion_depth=128)
        # More awaits than the queue holds: the rest wait for room.
        moved = await asyncio.gather(*[
            q.write(src, i * 64, kv, (n - 1 - i) * 64, 64) for i in range(n)])
        assert moved == [64] * n
        writes = q.stats.wakes
        back = await asyncio.gather(*[
            q.read(dst, i * 64, kv, (n - 1 - i) * 64, 64) for i in range(n)])
        assert back == [64] * n
        return q.stats, writes

    stats, wakes_for_writes = asyncio.run(main())
    expected = source.reshape(n, 64)[::-1].reshape(-1)
    assert np.array_equal(landed[:n * 64], expected)
    assert np.array_equal(np.frombuffer(dst, np.uint8), source)
    assert stats.completions == 2 * n
    # Completions come in batches, each a single wake of the loop: far
    # fewer wakes than operations. (A wake may find nothing when the
    # completions it announces were polled already, on the way.)
    assert stats.wakes <= n // 5, (stats.wakes, stats.empty_wakes,
                                   wakes_for_writes)


def test_run_returns_completions_in_order_with_their_tags(remote):
    client, landed, kv, _, _ = remote
    n = scaled(5000, 200)
    src = client.allocate(n * 8)
    np.frombuffer(src, np.uint64)[:] = np.arange(n, dtype=np.uint64) * 3

    async def main():
        q = rdmad.aio.open_queue(client, depth=256)
        ops = rdmad.make_ops(rdmad.WRITE, src, np.arange(n) * 8, kv,
                             np.arange(n) * 8, 8, tag=np.arange(n) + 1000)
        # Two batches and single operations in flight together.
        half = n // 2
        first, second, single = await asyncio.gather(
            q.run(ops[:half]), q.run(ops[half:]),
            q.write(src, 0, kv, 0, 8))
        return first, second, single

    first, second, single = asyncio.run(main())
    assert single == 8
    done = np.concatenate([first, second])
    assert np.array_equal(done["tag"], np.arange(n) + 1000)
    assert (done["code"] == 0).all() and (done["bytes"] == 8).all()
    assert np.array_equal(landed[:n * 8].view(np.uint64),
                          np.arange(n, dtype=np.uint64) * 3)


def test_a_failed_await_raises_and_others_complete(remote):
    client, _, kv, _, _ = remote
    buf = client.allocate(4096)

    async def main():
        q = rdmad.aio.open_queue(client)
        results = await asyncio.gather(
            q.write(buf, 0, kv, 0, 64),
            q.write(buf, 0, kv, 1 << 20, 64),  # past the region's end
            q.read(buf, 0, kv, 64, 64),
            return_exceptions=True)
        ops = rdmad.make_ops(rdmad.WRITE, buf, 0, kv, [0, 1 << 20, 8], 8)
        done = await q.run(ops)
        return results, done

    results, done = asyncio.run(main())
    assert results[0] == 64 and results[2] == 64
    assert isinstance(results[1], rdmad.OutOfRange)
    assert "does not fit" in results[1].message
    assert list(done["code"]) == [0, rdmad.OutOfRange.code, 0]
    assert "does not fit" in done.messages[1]
    with pytest.raises(rdmad.OutOfRange):
        done.check()


def test_async_for_notifications(remote):
    client, _, kv, owner, region = remote
    buf = client.allocate(4096)
    count = 20

    async def main():
        inbox = rdmad.aio.open_queue(owner, notifications=True)
        sender = rdmad.aio.open_queue(client)

        async def receive():
            seen = []
            async for note in inbox.notifications():
                seen.append(note)
                if len(seen) == count:
                    return seen

        receiver = asyncio.ensure_future(receive())
        await asyncio.sleep(0)  # the receiver waits before anything comes
        for i in range(count):
            await sender.write(buf, 0, kv, i * 256, 32, immediate=500 + i)
        return await asyncio.wait_for(receiver, 10)

    notes = asyncio.run(main())
    assert [int(n["immediate"]) for n in notes] == list(range(500, 520))
    assert [int(n["offset"]) for n in notes] == [i * 256 for i in range(20)]
    assert all(int(n["region"]) == region.id and int(n["bytes"]) == 32
               for n in notes)


def test_closing_fails_what_waits(remote):
    client, _, kv, _, _ = remote
    buf = client.allocate(4096)

    async def main():
        q = rdmad.aio.open_queue(client)
        inbox = rdmad.aio.open_queue(client, notifications=True)
        waiting = asyncio.ensure_future(inbox.notifications().__anext__())
        await asyncio.sleep(0.01)
        inbox.close()
        with pytest.raises(rdmad.Cancelled):
            await waiting
        assert await q.write(buf, 0, kv, 0, 8) == 8
        q.close()
        with pytest.raises(rdmad.Cancelled):
            await q.write(buf, 0, kv, 0, 8)

    asyncio.run(main())
