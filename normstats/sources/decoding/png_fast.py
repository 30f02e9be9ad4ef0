"""PNG decoding with libpng (through imagecodecs) where the pixels are exactly Pillow's.

PNG is lossless: a valid 8-bit, non-interlaced file has exactly one decoding, so libpng
and Pillow agree pixel for pixel. libpng without Pillow's per-file Python machinery
decodes a 32×32 PNG about 5× faster, which is most of the cost of a folder of small
PNGs. The fast path only takes files it has checked itself, stricter than both
decoders: the signature, an IHDR it understands, every chunk's CRC, consecutive IDATs,
an IEND at the very end, and no chunk except ancillary ones that neither decoder turns
into pixels: a few fixed-size ones, ``tEXt``, and the ICC profile (``iCCP``, carried by
most photos saved by cameras and editors; Pillow keeps it in ``info`` and ``convert``
ignores it), taken only where Pillow would accept it (before the first IDAT,
compression method 0, a profile that inflates within Pillow's text limit). Anything
else (palettes, transparency chunks, 16-bit or sub-byte samples, interlacing,
compressed text, damage, images over the pixel limit) returns None and goes through
Pillow, so its pixels and its error messages are Pillow's. A differential fuzz test
(tests/sources/decoding/test_png_fast.py) checks that a file the fast path accepts is
one Pillow decodes to the same pixels.
"""

from __future__ import annotations

import functools
import logging
import struct
import threading
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

try:  # libpng without Pillow's per-image overhead
    import imagecodecs as _imagecodecs
except ImportError:  # pragma: no cover - a dependency, but decoding must work without it
    _imagecodecs = None

try:  # built with normstats; without it the same walk runs in Python
    from normstats.sources.decoding import _png_chunks
except ImportError:  # pragma: no cover - a source tree used without pip install
    _png_chunks = None

if TYPE_CHECKING:
    from normstats.sources.decoding.policy import DecodePolicy, OutputBuffer

__all__ = ["decode_png_fast", "plain_png_header", "quiet_decoder_logs", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

#: Ancillary chunks both decoders read as metadata only, with the length each must have
#: (Pillow fails on a short one, so a wrong length goes to Pillow for its verdict).
_METADATA_CHUNK_LENGTHS = {b"gAMA": 4, b"cHRM": 32, b"sRGB": 1, b"pHYs": 9, b"tIME": 7}

#: 8-bit colour types without a palette → samples per pixel.
_SAMPLES = {0: 1, 4: 2, 2: 3, 6: 4}

class _QuietWhileDecoding(logging.Filter):
    """Drops the decoders' log lines from this thread's decodes, and nothing else.

    libpng reports recoverable oddities ("IDAT: Extra compressed data") through the
    ``imagecodecs`` logger, which would print them for every such file; Pillow, which
    accepts the same files, is silent. Pillow's TIFF plugin logs "More samples per pixel
    than can be decoded: 7" as an error before refusing the file: a line naming no file,
    when the skip reason already says what the file is. A user's own calls keep their logs.

    The filter is its own context manager (entered once per decoded file, so it is a
    plain class: a ``contextlib`` generator costs several times more a call, which a
    folder of small PNGs paid per image); a depth count makes nesting safe.
    """

    def __init__(self) -> None:
        super().__init__()
        self.active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.active, "depth", 0)

    def __enter__(self) -> None:
        active = self.active
        active.depth = getattr(active, "depth", 0) + 1

    def __exit__(self, *exception: object) -> None:
        self.active.depth -= 1


_QUIET = _QuietWhileDecoding()
for _logger in ("imagecodecs", "PIL.TiffImagePlugin", "tifffile"):
    logging.getLogger(_logger).addFilter(_QUIET)


def quiet_decoder_logs() -> _QuietWhileDecoding:
    """A context manager that drops the decoders' log lines while this thread decodes
    (`_QuietWhileDecoding`).

    Examples
    --------
    >>> import logging
    >>> line = logging.LogRecord("imagecodecs", logging.WARNING, "", 0, "IDAT", None, None)
    >>> with quiet_decoder_logs():
    ...     quiet_decoder_logs().filter(line)  # dropped while this thread decodes
    False
    >>> quiet_decoder_logs().filter(line)
    True
    """
    return _QUIET

