"""The mean image accumulators: exact against a Fraction oracle, the same bits however the
images are split, one size only."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import exact_mean_image

from normstats.errors import IncompatibleImagesError, NormstatsError
from normstats.maths import fused
from normstats.maths.mean_image import MAX_IMAGES, MeanImageBuilder, PositionSums


def integer_images(rng: np.random.Generator, dtype: type, count: int,
                   shape=(3, 4, 2)) -> np.ndarray:
    if dtype is np.bool_:
        return rng.integers(0, 2, (count, *shape)).astype(bool)
    info = np.iinfo(dtype)
    return rng.integers(info.min, int(info.max) + 1, (count, *shape), dtype=dtype)


def built(images: np.ndarray, cuts: list[int], with_std: bool = True, one_by_one=()):
    """Totals of ``images`` cut at ``cuts`` into parts merged in order; the parts whose
    index is in ``one_by_one`` are added image by image, the others as stacks."""
    total = None
    bounds = [0, *cuts, len(images)]
    for index, (a, b) in enumerate(zip(bounds, bounds[1:])):
        builder = MeanImageBuilder(with_std)
        if index in one_by_one:
            for i in range(a, b):
                builder.add(f"image {i}", images[i])
        else:
            builder.add_stack(f"image {a}", images[a:b])
        part = builder.result()
        if part is not None:
            total = part if total is None else total.merge(part)
    return total


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int8, np.int16, np.bool_])
def test_integer_mean_and_std_equal_the_exact_fractions(rng, dtype):
    # 600 images: the 8-bit runs fold into int64 after 257 images, twice
    images = integer_images(rng, dtype, 600)
    scale = 255 if dtype is np.uint8 else 1
    mean, std = built(images, [300], one_by_one={0}).finalize(scale)
    expected_mean, expected_std = exact_mean_image(images, scale)
    assert mean.dtype == std.dtype == np.float64
    assert np.array_equal(mean, expected_mean)
    assert np.array_equal(std, expected_std)


def test_16_bit_sums_past_int64_stay_exact(rng):
    """40,000 uint16 images of a few pixels: N·Σx² passes 2⁶² (Python ints), and the
    extreme values make each Σx² part large."""
    images = rng.choice(np.array([0, 1, 65534, 65535], np.uint16), size=(40_000, 1, 2, 1))
    mean, std = built(images, [1, 20_000], one_by_one={1}).finalize(65535)
    expected_mean, expected_std = exact_mean_image(images, 65535)
    assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)


def test_any_split_and_order_gives_the_same_bits(rng):
    images = integer_images(rng, np.uint8, 700, shape=(5, 3, 3))
    reference = built(images, [], one_by_one={0}).finalize(255)
    for cuts, one_by_one in (([1], {1}), ([256, 257, 258], {0, 2}), ([100, 600], set())):
        found = built(images, cuts, one_by_one=one_by_one).finalize(255)
        assert all(np.array_equal(a, b) for a, b in zip(found, reference))
    parts = [built(images[a:b], []) for a, b in ((0, 100), (100, 450), (450, 700))]
    backwards = parts[2].merge(parts[1]).merge(parts[0]).finalize(255)
    assert all(np.array_equal(a, b) for a, b in zip(backwards, reference))


def test_a_user_scale_that_is_no_integer_is_still_rounded_once(rng):
    images = integer_images(rng, np.uint8, 50)
    mean, std = built(images, [20]).finalize(0.1)  # Fraction(0.1) has a 2**55 denominator
    expected_mean, expected_std = exact_mean_image(images, 0.1)
    assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)


def test_float_images_are_accurate_on_badly_conditioned_data(rng):
    """Offset 1e8 with unit spread: the naive Σx² formula loses every digit there."""
    images = 1e8 + rng.normal(0, 1, (300, 2, 3, 1))
    images[::7] += 1e-3  # tiny and huge parts together
    for cuts, one_by_one in (([], {0}), ([1, 150], {1}), ([37, 38, 200], {2})):
        mean, std = built(images, cuts, one_by_one=one_by_one).finalize(1)
        expected_mean, expected_std = exact_mean_image(images, 1)
        np.testing.assert_allclose(mean, expected_mean, rtol=1e-15, atol=0)
        np.testing.assert_allclose(std, expected_std, rtol=2e-15, atol=0)


def test_float32_images_accumulate_in_float64(rng):
    images = (1e4 + rng.normal(0, 1, (200, 2, 2, 3))).astype(np.float32)
    mean, std = built(images, [50], one_by_one={0}).finalize(1)
    expected_mean, expected_std = exact_mean_image(images, 1)
    np.testing.assert_allclose(mean, expected_mean, rtol=1e-15, atol=0)
    np.testing.assert_allclose(std, expected_std, rtol=2e-15, atol=0)


def test_constant_images_have_std_zero_never_negative():
    images = np.full((300, 2, 2, 3), 77, np.uint8)
    mean, std = built(images, [100], one_by_one={0}).finalize(255)
    assert (mean == 77 / 255).all() and (std == 0).all()
    floats = np.full((30, 2, 2, 1), 0.1)
    assert (built(floats, [7], one_by_one={1}).finalize(1)[1] == 0).all()


def test_mean_only_keeps_no_squares(rng):
    totals = built(integer_images(rng, np.uint16, 10), [4], with_std=False)
    assert totals.square_low is None and totals.square_high is None
    assert totals.finalize(1)[1] is None
    with pytest.raises(NormstatsError, match="mean_image_std=True"):
        totals.std()


def test_two_sizes_are_refused_naming_both():
    builder = MeanImageBuilder()
    builder.add("a.png", np.zeros((4, 5, 3), np.uint8))
    with pytest.raises(IncompatibleImagesError, match=r"a\.png is 4×5×3 uint8 but b\.png is "
                                                      r"5×4×3 uint8; give resize="):
        builder.add("b.png", np.zeros((5, 4, 3), np.uint8))
    other = MeanImageBuilder()
    other.add("c.png", np.zeros((4, 5, 3), np.uint16))
    with pytest.raises(IncompatibleImagesError, match="c.png is 4×5×3 uint16"):
        builder.result().merge(other.result())


def test_more_images_than_the_int64_parts_hold_is_refused():
    builder = MeanImageBuilder()
    builder.add("a", np.zeros((1, 1, 1), np.uint8))
    totals = builder.result()
    huge = PositionSums(totals.shape, totals.dtype, "b", MAX_IMAGES - 1, totals.total)
    with pytest.raises(NormstatsError, match="2\\*\\*47 images"):
        totals.merge(huge)


def test_a_builder_with_no_image_gives_nothing():
    assert MeanImageBuilder().result() is None
    started = MeanImageBuilder(with_std=True)
    started.start("x", (2, 2, 1), np.dtype(np.float32))
    assert started.result().count == 0


def test_saturated_8_bit_runs_never_wrap():
    """257 images of 255 fill a uint16 run exactly; one more would wrap it."""
    images = np.full((1000, 2, 2, 3), 255, np.uint8)
    mean, std = built(images, [258], one_by_one={0, 1}).finalize(255)
    assert (mean == 1.0).all() and (std == 0.0).all()


@pytest.fixture(params=["compiled", "numpy"])
def kernel(request, monkeypatch):
    """The compiled running sums, and numpy's passes of an installation without them."""
    if request.param == "numpy":
        monkeypatch.setattr(fused, "_extension", lambda: None)
    return request.param


