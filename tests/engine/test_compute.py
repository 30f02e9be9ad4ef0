"""The core contract: every variant equals an exact oracle, however the work is split."""

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import random_images
from oracle import assert_matches_oracle

import normstats
from normstats import EmptyDatasetError


@pytest.mark.parametrize("dtype, scale", [(np.uint8, 255), (np.uint16, 65535)])
def test_integer_images_match_the_exact_oracle(dtype, scale, rng):
    images = random_images(rng, 30, dtype=dtype, sizes=((6, 6),))
    stats = normstats.compute(np.stack(images))
    assert stats.scale == scale and stats.dtype == np.dtype(dtype).name
    assert_matches_oracle(stats, images, scale)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_results_are_bit_identical_for_any_task_size_workers_and_scheduler(dtype, rng):
    images = np.stack(random_images(rng, 40, dtype=dtype, sizes=((7, 5),)))
    runs = [normstats.compute(images, task_size=size, workers=workers, scheduler=scheduler)
            for size in (1, 7, None, 40)
            for workers, scheduler in ((1, "sync"), (2, "threads"), (2, "processes"))]
    assert all(run == runs[0] for run in runs[1:])


def test_two_constant_images_give_pooled_half_and_per_image_zero():
    images = np.stack([np.zeros((4, 4, 3), np.uint8), np.full((4, 4, 3), 255, np.uint8)])
    stats = normstats.compute(images)
    assert stats.mean == (0.5,) * 3
    assert stats.std == (0.5,) * 3
    assert stats.per_image_std == (0.0,) * 3
    assert stats.per_image_std_ddof1 == (0.0,) * 3
    assert stats.rms_per_image_std == (0.0,) * 3


def test_constant_images_give_exactly_zero_never_nan():
    for images in (np.full((3, 5, 5, 1), 7, np.uint8), np.full((3, 5, 5, 1), 0.3)):
        stats = normstats.compute(images)
        assert stats.std == (0.0,) and stats.per_image_std == (0.0,)
        assert not any(math.isnan(v) for v in stats.std + stats.per_image_std)


def test_float32_image_at_1e4_has_variance_within_1e_9(rng):
    image = (1e4 + rng.normal(size=(1, 300, 300, 1))).astype(np.float32)
    values = [Fraction(float(v)) for v in image.ravel()]
    mean = sum(values) / len(values)
    exact = sum((v - mean) ** 2 for v in values) / len(values)
    stats = normstats.compute(image)
    assert stats.scale == 1.0
    assert abs(stats.std[0] ** 2 - float(exact)) < 1e-9
    assert abs(stats.per_image_std[0] ** 2 - float(exact)) < 1e-9


def test_float64_at_1e8_is_within_1e_12_of_the_fraction_oracle(rng):
    images = [1e8 + rng.normal(size=(9, 9, 2)) * s for s in (1.0, 3.0, 0.01)]
    images.append(np.full((2, 1, 2), 1e8 + 5.0))  # a tiny partition next to big ones
    stats = normstats.compute(iter(images), layout="HWC")  # 2 channels: the shape cannot say
    for c in range(2):
        values = [Fraction(float(v)) for img in images for v in img[:, :, c].ravel()]
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / len(values)
        assert stats.mean[c] == pytest.approx(float(mean), rel=1e-15)
        assert stats.std[c] ** 2 == pytest.approx(float(variance), rel=1e-12)


def test_vector_data_gives_per_feature_statistics(rng):
    x = rng.normal(loc=[3000, 69], scale=[400, 3], size=(500, 2))
    stats = normstats.compute(x)
    assert stats.kind == "vectors" and stats.per_image_std is None
    for j in range(2):
        column = [Fraction(v) for v in x[:, j]]
        mean = sum(column) / len(column)
        assert stats.mean[j] == pytest.approx(float(mean), rel=1e-15)
        variance = sum((v - mean) ** 2 for v in column) / len(column)
        assert stats.std[j] ** 2 == pytest.approx(float(variance), rel=1e-12)


def test_an_iterable_of_image_label_pairs_matches_the_array(rng):
    images = random_images(rng, 12, sizes=((6, 6),))
    from_array = normstats.compute(np.stack(images))
    # (image, label) tuples in CHW, as a PyTorch Dataset with ToTensor-like layout yields them
    dataset = [(img.transpose(2, 0, 1), i % 3) for i, img in enumerate(images)]
    from_iterable = normstats.compute(dataset)
    assert from_iterable.mean == from_array.mean and from_iterable.std == from_array.std
    assert from_iterable.per_image_std == from_array.per_image_std


def test_images_of_different_sizes_in_an_iterable(rng):
    images = random_images(rng, 9)  # (3, 2, 3) among them: either end could be channels
    assert_matches_oracle(normstats.compute(images, layout="HWC"), images, 255)


def test_scale_override(rng):
    images = random_images(rng, 5, sizes=((4, 4),))
    stats = normstats.compute(np.stack(images), scale=1)
    assert stats.scale == 1.0
    assert_matches_oracle(stats, images, 1)


def test_empty_input_is_a_clear_error():
    with pytest.raises(EmptyDatasetError, match="no usable image"):
        normstats.compute(np.zeros((0, 4, 4, 3), np.uint8))
    with pytest.raises(EmptyDatasetError):
        normstats.compute([])


def test_json_round_trip(rng):
    stats = normstats.compute(np.stack(random_images(rng, 5, sizes=((4, 4),))))
    assert normstats.DatasetStats.from_json(stats.to_json()) == stats


def test_single_pixel_images_have_no_sample_std():
    stats = normstats.compute(np.array([[[[10]]], [[[20]]]], np.uint8))
    assert stats.per_image_std == (0.0,)
    assert stats.per_image_std_ddof1 is None
    with pytest.raises(normstats.InvalidOptionError, match="not defined"):
        stats.variant("per_image_std_ddof1")