_CHUNK_HEAD = struct.Struct(">I4s")
_CRC = struct.Struct(">I")
_IHDR = struct.Struct(">IIBBBBB")


def _identity(pixels: np.ndarray) -> np.ndarray:
    return pixels


def _gray_to_rgb(pixels: np.ndarray) -> np.ndarray:
    return np.repeat(pixels[:, :, :1], 3, axis=2)


def _with_opaque_alpha(pixels: np.ndarray) -> np.ndarray:
    height, width, _ = pixels.shape
    return np.concatenate([pixels, np.full((height, width, 1), 255, np.uint8)], axis=2)


def _gray_alpha_to_rgba(pixels: np.ndarray) -> np.ndarray:
    return pixels[:, :, [0, 0, 0, 1]]


_UINT8 = np.dtype(np.uint8)

#: (samples per pixel, policy mode) → what Pillow's ``convert`` does to those samples.
#: Colour to L is missing on purpose: Pillow's luma rounding is its own, so Pillow does it.
_CONVERSIONS: dict[tuple[int, str], Callable[[np.ndarray], np.ndarray]] = {
    (1, "L"): _identity, (1, "keep"): _identity, (1, "RGB"): _gray_to_rgb,
    (1, "RGBA"): lambda p: _with_opaque_alpha(_gray_to_rgb(p)),
    (2, "keep"): _identity, (2, "L"): lambda p: p[:, :, :1],
    (2, "RGB"): _gray_to_rgb, (2, "RGBA"): _gray_alpha_to_rgba,
    (3, "RGB"): _identity, (3, "keep"): _identity, (3, "RGBA"): _with_opaque_alpha,
    (4, "RGBA"): _identity, (4, "keep"): _identity, (4, "RGB"): lambda p: p[:, :, :3],
}


def plain_png_header(data: bytes) -> tuple[int, int, int] | None:
    """(height, width, samples) of a structurally valid plain 8-bit PNG, else None.

    "Plain" is what the fast path takes: 8-bit grey, grey+alpha, RGB or RGBA, not
    interlaced, every chunk's CRC right, IDATs consecutive, IEND last with nothing after
    it, and no chunk but IHDR, IDAT, IEND, fixed-size metadata (gAMA, cHRM, sRGB, pHYs,
    tIME), ``tEXt`` within Pillow's limit and one ICC profile Pillow reads (``iCCP``).

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (5, 2)).save(buffer, format="PNG")
    >>> plain_png_header(buffer.getvalue())
    (2, 5, 3)
    >>> plain_png_header(buffer.getvalue()[:-1]) is None  # IEND cut short
    True
    """
    layout = _plain_layout(data)
    return None if layout is None else layout[0]


Layout = tuple[tuple[int, int, int], tuple[int, int] | None]


def _plain_layout(data: bytes) -> Layout | None:
    """`plain_png_header`'s verdict, with where the file's ICC profile chunk lies (its
    start and stop offsets; None when it has none): the compiled chunk walk, which
    mirrors `_walk_chunks` rule for rule in a sixth of its time."""
    if _png_chunks is None:
        return _walk_chunks(data)
    found = _png_chunks.plain_layout(data)
    if found is None:
        return None
    height, width, samples, start, stop = found
    if start < 0:
        return (height, width, samples), None
    if not _pillow_reads_profile(memoryview(data)[start + 8:stop - 4]):
        return None
    return (height, width, samples), (start, stop)


def _walk_chunks(data: bytes) -> Layout | None:
    """The chunk walk in Python: used where the compiled one was not built, and the
    reference the tests hold it to."""
    if not data.startswith(PNG_SIGNATURE):
        return None
    view, end, position = memoryview(data), len(data), len(PNG_SIGNATURE)
    header, idat_runs, previous, text, profile = None, 0, b"", 0, None
    while position + 12 <= end:
        length, kind = _CHUNK_HEAD.unpack_from(data, position)
        stop = position + 12 + length
        if stop > end or zlib.crc32(view[position + 4:stop - 4]) != \
                _CRC.unpack_from(data, stop - 4)[0]:
            return None
        if header is None:  # the first chunk must be a plain IHDR
            if kind != b"IHDR" or length != 13:
                return None
            header = _plain_ihdr(data, position + 8)
            if header is None:
                return None
        elif kind == b"IDAT":
            idat_runs += previous != b"IDAT"
        elif kind == b"IEND":
            plain = length == 0 and stop == end and idat_runs == 1
            return (header, profile) if plain else None
        elif kind == b"iCCP":
            if idat_runs or profile or not _pillow_reads_profile(view[position + 8:stop - 4]):
                return None
            profile = (position, stop)
        elif kind == b"tEXt":
            text += length  # Pillow refuses files whose text exceeds its memory limit
            if text > _TEXT_LIMIT:
                return None
        elif _METADATA_CHUNK_LENGTHS.get(kind) != length:
            return None
        previous, position = kind, stop
    return None