@pytest.mark.parametrize("count", [256, 257, 258, 514, 515])
@pytest.mark.parametrize("how", ["one by one", "a stack", "mixed"])
@pytest.mark.parametrize("with_std", [False, True])
def test_8_bit_images_of_255_at_the_fold_boundaries_keep_python_integers(count, how, with_std,
                                                                        kernel):
    """Runs of 257 images fold into int64: at 256, 257 and 258 images (and twice that) the
    totals are 255·N and 255²·N, added image by image, as one stack, or as 100 images and
    then a stack that the run's end splits."""
    images = np.full((count, 3, 5, 3), 255, np.uint8)
    builder = MeanImageBuilder(with_std)
    first = {"one by one": count, "a stack": 0, "mixed": 100}[how]
    for i in range(first):
        builder.add(f"image {i}", images[i])
    builder.add_stack(f"image {first}", images[first:])
    totals = builder.result()
    assert totals.count == count
    assert {int(v) for v in totals.total.ravel()} == {255 * count}
    if with_std:
        assert {int(v) for v in totals.square_low.ravel()} == {255**2 * count}
        assert totals.square_high is None
    else:
        assert totals.square_low is None


def test_8_bit_images_match_the_exact_oracle_with_either_kernel(rng, kernel):
    """Odd positions (not a multiple of any vector width), 600 images cut across folds."""
    images = integer_images(rng, np.uint8, 600, shape=(7, 11, 3))
    mean, std = built(images, [250, 300], one_by_one={0, 2}).finalize(255)
    expected_mean, expected_std = exact_mean_image(images, 255)
    assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_adding_in_place_equals_merging_and_leaves_the_parts_alone(rng, dtype):
    """A total made by a merge takes further parts into its own arrays; the parts, and a
    total that is still a task's uint16 run, are never written into."""
    images = integer_images(rng, dtype, 60)
    parts = [built(images[a:b], []) for a, b in ((0, 10), (10, 35), (35, 60))]
    before = [[None if a is None else a.copy() for a in (p.total, p.square_low, p.square_high)]
              for p in parts]
    merged = parts[0].merge(parts[1]).merge(parts[2])
    running = parts[0].merge(parts[1])
    arrays = running.total
    in_place = running.add_in_place(parts[2])
    assert in_place.total is arrays and in_place.count == 60
    assert all(np.array_equal(a, b) for a, b in zip(in_place.finalize(), merged.finalize()))
    for part, saved in zip(parts, before):
        now = (part.total, part.square_low, part.square_high)
        assert all(a is b is None or np.array_equal(a, b) for a, b in zip(now, saved))
    run = parts[0]  # a task's value: uint16 for 8-bit images, added into by no one
    if dtype is np.uint8:
        assert run.total.dtype == np.uint16
        assert run.add_in_place(parts[1]).total is not run.total
        assert np.array_equal(run.total, before[0][0])


