"""Fused normalization against the float64 formula, and folding into the first layer."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from normstats.errors import NormstatsError
from normstats.nn import Normalize, fold_into_first_layer

MEAN = (0.49140105, 0.48215663, 0.44653168)  # CIFAR-10 training-set mean (published)
STD = (0.24703284, 0.24348499, 0.26158834)
STATS = SimpleNamespace(channels=("R", "G", "B"), mean=MEAN, std=STD,
                        per_image_std=(0.20220193, 0.19931635, 0.20086373), scale=255.0)


def formula(x: np.ndarray, mean: Any = MEAN, std: Any = STD, scale: float = 255.0) -> np.ndarray:
    """The float64 reference ``((x / scale) - mean) / std``, in NHWC / HWC."""
    return (x.astype(np.float64) / scale - np.asarray(mean)) / np.asarray(std)


def ulps(a: np.ndarray, b64: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps between ``a`` and float64 values rounded to float32."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = v.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    return np.abs(ordered(a) - ordered(b64))


def every_byte_per_channel(rng: np.random.Generator) -> np.ndarray:
    """A (16, 16, 3) uint8 image holding each of the 256 values once per channel."""
    planes = [rng.permutation(256).reshape(16, 16) for _ in range(3)]
    return np.stack(planes, axis=-1).astype(np.uint8)


def test_all_256_values_of_every_channel_within_one_ulp() -> None:
    image = every_byte_per_channel(np.random.default_rng(0))
    out = Normalize(MEAN, STD)(image)
    assert out.dtype == np.float32 and out.shape == (3, 16, 16)
    assert ulps(out.transpose(1, 2, 0), formula(image)).max() <= 1
    assert np.array_equal(out.transpose(1, 2, 0), formula(image).astype(np.float32))


@pytest.mark.parametrize("layout", ["chw", "hwc"])
@pytest.mark.parametrize("threads", [1, 2])
def test_batches_in_both_layouts(layout: str, threads: int) -> None:
    rng = np.random.default_rng(1)
    batch = rng.integers(0, 256, (5, 7, 9, 3), dtype=np.uint8)
    out = Normalize.from_stats(STATS, layout=layout, threads=threads)(batch)
    as_nhwc = out.transpose(0, 2, 3, 1) if layout == "chw" else out
    assert out.shape == ((5, 3, 7, 9) if layout == "chw" else (5, 7, 9, 3))
    assert out.flags.c_contiguous
    assert ulps(as_nhwc, formula(batch)).max() <= 1


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.float32, np.float64])
def test_other_dtypes_within_one_ulp(dtype: type) -> None:
    rng = np.random.default_rng(2)
    scale = {np.uint16: 65535.0, np.int16: 32767.0}.get(dtype, 1.0)
    if dtype in (np.float32, np.float64):
        x = rng.uniform(0.0, 1.0, (2, 6, 5, 3)).astype(dtype)
    else:
        x = rng.integers(0, int(scale) + 1, (2, 6, 5, 3)).astype(dtype)
    out = Normalize(MEAN, STD, scale)(x)
    assert ulps(out.transpose(0, 2, 3, 1), formula(x, scale=scale)).max() <= 1


def test_uint16_table_covers_every_value() -> None:
    x = np.arange(65536, dtype=np.uint16).reshape(256, 256, 1)
    out = Normalize((0.3,), (0.2,), 65535.0, layout="hwc")(x, input_layout="hwc")
    assert ulps(out, formula(x, (0.3,), (0.2,), 65535.0)).max() <= 1


def test_out_argument_is_filled_and_returned() -> None:
    batch = np.random.default_rng(3).integers(0, 256, (2, 4, 4, 3), dtype=np.uint8)
    target = np.full((2, 3, 4, 4), np.nan, np.float32)
    assert Normalize(MEAN, STD)(batch, out=target) is target
    assert np.array_equal(target, Normalize(MEAN, STD)(batch))


def test_inverse_round_trips_uint8_exactly_and_floats_closely() -> None:
    rng = np.random.default_rng(4)
    norm = Normalize(MEAN, STD)
    image = every_byte_per_channel(rng)
    assert np.array_equal(norm.inverse(norm(image), dtype=np.uint8), image)
    batch = rng.integers(0, 256, (2, 5, 5, 3), dtype=np.uint8)
    back = norm.inverse(norm(batch))  # float output: the [0, 1] convention of ToTensor
    assert back.dtype == np.float32 and back.shape == batch.shape
    np.testing.assert_allclose(back, batch / 255, atol=1e-6)


def test_inverse_clips_to_the_integer_range() -> None:
    norm = Normalize((0.5,), (0.5,), layout="hwc")
    assert norm.inverse(np.array([[[-5.0], [5.0]]]), dtype=np.uint8).ravel().tolist() == [0, 255]


def test_from_stats_reads_the_requested_variant() -> None:
    norm = Normalize.from_stats(STATS, "per_image_std")
    assert norm.std.tolist() == list(STATS.per_image_std)
    assert norm.scale is None and norm.scale_for(np.uint8) == 255.0
    with pytest.raises(NormstatsError, match="no variant 'rms'"):
        Normalize.from_stats(STATS, "rms")
    vectors = SimpleNamespace(mean=(0.1, 0.2), std=(1.0, 2.0), per_image_std=None, scale=1.0)
    with pytest.raises(NormstatsError, match="not computed for this data"):
        Normalize.from_stats(vectors, "per_image_std")


def test_statistics_of_vector_data_are_refused_by_the_image_normalizers() -> None:
    """They used to build a Normalize (a Whiten) of "channels" c0..c3 that failed on the rows
    it was meant for: ``expected HWC or NHWC input with 4 channels last, got shape (5, 4)``."""
    import normstats
    from normstats.nn import BatchNorm, Whiten
    from normstats.nn import torch as adapters

    rows = np.random.default_rng(3).integers(-50, 50, (40, 4))
    stats = normstats.compute(rows)
    makers = (Normalize.from_stats, adapters.Normalize.from_stats,
              adapters.torchvision_normalize_kwargs)
    for make in makers:
        with pytest.raises(NormstatsError, match=r"vector data \(N, d\), and this normalizes "
                                                 r"images: standardize rows with"):
            make(stats)
    with pytest.raises(NormstatsError, match=r"vector data \(N, d\), and this whitens images: "
                                             r"whiten rows with stats.whitening\(\).apply"):
        Whiten.from_stats(normstats.compute(rows, covariance=True))
    layer = BatchNorm.from_stats(stats, eps=0.0, dtype=np.float64).eval()  # BatchNorm1d start
    np.testing.assert_allclose(layer(rows.astype(np.float64)).mean(axis=0), 0.0, atol=1e-12)


def test_from_a_real_dataset_stats() -> None:
    import normstats
    images = np.random.default_rng(8).integers(0, 256, (4, 6, 5, 3), dtype=np.uint8)
    stats = normstats.compute(images)
    out = Normalize.from_stats(stats)(images)
    # The dataset normalized by its own pooled constants has mean 0 and variance 1.
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0.0, atol=1e-6)
    np.testing.assert_allclose(out.var(axis=(0, 2, 3), dtype=np.float64), 1.0, rtol=1e-5)


@pytest.mark.parametrize(
    ("make", "x", "error", "match"),
    [
        (lambda: Normalize(MEAN, STD), np.zeros((4, 4), np.uint8), NormstatsError, "HWC or NHWC"),
        (lambda: Normalize(MEAN, STD), np.zeros((4, 4, 4), np.uint8), NormstatsError,
         "3 channels"),
        (lambda: Normalize(MEAN, STD), np.zeros((4, 4, 3), bool), TypeError, "dtype bool"),
    ],
)
def test_bad_input(make: Any, x: np.ndarray, error: Any, match: str) -> None:
    with pytest.raises(error, match=match):
        make()(x)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mean": MEAN, "std": (0.2, 0.2)}, "mean has 3 channels but std has 2"),
        ({"mean": MEAN, "std": (0.2, 0.0, 0.2)}, "std must be positive"),
        ({"mean": (), "std": ()}, "mean must be"),
        ({"mean": MEAN, "std": STD, "scale": 0.0}, "scale"),
        ({"mean": MEAN, "std": STD, "layout": "nchw"}, "layout"),
        ({"mean": MEAN, "std": STD, "threads": 0}, "threads"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(NormstatsError, match=match):
        Normalize(**kwargs)


def test_wrong_out_is_rejected() -> None:
    with pytest.raises(NormstatsError, match="out must be float32"):
        Normalize(MEAN, STD)(np.zeros((2, 2, 3), np.uint8), out=np.zeros((3, 2, 2)))


def conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int = 0) -> np.ndarray:
    """Reference cross-correlation (N, C, H, W) * (O, C, kh, kw), zero padding, float64."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", windows, w.astype(np.float64)) + b[:, None, None]


