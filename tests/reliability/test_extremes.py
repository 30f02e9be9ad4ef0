"""Reliability matrix, part 5: dataset extremes, the cache, the local pool (docs/reliability.md)."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest
from oracle import assert_matches_oracle
from reliability_helpers import replace_file_decoder

import normstats

fw = importlib.import_module("format_writers")



@pytest.mark.slow
def test_uint16_at_its_maximum_past_int64_end_to_end():
    """2.16e9 pixels at 65535: the pooled sum of squares passes 2**63 and stays exact
    (a zero-stride array, so no memory is needed for it)."""
    images = np.broadcast_to(np.uint16(65535), (33_000, 256, 256, 1))
    stats = normstats.compute(images)
    assert stats.pixels_per_channel * 65535**2 > 2**63
    assert stats.mean == (1.0,) and stats.std == (0.0,) and stats.per_image_std == (0.0,)
    assert stats.min == stats.max == (1.0,) and stats.images == 33_000


def test_a_cache_chunk_changed_but_well_formed_is_caught_by_the_digest(png_folder, tmp_path):
    """Unlike a truncated or bit-flipped chunk, which zstd already refuses, a chunk
    rewritten through zarr (one record value changed, compressed again) reads back
    without error: only the segment's SHA-256 digest can tell, and the files are decoded
    again."""
    import zarr

    root, images = png_folder
    cache = tmp_path / "cache"
    first = normstats.compute(root, cache=cache, workers=1)
    segments = [p for p in cache.glob("*/segments/*") if p.is_dir()]
    assert len(segments) == 1
    sums = zarr.open_group(segments[0], mode="r+")["sums"]
    changed = np.asarray(sums[...])
    changed[0, 0] += 1  # one image's red sum, off by one: well-formed and plausible
    sums[...] = changed
    assert np.array_equal(zarr.open_group(segments[0], mode="r")["sums"][...], changed)
    again = normstats.compute(root, cache=cache, workers=1)
    assert (again.images_decoded, again.images_cached) == (len(images), 0)
    assert again == first
    assert_matches_oracle(again, images, 255)


def test_a_local_worker_killed_once_costs_a_rerun_not_the_run(png_folder, monkeypatch, capfd):
    """When a forked pool worker dies, the run goes on on a local Dask cluster, which
    retries tasks and isolates a file that kills every worker (that case, a file crashing
    every worker, is tests/engine/test_distributed.py's poisoned-image test). The poisoned decoder
    here kills forked pool workers only, so on the cluster every file decodes: exact."""
    import normstats.sources.folder as folder_module

    root, images = png_folder
    parent, real = os.getpid(), folder_module.decode_file

    def poisoned(path, policy, name=None, scratch=None, **options):
        if path.endswith("013.png") and os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return real(path, policy, name, scratch, **options)

    replace_file_decoder(monkeypatch, poisoned)
    stats = normstats.compute(root, workers=2, task_size=4, scheduler="processes", cache=False)
    assert "running again on a local Dask cluster" in capfd.readouterr().err
    assert stats.skipped == ()
    assert_matches_oracle(stats, images, 255)
    # the rerun's temporary Dask setting left the caller's Dask configuration whole
    import dask

    assert dask.config.get("distributed.comm.timeouts.connect")
    assert dask.config.get("distributed.scheduler.allowed-failures") != 1


def test_the_process_pool_never_thaws_what_the_caller_froze(png_folder):
    """gc.freeze() keeps the parent's objects out of the workers' collections during a
    pool run; gc.unfreeze() afterwards would thaw every frozen object, the caller's too.
    A frozen reference cycle is never collected: once thawed, gc.collect() frees it."""
    import gc
    import weakref

    class Node:
        pass

    root, images = png_folder
    cycle = Node()
    cycle.self = cycle
    alive = weakref.ref(cycle)
    gc.freeze()  # the caller's own frozen objects (a server's preloaded state, say)
    del cycle
    try:
        stats = normstats.compute(root, scheduler="processes", workers=2, task_size=4,
                                  cache=False)
        gc.collect()
        assert alive() is not None  # still frozen
    finally:
        gc.unfreeze()
    gc.collect()
    assert alive() is None  # the check above could fail: thawed, the cycle is collected
    assert_matches_oracle(stats, images, 255)
    assert gc.get_freeze_count() == 0


def test_float_values_too_large_to_square_are_named_not_a_traceback():
    """|x| near 1e200 overflows x² in float64: the image is skipped with the reason."""
    images = np.full((3, 2, 2, 1), 1.0)
    images[1] = 1e200
    stats = normstats.compute(images)
    assert stats.images == 2 and [s.path for s in stats.skipped] == ["array[1]"]
    assert "squares overflow float64" in stats.skipped[0].reason
    assert stats.mean == (1.0,)
    table = np.array([[1e200, 1.0], [3.0, 2.0]])
    vectors = normstats.compute(table)
    assert vectors.counts == (1, 2) and vectors.mean == (3.0, 1.5)