def test_exact_totals_are_divided_with_one_rounding_at_any_size():
    """The float path only where numerator·q and p are exact in float64; Python's
    correctly rounded int / int beyond (where two roundings would differ)."""
    from fractions import Fraction

    from normstats.maths.mean_image import _divide

    def exact(values: list[int], d: Fraction) -> list[float]:
        return [float(Fraction(v) / d) for v in values]

    cases = [([[1, 2], [3, -4]], Fraction(5, 3)),
             ([1686293080695965], Fraction(170, 7)),  # n·q past 2**53
             ([827037], Fraction(10698018013524571)),  # p past 2**53
             ([2**70, 3], Fraction(1, 7))]
    for values, d in cases:
        numerators = np.array(values, dtype=object if values[0] == 2**70 else np.int64)
        assert _divide(numerators, d).ravel().tolist() == exact(np.ravel(values).tolist(), d)
    assert _divide(np.zeros((0, 2), np.int64), Fraction(1, 3)).shape == (0, 2)


def test_the_std_of_many_16_bit_images_whose_numerator_passes_int64():
    """100,000 images of 0 and 65535: N²·variance ≈ 1.07e19 > 2⁶³, so the numerator is
    taken as Python ints; the std is the square root of the correctly rounded variance."""
    from fractions import Fraction

    stack = np.zeros((100_000, 1, 1, 1), np.uint16)
    stack[::2] = 65535
    stack[1::4] = 12345
    builder = MeanImageBuilder(with_std=True)
    builder.add_stack("x[0]", stack)
    values = stack.ravel().tolist()
    n, total = len(values), sum(values)
    variance = Fraction(n * sum(v * v for v in values) - total * total, n * n)
    mean, std = builder.result().finalize()
    assert mean.ravel().tolist() == [float(Fraction(total, n))]
    assert std.ravel().tolist() == [float(np.sqrt(float(variance)))]
    assert builder.result().std(scale=65535).ravel().tolist() == [
        float(np.sqrt(float(variance / 65535**2)))]


def test_float_mean_images_in_their_scale_and_a_std_not_asked_for():
    stack = np.array([1.0, 2.0, 6.0]).reshape(3, 1, 1, 1) + 1e8
    plain = MeanImageBuilder()
    plain.add_stack("x[0]", stack)
    moments = plain.result()
    assert moments.mean().ravel().tolist() == [1e8 + 3] and \
        moments.mean(2).ravel().tolist() == [(1e8 + 3) / 2]
    assert moments.finalize()[1] is None
    with pytest.raises(NormstatsError) as caught:
        moments.std()
    assert str(caught.value) == ("the std of the mean image was not computed (ask for it with "
                                 "mean_image_std=True)")
    both = MeanImageBuilder(with_std=True)
    both.add_stack("x[0]", stack)
    assert both.result().std().ravel().tolist() == [float(np.sqrt(14 / 3))]
    assert both.result().std(2).ravel().tolist() == [float(np.sqrt(14 / 3)) / 2]
    empty = MeanImageBuilder(with_std=True)
    empty.start("x[0]", (1, 1, 1), np.dtype(np.float64))
    merged = empty.result().merge(both.result())
    assert merged.count == 3 and merged.mean().ravel().tolist() == [1e8 + 3]
    assert both.result().merge(empty.result()).count == 3
    with pytest.raises(IncompatibleImagesError) as caught:
        MeanImageBuilder().add("a.png", np.zeros((2, 2), np.uint8))
    assert str(caught.value) == "the mean image takes images (H, W, C); a.png has shape (2, 2)"