def assert_rel(actual: np.ndarray, expected: np.ndarray, rel: float) -> None:
    np.testing.assert_allclose(actual, expected, rtol=rel, atol=rel * np.abs(expected).max())


def test_folding_into_a_dense_layer_matches_normalize_then_layer() -> None:
    rng = np.random.default_rng(5)
    mean, std = rng.uniform(0.3, 0.6, 12), rng.uniform(0.1, 0.3, 12)
    x = rng.integers(0, 256, (20, 12)).astype(np.float32)  # vector data, per-feature stats
    w, b = rng.normal(size=(7, 12)).astype(np.float32), rng.normal(size=7).astype(np.float32)
    x_norm = ((x / 255.0 - mean) / std).astype(np.float32)
    fw, fb = fold_into_first_layer(w, b, mean, std, 255.0)
    assert fw.dtype == fb.dtype == np.float32
    assert_rel(x @ fw.T + fb, x_norm @ w.T.astype(np.float64) + b, 1e-5)


def test_folding_into_an_unpadded_conv_matches_and_padding_differs_at_borders() -> None:
    rng = np.random.default_rng(6)
    images = rng.integers(0, 256, (2, 9, 8, 3), dtype=np.uint8)
    w, b = rng.normal(size=(5, 3, 3, 3)).astype(np.float32), rng.normal(size=5)
    fw, fb = fold_into_first_layer(w, b, MEAN, STD, 255.0)
    raw = images.transpose(0, 3, 1, 2).astype(np.float32)
    reference = conv2d(Normalize(MEAN, STD)(images), w, b)
    assert_rel(conv2d(raw, fw, fb), reference, 1e-5)

    padded_ref = conv2d(Normalize(MEAN, STD)(images), w, b, pad=1)
    padded_fold = conv2d(raw, fw, fb, pad=1)
    assert_rel(padded_fold[..., 1:-1, 1:-1], padded_ref[..., 1:-1, 1:-1], 1e-5)
    border = np.abs(padded_fold - padded_ref)
    border[..., 1:-1, 1:-1] = 0.0
    assert border.max() > 0.1 * np.abs(padded_ref).max()  # the documented caveat


