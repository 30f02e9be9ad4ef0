"""Estimates from random samples: interval coverage, precision mode, exactness at N."""

from __future__ import annotations

import dataclasses
import math
import statistics
from fractions import Fraction

import numpy as np
import pytest
from conftest import random_images
from oracle import numbers

import normstats
from normstats.analyses.sampling import (
    INTERVAL_FIELDS,
    _per_image,
    _se_of_mean,
    _sqrt_se,
    choose_images,
    estimate_from_records,
    parse_seed,
    render_estimate,
    standard_errors,
    t_quantile,
)
from normstats.analyses.sampling_run import sample_estimate
from normstats.errors import InvalidOptionError
from normstats.maths.records import Records, concat_records, records_from_stack
from normstats.maths.summary import summarize
from normstats.results.findings import Estimate
from normstats.results.stats import DatasetStats
from normstats.sources import open_source

POPULATION = 2000


@pytest.fixture(scope="module")
def dataset():
    """2,000 images of three sizes whose brightness and contrast vary from image to image."""
    rng = np.random.default_rng(11)
    sizes = ((8, 8), (6, 10), (12, 5))
    images = random_images(rng, POPULATION, sizes=sizes)
    groups = [np.stack(images[k::3]) for k in range(3)]
    order = np.argsort(np.concatenate([np.arange(k, POPULATION, 3) for k in range(3)]))
    records = concat_records([records_from_stack(g) for g in groups]).take(order)
    return records, DatasetStats.from_summary(summarize(records))


def test_intervals_cover_the_exact_value(dataset):
    """Over 200 seeds the 95% intervals hold the exact value 90-99% of the time."""
    records, exact = dataset
    hits = {name: np.zeros(3) for name in INTERVAL_FIELDS}
    for seed in range(200):
        sample = records.take(choose_images(POPULATION, 100, np.random.default_rng(seed)))
        estimate = estimate_from_records(sample, POPULATION, seed=seed)
        for name in INTERVAL_FIELDS:
            bounds = np.array(estimate.interval(name))
            truth = np.array(getattr(exact, name))
            hits[name] += (bounds[:, 0] <= truth) & (truth <= bounds[:, 1])
    for name, count in hits.items():
        coverage = count / 200
        assert ((coverage >= 0.90) & (coverage <= 0.99)).all(), (name, coverage)


def test_pixel_independent_intervals_would_be_far_too_narrow(dataset):
    """Why clusters: the naive pixel-level half-width of the mean is many times smaller."""
    records, _ = dataset
    sample = records.take(choose_images(POPULATION, 100, np.random.default_rng(0)))
    stats = estimate_from_records(sample, POPULATION)
    naive = 1.96 * np.array(stats.std) / np.sqrt(sample.pixels.sum())
    assert (np.array(stats.estimate.half_width["mean"]) > 4 * naive).all()


def test_point_estimates_are_the_sample_statistics(dataset):
    records, _ = dataset
    sample = records.take(choose_images(POPULATION, 50, np.random.default_rng(3)))
    stats = estimate_from_records(sample, POPULATION)
    assert stats == DatasetStats.from_summary(summarize(sample))
    assert stats.estimate.sampled == 50 and stats.estimate.population == POPULATION


def test_whole_population_is_exact_with_zero_width(dataset):
    records, exact = dataset
    stats = estimate_from_records(records, POPULATION)
    assert stats == exact
    assert stats.estimate.max_half_width == 0.0 and stats.estimate.exact


def test_sample_reads_only_the_chosen_images(rng):
    data = rng.integers(0, 256, (300, 5, 5, 3), dtype=np.uint8)
    stats = sample_estimate(open_source(data), 40, seed=4, workers=1)
    chosen = choose_images(300, 40, np.random.default_rng(4))
    assert numbers(stats) == numbers(normstats.compute(data[chosen]))
    estimate = stats.estimate
    assert (estimate.sampled, estimate.population, estimate.seed) == (40, 300, 4)


