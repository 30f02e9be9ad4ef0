"""Conditioning report: the seeds' income/height example, and agreement with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import normstats
from normstats.analyses.conditioning import (
    Conditioning,
    CovarianceConditioning,
    SecondMoments,
    channel_conditioning,
    condition_number,
    conditioning,
    render_channel_conditioning,
    render_conditioning,
)
from normstats.errors import EmptyDatasetError, InvalidOptionError, UnreadableInputError


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
    assert "feature covariance" in text
    images = tmp_path / "images.npy"  # images: the channel covariance's condition numbers
    base = rng.integers(0, 200, (30, 6, 6, 1))
    np.save(images, np.concatenate([base, base + rng.integers(0, 30, base.shape),
                                    rng.integers(0, 255, base.shape)], axis=3).astype(np.uint8))
    result = CliRunner().invoke(main, ["condition", str(images), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    stats = normstats.compute(np.load(images), covariance=True)
    assert data["raw"] == condition_number(stats.covariance) > data["standardized"] > 5
    assert abs(data["whitened"] - 1) < 1e-9 and data["channels"] == ["c0", "c1", "c2"]
    text = CliRunner().invoke(main, ["condition", str(images)]).output
    assert "channel covariance" in text and "ZCA-whitened" in text
    flat = tmp_path / "flat.npy"  # a constant image: its covariance cannot be whitened
    np.save(flat, np.zeros((2, 3, 3), np.uint8))
    result = CliRunner().invoke(main, ["condition", str(flat), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["raw"] is None  # singular


def test_nan_and_infinite_values_are_counted_per_feature_not_a_linalg_error(rng):
    x = rng.normal(size=(100, 4))
    x[[3, 50, 70], 2] = np.nan
    x[8, 0] = -np.inf
    with pytest.raises(UnreadableInputError) as error:
        conditioning(x)
    assert str(error.value) == (
        "3 NaN and 1 infinite in 2 features (feature 0: 1 infinite, feature 2: 3 NaN): the "
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


# --- the streaming totals and the three scalings, on vectors written out by hand ----------

def test_second_moments_are_exact_totals_around_the_first_row() -> None:
    x = np.array([[10.0, -1.0], [12.0, 3.0], [7.0, 5.0], [11.0, 1.0], [10.0, 2.0]])
    for block_rows in (1, 2, 3, 5, 65536):
        moments = SecondMoments.from_array(x, block_rows=block_rows)
        centred = x - x[0]
        assert moments.count == 5 and type(moments.count) is int
        assert moments.shift.tolist() == [10.0, -1.0]
        assert moments.sum.tolist() == centred.sum(axis=0).tolist() == [0.0, 15.0]
        assert moments.outer.tolist() == (centred.T @ centred).tolist()
        assert moments.minimum.tolist() == [7.0, -1.0]
        assert moments.maximum.tolist() == [12.0, 5.0]
        assert moments.mean.tolist() == [10.0, 2.0]
        assert moments.covariance.tolist() == [[2.8, -1.6], [-1.6, 4.0]]
    ints = SecondMoments.from_array(np.array([[1, 2], [3, 4]], np.int64))
    assert ints.shift.dtype == np.float64 and ints.mean.tolist() == [2.0, 3.0]


def test_an_object_array_of_numbers_is_read_as_float64() -> None:
    """A table of mixed int and float columns comes out of pandas as an object array: its
    numbers are the vectors, as a float64 array of them."""
    x = [[10, -1.0], [12, 3.5], [7, 5.0], [11, 1.25]]
    mixed = SecondMoments.from_array(np.array(x, dtype=object), block_rows=3)
    plain = SecondMoments.from_array(np.array(x, dtype=np.float64), block_rows=3)
    assert mixed.outer.tolist() == plain.outer.tolist()
    assert (mixed.mean.tolist(), mixed.minimum.tolist()) == ([10.0, 2.1875], [7.0, -1.0])
    assert conditioning(np.array(x, dtype=object)) == conditioning(np.array(x, np.float64))


def test_second_moments_refuse_what_is_not_vectors() -> None:
    for x, error, message in (
            (np.ones((5, 2, 2)), InvalidOptionError,
             "conditioning needs vector data (N, d), got shape (5, 2, 2)"),
            (np.ones(5), InvalidOptionError, "conditioning needs vector data (N, d), got shape "
                                             "(5,)"),
            (np.ones((0, 3)), EmptyDatasetError, "no vectors"),
            (np.ones((4, 0)), UnreadableInputError,
             "vectors of shape (4, 0) have no features (axis 1 has length 0): there is nothing "
             "to condition")):
        with pytest.raises(error) as caught:
            SecondMoments.from_array(x)
        assert str(caught.value) == message


def test_values_that_are_not_finite_are_counted_in_every_block() -> None:
    x = np.zeros((8, 7))
    x[[0, 5], 1] = np.nan
    x[7, 1] = np.inf
    for j in (0, 2, 3, 4, 6):
        x[j, j] = -np.inf
    x[3:5, 2] = np.nan
    with pytest.raises(UnreadableInputError) as caught:
        SecondMoments.from_array(x, block_rows=3)
    assert str(caught.value) == (
        "4 NaN and 6 infinite in 6 features (feature 0: 1 infinite, feature 1: 2 NaN and 1 "
        "infinite, feature 2: 2 NaN and 1 infinite, feature 3: 1 infinite, feature 4: 1 "
        "infinite, ...): the condition number needs every value of every vector; drop or "
        "impute those rows first (normstats compute leaves NaN out per feature)")
    few = np.zeros((2, 5))
    few[:, 4] = np.nan
    with pytest.raises(UnreadableInputError) as caught:
        SecondMoments.from_array(few)
    assert str(caught.value).startswith("2 NaN in 1 feature (feature 4: 2 NaN): the")
    many = np.zeros((3000, 5))
    many[:, :] = np.nan
    with pytest.raises(UnreadableInputError) as caught:
        SecondMoments.from_array(many)
    assert str(caught.value).startswith("15,000 NaN in 5 features (feature 0: 3,000 NaN, "
                                        "feature 1: 3,000 NaN, feature 2: 3,000 NaN, feature 3: "
                                        "3,000 NaN, feature 4: 3,000 NaN): the")


def test_the_three_condition_numbers_of_a_plus_shaped_cloud() -> None:
    """Rows (±1, 0) and (0, ±2): covariance diag(1/2, 2), mean 0, so κ(raw) = 4, the
    correlation matrix is the identity, and min-max scaling gives
    [[3/8, 1/4], [1/4, 3/8]] with eigenvalues 5/8 and 1/8: κ = 5."""
    x = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]])
    result = conditioning(x)
    assert result.raw == pytest.approx(4.0, rel=1e-14)
    assert result.standardized == pytest.approx(1.0, rel=1e-14)
    assert result.min_max == pytest.approx(5.0, rel=1e-14)
    assert (result.features, result.vectors) == (2, 4)
    shifted = conditioning(x + np.array([3.0, 0.0]))  # mean (3, 0): H = C + μμᵀ
    assert shifted.raw == pytest.approx(9.5 / 2.0, rel=1e-14)
    assert shifted.min_max == pytest.approx(5.0, rel=1e-14)  # min-max ignores the shift
    assert shifted.to_dict()["raw"] == shifted.raw
    assert {k: shifted.to_dict()[k] for k in ("standardized", "min_max", "features",
                                              "vectors")} == {
        "standardized": shifted.standardized, "min_max": shifted.min_max, "features": 2,
        "vectors": 4}


def test_constant_features_are_named() -> None:
    x = np.array([[1.0, 5.0, 2.0, 7.0], [2.0, 5.0, 3.0, 7.0], [4.0, 5.0, 1.0, 7.0]])
    with pytest.raises(InvalidOptionError) as caught:
        conditioning(x)
    assert str(caught.value) == "features [1, 3] are constant: standardization is undefined"
    with pytest.raises(InvalidOptionError) as caught:
        conditioning(x[:, :3])
    assert str(caught.value) == "feature 1 is constant: standardization is undefined"


def test_as_many_nan_as_infinite_values_are_still_refused() -> None:
    x = np.arange(10.0).reshape(5, 2)
    x[2, 1], x[4, 1] = np.nan, np.inf
    with pytest.raises(UnreadableInputError) as caught:
        SecondMoments.from_array(x)
    assert str(caught.value).startswith("1 NaN and 1 infinite in 1 feature (feature 1: 1 "
                                        "NaN and 1 infinite): the condition number")


def test_a_missing_chunk_is_named_with_its_store(tmp_path) -> None:
    import zarr

    path = tmp_path / "v.zarr"
    zarr.create_array(path, shape=(6, 2), chunks=(2, 2), dtype="float64")[:] = 1.0
    (path / "c" / "2" / "0").unlink()
    with pytest.raises(UnreadableInputError) as caught:
        SecondMoments.from_array(zarr.open_array(path, mode="r"))
    assert caught.value.path == str(path)
    assert str(caught.value).startswith(f"{path}: 1 of 3 chunks are missing from the zarr "
                                        "store (c/2/0; images 4-5)")


def test_the_vector_report_word_for_word() -> None:
    plus = conditioning(np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0], [0.0, -2.0]]))
    assert plus.covariance == CovarianceConditioning(4.0, 1.0, 1.0)
    assert plus.to_dict() == {"raw": plus.raw, "standardized": plus.standardized,
                              "min_max": plus.min_max, "features": 2, "vectors": 4,
                              "covariance": {"raw": 4.0, "standardized": 1.0,
                                             "whitened": 1.0}}
    assert render_conditioning(plus, "p.npy") == (
        "normstats conditioning: p.npy (4 vectors, 2 features)\n"
        "  condition number of the second-moment matrix XᵀX/n (the least-squares Hessian):\n"
        "    raw features                    4\n"
        "    min-max to [0, 1]               5\n"
        "    standardized                    1\n"
        "  condition number of the feature covariance:\n"
        "    as is                           4\n"
        "    standardized                    1   (the correlation matrix)\n"
        "    ZCA-whitened                    1\n"
        "  gradient descent needs ~κ iterations per digit of accuracy: standardize when the "
        "raw number is large (income in dollars and height in inches: ~1e5, ~1 after).")
    bare = Conditioning(12345.678, 1.0, 3.5e-7, 3, 1234567)
    assert bare.to_dict() == {"raw": 12345.678, "standardized": 1.0, "min_max": 3.5e-07,
                              "features": 3, "vectors": 1234567, "covariance": None}
    assert render_conditioning(bare) == (
        "normstats conditioning: vectors (1,234,567 vectors, 3 features)\n"
        "  condition number of the second-moment matrix XᵀX/n (the least-squares Hessian):\n"
        "    raw features            1.235e+04\n"
        "    min-max to [0, 1]         3.5e-07\n"
        "    standardized                    1\n"
        "  gradient descent needs ~κ iterations per digit of accuracy: standardize when the "
        "raw number is large (income in dollars and height in inches: ~1e5, ~1 after).")


def test_the_channel_report_word_for_word() -> None:
    import dataclasses

    x = np.array([[[[0, 0, 3]]], [[[255, 200, 1]]], [[[10, 60, 2]]], [[[40, 7, 90]]],
                  [[[100, 100, 100]]]], np.uint8)
    stats = normstats.compute(x, covariance=True, channels="R,G,B")
    result = channel_conditioning(stats)
    assert result == CovarianceConditioning.of(stats.covariance)
    text = render_channel_conditioning(result, dataclasses.replace(stats, source=""))
    assert text == (
        "normstats conditioning: images (5 images, channels R, G, B)\n"
        "  condition number of the channel covariance:\n"
        f"    as is                {result.raw:12.4g}\n"
        f"    standardized         {result.standardized:12.4g}   (the correlation matrix)\n"
        f"    ZCA-whitened         {result.whitened:12.4g}\n"
        "  standardizing scales each channel; only whitening removes their correlation.")
    assert render_channel_conditioning(result, stats).startswith(
        "normstats conditioning: array (5, 1, 1, 3) uint8 (5 images, channels R, G, B)\n")
    for missing in (normstats.compute(x), object()):
        with pytest.raises(InvalidOptionError) as caught:
            channel_conditioning(missing)
        assert str(caught.value) == ("the result has no channel covariance: compute it with "
                                     "covariance=True (--covariance)")
