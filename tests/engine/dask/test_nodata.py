"""Nodata and Dask: records of a masked array keep each band's valid counts and reduce to
what `compute` gives; a Dask array's graph has no nodata tags, so ``nodata=`` is refused on
it rather than ignored."""

from __future__ import annotations

from dataclasses import replace

import dask.array as da
import numpy as np
import pytest

import normstats
from normstats.errors import InvalidOptionError


def test_records_of_a_masked_array_reduce_to_compute_s_numbers(rng):
    pixels = rng.integers(0, 40, (7, 4, 5, 13)).astype(np.uint16)
    masked = np.ma.masked_equal(pixels, 0)
    rec = normstats.records(masked, layout="NHWC", task_size=3)
    assert rec.keys.tolist() == list(range(7)) and "valid" in rec.arrays
    whole = normstats.compute(masked, layout="NHWC", scale=1)
    assert normstats.reduce(rec, scale=1) == whole
    first = normstats.reduce(rec[rec.keys < 4], scale=1)
    alone = normstats.compute(masked[:4], layout="NHWC", scale=1)
    assert replace(first, source=alone.source) == alone


def test_nodata_on_a_dask_array_is_refused_not_ignored():
    x = da.ones((4, 3, 3, 2), dtype=np.uint16, chunks=2)
    for call in (lambda: normstats.compute(x, nodata=0),
                 lambda: normstats.reduce_lazy(x, nodata=0),
                 lambda: normstats.records(x, nodata=0)):
        with pytest.raises(InvalidOptionError, match="not on a Dask array's graph"):
            call()


def test_nodata_on_items_of_a_dataset_object_is_refused_not_ignored(rng):
    items = [rng.integers(0, 9, (4, 4, 3), dtype=np.uint8) for _ in range(3)]
    with pytest.raises(InvalidOptionError, match="not of the items of a dataset object"):
        normstats.compute(items, nodata=0)
