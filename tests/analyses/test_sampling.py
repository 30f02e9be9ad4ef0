"""Estimates from random samples: interval coverage, precision mode, exactness at N."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import random_images
from oracle import numbers

import normstats
from normstats.analyses.sampling import (
    INTERVAL_FIELDS,
    choose_images,
    estimate_from_records,
    t_quantile,
)
from normstats.analyses.sampling_run import sample_estimate
from normstats.errors import InvalidOptionError
from normstats.maths.records import concat_records, records_from_stack
from normstats.maths.summary import summarize
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
