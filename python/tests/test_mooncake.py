"""rdmad.compat.mooncake.TransferEngine driven the way vLLM's Mooncake
connector drives Mooncake's: two engines (prefill on daemon A, decode on
daemon B) with P2P handshakes, KV layers registered in one batch, blocks
written from a thread pool with batch_transfer_sync_write, read back, and
an asynchronous batch with its status."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import rdmad
from rdmad.compat.mooncake import TransferEngine, TransferOpcode

LAYERS = 4
BLOCKS = 32
BLOCK_LEN = 4096


def engine_on(daemon, monkeypatch):
    monkeypatch.setenv("RDMAD_SOCKET", daemon.socket)
    engine = TransferEngine()
    assert engine.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", "") == 0
    assert engine.get_rpc_port() > 0
    return engine


def kv_layers(engine):
    """vLLM's register_kv_caches: one region per layer, registered at once."""
    bases = [engine.allocate_managed_buffer(BLOCKS * BLOCK_LEN)
             for _ in range(LAYERS)]
    assert all(bases)
    assert engine.batch_register_memory(bases,
                                        [BLOCKS * BLOCK_LEN] * LAYERS) == 0
    return bases


def group_contiguous(local_ids, remote_ids):
    """vLLM's grouping: runs where both sides' block ids are consecutive."""
    groups = [[(local_ids[0], remote_ids[0])]]
    for pair in zip(local_ids[1:], remote_ids[1:]):
        last = groups[-1][-1]
        if pair == (last[0] + 1, last[1] + 1):
            groups[-1].append(pair)
        else:
            groups.append([pair])
    return groups


def descriptors(local_bases, remote_bases, local_ids, remote_ids):
    src, dst, lengths = [], [], []
    for local_base, remote_base in zip(local_bases, remote_bases):
        for group in group_contiguous(local_ids, remote_ids):
            src.append(local_base + group[0][0] * BLOCK_LEN)
            dst.append(remote_base + group[0][1] * BLOCK_LEN)
            lengths.append(BLOCK_LEN * len(group))
    return src, dst, lengths


@pytest.fixture
def engines(daemon_a, daemon_b, monkeypatch):
    prefill = engine_on(daemon_a, monkeypatch)
    decode = engine_on(daemon_b, monkeypatch)
    yield prefill, decode
    prefill.close()
    decode.close()


def test_kv_blocks_the_vllm_way(engines):
    prefill, decode = engines
    prefill_layers = kv_layers(prefill)
    decode_layers = kv_layers(decode)
    rng = np.random.default_rng(11)
    content = rng.integers(0, 256, (LAYERS, BLOCKS * BLOCK_LEN),
                           dtype=np.uint8)
    for layer, base in enumerate(prefill_layers):
        assert prefill.write_bytes_to_buffer(
            base, content[layer].tobytes(), BLOCKS * BLOCK_LEN) == 0

    # Four requests, each a decode-side block list the prefill worker
    # writes from its sender pool, as vLLM's _send_blocks does.
    session = f"127.0.0.1:{decode.get_rpc_port()}"
    requests = [
        ([0, 1, 2, 3], [10, 11, 12, 13]),
        ([4, 5, 9], [0, 1, 2]),
        ([20, 21, 22, 23, 24], [27, 28, 3, 4, 5]),
        ([30, 31], [30, 31]),
    ]

    def send(request):
        src, dst, lengths = descriptors(prefill_layers, decode_layers,
                                        *request)
        return prefill.batch_transfer_sync_write(session, src, dst, lengths)

    with ThreadPoolExecutor(max_workers=4) as senders:
        assert list(senders.map(send, requests)) == [0, 0, 0, 0]

    for layer, base in enumerate(decode_layers):
        for local_ids, remote_ids in requests:
            for local_id, remote_id in zip(local_ids, remote_ids):
                got = decode.read_bytes_from_buffer(
                    base + remote_id * BLOCK_LEN, BLOCK_LEN)
                want = content[layer][local_id * BLOCK_LEN:
                                      (local_id + 1) * BLOCK_LEN]
                assert got == want.tobytes(), (layer, local_id, remote_id)

    # Read the decode side's blocks back into a scratch buffer.
    scratch = prefill.allocate_managed_buffer(LAYERS * BLOCK_LEN * 4)
    src = [scratch + i * BLOCK_LEN for i in range(LAYERS * 4)]
    dst = [decode_layers[layer] + block * BLOCK_LEN
           for layer in range(LAYERS) for block in (10, 11, 12, 13)]
    assert prefill.batch_transfer_sync_read(session, src, dst,
                                            [BLOCK_LEN] * len(src)) == 0
    back = np.frombuffer(prefill.read_bytes_from_buffer(
        scratch, LAYERS * BLOCK_LEN * 4), np.uint8)
    want = np.concatenate([content[layer][:4 * BLOCK_LEN]
                           for layer in range(LAYERS)])
    assert np.array_equal(back, want)
    assert prefill.free_managed_buffer(scratch, LAYERS * BLOCK_LEN * 4) == 0


def test_async_batches_and_their_status(engines):
    prefill, decode = engines
    local = prefill.allocate_managed_buffer(1 << 20)
    remote = decode.allocate_managed_buffer(1 << 20)
    assert prefill.write_bytes_to_buffer(local, bytes(range(256)) * 4096,
                                         1 << 20) == 0
    session = f"127.0.0.1:{decode.get_rpc_port()}"
    ids = [prefill.batch_transfer_async_write(
        session, [local + i * 65536], [remote + i * 65536], [65536])
        for i in range(16)]
    assert all(ids) and len(set(ids)) == 16
    assert prefill.get_batch_transfer_status(ids) == 0
    assert decode.read_bytes_from_buffer(remote, 1 << 20) == \
        bytes(range(256)) * 4096

    one = prefill.transfer_submit_write(session, local, remote + 64, 64)
    while (state := prefill.transfer_check_status(one)) == 0:
        pass
    assert state == 1
    assert prefill.transfer_sync(session, local, remote, 8,
                                 TransferOpcode.READ) == 0

    # A failed batch reports -1, and why.
    bad = prefill.batch_transfer_async_read(session, [local],
                                            [remote + (1 << 20)], [64])
    assert prefill.get_batch_transfer_status([bad]) == -1
    assert "not memory the engine" in prefill.last_error


def test_what_rdmad_cannot_register_names_allocate_managed_buffer(engines):
    prefill, _ = engines
    plain = np.zeros(4096, np.uint8)
    code = prefill.register_memory(plain.ctypes.data, plain.nbytes)
    assert code == -rdmad.InvalidArgument.code
    assert "allocate_managed_buffer" in prefill.last_error
    base = prefill.allocate_managed_buffer(8192)
    assert prefill.register_memory(base + 4096, 4096) == 0
    assert prefill.register_memory(base + 4096, 8192) < 0  # past its end
    assert prefill.unregister_memory(base + 4096) == 0


def test_only_p2p_handshake(daemon_a, monkeypatch):
    monkeypatch.setenv("RDMAD_SOCKET", daemon_a.socket)
    engine = TransferEngine()
    assert engine.initialize("127.0.0.1", "etcd://127.0.0.1:2379", "rdma",
                             "") == -rdmad.Unimplemented.code
    assert "P2PHANDSHAKE" in engine.last_error