def test_folding_takes_a_torch_layers_parameters_as_they_are() -> None:
    import torch  # in the test extra: fail, never skip
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3)  # weight and bias require grad
    fw, fb = fold_into_first_layer(conv.weight, conv.bias, MEAN, STD, 255.0)
    expected = fold_into_first_layer(conv.weight.detach().numpy(), conv.bias.detach().numpy(),
                                     MEAN, STD, 255.0)
    assert fw.tobytes() == expected[0].tobytes() and fb.tobytes() == expected[1].tobytes()
    assert conv.weight.requires_grad and conv.weight.grad is None  # the layer is untouched
    images = np.random.default_rng(7).integers(0, 256, (2, 9, 8, 3), dtype=np.uint8)
    folded = torch.nn.Conv2d(3, 4, 3)
    with torch.no_grad():
        folded.weight.copy_(torch.from_numpy(fw))
        folded.bias.copy_(torch.from_numpy(fb))
        raw = torch.from_numpy(images).permute(0, 3, 1, 2).float()
        assert_rel(folded(raw).numpy(),
                   conv(torch.from_numpy(Normalize(MEAN, STD)(images))).numpy(), 1e-5)


def test_constants_as_a_dict_point_at_the_object_they_describe() -> None:
    import normstats

    stats = normstats.compute(np.random.default_rng(8).integers(0, 256, (4, 5, 5, 3), np.uint8))
    with pytest.raises(NormstatsError, match=r"^stats is a dict: pass the DatasetStats it "
                                             r"holds, normstats\.DatasetStats\.from_dict"):
        Normalize.from_stats(stats.to_dict())
    # what the message names gives the constants the object itself gives
    rebuilt = Normalize.from_stats(normstats.DatasetStats.from_dict(stats.to_dict()))
    assert rebuilt.mean.tolist() == list(stats.mean) and rebuilt.std.tolist() == list(stats.std)


def test_folding_without_bias_and_bad_shapes() -> None:
    fw, fb = fold_into_first_layer(np.ones((2, 1)), None, (0.5,), (0.25,), 1.0)
    assert fw.tolist() == [[4.0], [4.0]] and fb.tolist() == [-2.0, -2.0]
    with pytest.raises(NormstatsError, match="weight has 4 inputs"):
        fold_into_first_layer(np.ones((2, 4)), None, MEAN, STD)
    with pytest.raises(NormstatsError, match="weight must be"):
        fold_into_first_layer(np.ones(3), None, MEAN, STD)
    with pytest.raises(NormstatsError, match="bias must have shape"):
        fold_into_first_layer(np.ones((2, 3)), np.ones(3), MEAN, STD)


def test_float_input_is_taken_as_already_in_0_1_like_to_tensor() -> None:
    rng = np.random.default_rng(11)
    image = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    norm = Normalize(MEAN, STD)
    as_float = (image / 255).astype(np.float32)  # what ToTensor gives (channels last here)
    # float32(x / 255) is itself rounded: agreement to float32 resolution, not to the ulp
    np.testing.assert_allclose(norm(as_float), norm(image), rtol=0, atol=1e-6)
    assert np.abs(norm(as_float)).max() < 5  # not divided by 255 a second time
    raw_float = image.astype(np.float32)  # float pixels in [0, 255]: say so
    assert ulps(Normalize(MEAN, STD, scale=255.0)(raw_float), norm(image)).max() <= 1


