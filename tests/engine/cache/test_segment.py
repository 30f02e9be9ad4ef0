"""Reading a cache segment back: the plausibility of its records and the checks on its files.

`impossible_rows` must never refuse a record real pixels produced (else a clean cache
would be decoded again on every run), and must refuse each contradiction it states,
exactly, also where the products pass int64 (16-bit images of 2³¹ pixels).
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from normstats.engine.cache import segment as segment_module
from normstats.engine.cache.segment import DamagedFile, check_segment_files, read_cache_json
from normstats.engine.cache.store import DatasetCache
from normstats.maths.records import IntegerRecords, impossible_rows, records_from_stack
from normstats.sources.decoding.policy import DecodePolicy

_DTYPES = [np.uint8, np.uint16, np.int16, np.int8, np.bool_, np.float32, np.float64]


@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(_DTYPES), st.integers(1, 4), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 3), st.sampled_from(["any", "constant", "two values"]), st.data())
def test_records_of_real_pixels_are_never_refused(dtype, count, h, w, c, shape, data):
    elements = (st.floats(-1e6, 1e6, width=np.dtype(dtype).itemsize * 8)
                if np.dtype(dtype).kind == "f" else None)
    stack = data.draw(hnp.arrays(dtype, (count, h, w, c), elements=elements))
    if shape == "constant":
        stack[...] = stack.flat[0]
    elif shape == "two values":
        stack = np.where(np.arange(h * w).reshape(1, h, w, 1) % 2, stack.flat[0], stack.flat[-1])
    assert not impossible_rows(records_from_stack(np.ascontiguousarray(stack))).any()


def _uint16(n: int, low: int, high: int, sums: int, squares: int) -> IntegerRecords:
    return IntegerRecords(dtype="uint16", channel_names=("L",), keys=("a",),
                          pixels=np.array([n]), minimum=np.array([[float(low)]]),
                          maximum=np.array([[float(high)]]), sums=np.array([[sums]]),
                          sums_sq=np.array([[squares]]))


def test_bounds_are_exact_where_their_products_pass_int64():
    """n·Σx² = (Σx)² for a flat image and Σx² = (min + max)·Σx − n·min·max for a
    two-valued one hold with equality, at products near 2⁹⁴: off by 2 is refused."""
    n = 2**31 - 2
    flat = _uint16(n, 65535, 65535, 65535 * n, 65535**2 * n)
    two = _uint16(n, 0, 65535, 65535 * (n // 2), 65535**2 * (n // 2))
    assert n * int(flat.sums_sq[0, 0]) > 2**93  # n·Σx²: far past int64
    for record in (flat, two):
        assert impossible_rows(record).tolist() == [False]
    assert impossible_rows(replace(flat, sums_sq=flat.sums_sq - 2)).tolist() == [True]
    assert impossible_rows(replace(two, sums_sq=two.sums_sq + 2)).tolist() == [True]


@pytest.mark.parametrize("change", [
    dict(pixels=np.array([0])), dict(pixels=np.array([2**41])),
    dict(minimum=np.array([[np.nan]])), dict(minimum=np.array([[3.5]])),
    dict(minimum=np.array([[-1.0]])), dict(maximum=np.array([[70000.0]])),
    dict(minimum=np.array([[9.0]]), maximum=np.array([[8.0]])),
    dict(sums=np.array([[41]])),            # parity: Σx² − Σx is always even
    dict(sums=np.array([[2**63 - 1]])), dict(sums_sq=np.array([[-2]])),
    dict(sums_sq=np.array([[8 * 10**2]])),  # above max·Σx: every pixel ≤ 10
])
def test_each_stated_contradiction_is_refused(change):
    valid = _uint16(8, 2, 10, 40, 260)  # 2, 10 and six 4s: Σx = 40, Σx² = 4 + 100 + 96
    assert impossible_rows(valid).tolist() == [False]
    assert impossible_rows(replace(valid, **change)).tolist() == [True]


def test_float_contradictions_are_refused():
    valid = records_from_stack(np.array([1.0, 2.0, 4.0, 9.0]).reshape(1, 2, 2, 1))
    assert impossible_rows(valid).tolist() == [False]
    for change in (dict(m2s=np.array([[-1e-9]])), dict(m2s=np.array([[np.inf]])),
                   dict(means=np.array([[9.5]])), dict(residuals=np.array([[np.nan]])),
                   dict(m2s=np.array([[65.1]]))):  # above n·(max − mean)·(mean − min) = 64
        assert impossible_rows(replace(valid, **change)).tolist() == [True], change


@pytest.fixture
def segment(tmp_path: Path) -> tuple[Path, dict]:
    cache = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    records = records_from_stack(np.arange(24, dtype=np.uint8).reshape(2, 2, 2, 3),
                                 keys=("a.png", "b.png"), channel_names=("R", "G", "B"))
    name = cache.write_segment(records, np.array([1, 2]), np.array([3, 4]), ())
    return cache.segments_dir / name, json.loads((cache.markers_dir / f"{name}.json").read_text())


def test_array_metadata_promising_more_than_the_marker_is_damage(segment):
    folder, marker = segment
    check_segment_files(folder, ["sums", "path_bytes"], 2, 3)
    meta_path = folder / "sums" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "shape": [10**12, 3]}))
    with pytest.raises(DamagedFile, match=r"sums/zarr.json: describes a int64 array of shape "
                                          r"\[1000000000000, 3\], not the one"):
        check_segment_files(folder, ["sums"], 2, 3)


def test_a_link_to_a_directory_inside_an_array_is_damage(segment, tmp_path):
    folder, _ = segment
    chunk = folder / "pixels" / "c.0"
    (tmp_path / "elsewhere").mkdir()
    os.rename(chunk, tmp_path / "elsewhere" / "c.0")
    chunk.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(DamagedFile, match=r"pixels/c.0: a link to .*elsewhere: not a regular "
                                          r"file \(a directory\)"):
        check_segment_files(folder, ["pixels"], 2, 3)


def test_metadata_that_is_not_json_is_damage(tmp_path):
    (tmp_path / "zarr.json").write_bytes(b"\xff{")
    with pytest.raises(DamagedFile, match="not valid JSON"):
        read_cache_json(tmp_path / "zarr.json")


def test_records_are_checked_a_block_of_rows_at_a_time_as_all_at_once(monkeypatch):
    monkeypatch.setattr(segment_module, "_CHECK_ROWS", 2)
    rng = np.random.default_rng(5)
    records = records_from_stack(rng.integers(0, 256, (7, 2, 2, 3), dtype=np.uint8),
                                 keys=tuple("abcdefg"), channel_names=("R", "G", "B"))
    sums = records.sums.copy()
    sums[[2, 5]] += 10_000  # more than four pixels of 255 can sum to
    damaged = replace(records, sums=sums)
    assert segment_module._impossible(damaged).tolist() == impossible_rows(damaged).tolist() \
        == [False, False, True, False, False, True, False]
