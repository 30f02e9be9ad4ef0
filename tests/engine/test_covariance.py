"""The channel covariance through every engine path — in process, threads, the fork pool,
an iterable, Dask arrays of any chunking, vector data — bit-identical to one another and
to the exact oracle; and a run that does not ask for it carries none."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from oracle import exact_covariance
from PIL import Image

import normstats
from normstats.engine.pipeline import run
from normstats.sources import open_source


@pytest.fixture
def photos(rng) -> np.ndarray:
    """Correlated channels, as in photos: G follows R, B follows both less closely."""
    base = rng.integers(0, 200, (60, 9, 7, 1))
    return np.concatenate([base, base + rng.integers(0, 50, base.shape),
                           base // 2 + rng.integers(0, 100, base.shape)], axis=3).astype(np.uint8)


def test_every_scheduler_and_task_size_gives_the_exact_covariance(photos):
    expected = exact_covariance(list(photos), scale=255)
    results = [normstats.compute(photos, covariance=True, scheduler=scheduler, workers=2,
                                 task_size=size)
               for scheduler in ("sync", "threads", "processes") for size in (1, 7, 60)]
    assert {r.covariance for r in results} == {tuple(map(tuple, expected))}
    assert len({(r.covariance_ddof1, r.correlation) for r in results}) == 1
    assert results[0].covariance_ddof1 == tuple(map(tuple, exact_covariance(
        list(photos), scale=255, ddof=1)))


def test_a_folder_decoded_by_the_pool_has_the_covariance_of_its_pixels(photos, tmp_path):
    for i, image in enumerate(photos[:30]):
        Image.fromarray(image[: 5 + i % 4]).save(tmp_path / f"{i:02d}.png")
    images = [photos[i][: 5 + i % 4] for i in range(30)]
    stats = normstats.compute(tmp_path, covariance=True, cache=False, workers=2,
                              scheduler="processes", task_size=4)
    assert [list(r) for r in stats.covariance] == exact_covariance(images, scale=255)
    assert normstats.compute(tmp_path, cache=False, workers=1).covariance is None


def test_an_iterable_of_images_of_several_sizes(photos):
    images = [photos[i][: 3 + i % 5] for i in range(20)]
    stats = normstats.compute(iter(images), covariance=True, layout="HWC")
    assert [list(r) for r in stats.covariance] == exact_covariance(images, scale=255)


def test_a_run_that_does_not_ask_makes_no_cross_sums(photos):
    seen = []
    summary = run(open_source(photos), task_size=10, on_result=seen.append)
    assert summary.cross is None and all(r.records.cross_sums is None for r in seen)
    stats = normstats.compute(photos)
    assert (stats.covariance, stats.covariance_ddof1, stats.correlation) == (None, None, None)
    with pytest.raises(normstats.InvalidOptionError, match="covariance=True"):
        stats.pca()


@pytest.mark.parametrize("chunks", [(7, 9, 7, 3), (13, 4, 3, 3), (60, 9, 7, 1), (5, 2, 7, 2)])
def test_dask_arrays_of_any_chunking_give_the_same_bits(photos, chunks):
    """Blocks split along H and W add their cross sums; split along C, they are joined
    first (a pair of channels must meet in one block)."""
    import dask.array as da

    expected = normstats.compute(photos, covariance=True)
    found = normstats.compute(da.from_array(photos, chunks=chunks), covariance=True,
                              scheduler="sync")
    assert (found.covariance, found.correlation) == (expected.covariance, expected.correlation)


def test_float_dask_blocks_split_along_h_merge_their_co_moments(rng):
    """Split along N: the same bits; along H and W: Chan's pairwise co-moment merge in
    float64, which at an offset of 1e6 keeps ~11 digits, as the variances' merge does
    (the rounding of the merged mean, an ulp of 1e6, is its error)."""
    import dask.array as da

    x = rng.normal(0, 1, (12, 8, 6, 3)) @ np.array([[1, 0.5, 0], [0, 1, 0.3], [0, 0, 1]]) + 1e6
    expected = np.array(exact_covariance(list(x)))
    whole = normstats.compute(x, covariance=True, layout="NHWC")
    by_n = normstats.compute(da.from_array(x, chunks=(5, 8, 6, 3)), covariance=True,
                             scheduler="sync")
    split = normstats.compute(da.from_array(x, chunks=(5, 3, 4, 3)), covariance=True,
                              scheduler="sync")
    assert by_n.covariance == whole.covariance
    scale = np.sqrt(np.outer(np.diag(expected), np.diag(expected)))
    assert (np.abs(np.array(whole.covariance) - expected) <= 1e-12 * scale).all()
    assert (np.abs(np.array(split.covariance) - expected) <= 1e-10 * scale).all()


def test_vectors_get_numpy_cov_exactly_for_integers(rng):
    ints = rng.integers(-(2**40), 2**40, (2000, 4), dtype=np.int64)
    stats = normstats.compute(ints, covariance=True)
    exact, n = ints.astype(object), len(ints)
    centred_sum = (exact.T @ exact) * n - np.outer(exact.sum(axis=0), exact.sum(axis=0))
    expected = [[float(Fraction(int(v), n * (n - 1))) for v in row] for row in centred_sum]
    assert [list(r) for r in stats.covariance_ddof1] == expected
    np.testing.assert_allclose(stats.covariance_ddof1, np.cov(ints, rowvar=False), rtol=1e-12)
    floats = rng.normal(size=(70_000, 3)) * [1, 10, 0.1] + [0, 1e5, 0]  # two row blocks
    np.testing.assert_allclose(normstats.compute(floats, covariance=True).covariance_ddof1,
                               np.cov(floats, rowvar=False), rtol=1e-10, atol=1e-12)


def test_vectors_with_missing_values_use_the_complete_rows(rng):
    x = rng.normal(size=(200, 3))
    x[[5, 70], 1] = np.nan
    x[9, 2] = np.inf
    stats = normstats.compute(x, covariance=True)
    complete = np.delete(x, [5, 9, 70], axis=0)
    np.testing.assert_allclose(stats.covariance_ddof1, np.cov(complete, rowvar=False),
                               rtol=1e-12)
    none = np.full((3, 2), np.nan)
    none[0, 0] = none[1, 1] = 1.0
    with pytest.raises(normstats.EmptyDatasetError, match="every feature finite"):
        normstats.compute(none, covariance=True)