@pytest.mark.parametrize("held_as", [np.float32, np.int64])
def test_pixels_normalize_would_misread_are_said_once(caplog, held_as) -> None:
    """Raw 0-255 pixels held as float32 (``image.astype(np.float32)``) came out ~255 times
    too large under constants in [0, 1]; held as int64 (``torch.tensor`` of a list), they
    are divided by int64's maximum and all came out about -mean/std (max 1.696 against
    1.724 as uint8). Both without a word: one line now says so, once per Normalize, and
    with scale=255 the output is the uint8 one. Floats in [0, 1], uint8, an explicit scale,
    floats under constants in raw units and int64 values beyond 16 bits say nothing."""
    image = np.random.default_rng(12).integers(0, 256, (2, 5, 4, 3), dtype=np.uint8)
    given = image.astype(held_as)
    norm = Normalize(MEAN, STD)
    said = {np.float32: (
        f"normstats: float pixels up to {float(image.max()):g} given to Normalize of constants "
        "in [0, 1]: float input is taken as already divided (as ToTensor gives it), and these "
        "look like raw 0-255 values; divide them first, or build the Normalize with scale=255"),
        np.int64: (
        f"normstats: int64 pixels up to {int(image.max())} given to Normalize: integer input "
        "is divided by its dtype's maximum (9.22337e+18), so these all normalize to about "
        "-mean/std; convert them to the type of their values first (x.astype(np.uint8) for "
        "0-255), or build the Normalize with scale=255")}[held_as]
    assert _said(caplog, lambda: norm(given), lambda: norm(given)) == [said]
    assert ulps(Normalize(MEAN, STD, scale=255.0)(given), norm(image)).max() <= 1
    raw_units = Normalize((123.7, 116.3, 103.5), (58.4, 57.1, 57.4))  # floats as they are
    assert _said(caplog, lambda: Normalize(MEAN, STD)(image),
                 lambda: Normalize(MEAN, STD)(image / np.float32(255)),
                 lambda: Normalize(MEAN, STD, scale=255.0)(given),
                 lambda: raw_units(image.astype(np.float32)),
                 lambda: Normalize(MEAN, STD)(image.astype(np.int64) << 40)) == []


def _said(caplog: pytest.LogCaptureFixture, *calls: Callable[[], object]) -> list[str]:
    """The lines normstats.nn logged while ``calls`` ran, in order."""
    caplog.clear()
    with caplog.at_level("WARNING", logger="normstats.nn"):
        for call in calls:
            call()
    return [record.getMessage() for record in caplog.records]


def test_channels_first_input_is_refused_naming_the_way_out() -> None:
    with pytest.raises(NormstatsError, match=r"got shape \(2, 3, 4, 5\): channels first\? "
                       r"Move them last \(x.transpose\(0, 2, 3, 1\) for NCHW\), or normalize "
                       r"\(\.\.\., C, H, W\) tensors with normstats.nn.torch.Normalize"):
        Normalize(MEAN, STD)(np.zeros((2, 3, 4, 5), np.uint8))


def test_grayscale_hw_and_nhw_work_and_an_ambiguous_input_is_refused() -> None:
    rng = np.random.default_rng(12)
    stack = rng.integers(0, 256, (4, 6, 5), dtype=np.uint8)
    norm = Normalize((0.5,), (0.25,))
    assert norm(stack).shape == (4, 1, 6, 5)
    assert norm(stack[0]).shape == (1, 6, 5)
    np.testing.assert_array_equal(norm(stack)[2], norm(stack[2]))
    column = stack[:, :, :1]  # (N, H, 1): 4 images 6 wide and 1 high, or one 4×6 image?
    with pytest.raises(NormstatsError, match=r"\(H, W, 1\) image or 4 images"):
        norm(column)
    assert norm(column, input_layout="nhw").shape == (4, 1, 6, 1)
    assert norm(column, input_layout="hwc").shape == (1, 4, 6)


def test_from_stats_carries_the_variant_and_the_channel_order() -> None:
    norm = Normalize.from_stats(STATS, "per_image_std")
    assert norm.variant == "per_image_std" and norm.channel_names == ("R", "G", "B")
    assert "variant='per_image_std'" in repr(norm) and "('R', 'G', 'B')" in repr(norm)
    raw = SimpleNamespace(mean=(125.0,), std=(60.0,), scale=1.0, dtype="uint8")
    assert Normalize.from_stats(raw).scale == 1.0  # constants in raw units: every input raw
