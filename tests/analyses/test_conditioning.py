"""Conditioning report: the seeds' income/height example, and agreement with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from normstats.analyses.conditioning import SecondMoments, condition_number, conditioning
from normstats.errors import InvalidOptionError, UnreadableInputError


def income_height(rng: np.random.Generator, n: int = 100_000) -> np.ndarray:
    """Seeds 003: income in dollars ~ N(3000, 400²), height in inches ~ N(69, 3²)."""
    return np.column_stack([rng.normal(3000, 400, n), rng.normal(69, 3, n)])


def test_reproduces_the_seed_example(rng):
    x = income_height(rng)
    result = conditioning(x)
    h = x.T @ x / len(x)
    np.testing.assert_allclose(h / 1e3, [[9137.3, 206.6], [206.6, 4.8]], rtol=0.01, atol=0.05)
    assert 8e4 < result.raw < 1.1e5  # seeds: 9.2e4 (population value 9.95e4)
    assert result.standardized < 1.05
    assert 1 < result.min_max < result.raw / 100


def test_matches_numpy_on_explicitly_scaled_data(rng):
    x = np.column_stack([rng.normal(1e6, 5, 5000), rng.uniform(-2, 3, 5000),
                         rng.exponential(4.0, 5000)])
    x[:, 2] += 0.3 * x[:, 1]
    result = conditioning(x)

    def kappa(v: np.ndarray) -> float:
        return float(np.linalg.cond(v.T @ v / len(v)))

    standardized = (x - x.mean(axis=0)) / x.std(axis=0)
    min_max = (x - x.min(axis=0)) / (x.max(axis=0) - x.min(axis=0))
    assert result.standardized == pytest.approx(kappa(standardized), rel=1e-9)
    assert result.min_max == pytest.approx(kappa(min_max), rel=1e-6)
    assert result.raw > 1e10


def test_streaming_blocks_agree(rng):
    x = income_height(rng, 10_000)
    one = SecondMoments.from_array(x)
    blocks = SecondMoments.from_array(x, block_rows=777)
    np.testing.assert_allclose(blocks.covariance, one.covariance, rtol=1e-12)
    np.testing.assert_allclose(one.covariance, np.cov(x.T, ddof=0), rtol=1e-10)


def test_errors():
    with pytest.raises(InvalidOptionError, match="constant"):
        conditioning(np.ones((5, 2)))
    with pytest.raises(InvalidOptionError, match=r"\(N, d\)"):
        conditioning(np.ones((5, 2, 2)))
    assert condition_number(np.zeros((2, 2))) == float("inf")


def test_condition_command(tmp_path, rng):
    import json

    from click.testing import CliRunner

    from normstats_cli import main

    path = tmp_path / "people.npy"
    np.save(path, income_height(rng, 20_000))
    result = CliRunner().invoke(main, ["condition", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert 8e4 < data["raw"] < 1.1e5 and data["standardized"] < 1.1
    text = CliRunner().invoke(main, ["condition", str(path)]).output
    assert "standardized" in text and "min-max" in text
    bad = tmp_path / "images.npy"
    np.save(bad, np.zeros((2, 3, 3), np.uint8))
    result = CliRunner().invoke(main, ["condition", str(bad)])
    assert result.exit_code == 1 and "(N, d)" in result.output


def test_nan_and_infinite_values_are_counted_per_feature_not_a_linalg_error(rng):
    x = rng.normal(size=(100, 4))
    x[[3, 50, 70], 2] = np.nan
    x[8, 0] = -np.inf
    with pytest.raises(UnreadableInputError) as error:
        conditioning(x)
    assert str(error.value) == (
        "3 NaN and 1 infinite in 2 feature(s) (feature 0: 1 infinite, feature 2: 3 NaN): the "
        "condition number needs every value of every vector; drop or impute those rows first "
        "(normstats compute leaves NaN out per feature)")


def test_no_features_or_a_zarr_store_with_a_missing_chunk_are_refused(tmp_path, rng):
    import zarr

    with pytest.raises(UnreadableInputError, match=r"\(5, 0\) have no features"):
        conditioning(np.zeros((5, 0)))
    path = tmp_path / "vectors.zarr"
    array = zarr.create_array(path, shape=(6, 2), chunks=(2, 2), dtype="float64")
    array[:] = rng.normal(size=(6, 2))
    (path / "c" / "2" / "0").unlink()
    with pytest.raises(UnreadableInputError, match=r"1 of 3 chunks .*\(c/2/0; images 4-5\)"):
        conditioning(zarr.open_array(path, mode="r"))
