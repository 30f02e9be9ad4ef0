"""Vector data as scikit-learn users expect it: NaN per feature, exact integers, raw units.

Oracles: scikit-learn's ``StandardScaler`` (NaN ignored per feature), and Python ints /
``fractions.Fraction`` where float64 cannot hold the answer (int64 values near 2**62).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.preprocessing import StandardScaler

import normstats
from normstats.engine.vectors_run import compute_vectors
from normstats.maths.vectors import summarize_vectors
from normstats.sources.arrays import ArraySource
from normstats_cli import main


def exact_mean_var(column: list[int | float]) -> tuple[Fraction, Fraction]:
    values = [Fraction(v) for v in column]
    mean = sum(values, Fraction(0)) / len(values)
    return mean, sum(((v - mean) ** 2 for v in values), Fraction(0)) / len(values)


@pytest.fixture
def table(rng) -> np.ndarray:
    x = rng.normal([10.0, -3.0, 1e6], [2.0, 0.5, 3.0], size=(500, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    x[7, 0] = np.nan  # a NaN in column 0 must not touch the other columns of row 7
    return x


def test_nan_is_ignored_per_feature_like_standard_scaler(table):
    stats = normstats.compute(table)
    scaler = StandardScaler().fit(table)
    np.testing.assert_allclose(stats.mean, scaler.mean_, rtol=1e-13)
    np.testing.assert_allclose(np.square(stats.std), scaler.var_, rtol=1e-12)
    assert stats.counts == tuple(int(n) for n in scaler.n_samples_seen_)
    for j in range(3):
        column = table[:, j][~np.isnan(table[:, j])].tolist()
        mean, var = exact_mean_var(column)
        assert stats.mean[j] == pytest.approx(float(mean), rel=1e-15)
        assert stats.std[j] == pytest.approx(math.sqrt(float(var)), rel=1e-12)


def test_a_nan_in_one_column_leaves_the_others_unchanged(rng):
    clean = rng.normal(size=(500, 3))
    dirty = clean.copy()
    dirty[3, 0] = np.nan
    a, b = normstats.compute(clean), normstats.compute(dirty)
    assert a.mean[1:] == b.mean[1:] and a.std[1:] == b.std[1:]
    assert b.counts == (499, 500, 500)


def test_int64_near_2_62_is_exact_where_float64_conversion_is_not(rng):
    x = (2**62 - rng.integers(0, 600, size=(200, 2))).astype(np.int64)
    stats = normstats.compute(x)
    assert stats.scale == 1.0 and stats.dtype == "int64"
    for j in range(2):
        mean, var = exact_mean_var([int(v) for v in x[:, j]])
        assert stats.mean[j] == float(mean)
        assert stats.std[j] == math.sqrt(float(var))
        naive = x[:, j].astype(np.float64)
        assert abs(naive.std() - math.sqrt(float(var))) / math.sqrt(float(var)) > 0.05


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint32, np.uint64])
def test_every_integer_width_in_raw_units_like_standard_scaler(rng, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -1000), min(info.max, 1000), size=(300, 4)).astype(dtype)
    stats = normstats.compute(x)
    scaler = StandardScaler().fit(x.astype(np.float64))
    assert stats.scale == 1.0
    np.testing.assert_allclose(stats.mean, scaler.mean_, rtol=1e-14)
    np.testing.assert_allclose(stats.std, scaler.scale_, rtol=1e-14)


def test_infinite_values_are_named_by_row_and_column_or_fatal():
    x = np.array([[1.0, 2.0], [np.inf, 3.0], [4.0, -np.inf]])
    stats = normstats.compute(x)
    assert [(s.path.split("[")[-1], s.reason) for s in stats.skipped] == \
        [("1, 0]", "infinite value"), ("2, 1]", "infinite value")]
    assert stats.counts == (2, 2) and stats.mean == (2.5, 2.5)
    with pytest.raises(normstats.UnreadableInputError, match="infinite value at row 1, column 0"):
        normstats.compute(x, on_error="fail")


def test_blocks_of_rows_merge_exactly_and_chunking_changes_no_bit(rng, monkeypatch):
    from normstats.engine import vectors_run

    x = rng.normal(1e8, 1.0, size=(1000, 2))  # badly conditioned: offset 1e8, spread 1
    monkeypatch.setattr(vectors_run, "BLOCK_ROWS", 7)
    stats = compute_vectors(ArraySource(x))
    for j in range(2):
        mean, var = exact_mean_var(x[:, j].tolist())
        assert stats.std[j] == pytest.approx(math.sqrt(float(var)), rel=1e-12)
    import zarr

    chunked = zarr.create_array(store={}, shape=x.shape, chunks=(13, 1), dtype=x.dtype)
    chunked[:] = x
    assert compute_vectors(ArraySource(chunked, layout="NC")) == \
        compute_vectors(ArraySource(x, layout="NC"))


def test_an_all_nan_feature_is_a_clear_error():
    with pytest.raises(normstats.EmptyDatasetError, match="feature 1 has no finite value"):
        normstats.compute(np.array([[1.0, np.nan], [2.0, np.nan]]))


def test_the_cli_prints_a_standard_scaler_line_and_the_counts(tmp_path, table):
    np.save(tmp_path / "x.npy", table)
    result = CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy"), "--no-cache"])
    assert result.exit_code == 0, result.output
    assert "StandardScaler: mean_=[" in result.output and "scale_=" in result.output
    assert "torchvision" not in result.output
    assert "values" in result.output and "NaN values are left out per feature" in result.output
    data = normstats.DatasetStats.from_json(CliRunner().invoke(
        main, ["compute", str(tmp_path / "x.npy"), "--no-cache", "--json"]).output)
    assert data.counts == normstats.compute(table).counts


def test_vectors_with_no_feature_are_one_line_not_an_empty_result():
    with pytest.raises(normstats.UnreadableInputError,
                       match=r"vectors of shape \(5, 0\) have no features"):
        summarize_vectors(np.zeros((5, 0)))
    with pytest.raises(normstats.UnreadableInputError, match="features .* has length 0"):
        normstats.compute(np.zeros((5, 0)))


def test_values_whose_squares_overflow_are_skipped_or_fatal_by_row_and_column():
    from normstats.maths.records import TOO_LARGE_REASON, Skipped

    x = np.array([[1.0, 2.0**500], [np.inf, 3.0], [4.0, -(2.0**481)]])
    summary = summarize_vectors(x, first_row=10, name="t.npy")
    assert summary.skipped == (Skipped("t.npy[11, 0]", "infinite value"),
                               Skipped("t.npy[10, 1]", TOO_LARGE_REASON),
                               Skipped("t.npy[12, 1]", TOO_LARGE_REASON))
    assert (summary.rows, summary.dtype) == (3, "float64")
    assert summary.finalize(2.0) == {"mean": (1.25, 1.5), "variance": (0.5625, 0.0),
                                     "variance_ddof1": (1.125, None), "min": (0.5, 1.5),
                                     "max": (2.0, 1.5), "counts": (2, 1)}
    with pytest.raises(normstats.UnreadableInputError) as raised:
        summarize_vectors(x, first_row=10, name="t.npy", fail_on_inf=True)
    assert str(raised.value) == "t.npy: infinite value at row 11, column 0"
    with pytest.raises(normstats.UnreadableInputError) as raised:
        summarize_vectors(x[[0, 2]], first_row=10, name="t.npy", fail_on_inf=True)
    assert str(raised.value) == f"t.npy: value too large at row 10, column 1: {TOO_LARGE_REASON}"
    edge = summarize_vectors(np.array([[2.0**480], [-(2.0**480)]]))
    assert edge.skipped == () and edge.features[0].count == 2  # the limit itself is kept


def test_float32_float16_and_bool_vectors():
    for dtype in (np.float32, np.float16):
        summary = summarize_vectors(np.array([[1, 2], [3, 5], [np.inf, 1]], dtype))
        done = summary.finalize(1.0)
        assert (done["mean"], done["min"], done["max"], done["counts"]) == \
            ((2.0, 8 / 3), (1.0, 1.0), (3.0, 5.0), (2, 3))
        # float features: within 1e-12 of the exact value (docs: float accumulation)
        assert done["variance"] == pytest.approx((1.0, 26 / 9), rel=1e-12, abs=0)
        assert done["variance_ddof1"] == pytest.approx((2.0, 13 / 3), rel=1e-12, abs=0)
        assert len(summary.skipped) == 1
    flags = summarize_vectors(np.array([[True, False], [True, True]]))
    assert flags.finalize(1.0)["mean"] == (1.0, 0.5)
    assert flags.finalize(1.0)["variance"] == (0.0, 0.25)
    assert flags.dtype == "bool"  # summed as 0/1, reported as what the user gave
    assert flags.merge(summarize_vectors(np.array([[False, True]]))).dtype == "bool"


def test_summaries_of_rows_merge_and_refuse_other_widths():
    a = summarize_vectors(np.array([[1.0, 3.0], [4.0, np.nan]]), name="t")
    b = summarize_vectors(np.array([[-7.0, 0.5]]), first_row=2, name="t")
    merged = a.merge(b)
    assert merged.rows == 3 and merged.dtype == "float64"
    assert merged.finalize(1.0)["min"] == (-7.0, 0.5)
    assert merged.finalize(1.0)["max"] == (4.0, 3.0)
    assert merged.finalize(1.0)["counts"] == (3, 2)
    whole = summarize_vectors(np.array([[1.0, 3.0], [4.0, np.nan], [-7.0, 0.5]]))
    assert merged.finalize(1.0)["variance"] == \
        pytest.approx(whole.finalize(1.0)["variance"], rel=1e-12, abs=0)
    integers = summarize_vectors(np.array([[5], [-2]], np.int64))
    assert integers.merge(summarize_vectors(np.zeros((0, 1), np.int64))) == integers
    assert summarize_vectors(np.zeros((0, 1), np.int64)).merge(integers) == integers
    assert integers.finalize(1.0)["min"] == (-2.0,) and integers.finalize(1.0)["max"] == (5.0,)
    with pytest.raises(ValueError, match="^cannot merge vectors of different feature counts$"):
        a.merge(summarize_vectors(np.zeros((1, 3))))
    with pytest.raises(ValueError, match=r"^vector data must be \(N, d\), got shape \(3,\)$"):
        summarize_vectors(np.zeros(3))


def test_the_co_moments_are_those_of_the_complete_rows_only():
    """Integer rows are all complete (exact Python-int co-moments); float rows count only
    where every feature is finite and within the limit (the limit itself is in)."""
    from normstats.maths.covariance import CoMoments
    from normstats.maths.exact import FIXED_BITS
    from normstats.maths.records import FLOAT_LIMIT

    ints = np.array([[1, 2], [3, -4], [5, 6]], np.int16)
    assert summarize_vectors(ints, covariance=True).co_moments == CoMoments.from_integers(ints)
    assert summarize_vectors(ints).co_moments is None
    x = np.array([[1.0, 2.0], [np.nan, 1.0], [3.0, np.inf], [FLOAT_LIMIT, 0.5],
                  [2.0**481, 1.0], [0.25, -3.0]])
    found = summarize_vectors(x, covariance=True).co_moments
    assert found == CoMoments.from_floats(x[[0, 3, 5]]) and found.count == 3
    assert summarize_vectors(x[[1, 2, 4]], covariance=True).co_moments == \
        CoMoments(0, (0, 0), (0, 0, 0), FIXED_BITS)
    three = summarize_vectors(np.full((2, 3), np.nan), covariance=True).co_moments
    assert three == CoMoments(0, (0,) * 3, (0,) * 6, FIXED_BITS)


def test_merged_summaries_keep_co_moments_only_when_both_have_them():
    a = summarize_vectors(np.array([[1.0, 3.0], [4.0, 2.0]]), covariance=True)
    b = summarize_vectors(np.array([[-7.0, 0.5]]), first_row=2, covariance=True)
    plain = summarize_vectors(np.array([[-7.0, 0.5]]), first_row=2)
    assert a.merge(b).co_moments == a.co_moments.merge(b.co_moments)
    assert a.merge(b).co_moments.count == 3
    assert a.merge(plain).co_moments is None and plain.merge(a).co_moments is None


def test_rows_are_named_from_zero_in_the_array_by_default():
    from normstats.maths.records import Skipped

    summary = summarize_vectors(np.array([[1.0, np.inf], [2.0, 3.0]]))
    assert summary.skipped == (Skipped("array[0, 1]", "infinite value"),)
    with pytest.raises(normstats.UnreadableInputError) as raised:
        summarize_vectors(np.zeros((3, 0)))
    assert str(raised.value) == ("array: vectors of shape (3, 0) have no features (axis 1 has "
                                 "length 0): that is not a dataset")
    with pytest.raises(normstats.EmptyDatasetError) as raised:
        summarize_vectors(np.array([[np.nan, 1.0]])).finalize(1.0)
    assert str(raised.value) == ("feature 0 has no finite value (all NaN, infinite or "
                                 "skipped), so it has no statistic")


def test_bool_features_are_summed_as_integers_and_narrow_floats_compare_silently():
    import warnings

    from normstats.maths.moments import IntegerMoments

    flags = summarize_vectors(np.array([[True, False], [True, True]]))
    assert all(isinstance(f.moments, IntegerMoments) for f in flags.features)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float16/32 are never beyond the limit: no cast
        for dtype in (np.float16, np.float32):
            assert summarize_vectors(np.array([[1, 2], [3, 65504]], dtype)).skipped == ()
