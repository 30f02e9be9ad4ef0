"""Dask arrays on a real 2-worker dask.distributed cluster: only summaries reach the client.

The blocks are made on the workers (never on the client); reducing them moves only
`Summary` values, which the workers' transfer logs show, and the answer is bit-identical
to the local one. Pulling the blocks to the client is measured the same way, so the
measurement can tell the two apart.
"""

from __future__ import annotations

import os

import dask
import dask.array as da
import distributed  # in the test extra: fail, never skip
import numpy as np
import pytest
from distributed_cluster import running_cluster
from oracle import assert_matches_oracle, numbers

import normstats

BLOCKS, PER_BLOCK, SHAPE = 8, 500, (16, 16, 3)


def make_block(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(PER_BLOCK, *SHAPE), dtype=np.uint8)


def on_workers(client) -> da.Array:
    """An array whose blocks are made on the workers, alternating between them."""
    workers = sorted(client.scheduler_info()["workers"])
    # a Generator's bound method travels by value (this test module is not on the workers)
    futures = [client.submit(np.random.default_rng(seed).integers, 0, 256,
                             size=(PER_BLOCK, *SHAPE), dtype=np.uint8,
                             workers=[workers[seed % len(workers)]], pure=False)
               for seed in range(BLOCKS)]
    client.gather(client.map(len, futures))  # made; only their lengths come back
    name = "blocks-on-workers"
    graph = {(name, i, 0, 0, 0): future for i, future in enumerate(futures)}
    x = da.Array(graph, name, ((PER_BLOCK,) * BLOCKS, *((n,) for n in SHAPE)), dtype=np.uint8)
    return x.rechunk((PER_BLOCK, 8, 16, 3))  # H split: partial images per block


def sent_to(client) -> int:
    """Bytes the workers sent to clients: their outgoing transfer logs, less transfers
    between workers (those name the worker that asked; a client's gather names none)."""
    logs = client.run(lambda dask_worker: list(dask_worker.transfer_outgoing_log))
    return sum(entry["total"] for log in logs.values() for entry in log
               if entry["who"] is None)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("cluster")) as cluster:
        with distributed.Client(cluster.address, set_as_default=False, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            yield client


def test_blocks_on_workers_reduce_to_summaries_bit_identical(client):
    x = on_workers(client)
    held = client.run(lambda dask_worker: len(dask_worker.data))
    assert all(count > 0 for count in held.values())  # both workers hold blocks
    before = sent_to(client)
    stats = normstats.compute(x, scheduler=client)
    moved = sent_to(client) - before
    local = np.concatenate([make_block(seed) for seed in range(BLOCKS)])
    assert numbers(stats) == numbers(normstats.compute(local, workers=1))
    data_bytes = local.nbytes
    assert moved < data_bytes / 100, (moved, data_bytes)
    # the measure sees block transfers: pulling the array moves all of it
    before = sent_to(client)
    client.gather(client.compute(x)).sum()
    assert sent_to(client) - before >= data_bytes


def test_images_array_and_records_on_the_cluster(client, png_folder):
    root, _ = png_folder
    x = normstats.images(root, resize=8, center_crop=8)
    local = normstats.compute(root, resize=8, center_crop=8, workers=1)
    assert numbers(normstats.compute(x.map_blocks(np.copy), channels=local.channels,
                                     scheduler=client)) == numbers(local)
    rec = normstats.records(x.map_blocks(np.copy), scheduler=client)
    assert numbers(normstats.reduce(rec, channels=local.channels, scheduler=client)) == \
        numbers(local)


def test_two_lazy_reductions_in_one_graph_and_persisted(client, png_folder, rng):
    root, _ = png_folder
    (root / "dog" / "broken.png").write_bytes(b"not a png")
    small = rng.integers(0, 256, size=(40, 8, 6, 3), dtype=np.uint8)
    a = client.persist(da.from_array(small, chunks=(7, 4, 6, 1)))  # blocks on the workers
    b = normstats.images(root, resize=8, center_crop=8, task_size=5).map_blocks(np.copy)
    before = sent_to(client)
    got_a, got_b = dask.compute(normstats.reduce_lazy(a), normstats.reduce_lazy(b),
                                scheduler=client)
    assert sent_to(client) - before < small.nbytes / 10  # two summaries, not the blocks
    assert_matches_oracle(got_a, list(small), 255)
    pixels = normstats.images(root, resize=8, center_crop=8).compute(scheduler="sync")
    assert_matches_oracle(got_b, list(pixels), 255)
    assert [s.path for s in got_b.skipped] == [os.path.join("dog", "broken.png")]
    (kept,) = dask.persist(normstats.reduce_lazy(a), scheduler=client)
    assert distributed.futures_of(kept)  # the result stays on the cluster until asked for
    assert numbers(kept.compute(scheduler=client)) == numbers(got_a)
