"""`normstats.compute` of Dask arrays: the exact reduction over blocks, any chunking."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.delayed import Delayed
from oracle import assert_matches_oracle, numbers

import normstats
from normstats.errors import InvalidOptionError

CHUNKINGS = [(7, 8, 6, 3), (7, 3, 2, 1), (40, 1, 1, 3), (1, 8, 6, 1), (13, 5, 4, 2),
             (40, 8, 6, 3)]


@pytest.fixture
def stack(rng: np.random.Generator) -> np.ndarray:
    # per-image brightness, so per-image and pooled std differ
    base = rng.integers(0, 200, size=(40, 1, 1, 1))
    return (base + rng.integers(0, 56, size=(40, 8, 6, 3))).astype(np.uint8)


@pytest.mark.parametrize("chunks", CHUNKINGS)
def test_any_chunking_is_bit_identical_to_the_exact_oracle(stack, chunks):
    stats = normstats.compute(da.from_array(stack, chunks=chunks), scheduler="sync")
    assert_matches_oracle(stats, list(stack), 255)
    assert numbers(stats) == numbers(normstats.compute(stack, workers=1))


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.bool_])
def test_other_integer_dtypes_rechunked_along_h_w_c(rng, dtype):
    info = np.iinfo(np.uint8 if dtype == np.bool_ else dtype)
    x = rng.integers(info.min, info.max, size=(9, 5, 4, 3), endpoint=True).astype(dtype)
    expected = numbers(normstats.compute(x, workers=1))
    for chunks in ((2, 2, 3, 1), (9, 5, 4, 3), (4, 1, 4, 2)):
        got = normstats.compute(da.from_array(x, chunks=chunks), scheduler="threads", workers=2)
        assert numbers(got) == expected, chunks


def test_rechunked_graph_on_processes_and_threads_agree(stack):
    x = da.from_array(stack, chunks=(10, 8, 6, 3)).rechunk((6, 4, 3, 1))
    local = numbers(normstats.compute(stack, workers=1))
    assert numbers(normstats.compute(x, scheduler="processes", workers=2)) == local
    assert numbers(normstats.compute(x, scheduler="threads", workers=2)) == local


def test_dask_default_scheduler_from_config_is_used(stack):
    x = da.from_array(stack, chunks=(5, 8, 6, 3))
    with dask.config.set(scheduler="sync"):
        assert normstats.compute(x).images == 40


def test_float_chunks_along_n_and_c_are_bit_identical_and_h_w_close(rng):
    x = rng.normal(3.0, 2.0, size=(12, 6, 5, 3)) + rng.normal(0, 5, size=(12, 1, 1, 1))
    exact = normstats.compute(x, workers=1)
    same = normstats.compute(da.from_array(x, chunks=(5, 6, 5, 1)), scheduler="sync")
    assert numbers(same) == numbers(exact)
    split = normstats.compute(da.from_array(x, chunks=(5, 2, 3, 3)), scheduler="sync")
    for name in ("mean", "std", "per_image_std", "per_image_std_ddof1", "min", "max"):
        np.testing.assert_allclose(getattr(split, name), getattr(exact, name), rtol=1e-13)


def test_non_finite_images_are_skipped_and_named_as_in_memory(rng):
    x = rng.normal(size=(10, 4, 4, 2))
    x[3, 2, 1, 0] = np.nan
    x[7, 0, 0, 1] = np.inf
    expected = normstats.compute(x, workers=1)
    got = normstats.compute(da.from_array(x, chunks=(4, 2, 4, 1)), scheduler="sync")
    assert [s.path for s in got.skipped] == ["array[3]", "array[7]"]
    assert got.skipped == expected.skipped
    assert got.images == 8


def test_unknown_chunk_sizes_are_reduced(stack):
    x = da.from_array(stack, chunks=(10, 8, 6, 3))
    kept = x[da.from_array(np.arange(40) % 3 != 0, chunks=10)]
    assert np.isnan(kept.chunks[0][0])
    got = normstats.compute(kept, scheduler="sync")
    assert numbers(got) == numbers(normstats.compute(stack[np.arange(40) % 3 != 0], workers=1))


def test_layouts_and_xarray_style_objects(stack):
    nchw = da.from_array(np.ascontiguousarray(stack.transpose(0, 3, 1, 2)), chunks=(8, 1, 4, 6))
    assert numbers(normstats.compute(nchw, layout="NCHW")) == \
        numbers(normstats.compute(stack, workers=1))
    grey = da.from_array(stack[..., 0], chunks=(9, 4, 6))
    assert normstats.compute(grey).channels == ("L",)

    class DataArray:  # what compute needs of xarray: dims and a Dask .data
        dims = ("n", "y", "x", "c")
        data = da.from_array(stack, chunks=(9, 8, 6, 3))

    assert numbers(normstats.compute(DataArray())) == numbers(normstats.compute(stack, workers=1))


def test_bad_dtypes_and_layouts_are_one_line_errors():
    with pytest.raises(InvalidOptionError, match="int32"):
        normstats.compute(da.zeros((4, 2, 2, 3), dtype=np.int32))
    with pytest.raises(InvalidOptionError, match="layout"):
        normstats.compute(da.zeros((4, 2, 2, 3), dtype=np.uint8), layout="NCHWX")


def test_each_block_is_made_once_and_reduced_in_the_graph(stack):
    """The chunk step consumes each block once, inside the array's own graph (what travels
    on a cluster is measured in tests/engine/dask/test_distributed.py)."""
    x = da.from_array(stack, chunks=(10, 4, 6, 3))
    seen = []

    def mark(block):
        seen.append(block.shape)
        return block

    y = x.map_blocks(mark, meta=np.empty((0, 0, 0, 0), np.uint8))
    normstats.compute(y, scheduler="sync")
    assert sorted(seen) == [(10, 4, 6, 3)] * 8


def test_reduce_lazy_reduces_two_arrays_in_one_graph_and_persists(stack, rng):
    floats = rng.normal(1e4, 1.0, size=(9, 4, 5, 2))  # badly conditioned: float64 moments
    a = da.from_array(stack, chunks=(7, 3, 2, 1))
    b = da.from_array(floats, chunks=(4, 4, 5, 2))
    lazy = normstats.reduce_lazy(a), normstats.reduce_lazy(b, layout="NHWC", channels=("x", "y"))
    assert all(isinstance(d, Delayed) for d in lazy)
    got_a, got_b = dask.compute(*lazy, scheduler="threads", num_workers=2)
    assert_matches_oracle(got_a, list(stack), 255)
    assert numbers(got_a) == numbers(normstats.compute(stack, workers=1))
    assert_matches_oracle(got_b, list(floats), 1)
    assert got_b.channels == ("x", "y")
    (kept,) = dask.persist(lazy[0], scheduler="sync")
    assert len(kept.dask) == 1  # the result itself, nothing left to run
    assert numbers(kept.compute()) == numbers(got_a)


def test_reduce_lazy_refuses_what_it_cannot_reduce_lazily(stack):
    with pytest.raises(InvalidOptionError, match="Dask array or records"):
        normstats.reduce_lazy(stack)
    with pytest.raises(InvalidOptionError, match="vectors"):
        normstats.reduce_lazy(da.zeros((10, 3), chunks=5))


def test_blocks_summarised_as_read_merge_with_blocks_still_in_records(stack):
    """A chunk step summarises its block at once when the compiled pass made the totals
    (`_chunk`), and leaves it as records otherwise (the numpy kernel; a pass whose spreads
    numpy must compute): a combine given both merges them into the same exact summary."""
    from normstats.engine.dask.reduce import Part, merge_parts
    from normstats.maths.records import concat_records
    from normstats.maths.summary import summarize
    from normstats.sources.arrays import stack_records

    first, second = stack_records(stack[:25]), stack_records(stack[25:])
    whole = summarize(concat_records([first, second]))
    for parts in ([Part(25, summarize(first)), Part(15, second)],
                  [Part(25, first), Part(15, summarize(second))]):
        merged = merge_parts(parts)
        assert merged.rows == 40
        assert merged.value == whole
    assert whole.images == 40 and whole.moments.total == tuple(
        int(stack[..., c].astype(np.int64).sum()) for c in range(3))
