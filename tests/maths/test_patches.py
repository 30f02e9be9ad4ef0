"""The k×k patch totals equal those of the materialised patches, in Python ints, for every
patch size, image shape and integer dtype, on every path (float64 blocks or int64 border
sums, one batch or many); and what has no patch is refused in words."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from normstats.errors import IncompatibleImagesError, InvalidOptionError
from normstats.maths import patches
from normstats.maths.patches import PatchMoments


def materialised(stack: np.ndarray, size: int) -> tuple[int, list[int], list[int]]:
    """Count, Σp and the upper triangle of Σpᵀp of every patch, flattened (c, u, v), in
    Python ints."""
    p = sliding_window_view(stack, (size, size), axis=(1, 2))  # (N, H', W', C, k, k)
    flat = p.reshape(-1, stack.shape[3] * size * size).astype(object)
    gram = flat.T @ flat
    rows, cols = np.triu_indices(flat.shape[1])
    return flat.shape[0], flat.sum(axis=0).tolist(), [gram[r, c] for r, c in zip(rows, cols)]


@pytest.mark.parametrize("shape, size", [((3, 5, 4, 3), 2), ((2, 3, 3, 1), 3),
                                         ((4, 6, 7, 2), 3), ((2, 4, 9, 3), 3),
                                         ((1, 3, 3, 3), 3), ((3, 8, 5, 3), 4),
                                         ((5, 9, 9, 3), 1), ((2, 32, 32, 3), 3),
                                         ((3, 3, 7, 2), 2), ((2, 7, 3, 1), 3)])
def test_the_totals_are_those_of_the_materialised_patches(rng, shape, size):
    stack = rng.integers(0, 256, shape, dtype=np.uint8)
    m = PatchMoments.from_stack(stack, size)
    assert (m.count, list(m.total), list(m.products)) == materialised(stack, size)


@pytest.mark.parametrize("dtype", ["uint16", "int16", "int8", "bool"])
def test_every_integer_dtype(rng, dtype):
    info = np.iinfo(np.uint8 if dtype == "bool" else dtype)
    stack = rng.integers(info.min, int(info.max) + 1, (3, 6, 5, 2)).astype(dtype)
    m = PatchMoments.from_stack(stack, 3)
    expected = materialised(stack.astype(np.int64), 3)
    assert (m.count, list(m.total), list(m.products)) == expected


def test_the_int64_border_sums_and_many_batches(rng, monkeypatch):
    """Where float64 would pass 2⁵³ the border sums stay int64 and the matrix products take
    shorter runs; batches of a few images add up to the same totals."""
    stack = rng.integers(0, 65536, (7, 6, 5, 2)).astype(np.uint16)
    expected = materialised(stack, 2)
    monkeypatch.setattr(patches, "_EXACT", 2**40)
    monkeypatch.setattr(patches, "_BATCH_BYTES", 2 * 6 * 5 * 2 * 8)
    m = PatchMoments.from_stack(stack, 2)
    assert (m.count, list(m.total), list(m.products)) == expected


def test_merged_parts_are_the_whole_and_the_covariance_is_rounded_once(rng):
    stack = rng.integers(0, 256, (6, 5, 5, 2), dtype=np.uint8)
    whole = PatchMoments.from_stack(stack, 2)
    parts = [PatchMoments.from_stack(part, 2) for part in np.split(stack, [1, 4])]
    assert parts[2].merge(parts[0]).merge(parts[1]) == whole
    p = sliding_window_view(stack, (2, 2), axis=(1, 2)).reshape(-1, 8).astype(np.float64)
    np.testing.assert_allclose(whole.covariance(ddof=1), np.cov(p, rowvar=False),
                               rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(whole.mean(255), p.mean(axis=0) / 255, rtol=1e-15)


def test_what_has_no_patch_or_no_exact_covariance_is_refused():
    with pytest.raises(InvalidOptionError, match="no 4×4 patch"):
        PatchMoments.from_stack(np.zeros((1, 3, 9, 1), np.uint8), 4)
    with pytest.raises(IncompatibleImagesError, match="integer images"):
        PatchMoments.from_stack(np.zeros((1, 3, 3, 1), np.float32), 2)
    with pytest.raises(InvalidOptionError, match="positive integer"):
        PatchMoments.from_stack(np.zeros((1, 3, 3, 1), np.uint8), 0)
    with pytest.raises(IncompatibleImagesError, match="cannot pool"):
        PatchMoments.from_stack(np.zeros((1, 3, 3, 1), np.uint8), 2).merge(
            PatchMoments.from_stack(np.zeros((1, 3, 3, 1), np.uint8), 3))


def test_patch_dimensions_are_named_channel_major():
    from normstats.maths.patches import patch_dimension_names

    assert patch_dimension_names(("R", "G"), 2) == ("R[0,0]", "R[0,1]", "R[1,0]", "R[1,1]",
                                                    "G[0,0]", "G[0,1]", "G[1,0]", "G[1,1]")
    assert patch_dimension_names(("L",), 1) == ("L[0,0]",)


def test_the_mean_and_covariance_by_default_and_at_their_edges():
    from fractions import Fraction

    x = np.array([[[[0], [4]], [[2], [8]]], [[[1], [3]], [[5], [7]]]], np.uint8)
    m = PatchMoments.from_stack(x, 1)
    values = [0, 4, 2, 8, 1, 3, 5, 7]
    assert m.mean().tolist() == [3.75] and m.mean(2).tolist() == [1.875]
    assert m.covariance().tolist() == [[float(np.var(values))]]
    assert m.covariance(scale=2).tolist() == [[float(Fraction(
        sum((Fraction(v) - Fraction(15, 4)) ** 2 for v in values), 8 * 4))]]
    one = PatchMoments.from_stack(x[:1, :1, :1], 1)
    assert one.covariance().tolist() == [[0.0]]
    with pytest.raises(InvalidOptionError) as caught:
        one.covariance(ddof=1)
    assert str(caught.value) == "a patch covariance with ddof=1 needs more than 1 patches"
    two = PatchMoments.from_stack(x[:1, :1], 1)
    assert two.covariance(ddof=1).tolist() == [[8.0]]


def test_what_patches_cannot_be_taken_from():
    with pytest.raises(InvalidOptionError) as caught:
        PatchMoments.from_stack(np.zeros((2, 3, 3), np.uint8), 1)
    assert str(caught.value) == "patches are taken from (N, H, W, C) images, got shape (2, 3, 3)"
    for size in (True, 0, 1.0):
        with pytest.raises(InvalidOptionError) as caught:
            PatchMoments.from_stack(np.zeros((1, 3, 3, 1), np.uint8), size)
        assert str(caught.value) == f"the patch size must be a positive integer, got {size!r}"
    for dtype in ("int32", "uint64", "float32"):
        with pytest.raises(IncompatibleImagesError) as caught:
            PatchMoments.from_stack(np.zeros((1, 3, 3, 1), dtype), 1)
        assert str(caught.value) == ("the patch covariance is exact for integer images of at "
                                     f"most 16 bits, not {dtype}")
    with pytest.raises(InvalidOptionError) as caught:
        PatchMoments.from_stack(np.zeros((1, 2, 5, 1), np.uint8), 3)
    assert str(caught.value) == "images of 2×5 pixels have no 3×3 patch"
