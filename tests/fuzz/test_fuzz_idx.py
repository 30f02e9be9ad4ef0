"""Fuzz target: IDX (MNIST) headers, raw and gzip-compressed, read by `normstats.compute`.

An IDX header is two zero bytes, a type code, the number of dimensions and one big-endian
uint32 a dimension; the data follows. Hypothesis damages every field of valid files (the
magic bytes, the type code, the dimension count, any dimension up to 2**32 - 1) and the
length of the data, plain or inside a ``.gz``. Whatever the damage, a run either refuses the
file in one line naming it or computes exactly the pixels the header describes, and never
allocates what the header claims beyond what the file can hold.
"""

from __future__ import annotations

import gzip
import math
import tempfile
import tracemalloc
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given
from hypothesis import strategies as st

import normstats
from normstats import NormstatsError
from normstats.sources.idx import IDX_TYPES

#: Far more than a run over a file of a few kilobytes needs, far less than any lie claims.
_MEMORY_LIMIT = 32 << 20
_DIMENSIONS = [0, 1, 2, 3, 4, 255, 65_536, 2**31 - 1, 2**31, 2**32 - 1]


@st.composite
def damaged_idx(draw) -> tuple[str, bytes]:
    """A small valid IDX file, then up to three header fields and its length damaged."""
    code = draw(st.sampled_from(sorted(IDX_TYPES)))
    shape = draw(st.lists(st.integers(1, 4), min_size=3, max_size=4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = np.dtype(IDX_TYPES[code])
    if dtype.kind == "f":
        values = rng.standard_normal(math.prod(shape)) * 100
    else:
        info = np.iinfo(dtype)
        values = rng.integers(info.min, int(info.max) + 1, math.prod(shape))
    header = bytearray([0, 0, code, len(shape)]) + np.array(shape, ">u4").tobytes()
    data = header + values.astype(dtype).tobytes()
    for field in draw(st.lists(st.sampled_from(["magic", "code", "ndim", "dim"]), max_size=3)):
        _damage(draw, data, field)
    length = draw(st.sampled_from(["kept", "cut", "grown"]))
    if length == "cut":
        del data[draw(st.integers(0, len(data) - 1)):]
    elif length == "grown":
        data += bytes(draw(st.integers(1, 64)))
    compressed = draw(st.booleans())
    if compressed:
        data = bytearray(gzip.compress(bytes(data), mtime=0))
        if draw(st.booleans()):
            del data[draw(st.integers(0, len(data))):]
    return "fuzz-idx3-ubyte" + (".gz" if compressed else ""), bytes(data)


def _damage(draw, data: bytearray, field: str) -> None:
    """Damage one header field of ``data`` in place."""
    if field == "magic":
        data[draw(st.integers(0, 1))] = draw(st.integers(0, 255))
    elif field == "code":
        data[2] = draw(st.sampled_from([*IDX_TYPES, 0x00, 0x0A, 0x0F, 0xFF]))
    elif field == "ndim":
        data[3] = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 8, 9, 255]))
    else:  # a dimension, or the first bytes of the data read as one
        at = 4 + 4 * draw(st.integers(0, 3))
        data[at:at + 4] = draw(st.sampled_from(_DIMENSIONS)).to_bytes(4, "big")


@fuzz_settings(200)
@given(damaged_idx())
def test_a_damaged_idx_is_refused_or_read_exactly(case: tuple[str, bytes]) -> None:
    _check(*case)


@pytest.mark.parametrize("path", regression_inputs("idx"), ids=lambda p: p.name)
def test_saved_idx_inputs_are_refused_or_read_exactly(path: Path) -> None:
    _check(path.name, path.read_bytes())


def _check(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        tracemalloc.start()
        try:
            stats = normstats.compute(str(path), scheduler="sync", cache=False, scale=1)
        except NormstatsError as error:
            assert str(error).startswith(f"{path}: ") and "\n" not in str(error)
            return
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < _MEMORY_LIMIT, f"{peak:,} bytes allocated for a {len(data)}-byte file"
    _assert_exact(stats, gzip.decompress(data) if name.endswith(".gz") else data)


def _assert_exact(stats: normstats.DatasetStats, raw: bytes) -> None:
    """The statistics of the pixels the header describes (an independent reading)."""
    ndim = raw[3]
    shape = tuple(int(d) for d in np.frombuffer(raw[4:4 + 4 * ndim], ">u4"))
    dtype = np.dtype(IDX_TYPES[raw[2]])
    assert len(raw) == 4 + 4 * ndim + math.prod(shape) * dtype.itemsize  # exact size only
    array = np.frombuffer(raw[4 + 4 * ndim:], dtype).reshape(shape)
    array = array.astype(dtype.newbyteorder("="))
    if ndim == 2:  # N x d: vectors, one mean a feature
        assert stats.kind == "vectors" and stats.images == shape[0]
        expected = [Fraction(sum(map(Fraction, column.tolist())), shape[0])
                    for column in array.T]
        assert all(abs(Fraction(m) - e) <= abs(e) * Fraction(1, 10**12)
                   for m, e in zip(stats.mean, expected))
        return
    if ndim == 3:  # N x H x W: one gray channel
        images = array[..., None]
    else:  # N x H x W x C when the last axis can be channels, else N x C x H x W
        images = array if shape[-1] in (1, 3, 4) else array.transpose(0, 2, 3, 1)
    finite = [image for image in images if np.isfinite(image).all()]
    assert stats.images == len(finite) and len(stats.skipped) == len(images) - len(finite)
    assert stats.pixels_per_channel == sum(image[..., 0].size for image in finite)
    pooled = np.stack(finite).reshape(-1, images.shape[-1])
    assert list(stats.min) == pooled.min(axis=0).astype(np.float64).tolist()
    assert list(stats.max) == pooled.max(axis=0).astype(np.float64).tolist()
    if dtype.kind != "f":  # integer pixels: pooled mean and std bit-exact (DESIGN section 2)
        assert (list(stats.mean), list(stats.std)) == _exact_mean_and_std(pooled)


def _exact_mean_and_std(pooled: np.ndarray) -> tuple[list[float], list[float]]:
    """Each column's mean and population std, in fractions, rounded once."""
    means, stds = [], []
    for column in pooled.T.tolist():
        mean = Fraction(sum(column), len(column))
        means.append(float(mean))
        stds.append(math.sqrt(float(sum((v - mean) ** 2 for v in column) / len(column))))
    return means, stds