#: Pillow's limits on text and on an inflated ICC profile (PngImagePlugin.MAX_TEXT_*).
_TEXT_LIMIT = 64 * 1024 * 1024
_PROFILE_LIMIT = 1024 * 1024


def _pillow_reads_profile(body: memoryview) -> bool:
    """True when Pillow reads this iCCP body without an error: a name ended by NUL,
    compression method 0, and a zlib stream that inflates completely within its limit.
    Photos of one camera or editor share their profile: each is inflated once."""
    return _readable_profile(bytes(body))


@functools.lru_cache(maxsize=64)
def _readable_profile(data: bytes) -> bool:
    name_end = data.find(b"\0")
    if not 0 < name_end <= 79 or len(data) < name_end + 2 or data[name_end + 1] != 0:
        return False
    inflate = zlib.decompressobj()
    try:
        inflate.decompress(data[name_end + 2:], _PROFILE_LIMIT)
    except zlib.error:
        return False
    return not inflate.unconsumed_tail and inflate.eof


def _plain_ihdr(data: bytes, offset: int) -> tuple[int, int, int] | None:
    width, height, depth, colour, compression, filtering, interlace = \
        _IHDR.unpack_from(data, offset)
    samples = _SAMPLES.get(colour)
    if (samples is None or depth != 8 or compression or filtering or interlace
            or not 0 < width < 2**31 or not 0 < height < 2**31):
        return None
    return height, width, samples


def decode_png_fast(data: bytes, policy: DecodePolicy,
                    scratch: OutputBuffer | None = None) -> np.ndarray | None:
    """Decode a plain 8-bit PNG with libpng to (H, W, C) under ``policy``, or return None.

    None means "let Pillow decode it": the file is not plain (see `plain_png_header`),
    exceeds ``policy.max_pixels``, needs a conversion only Pillow does exactly (colour to
    L), or libpng refused it. With ``scratch`` the pixels may live in that buffer.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> from normstats.sources.decoding.policy import DecodePolicy
    >>> buffer = io.BytesIO(); Image.new("L", (3, 2), 9).save(buffer, format="PNG")
    >>> decode_png_fast(buffer.getvalue(), DecodePolicy("RGB"))[0, 0].tolist()
    [9, 9, 9]
    """
    if _imagecodecs is None:
        return None
    layout = _plain_layout(data)
    if layout is None:
        return None
    (height, width, samples), profile = layout
    convert = _CONVERSIONS.get((samples, policy.mode))
    if convert is None or height * width > policy.max_pixels:
        return None
    shape = (height, width) if samples == 1 else (height, width, samples)
    if profile is not None:
        # libpng would read and check the profile (~4 µs of a 32×32 file's ~25) only to
        # ignore it, as Pillow's convert does: it decodes the file without that chunk.
        data = data[:profile[0]] + data[profile[1]:]
    try:
        # in the try: a header claiming 2**62 pixels (under a raised --max-pixels) fails
        # here, in numpy, and Pillow then gives the file its verdict
        out = None if scratch is None else scratch.take(height * width * samples).reshape(shape)
        with _QUIET:
            pixels = _imagecodecs.png_decode(data, out=out)
    except Exception:  # noqa: BLE001 - Pillow decodes it again and names the problem
        return None
    # identity, not ``!=`` (~0.5 µs, a twentieth of the Python around a small file's
    # decode): an array of any other dtype object goes to Pillow, which is only slower
    if pixels.shape != shape or pixels.dtype is not _UINT8:
        return None
    return convert(pixels if samples != 1 else pixels.reshape(height, width, 1))
