"""What the model sees: torchvision's ``Resize(N)`` and ``CenterCrop(N)``, on decoded pixels.

Published ImageNet constants are statistics of images after ``Resize(256)`` and
``CenterCrop(224)``, not of the files. These pure functions reproduce torchvision's
PIL path exactly:

- ``Resize(N)`` with an int: the shorter side becomes N, the longer one
  ``int(N * long / short)`` (truncated, as torchvision computes it), resampled by
  Pillow's ``Image.resize(size, BILINEAR)``, which is antialiased (its filter support
  widens with the downscale factor) and has ``reducing_gap=None``. RGBA is resized
  premultiplied, as Pillow does for every caller.
- ``CenterCrop(N)``: top/left offsets ``int(round((H - N) / 2))`` (Python's round,
  half to even), zero padding when the image is smaller than the crop.

They run after the decode policy's mode conversion (`normstats.sources.decoding.decode`), so
the cache, which keys on the whole `DecodePolicy`, keys on them too.

``--max-pixels`` bounds what they make as it bounds what is decoded: a size whose every
output is over it (``Resize(N)`` makes at least N² pixels, ``CenterCrop(N)`` exactly N²) is an
option error before any file is read (`check_transform_sizes`), and an image that one resize
would take over it (a long, thin one) is skipped before Pillow allocates the output
(`apply_transforms`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError, RefusedInputError, UnreadableInputError

log = logging.getLogger("normstats.sources")

__all__ = ["resized_size", "resize_shorter", "center_crop", "apply_transforms",
           "parse_size", "check_transform_sizes", "transformed_source"]


def parse_size(value: int | None, option: str) -> int | None:
    """Validate a resize or crop size: None or a positive int.

    Examples
    --------
    >>> parse_size(224, "center_crop"), parse_size(None, "resize")
    (224, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or int(value) != value or int(value) <= 0:
        raise InvalidOptionError(f"{option} must be a positive integer, got {value!r}")
    return int(value)


def check_transform_sizes(resize: int | None, crop: int | None, max_pixels: int) -> None:
    """Refuse a resize or crop whose every output image is over ``max_pixels``.

    ``Resize(N)`` gives every image at least N x N pixels (its shorter side becomes N) and
    ``CenterCrop(N)`` exactly N x N, so such a size would skip every file, one after the
    other, after decoding each: it is the option that is wrong, and it is said up front.

    Examples
    --------
    >>> check_transform_sizes(100_000, None, 89_478_485)
    Traceback (most recent call last):
    ...
    normstats.errors.InvalidOptionError: --resize 100000 makes every image at least ...
    """
    for option, size in (("--resize", resize), ("--center-crop", crop)):
        if size is not None and size * size > max_pixels:
            least = "at least " if option == "--resize" else ""
            raise InvalidOptionError(
                f"{option} {size} makes every image {least}{size}x{size} = {size * size} "
                f"pixels, over the limit of {max_pixels} pixels (--max-pixels), so every "
                f"file would be skipped; use a smaller {option}, or raise --max-pixels if "
                "the memory is there")


def resized_size(height: int, width: int, shorter: int) -> tuple[int, int]:
    """(height, width) after torchvision's ``Resize(shorter)``.

    Examples
    --------
    >>> resized_size(375, 500, 256)
    (256, 341)
    """
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = shorter, int(shorter * long / short)
    return (new_long, new_short) if width <= height else (new_short, new_long)


def _pil_mode(pixels: np.ndarray, channel_names: tuple[str, ...]) -> str:
    channels, dtype = pixels.shape[2], pixels.dtype
    if dtype == np.uint8 and channels in (1, 2, 3, 4):
        if channel_names == ("C", "M", "Y", "K"):
            return "CMYK"
        return {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}[channels]
    if channels == 1 and dtype == np.uint16:
        return "I;16"
    if channels == 1 and dtype == np.float32:
        return "F"
    raise InvalidOptionError(f"cannot resize {channels}-channel {dtype} images")


def resize_shorter(pixels: np.ndarray, shorter: int,
                   channel_names: tuple[str, ...] = ()) -> np.ndarray:
    """Resize (H, W, C) pixels so the shorter side is ``shorter``, as torchvision on PIL.

    Examples
    --------
    >>> resize_shorter(np.zeros((4, 6, 3), np.uint8), 2).shape
    (2, 3, 3)
    """
    from PIL import Image  # here: a run that resizes nothing never loads it

    height, width = resized_size(pixels.shape[0], pixels.shape[1], shorter)
    mode = _pil_mode(pixels, channel_names)
    source = pixels[:, :, 0] if pixels.shape[2] == 1 else pixels
    source = np.ascontiguousarray(source)
    # fromarray infers every mode but CMYK (4 uint8 channels read as RGBA)
    image = Image.fromarray(source, mode="CMYK") if mode == "CMYK" else Image.fromarray(source)
    if image.mode != mode:
        raise InvalidOptionError(f"cannot resize {pixels.dtype} pixels as Pillow mode {mode}")
    out = np.asarray(image.resize((width, height), Image.Resampling.BILINEAR,
                                  reducing_gap=None))
    return out[:, :, None] if out.ndim == 2 else out


def center_crop(pixels: np.ndarray, size: int) -> np.ndarray:
    """Crop (H, W, C) pixels to ``size`` x ``size`` at the centre, zero-padding small ones.

    Examples
    --------
    >>> center_crop(np.arange(25, dtype=np.uint8).reshape(5, 5, 1), 2)[:, :, 0].tolist()
    [[12, 13], [17, 18]]
    """
    height, width = pixels.shape[:2]
    if size > height or size > width:
        pad_h, pad_w = max(0, size - height), max(0, size - width)
        # torchvision pads left/top by the floor half and right/bottom by the ceiling half
        pixels = np.pad(pixels, ((pad_h // 2, (pad_h + 1) // 2),
                                 (pad_w // 2, (pad_w + 1) // 2), (0, 0)))
        height, width = pixels.shape[:2]
    top = int(round((height - size) / 2.0))
    left = int(round((width - size) / 2.0))
    return pixels[top:top + size, left:left + size]


def apply_transforms(pixels: np.ndarray, channel_names: tuple[str, ...], resize: int | None,
                     crop: int | None, name: str = "image",
                     max_pixels: int | None = None) -> np.ndarray:
    """``Resize(resize)`` then ``CenterCrop(crop)``, each only when given.

    Raises
    ------
    UnreadableInputError
        When the pixels cannot be resized (a dtype Pillow cannot resample), or the resize
        would make more than ``max_pixels`` pixels (checked before Pillow allocates them),
        naming ``name``.

    Examples
    --------
    >>> apply_transforms(np.zeros((1, 50, 1), np.uint8), ("L",), 4, None, "thin.png", 100)
    Traceback (most recent call last):
    ...
    normstats.errors.RefusedInputError: thin.png: Resize(4) makes it 4x200 = 800 pixels, ...
    """
    if resize is not None:
        _check_resized(pixels.shape[0], pixels.shape[1], resize, max_pixels, name)
        try:
            pixels = resize_shorter(pixels, resize, channel_names)
        except InvalidOptionError as error:
            raise UnreadableInputError(error.reason, name) from None
    if crop is not None:
        pixels = center_crop(pixels, crop)
    return pixels


def _check_resized(height: int, width: int, resize: int, max_pixels: int | None,
                   name: str) -> None:
    """Skip an image (a long, thin one) that the resize would take over ``max_pixels``."""
    new_height, new_width = resized_size(height, width, resize)
    if max_pixels is not None and new_height * new_width > max_pixels:
        raise RefusedInputError(
            f"Resize({resize}) makes it {new_height}x{new_width} = {new_height * new_width} "
            f"pixels, over the limit of {max_pixels} pixels; use a smaller --resize, or "
            "raise --max-pixels if the memory is there", name)


def transformed_source(source: Any, resize: int | None, crop: int | None) -> Any:
    """``source`` decoding under its policy plus ``Resize``/``CenterCrop`` (a copy).

    Only sources that decode image files (folders, tar shards) have a decode policy;
    arrays are used as stored, so asking to resize them is an error rather than a no-op.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from normstats.sources.folder import FolderSource
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (8, 6)).save(d / "a.png")
    >>> transformed_source(FolderSource(d), 4, 4).mode
    'RGB, Resize(4), CenterCrop(4)'
    """
    if resize is None and crop is None:
        return source
    policy = getattr(source, "policy", None)
    if policy is None:
        raise InvalidOptionError("--resize and --center-crop apply to image files (folders, "
                                 f"tar shards), not to {source.description}")
    resize, crop = parse_size(resize, "resize"), parse_size(crop, "center_crop")
    if resize is not None and crop is not None and crop > resize:
        # Every image then comes out padded (its shorter side is `resize`): torchvision
        # does the same, so the numbers stay its, but a swapped pair (--resize 224
        # --center-crop 256) would otherwise pull every mean towards 0 without a word.
        log.warning("normstats: --center-crop %d is larger than --resize %d: every image is "
                    "padded with zeros, as torchvision's CenterCrop pads it, and the zeros "
                    "are counted (the usual pair is --resize 256 --center-crop 224)",
                    crop, resize)
    out = copy.copy(source)
    out.policy = dataclasses.replace(policy, resize=resize, center_crop=crop)
    out.mode = out.policy.describe()
    return out
