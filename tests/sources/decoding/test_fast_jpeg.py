"""The fast JPEG path must give exactly Pillow's pixels, or not be taken."""

import io

import numpy as np
import pytest
from PIL import Image

from normstats.sources.decoding import jpeg_fast
from normstats.sources.decoding.decode import Scratch, decode_bytes, decode_jpeg_fast
from normstats.sources.decoding.policy import DecodePolicy


def test_simplejpeg_a_hard_dependency_is_importable():
    """simplejpeg is a dependency: a broken install fails here instead of skipping."""
    assert jpeg_fast._simplejpeg is not None


def jpeg(image: Image.Image, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", **options)
    return buffer.getvalue()


def corpus(rng) -> dict[str, bytes]:
    """Subsamplings, progressive, optimized, restart markers, odd sizes, qualities, gray."""
    out = {}
    for size in ((1, 1), (7, 13), (64, 64), (257, 199)):
        base = rng.integers(0, 256, size=(max(1, size[1] // 8), max(1, size[0] // 8), 3))
        photo = Image.fromarray(base.astype(np.uint8)).resize(size, Image.BICUBIC)
        noisy = Image.fromarray(rng.integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8))
        for name, image in (("photo", photo), ("noise", noisy)):
            for sub in (0, 1, 2):
                for extra in ({}, {"progressive": True}, {"optimize": True},
                              {"quality": 20}, {"quality": 100}):
                    out[f"{name}{size}-sub{sub}-{extra}"] = jpeg(image, subsampling=sub, **extra)
            out[f"{name}{size}-gray"] = jpeg(image.convert("L"))
    return out


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_fast_path_equals_pillow_on_a_corpus(mode, rng):
    taken = 0
    for name, data in corpus(rng).items():
        fast = decode_jpeg_fast(data, DecodePolicy(mode))
        expected = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
        if fast is not None:
            taken += 1
            assert np.array_equal(fast.reshape(expected.shape), expected), name
        assert np.array_equal(decode_bytes(data, name, DecodePolicy(mode)).pixels.reshape(
            expected.shape), expected), name
    # the fast path takes every YCbCr file under RGB and every grey file under both modes
    files = corpus(rng)
    assert taken == (len(files) if mode == "RGB" else sum("gray" in name for name in files))


def test_cmyk_and_colour_under_l_fall_back_to_pillow(rng):
    image = Image.fromarray(rng.integers(0, 256, size=(16, 16, 3), dtype=np.uint8))
    assert decode_jpeg_fast(jpeg(image.convert("CMYK")), DecodePolicy("RGB")) is None
    assert decode_jpeg_fast(jpeg(image), DecodePolicy("L")) is None
    assert decode_jpeg_fast(jpeg(image), DecodePolicy("keep")) is None
    for mode in ("RGBA", "keep"):  # what the fast path never makes, even from grey
        assert decode_jpeg_fast(jpeg(image.convert("L")), DecodePolicy(mode)) is None


def test_damaged_or_oversized_jpegs_get_pillows_verdict(rng):
    data = jpeg(Image.fromarray(rng.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)))
    assert decode_jpeg_fast(data[: len(data) // 2], DecodePolicy()) is None
    assert decode_jpeg_fast(data, DecodePolicy(max_pixels=100)) is None
    assert decode_jpeg_fast(data, DecodePolicy(max_pixels=64 * 64 - 1)) is None
    at_the_limit = decode_jpeg_fast(data, DecodePolicy(max_pixels=64 * 64))
    assert np.array_equal(at_the_limit, np.asarray(Image.open(io.BytesIO(data))))


def test_fast_path_applies_resize_and_crop_like_pillow(rng, monkeypatch):
    data = jpeg(Image.fromarray(rng.integers(0, 256, size=(40, 50, 3), dtype=np.uint8)))
    policy = DecodePolicy("RGB", resize=16, center_crop=12)
    fast = decode_bytes(data, "a.jpg", policy).pixels
    monkeypatch.setattr(jpeg_fast, "_simplejpeg", None)
    pillow = decode_bytes(data, "a.jpg", policy).pixels
    assert fast.shape == (12, 12, 3) and np.array_equal(fast, pillow)


def test_scratch_buffer_gives_the_same_pixels_and_is_reused(rng):
    scratch = Scratch()
    images = [jpeg(Image.fromarray(rng.integers(0, 256, size=(9, 7, 3), dtype=np.uint8)))
              for _ in range(2)]
    first = decode_bytes(images[0], "a.jpg", DecodePolicy(), scratch).pixels.copy()
    second = decode_bytes(images[1], "b.jpg", DecodePolicy(), scratch).pixels
    assert np.array_equal(first, decode_bytes(images[0], "a.jpg", DecodePolicy()).pixels)
    assert np.array_equal(second, decode_bytes(images[1], "b.jpg", DecodePolicy()).pixels)
    assert np.shares_memory(second, scratch.take(1))