def test_precision_stops_below_eps(rng):
    images = random_images(rng, 1500, sizes=((6, 6),))
    data = np.stack(images)
    estimate = sample_estimate(open_source(data), 32, seed=1, precision=0.01,
                               workers=1).estimate
    assert estimate.max_half_width < 0.01
    assert estimate.sampled < 1500 and estimate.sampled in (32, 64, 128, 256, 512, 1024)
    smaller = sample_estimate(open_source(data), estimate.sampled // 2, seed=1, workers=1)
    assert smaller.estimate.max_half_width >= 0.01  # it did not stop later than needed


def test_precision_reads_everything_when_needed(rng):
    data = rng.integers(0, 256, (20, 3, 3, 1), dtype=np.uint8)
    stats = sample_estimate(open_source(data), 4, seed=0, precision=1e-9, workers=1)
    assert stats.estimate.sampled == 20 and stats.estimate.max_half_width == 0.0
    assert numbers(stats) == numbers(normstats.compute(data))


def test_folder_sample(png_folder):
    root, images = png_folder
    stats = sample_estimate(open_source(root), 10, seed=2, workers=1)
    assert stats.estimate.sampled == 10 and stats.estimate.population == len(images)
    assert stats.mode == "RGB"


def test_t_quantile():
    assert abs(t_quantile(0.975, 5) - 2.5706) < 1e-3
    assert abs(t_quantile(0.975, 30) - 2.0423) < 1e-4


def test_errors(rng):
    data = open_source(rng.integers(0, 256, (5, 2, 2, 1), dtype=np.uint8))
    with pytest.raises(InvalidOptionError, match="sample size, a precision"):
        sample_estimate(data)
    with pytest.raises(InvalidOptionError, match="precision must be positive"):
        sample_estimate(data, precision=0)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_a_seed_numpy_refuses_is_an_option_error(rng, seed):
    data = open_source(rng.integers(0, 256, (5, 2, 2, 1), dtype=np.uint8))
    with pytest.raises(InvalidOptionError) as refused:
        sample_estimate(data, 2, seed=seed)
    assert str(refused.value) == f"seed must be a non-negative integer, got {seed!r}"
    assert sample_estimate(data, 2, seed=np.int64(0), workers=1).estimate.seed == 0


# --- the estimators term by term, on a few images, against exact arithmetic ---------------

def cornish_fisher(p: float, df: int) -> float:
    """Student's t quantile by the Cornish–Fisher expansion of Abramowitz and Stegun 26.7.5,
    its four correction terms summed in exact arithmetic from the normal quantile."""
    from statistics import NormalDist

    z = Fraction(NormalDist().inv_cdf(p))
    terms = [(z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
             (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
             (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160]
    return float(z + sum(t / Fraction(df) ** (k + 1) for k, t in enumerate(terms)))


@pytest.mark.parametrize("df", [1, 2, 3, 7, 99])
@pytest.mark.parametrize("p", [0.975, 0.9, 0.6])
def test_t_quantile_is_the_four_term_expansion(p: float, df: int) -> None:
    assert t_quantile(p, df) == pytest.approx(cornish_fisher(p, df), rel=1e-14, abs=0)


def test_t_quantile_treats_fewer_than_one_degree_of_freedom_as_one() -> None:
    assert t_quantile(0.975, 0) == t_quantile(0.975, -4) == t_quantile(0.975, 1)
    assert t_quantile(0.975, 2.9) == t_quantile(0.975, 2)
    import scipy.stats

    for df in (5, 10, 30, 1000):  # the expansion's accuracy, against the exact quantile
        assert abs(t_quantile(0.975, df) - scipy.stats.t.ppf(0.975, df)) < 1e-3


def exact_errors(images: list[list[list[int]]], population: int,
                 scale: int = 1) -> dict[str, list[float]]:
    """docs/sampling.md's standard errors from the pixels (one list per image and channel),
    in exact arithmetic up to each square root."""
    m, channels = len(images), len(images[0])
    f = Fraction(m, population)

    def se(z: list[Fraction]) -> Fraction:
        mean = sum(z) / m
        return (1 - f) * sum((v - mean) ** 2 for v in z) / (m - 1) / m

    def root(value: Fraction) -> float:
        return math.sqrt(value)

    out: dict[str, list[float]] = {k: [] for k in ("mean", "std", "std_ddof1", "per_image_std",
                                                   "per_image_std_ddof1", "rms_per_image_std")}
    for c in range(channels):
        values = [[Fraction(v, scale) for v in image[c]] for image in images]
        n = [len(v) for v in values]
        n_bar = Fraction(sum(n), m)
        mu = [sum(v) / len(v) for v in values]
        var = [sum((x - u) ** 2 for x in v) / len(v) for v, u in zip(values, mu)]
        r = sum(k * u for k, u in zip(n, mu)) / sum(n)
        big_v = sum(k * (w + (u - r) ** 2) for k, w, u in zip(n, var, mu)) / sum(n)
        out["mean"].append(root(se([k / n_bar * (u - r) for k, u in zip(n, mu)])))
        se_v = root(se([k / n_bar * (w + (u - r) ** 2 - big_v) for k, w, u in zip(n, var, mu)]))
        se_std = se_v / (2 * root(big_v)) if big_v else 0.0
        out["std"].append(se_std)
        out["std_ddof1"].append(se_std * math.sqrt(sum(n) / (sum(n) - 1)))
        out["per_image_std"].append(math.sqrt((1 - f) * statistics.variance(
            [math.sqrt(w) for w in var]) / m))
        samples = [math.sqrt(w * k / (k - 1)) for w, k in zip(var, n) if k > 1]
        out["per_image_std_ddof1"].append(math.sqrt((1 - f) * statistics.variance(samples)
                                                    / len(samples)))
        mean_var = sum(var) / m
        out["rms_per_image_std"].append(root(se(var)) / (2 * root(mean_var)) if mean_var
                                        else 0.0)
    return out


def records_of(images: list[np.ndarray]) -> Records:
    return concat_records([records_from_stack(image[None]) for image in images])


def test_standard_errors_are_the_documented_influences_in_exact_arithmetic() -> None:
    images = [np.array([[[0, 9], [2, 9]]], np.uint8), np.array([[[4, 1]], [[4, 3]], [[7, 3]]],
                                                                np.uint8),
              np.array([[[200, 50], [10, 50], [30, 51]]], np.uint8),
              np.array([[[5, 5]]], np.uint8)]
    pixels = [[image[..., c].ravel().tolist() for c in range(2)] for image in images]
    for population, scale in ((4, 1), (10, 1), (1000, 255)):
        got = standard_errors(records_of(images), population, scale)
        expected = exact_errors(pixels, population, scale)
        for name, values in expected.items():
            if name == "per_image_std_ddof1":  # the one-pixel image has no sample std
                assert got[name].tolist() == pytest.approx(values, rel=1e-13), name
            else:
                assert got[name].tolist() == pytest.approx(values, rel=1e-13, abs=1e-300), name
    float_images = [image.astype(np.float64) / 8 for image in images]
    got = standard_errors(records_of(float_images), 10, 1)
    eighths = exact_errors([[[v for v in channel] for channel in image] for image in pixels],
                           10, 8)
    for name, values in eighths.items():
        assert got[name].tolist() == pytest.approx(values, rel=1e-13), name


def test_standard_errors_at_the_edges() -> None:
    one = records_from_stack(np.array([[[[1], [3]]]], np.uint8))
    assert {k: v.tolist() for k, v in standard_errors(one, 5, 1).items()} == {
        "mean": [math.inf], "std": [math.inf], "std_ddof1": [math.inf],
        "per_image_std": [math.inf], "per_image_std_ddof1": [math.inf],
        "rms_per_image_std": [math.inf]}
    whole = records_of([np.array([[[1], [3]]], np.uint8), np.array([[[5], [9]]], np.uint8)])
    assert all(v.tolist() == [0.0] for v in standard_errors(whole, 2, 1).values())
    assert all(v.tolist() == [0.0] for v in standard_errors(whole, 1, 1).values())  # f > 1
    flat = records_of([np.full((1, 2, 1), 7, np.uint8), np.full((1, 2, 1), 7, np.uint8)])
    errors = standard_errors(flat, 9, 1)
    assert errors["std"].tolist() == [0.0] and errors["rms_per_image_std"].tolist() == [0.0]
    single_pixels = records_of([np.full((1, 1, 1), v, np.uint8) for v in (1, 2, 4)])
    errors = standard_errors(single_pixels, 9, 1)
    assert "per_image_std_ddof1" not in errors and errors["mean"].tolist() == [
        math.sqrt((1 - 3 / 9) * statistics.variance([1, 2, 4]) / 3)]
    one_pixel_in_all = records_of([np.full((1, 1, 1), 1, np.uint8)])
    assert standard_errors(one_pixel_in_all, 3, 1)["std_ddof1"].tolist() == [0.0]



def test_estimates_carry_t_times_the_standard_errors() -> None:
    images = [np.array([[[0], [2]]], np.uint8), np.array([[[4], [4]]], np.uint8),
              np.array([[[1], [9]]], np.uint8)]
    records = records_of(images)
    stats = estimate_from_records(records, 30, seed=12, scale=1, channels=("Y",), mode="L")
    errors = standard_errors(records, 30, 1)
    t = t_quantile(0.975, 2)
    assert stats.estimate == Estimate({name: (float(t * errors[name][0]),)
                                       for name in INTERVAL_FIELDS}, 3, 30, 12, 0.95)
    assert list(stats.estimate.half_width) == list(INTERVAL_FIELDS)
    assert (stats.channels, stats.mode, stats.scale) == (("Y",), "L", 1.0)
    assert stats == DatasetStats.from_summary(summarize(records), scale=1, channels=("Y",),
                                              mode="L")
    single = records_of([np.full((1, 1, 1), v, np.uint8) for v in (1, 2, 4)])
    assert "per_image_std_ddof1" not in estimate_from_records(single, 3).estimate.half_width
    lone = estimate_from_records(records_of([np.full((1, 1, 1), 5, np.uint8)]), 4)
    # one pixel has no sample std: no half-width for what the result does not hold
    assert lone.std_ddof1 is None and lone.per_image_std_ddof1 is None
    assert list(lone.estimate.half_width) == ["mean", "std", "per_image_std",
                                              "rms_per_image_std"]
    assert estimate_from_records(records, 3).estimate.population == 3
    with pytest.raises(InvalidOptionError) as caught:
        estimate_from_records(records, 2)
    assert str(caught.value) == "population 2 is smaller than the sample 3"


def test_per_image_values_are_in_the_reported_scale() -> None:
    records = records_of([np.array([[[0], [2]]], np.uint8), np.array([[[3], [3], [9]]],
                                                                     np.uint8)])
    n, means, variances = _per_image(records, 2.0)
    assert n.tolist() == [2.0, 3.0] and n.dtype == np.float64
    assert means.tolist() == [[0.5], [2.5]] and variances.tolist() == [[0.25], [2.0]]
    floats = records_of([np.array([[[1e8 + 1.0], [1e8 + 3.0]]])])
    assert _per_image(floats, 1.0)[1].tolist() == [[1e8 + 2.0]]
    offset = np.random.default_rng(0).normal(1e8, 1, (50, 3, 5, 1))
    means = _per_image(records_from_stack(offset), 1.0)[1][:, 0]
    exact = [sum(map(Fraction, image.ravel().tolist())) / 15 for image in offset]
    assert all(abs(Fraction(m) - e) <= Fraction(np.spacing(m)) / 2 for m, e in zip(means, exact))


def test_the_standard_error_of_a_mean_and_of_a_square_root() -> None:
    z = np.array([[1.0, 0.0], [3.0, 0.0], [8.0, 0.0]])
    assert _se_of_mean(z, 0.5).tolist() == [math.sqrt(0.5 * statistics.variance([1, 3, 8]) / 3),
                                            0.0]
    assert _se_of_mean(z[:1], 0.5).tolist() == [math.inf, math.inf]
    assert _se_of_mean(z[:2], 1.0).tolist() == [math.sqrt(2.0 / 2), 0.0]
    assert _sqrt_se(np.array([4.0, 0.0, 9.0]), np.array([1.0, 5.0, 3.0])).tolist() == [
        0.25, 0.0, 0.5]


def test_a_zero_spread_gives_a_zero_standard_error_without_a_warning() -> None:
    """A constant channel (V = 0) has se 0 for its std, silently: no RuntimeWarning of
    x/0 or 0/0 reaches the user's terminal from a sampled run."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _sqrt_se(np.array([0.0, 0.0, 4.0]), np.array([5.0, 0.0, 1.0])).tolist() == [
            0.0, 0.0, 0.25]
        flat = records_of([np.full((1, 2, 1), 7, np.uint8)] * 3)
        assert estimate_from_records(flat, 9).estimate.half_width["std"] == (0.0,)


def test_seeds_and_sample_sizes_are_checked() -> None:
    assert parse_seed(None) is None and parse_seed(0) == 0
    assert parse_seed(np.uint8(3)) == 3 and type(parse_seed(np.int64(5))) is int
    for bad in (-1, np.int64(-2), True, 2.0, "1"):
        with pytest.raises(InvalidOptionError) as caught:
            parse_seed(bad)
        assert str(caught.value) == f"seed must be a non-negative integer, got {bad!r}"
    rng = np.random.default_rng(3)
    assert choose_images(10, 4, rng).tolist() == sorted(
        np.random.default_rng(3).permutation(10)[:4].tolist())
    assert choose_images(3, 1, np.random.default_rng(0)).size == 1
    for size in (0, -2):
        with pytest.raises(InvalidOptionError) as caught:
            choose_images(10, size, rng)
        assert str(caught.value) == f"sample size must be positive, got {size}"


def _sampled(estimate: Estimate) -> DatasetStats:
    stats = DatasetStats(channels=("R", "long-name"), mean=(0.5, 0.25), std=(0.125, 1.0),
                         std_ddof1=(0.25, 2.0), per_image_std=(0.0625, 0.5),
                         per_image_std_ddof1=None, rms_per_image_std=None, min=(0.0, 0.0),
                         max=(1.0, 1.0), images=40, pixels_per_channel=640, dtype="uint8",
                         scale=255.0)
    return dataclasses.replace(stats, estimate=estimate)


def test_the_estimate_report_word_for_word() -> None:
    half = {"mean": (0.01, 0.00005), "std": (0.002, 0.5), "per_image_std": (0.0, 1.0)}
    lines = render_estimate(_sampled(Estimate(half, 1234, 5678, 9)))
    assert lines == [
        "ESTIMATE from a uniform random sample of 1,234 of 5,678 images (seed 9: --seed 9 "
        "draws the same images); not the exact values.",
        "95% confidence intervals treat each image as one cluster of correlated pixels (see "
        "docs/sampling.md); min and max are those of the sample.",
        "  mean                  R: 0.5000 ± 0.0100  long-name: 0.2500 ± 0.0001",
        "  std                   R: 0.1250 ± 0.0020  long-name: 1.0000 ± 0.5000",
        "  per_image_std         R: 0.0625 ± 0.0000  long-name: 0.5000 ± 1.0000"]
    short = dataclasses.replace(_sampled(Estimate({"std_ddof1": (0.0, 0.0)}, 3, 3)),
                                channels=("R", "G"))
    assert render_estimate(short)[0] == (
        "EXACT: the sample grew to all 3 images, so these are the dataset's own values "
        "(half-widths 0).")
    assert render_estimate(short)[2] == ("  std_ddof1           R: 0.2500 ± 0.0000  G: 2.0000 "
                                         "± 0.0000")
    asked = _sampled(Estimate({"mean": (0.0, 0.0)}, 3000, 3000, 1, requested=5000))
    assert render_estimate(asked)[0] == (
        "EXACT: --sample 5,000 is more than the 3,000 images of the dataset, so all of them "
        "were used: these are the dataset's own values (half-widths 0).")
    with pytest.raises(InvalidOptionError) as caught:
        render_estimate(dataclasses.replace(asked, estimate=None))
    assert str(caught.value) == "not a sampled result: it has no estimate"
