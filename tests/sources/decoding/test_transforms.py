"""Resize/CenterCrop: statistics of what the model sees, as torchvision's PIL path makes it."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats.errors import InvalidOptionError
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.decoding.transforms import center_crop, resized_size


def torchvision_like(path, resize: int | None, crop: int | None) -> np.ndarray:
    """The test's own rendering of torchvision's Resize(N) + CenterCrop(M) with Pillow."""
    image = Image.open(path).convert("RGB")
    if resize is not None:
        w, h = image.size
        if w <= h:
            size = (resize, int(resize * h / w))
        else:
            size = (int(resize * w / h), resize)
        image = image.resize(size, Image.BILINEAR)
    if crop is not None:
        w, h = image.size
        left, top = int(round((w - crop) / 2.0)), int(round((h - crop) / 2.0))
        image = image.crop((left, top, left + crop, top + crop))  # zero-fills outside
    return np.asarray(image)


@pytest.fixture
def photo_folder(tmp_path, rng):
    sizes = [(37, 53), (64, 48), (30, 30), (91, 40), (20, 33)]
    root = tmp_path / "photos"
    root.mkdir()
    paths = []
    for i, (h, w) in enumerate(sizes * 2):
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) % 256], axis=-1)
        noise = rng.integers(-30, 31, (h, w, 3))
        pixels = np.clip(base + noise + i * 7, 0, 255).astype(np.uint8)
        path = root / f"img{i:02d}.png"
        Image.fromarray(pixels).save(path)
        paths.append(path)
    return root, paths


@pytest.mark.parametrize(("resize", "crop"), [(24, 20), (24, None), (None, 28), (41, 41)])
def test_equals_oracle_on_pillow_rendered_images(photo_folder, resize, crop):
    root, paths = photo_folder
    expected = [torchvision_like(p, resize, crop) for p in paths]
    stats = normstats.compute(root, resize=resize, center_crop=crop, cache=False, workers=1)
    assert_matches_oracle(stats, expected, 255)
    assert "Resize" in stats.mode or "CenterCrop" in stats.mode


def test_a_crop_larger_than_the_resize_is_said_and_padded_as_torchvision(photo_folder,
                                                                         caplog):
    """--resize 24 --center-crop 28 pads every image with zeros (torchvision's numbers); the
    swapped pair of the usual 256/224 would otherwise pull the means down without a word."""
    root, paths = photo_folder
    with caplog.at_level("WARNING", logger="normstats.sources"):
        stats = normstats.compute(root, resize=24, center_crop=28, cache=False, workers=1)
    assert_matches_oracle(stats, [torchvision_like(p, 24, 28) for p in paths], 255)
    assert [r.getMessage() for r in caplog.records] == [
        "normstats: --center-crop 28 is larger than --resize 24: every image is padded with "
        "zeros, as torchvision's CenterCrop pads it, and the zeros are counted (the usual "
        "pair is --resize 256 --center-crop 224)"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="normstats.sources"):
        for resize, crop in ((28, 28), (28, 24), (None, 28), (24, None)):
            normstats.compute(root, resize=resize, center_crop=crop, cache=False, workers=1)
    assert caplog.records == []


def test_resized_size_follows_torchvision():
    assert resized_size(375, 500, 256) == (256, 341)
    assert resized_size(500, 375, 256) == (341, 256)
    assert resized_size(100, 100, 7) == (7, 7)


def test_center_crop_pads_small_images_with_zeros():
    pixels = np.full((2, 3, 1), 9, np.uint8)
    out = center_crop(pixels, 4)
    assert out.shape == (4, 4, 1)
    assert out.sum() == 9 * 6  # the image itself, surrounded by zeros


def test_center_crop_rounds_half_to_even():
    pixels = np.arange(25, dtype=np.uint8).reshape(5, 5, 1)
    assert center_crop(pixels, 2)[:, :, 0].tolist() == [[12, 13], [17, 18]]


def test_policy_validates_and_describes():
    assert DecodePolicy("RGB", resize=256, center_crop=224).describe() == \
        "RGB, Resize(256), CenterCrop(224)"
    with pytest.raises(InvalidOptionError, match="resize must be a positive integer"):
        DecodePolicy(resize=0)


def test_arrays_refuse_resize():
    with pytest.raises(InvalidOptionError, match="apply to image files"):
        normstats.compute(np.zeros((2, 4, 4, 3), np.uint8), resize=2)


def test_cache_identity_includes_transforms(tmp_path):
    from normstats.engine.cache.store import group_identity

    plain = group_identity(str(tmp_path), DecodePolicy())
    resized = group_identity(str(tmp_path), DecodePolicy(resize=8))
    cropped = group_identity(str(tmp_path), DecodePolicy(resize=8, center_crop=4))
    assert len({str(plain), str(resized), str(cropped)}) == 3


def test_cached_run_keys_on_transforms(photo_folder, tmp_path):
    root, paths = photo_folder
    cache = tmp_path / "cache"
    plain = normstats.compute(root, cache=cache, workers=1)
    resized = normstats.compute(root, cache=cache, workers=1, resize=16)
    again = normstats.compute(root, cache=cache, workers=1, resize=16)
    assert resized.images_decoded == len(paths) and again.images_cached == len(paths)
    assert plain.pixels_per_channel != resized.pixels_per_channel
    assert again.mean == resized.mean


def _refuse_large_resizes(monkeypatch, limit: int) -> None:
    """Make Pillow's resize fail if it is ever asked for more than ``limit`` pixels: the
    refusal must come before the output is allocated, not from the machine running out."""
    original = Image.Image.resize

    def guarded(image, size, *args, **kwargs):
        assert size[0] * size[1] <= limit, f"Pillow asked to allocate {size}"
        return original(image, size, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "resize", guarded)


def test_a_resize_over_max_pixels_skips_that_image_before_pillow_allocates(tmp_path, rng,
                                                                           monkeypatch):
    _refuse_large_resizes(monkeypatch, 10_000)
    root = tmp_path / "data"
    root.mkdir()
    for i in range(3):
        Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)).save(root / f"{i}.png")
    Image.fromarray(rng.integers(0, 256, (1, 200, 3), dtype=np.uint8)).save(root / "thin.png")
    stats = normstats.compute(root, resize=100, max_pixels=10_000, scheduler="sync",
                              cache=False)
    # 4x4 -> 100x100 is exactly the limit: kept; 1x200 -> 100x20000 is over it: skipped
    expected = [torchvision_like(root / f"{i}.png", 100, None) for i in range(3)]
    assert_matches_oracle(stats, expected, 255)
    assert [(s.path, s.reason) for s in stats.skipped] == [
        ("thin.png", "Resize(100) makes it 100x20000 = 2000000 pixels, over the limit of "
                     "10000 pixels; use a smaller --resize, or raise --max-pixels if the "
                     "memory is there")]


@pytest.mark.parametrize(("options", "message"), [
    ({"resize": 101}, "--resize 101 makes every image at least 101x101 = 10201 pixels, over "
                      "the limit of 10000 pixels (--max-pixels), so every file would be "
                      "skipped; use a smaller --resize, or raise --max-pixels if the memory "
                      "is there"),
    ({"center_crop": 101}, "--center-crop 101 makes every image 101x101 = 10201 pixels"),
])
def test_sizes_whose_every_output_is_over_max_pixels_are_option_errors(tmp_path, monkeypatch,
                                                                       options, message):
    _refuse_large_resizes(monkeypatch, 10_000)
    root = tmp_path / "data"
    root.mkdir()
    Image.new("RGB", (4, 4)).save(root / "a.png")
    with pytest.raises(InvalidOptionError) as raised:
        normstats.compute(root, max_pixels=10_000, cache=False, **options)
    assert str(raised.value).startswith(message)
    assert normstats.compute(root, max_pixels=10_000, cache=False, resize=100,
                             center_crop=100).images == 1  # the limit itself is allowed


@pytest.mark.parametrize("rows, size, expected", [
    ([[1], [2], [3], [4]], 2, [[2, 0], [3, 0]]),         # padded in width only
    ([[7]], 3, [[0, 0, 0], [0, 7, 0], [0, 0, 0]]),        # floor half before, ceiling after
    ([[1, 2], [3, 4]], 3, [[1, 2, 0], [3, 4, 0], [0, 0, 0]]),
    ([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]], 3,
     [[2, 3, 4], [7, 8, 9], [12, 13, 14]]),               # the height fits exactly
    ([[0, 1, 2, 3]] * 4, 1, [[2]]),                       # round(1.5) = 2: half to even
    ([[0, 1, 2]] * 3, 2, [[0, 1], [0, 1]]),               # round(0.5) = 0
    ([[1, 2], [3, 4], [5, 6], [7, 8]], 3, [[1, 2, 0], [3, 4, 0], [5, 6, 0]]),  # height fits
])
def test_center_crop_is_torchvisions_pad_then_crop(rows, size, expected):
    """Hand-computed: torchvision pads (floor half top/left, ceiling half bottom/right) where
    the image is smaller than the crop, then crops at int(round((H - N) / 2))."""
    pixels = np.array(rows, np.uint8)[:, :, None]
    assert center_crop(pixels, size)[:, :, 0].tolist() == expected


def pillow_resized(image: Image.Image, shorter: int) -> np.ndarray:
    """The oracle: Pillow's own antialiased bilinear resize of a Pillow image."""
    w, h = image.size
    size = (shorter, int(shorter * h / w)) if w <= h else (int(shorter * w / h), shorter)
    out = np.asarray(image.resize(size, Image.Resampling.BILINEAR, reducing_gap=None))
    return out[:, :, None] if out.ndim == 2 else out


@pytest.mark.parametrize("mode, dtype, names", [
    ("L", np.uint8, ("L",)), ("LA", np.uint8, ("L", "A")), ("RGB", np.uint8, ("R", "G", "B")),
    ("RGBA", np.uint8, ("R", "G", "B", "A")), ("CMYK", np.uint8, ("C", "M", "Y", "K")),
    ("I;16", np.uint16, ("L",)), ("F", np.float32, ("L",)),
])
def test_every_pixel_kind_resizes_as_pillow_resizes_it(rng, mode, dtype, names):
    from normstats.sources.decoding.transforms import apply_transforms, resize_shorter

    channels = len(names)
    high = 65535 if dtype == np.uint16 else 255
    pixels = rng.integers(0, high, (9, 14, channels), endpoint=True).astype(dtype)

    def image_of(array: np.ndarray) -> Image.Image:
        source = np.ascontiguousarray(array[:, :, 0] if channels == 1 else array)
        image = Image.fromarray(source, mode="CMYK") if mode == "CMYK" else \
            Image.fromarray(source)
        assert image.mode == mode
        return image

    expected = pillow_resized(image_of(pixels), 4)
    for array in (pixels, pixels.transpose(1, 0, 2).copy()):  # wide, then tall
        got = resize_shorter(array, 4, names)
        assert got.dtype == pixels.dtype
        assert np.array_equal(got, pillow_resized(image_of(array), 4))
    cropped = apply_transforms(pixels, names, 4, 3, "x.png")
    assert np.array_equal(cropped, center_crop(expected, 3))


@pytest.mark.parametrize("channels, dtype", [(3, np.uint16), (3, np.float32), (5, np.uint8),
                                             (1, np.int16), (1, np.float64)])
def test_pixels_pillow_cannot_resample_are_skipped_by_name(channels, dtype):
    from normstats.errors import UnreadableInputError
    from normstats.sources.decoding.transforms import apply_transforms, resize_shorter

    pixels = np.zeros((4, 4, channels), dtype)
    message = f"cannot resize {channels}-channel {np.dtype(dtype)} images"
    with pytest.raises(InvalidOptionError) as raised:
        resize_shorter(pixels, 2)
    assert str(raised.value) == message
    with pytest.raises(UnreadableInputError) as raised:
        apply_transforms(pixels, ("L",) * channels, 2, None, "odd.tif")
    assert str(raised.value) == f"odd.tif: {message}"
    assert apply_transforms(pixels, ("L",) * channels, None, None) is pixels


def test_a_resize_over_max_pixels_names_the_image():
    from normstats.errors import RefusedInputError
    from normstats.sources.decoding.transforms import apply_transforms

    with pytest.raises(RefusedInputError) as raised:
        apply_transforms(np.zeros((1, 50, 1), np.uint8), ("L",), 4, None, "thin.png", 799)
    assert str(raised.value).startswith("thin.png: Resize(4) makes it 4x200 = 800 pixels")
    assert apply_transforms(np.zeros((1, 50, 1), np.uint8), ("L",), 4, None, "thin.png",
                            800).shape == (4, 200, 1)


def test_an_unnamed_image_is_called_image_in_errors():
    from normstats.errors import UnreadableInputError
    from normstats.sources.decoding.transforms import apply_transforms

    with pytest.raises(UnreadableInputError) as raised:
        apply_transforms(np.zeros((4, 4, 1), np.int16), ("L",), 2, None)
    assert str(raised.value) == "image: cannot resize 1-channel int16 images"


def test_a_transformed_source_decodes_with_both_sizes_checked_by_name(tmp_path):
    from normstats.sources.decoding.transforms import transformed_source
    from normstats.sources.folder import FolderSource

    Image.new("RGB", (8, 6)).save(tmp_path / "a.png")
    source = FolderSource(tmp_path)
    both = transformed_source(source, 4, 2)
    assert (both.policy.resize, both.policy.center_crop, both.mode) == \
        (4, 2, "RGB, Resize(4), CenterCrop(2)")
    assert source.policy.resize is None  # a copy
    assert transformed_source(source, None, None) is source
    for resize, crop, message in ((0, None, "resize must be a positive integer, got 0"),
                                  (None, -1, "center_crop must be a positive integer, got -1")):
        with pytest.raises(InvalidOptionError) as raised:
            transformed_source(source, resize, crop)
        assert str(raised.value) == message
    with pytest.raises(InvalidOptionError) as raised:
        normstats.compute(np.zeros((2, 4, 4, 3), np.uint8), center_crop=2)
    assert str(raised.value).startswith("--resize and --center-crop apply to image files "
                                        "(folders, tar shards), not to ")
