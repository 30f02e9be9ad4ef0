"""How files become pixels: the decode policy, the decoded image, a reusable buffer.

The default policy, ``RGB``, is what torchvision's default loader feeds a model
(``Image.open(p).convert("RGB")``). ``L`` and ``RGBA`` convert likewise. ``keep``
keeps native channels and bit depth: 16-bit stays uint16 and float stays float.

`DecodePolicy` stays internal: it is the decode part of the one public options object,
`normstats.ReadOptions` (`normstats.sources.options`), which users build and which gives
it as ``ReadOptions.policy``. It is what the record cache keys on (mode, pixel and byte
limits, resize, crop), and readers take it; users never need to name it. Its one import
path is this module. Both validate through the same ``parse_*`` functions, so a mode is
checked (and its case forgiven: ``"rgb"`` is ``RGB``) in one place.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.maths.placement import decode_buffer
from normstats.sources.decoding.file_read import IMAGE_EXTENSIONS, default_file_limit
from normstats.sources.decoding.transforms import check_transform_sizes, parse_size

__all__ = ["DecodePolicy", "policy_of", "parse_mode", "parse_limit", "parse_nodata",
           "DecodedImage", "Scratch",
           "OutputBuffer", "MODES", "ALLOWED_FORMATS", "IMAGE_EXTENSIONS", "DEFAULT_MAX_PIXELS",
           "NATIVE_NAMES", "channel_names_for", "MODE_CHANNELS"]

MODES = ("RGB", "L", "RGBA", "keep")
#: The channels a mode makes, where it names a count other than the default RGB's: data
#: that is not decoded (arrays, tensors) and holds another count contradicts it.
MODE_CHANNELS = {"L": 1, "RGBA": 4}
ALLOWED_FORMATS = ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "GIF", "PPM")
#: Pillow's own default limit (its ``Image.MAX_IMAGE_PIXELS`` as it ships, a test checks),
#: used unless ``--max-pixels`` says otherwise: written out, so that a run that decodes
#: nothing (every record from the cache) never imports Pillow's image module (~10 ms).
DEFAULT_MAX_PIXELS = 89_478_485

#: Each mode by the words a user may type for it (case is forgiven, as on the command line).
_MODE_BY_NAME = {mode.lower(): mode for mode in MODES}

NATIVE_NAMES = {"L": ("L",), "LA": ("L", "A"), "RGB": ("R", "G", "B"),
                 "RGBA": ("R", "G", "B", "A"), "CMYK": ("C", "M", "Y", "K")}


def parse_mode(mode: str) -> str:
    """A decode mode in its own spelling, whatever the case it was typed in.

    Examples
    --------
    >>> parse_mode("rgb"), parse_mode("KEEP")
    ('RGB', 'keep')
    """
    if not isinstance(mode, str) or mode.lower() not in _MODE_BY_NAME:
        raise InvalidOptionError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return _MODE_BY_NAME[mode.lower()]


def parse_limit(value: int | None, option: str) -> int | None:
    """A pixel or byte limit: None (the default limit) or a positive integer.

    Examples
    --------
    >>> parse_limit(10, "max_pixels"), parse_limit(None, "max_file_bytes")
    (10, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidOptionError(f"{option} must be an integer, got {value!r}")
    if value <= 0:
        raise InvalidOptionError(f"{option} must be positive, got {value}")
    return int(value)


def parse_nodata(value: float | int | str | None) -> float | None:
    """A nodata value: a number (or its text, as ``--nodata -9999`` or ``nan``), or None.

    Examples
    --------
    >>> parse_nodata("-9999"), parse_nodata(0), parse_nodata(None)
    (-9999.0, 0.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidOptionError(f"nodata must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidOptionError(f"nodata must be a number, got {value!r}") from None
    if math.isinf(number):
        raise InvalidOptionError(f"nodata must be finite or nan, got {value!r}")
    return number


@dataclass(frozen=True)
class DecodePolicy:
    """How files become pixels: the mode policy and the decompression-bomb limit.

    Examples
    --------
    >>> DecodePolicy("RGB").mode
    'RGB'
    """

    mode: str = "RGB"
    max_pixels: int = DEFAULT_MAX_PIXELS
    #: torchvision ``Resize(resize)`` then ``CenterCrop(center_crop)`` after the mode
    #: conversion (`normstats.sources.decoding.transforms`): statistics of what the model sees.
    resize: int | None = None
    center_crop: int | None = None
    #: Files (and tar members) larger than this are skipped unread; None: the limit
    #: ``max_pixels`` implies (`normstats.sources.decoding.file_read.default_file_limit`).
    max_file_bytes: int | None = None
    #: The value of missing measurements, left out band by band; None: a TIFF's own
    #: GDAL_NODATA tag under ``keep`` (`normstats.sources.decoding.raster`), else none.
    nodata: float | None = None

    @functools.cached_property
    def file_byte_limit(self) -> int:
        """The byte limit of one image file under this policy (asked once a file)."""
        if self.max_file_bytes is not None:
            return int(self.max_file_bytes)
        return default_file_limit(self.max_pixels)

    @property
    def keeps_pixels_as_decoded(self) -> bool:
        """No resize, crop or nodata: an image's values are its decoded pixels, all counted.

        Examples
        --------
        >>> DecodePolicy("RGB").keeps_pixels_as_decoded
        True
        >>> DecodePolicy("RGB", resize=8).keeps_pixels_as_decoded
        False
        """
        return self.resize is None and self.center_crop is None and self.nodata is None

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", parse_mode(self.mode))  # frozen: set once, here
        if parse_limit(self.max_pixels, "max_pixels") is None:
            raise InvalidOptionError("max_pixels must be an integer, got None")
        parse_limit(self.max_file_bytes, "max_file_bytes")
        object.__setattr__(self, "nodata", parse_nodata(self.nodata))
        check_transform_sizes(parse_size(self.resize, "resize"),
                              parse_size(self.center_crop, "center_crop"), int(self.max_pixels))

    def describe(self) -> str:
        """The mode and any preprocessing, for reports: ``RGB, Resize(256), CenterCrop(224)``."""
        steps = [self.mode]
        if self.resize is not None:
            steps.append(f"Resize({self.resize})")
        if self.center_crop is not None:
            steps.append(f"CenterCrop({self.center_crop})")
        if self.nodata is not None:
            steps.append(f"nodata {self.nodata:g}")
        return ", ".join(steps)


def policy_of(mode: str = "RGB", max_pixels: int | None = None,
              max_file_bytes: int | None = None) -> DecodePolicy:
    """The policy of ``mode`` with the given limits (None: the defaults).

    Examples
    --------
    >>> policy_of("L", max_file_bytes=10).file_byte_limit
    10
    """
    return DecodePolicy(mode, DEFAULT_MAX_PIXELS if max_pixels is None else max_pixels,
                        max_file_bytes=max_file_bytes)


class DecodedImage(NamedTuple):
    """Pixels (H, W, C) of one file and the names of their channels.

    ``nodata`` is the value of missing measurements to leave out band by band (the file's
    own, or the policy's); ``raster`` says the file came through the raster path
    (`normstats.sources.decoding.raster`): NaN is missing in its float bands, and it is
    reported in raw units unless it is 8-bit of at most 4 bands. ``mask`` is bool
    (H, W, 1) or (H, W, C), True where the file's mask (a TIFF mask page, a ``.msk``
    sidecar: `normstats.sources.decoding.sidecar`) says a value is not data, as in numpy's
    masked arrays; None where the file has none. A value counts only if neither ``nodata``,
    NaN nor the mask leaves it out.
    """

    pixels: np.ndarray
    channel_names: tuple[str, ...]
    nodata: float | None = None
    raster: bool = False
    mask: np.ndarray | None = None

    @property
    def leaves_values_out(self) -> bool:
        """Whether values may be left out (a raster, a nodata value, a mask): its records
        then count each band's valid values.

        Examples
        --------
        >>> DecodedImage(np.zeros((1, 1, 1), np.uint8), ("L",)).leaves_values_out
        False
        >>> DecodedImage(np.zeros((1, 1, 1), np.uint8), ("L",), nodata=0.0).leaves_values_out
        True
        """
        return self.raster or self.nodata is not None or self.mask is not None

    @property
    def raw_units(self) -> bool:
        """Reported in raw units: a raster of more than 4 bands or samples other than
        8-bit unsigned integers (`normstats.maths.scale`).

        Examples
        --------
        >>> DecodedImage(np.zeros((2, 2, 3), np.uint8), ("R", "G", "B"), raster=True).raw_units
        False
        >>> DecodedImage(np.zeros((2, 2, 1), np.int16), ("L",), raster=True).raw_units
        True
        """
        return self.raster and (self.pixels.shape[2] > 4 or self.pixels.dtype != np.uint8)


def channel_names_for(mode: str, channels: int) -> tuple[str, ...]:
    """Channel names of pixels decoded under ``mode`` with ``channels`` channels.

    Examples
    --------
    >>> channel_names_for("keep", 2)
    ('L', 'A')
    """
    if mode != "keep":
        return NATIVE_NAMES[mode]
    return {1: ("L",), 2: ("L", "A"), 3: ("R", "G", "B"), 4: ("R", "G", "B", "A")}[channels]


class OutputBuffer(Protocol):
    """Where a decoder may write an image's pixels: ``take(nbytes)`` gives a writable uint8
    buffer of that size, valid until the image is used (a `Scratch`, or the records of a
    task, `normstats.maths.uint8_rows.Uint8Rows`, which reduce small images in batches)."""

    def take(self, nbytes: int) -> np.ndarray: ...


class Scratch:
    """A reusable output buffer for decoding: each decode into it overwrites the last.

    Decoding a 256×256 image into fresh memory costs page faults on every call; a reader
    that reduces each image before decoding the next can hand the decoder one buffer.

    Examples
    --------
    >>> scratch = Scratch()
    >>> scratch.take(12).shape
    (12,)
    """

    def __init__(self) -> None:
        self._buffer = np.empty(0, dtype=np.uint8)

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 view of ``nbytes`` bytes (growing the buffer when needed)."""
        if self._buffer.size < nbytes:
            self._buffer = decode_buffer(nbytes)
        return self._buffer[:nbytes]
