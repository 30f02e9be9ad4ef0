"""Decoding one image file into pixels, under an explicit mode policy.

The default policy, ``RGB``, is what torchvision's default loader feeds a model
(``Image.open(p).convert("RGB")``). ``L`` and ``RGBA`` convert likewise. ``keep``
keeps native channels and bit depth: 16-bit stays uint16 and float stays float.
No policy clips silently: a 16-bit or float image under an 8-bit policy is refused
with a pointer to ``--mode keep``. Only the first frame of a multi-frame file is used.
Pillow's ``LOAD_TRUNCATED_IMAGES`` is never set, so a truncated file is an error,
not an image padded with grey.

Two fast paths skip Pillow's per-file overhead where their pixels are provably Pillow's:
libjpeg-turbo (simplejpeg) for YCbCr and grey JPEGs, libpng (imagecodecs,
`normstats.sources.decoding.png_fast`) for plain 8-bit PNGs. TIFF rasters that Pillow cannot
read at their native depth (more than 4 bands, deeper than 8 bits, signed or float samples,
BigTIFF) take the raster path (tifffile, `normstats.sources.decoding.raster`), under
``keep`` only. Every other file, and every file they are unsure of, is decoded by Pillow,
which also words every error.

The value of missing measurements (``nodata``) travels with the pixels: the policy's, or,
under ``keep``, a TIFF's own GDAL_NODATA tag; the records leave it out band by band. So
does a mask under ``keep``: a TIFF's mask page, and GDAL's ``.msk`` sidecar next to a file
of a folder or list of files (`normstats.sources.decoding.sidecar`), both if both exist.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

import numpy as np

from normstats.errors import (
    OUT_OF_MEMORY_REASON,
    RefusedInputError,
    TransientInputError,
    UnreadableInputError,
)
from normstats.sources.decoding.file_read import read_image_file, read_whole_file
from normstats.sources.decoding.jpeg_fast import decode_jpeg_fast
from normstats.sources.decoding.pillow_pixels import (
    bomb_reason,
    check_size,
    decoded_channel_names,
    memory_reason,
    pixels_under_mode,
    unidentified_reason,
)
from normstats.sources.decoding.png_fast import (
    PNG_SIGNATURE,
    decode_png_fast,
    quiet_decoder_logs,
)
from normstats.sources.decoding.policy import (
    ALLOWED_FORMATS,
    DEFAULT_MAX_PIXELS,
    IMAGE_EXTENSIONS,
    MODES,
    DecodedImage,
    DecodePolicy,
    OutputBuffer,
    Scratch,
    channel_names_for,
)
from normstats.sources.decoding.raster import (
    BIGTIFF_SIGNATURES,
    GDAL_NODATA,
    TIFF_SIGNATURES,
    decode_raster,
    keeps_as_raster,
    mask_file,
    needs_raster_path,
    parse_nodata_tag,
    tiff_mask,
)
from normstats.sources.decoding.sidecar import Sidecar, read_sidecar
from normstats.sources.decoding.tiff_header import describe_layout, tiff_layout
from normstats.sources.decoding.transforms import apply_transforms, center_crop

if TYPE_CHECKING:
    from PIL import Image

_TIFF_HEADS = TIFF_SIGNATURES + BIGTIFF_SIGNATURES
_PHOTOMETRIC, _PALETTE = 262, 3

__all__ = ["MODES", "ALLOWED_FORMATS", "IMAGE_EXTENSIONS", "DEFAULT_MAX_PIXELS",
           "decode_file", "decode_bytes", "decode_jpeg_fast", "fast_pixels",
           "read_image_bytes", "read_whole_file",
           "channel_names_for", "DecodedImage", "Scratch", "OutputBuffer", "lift_pillow_limit"]

#: Whether this process is a pool worker of normstats' own (`lift_pillow_limit`).
_pillow_limit_lifted = False


def lift_pillow_limit() -> None:
    """In a process of normstats' own (a pool worker), leave the pixel limit to the
    policy: Pillow's own limit is lifted before each file Pillow opens here, the only
    place it is used (most runs never load Pillow: the fast paths decode PNG and JPEG,
    and a worker forked from a process without it would spend ~10 ms on the import).

    Never called in the caller's process, whose Pillow settings are the caller's.
    """
    global _pillow_limit_lifted
    _pillow_limit_lifted = True


def decode_file(path: str, policy: DecodePolicy, name: str | None = None,
                scratch: OutputBuffer | None = None, size_hint: int | None = None,
                sidecars: bool = False) -> DecodedImage:
    """Read and decode one file to an (H, W, C) array under ``policy``.

    With ``scratch``, the pixels may live in that buffer and stay valid only until the
    next decode into it. ``size_hint`` (the size the folder listing saw) lets the read
    take the whole file in one call; the file is read to its end whatever its size now,
    up to the policy's byte limit (`normstats.sources.decoding.file_read`). With
    ``sidecars`` (asked by listings that found a mask sidecar and key the record cache on
    it), a ``.msk`` file next to it masks its pixels under ``keep``.

    Raises
    ------
    UnreadableInputError
        With the file name and the reason in plain words.

    Examples
    --------
    >>> import tempfile, os
    >>> from PIL import Image
    >>> p = os.path.join(tempfile.mkdtemp(), "a.png")
    >>> Image.new("L", (3, 2), 7).save(p)
    >>> decoded = decode_file(p, DecodePolicy("RGB"))
    >>> decoded.pixels.shape, decoded.channel_names
    ((2, 3, 3), ('R', 'G', 'B'))
    """
    name = name or path
    data = read_image_bytes(path, name, policy, size_hint)
    try:
        sidecar = read_sidecar(path, name, policy.file_byte_limit) \
            if sidecars and policy.mode == "keep" else None
    except MemoryError:
        raise TransientInputError(OUT_OF_MEMORY_REASON, name) from None
    return decode_bytes(data, name, policy, scratch, sidecar)


def read_image_bytes(path: str, name: str, policy: DecodePolicy,
                     size_hint: int | None = None) -> bytes:
    """The bytes of the image file ``path`` under the policy's byte limit
    (`read_image_file`); running out of memory is the moment's fault, not the file's: a
    `TransientInputError` (`OUT_OF_MEMORY_REASON`). Errors name ``name``.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.png")
    >>> _ = open(path, "wb").write(b"abc")
    >>> read_image_bytes(path, "a.png", DecodePolicy(max_file_bytes=2))
    Traceback (most recent call last):
    ...
    normstats.errors.RefusedInputError: a.png: file of 3 bytes is over the limit of 2 bytes; ...
    """
    try:
        return read_image_file(path, name, policy.file_byte_limit, size_hint)
    except MemoryError:
        raise TransientInputError(OUT_OF_MEMORY_REASON, name) from None


def fast_pixels(data: bytes, policy: DecodePolicy,
                scratch: OutputBuffer | None = None) -> np.ndarray | None:
    """The pixels of image bytes the fast decoders take (a plain PNG, a YCbCr or grey
    JPEG: `decode_png_fast`, `decode_jpeg_fast`), or None for any other bytes.

    Before any transform: what `decode_bytes` gives such bytes under a policy that keeps
    pixels as decoded (`DecodePolicy.keeps_pixels_as_decoded`), without the image tuple
    around them. The file's signature picks the decoder to try (a call less for the
    other format).

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> png = io.BytesIO(); Image.new("L", (3, 2), 7).save(png, format="PNG")
    >>> fast_pixels(png.getvalue(), DecodePolicy("RGB")).shape
    (2, 3, 3)
    >>> bmp = io.BytesIO(); Image.new("L", (3, 2), 7).save(bmp, format="BMP")
    >>> fast_pixels(bmp.getvalue(), DecodePolicy("RGB")) is None
    True
    """
    if data.startswith(PNG_SIGNATURE):
        return decode_png_fast(data, policy, scratch)
    return decode_jpeg_fast(data, policy, scratch)


def decode_bytes(data: bytes, name: str, policy: DecodePolicy,
                 scratch: OutputBuffer | None = None,
                 sidecar: Sidecar | None = None, *, fast: bool = True) -> DecodedImage:
    """Decode image bytes to (H, W, C) under ``policy``; errors name ``name``. A
    ``sidecar`` (the bytes of its mask file) masks the pixels, as its own mask page does.

    Running out of memory is reported as what it is (`OUT_OF_MEMORY_REASON`), never as
    damage: a `TransientInputError`, so the record cache does not keep it as the file's
    verdict and the next run decodes the file again.

    Examples
    --------
    >>> decode_bytes(b"", "a.png", DecodePolicy())
    Traceback (most recent call last):
    ...
    normstats.errors.UnreadableInputError: a.png: zero-byte file

    ``fast=False`` says the fast decoders refused these bytes already (`fast_pixels`):
    they are not tried again.
    """
    try:
        image = _decode_bytes(data, name, policy, scratch, fast)
        if sidecar is not None:
            image = image._replace(mask=_either(image.mask, mask_file(
                sidecar.data, f"mask file {sidecar.name}", image.pixels.shape, name)))
        return _transformed(image, policy, name)
    except MemoryError:
        raise TransientInputError(OUT_OF_MEMORY_REASON, name) from None


def _decode_bytes(data: bytes, name: str, policy: DecodePolicy,
                  scratch: OutputBuffer | None, fast: bool = True) -> DecodedImage:
    """The pixels as decoded, before the policy's resize and crop."""
    if not data:
        raise UnreadableInputError("zero-byte file", name)
    if policy.mode == "keep" and data[:4] in _TIFF_HEADS and keeps_as_raster(data):
        return decode_raster(data, name, policy)
    pixels = fast_pixels(data, policy, scratch) if fast else None
    if pixels is not None:
        return DecodedImage(pixels, channel_names_for(policy.mode, pixels.shape[2]),
                            policy.nodata)
    # Pillow's image module loads with the first file it decodes: a run whose records all
    # come from the cache, or whose files all take the fast paths, never needs it.
    from PIL import Image, UnidentifiedImageError

    # Thread-safe by design: Pillow's limit (Image.MAX_IMAGE_PIXELS) and the warning filters
    # are module globals shared with the caller's threads, so neither is ever changed here
    # but in the pool's workers, processes of our own (`lift_pillow_limit`).
    # check_size enforces the policy's limit from the header, before a pixel is allocated.
    if _pillow_limit_lifted:
        Image.MAX_IMAGE_PIXELS = None
    try:
        with quiet_decoder_logs():  # log lines naming no file: the skip reason says it
            image = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
            check_size(image, policy, name)
            image.load()
            check_size(image, policy, name)  # a GIF frame may extend the canvas on load
    except UnreadableInputError:
        raise
    except UnidentifiedImageError:
        if data[:4] in _TIFF_HEADS and needs_raster_path(data):
            raise _raster_refused(data, name, policy) from None
        raise UnreadableInputError(unidentified_reason(data), name) from None
    except MemoryError:
        raise  # the machine's limit, not the file's fault: worded by decode_bytes
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as error:
        # Pillow's own check, at the caller's Image.MAX_IMAGE_PIXELS (errors above twice it;
        # its warning arrives here only if the caller's filters turn it into an error).
        raise _pillow_limit_error(error, policy, name) from None
    except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
        raise UnreadableInputError(f"truncated or corrupt image data ({error})",
                                   name) from None
    pixels = pixels_under_mode(image, data, policy.mode, name)
    names = decoded_channel_names(image.mode, policy.mode, pixels.shape[2])
    mask = tiff_mask(data, pixels.shape, name) \
        if policy.mode == "keep" and image.format == "TIFF" else None
    return DecodedImage(pixels, names, _nodata(image, policy, name), mask=mask)


def _nodata(image: Image.Image, policy: DecodePolicy, name: str) -> float | None:
    """The policy's nodata value, or under ``keep`` a TIFF's own GDAL_NODATA tag (not a
    palette TIFF's: its samples are indices, and ``keep`` gives their colours)."""
    if policy.nodata is not None or policy.mode != "keep" or image.format != "TIFF":
        return policy.nodata
    tags = getattr(image, "tag_v2", {})
    if GDAL_NODATA not in tags or tags.get(_PHOTOMETRIC) == _PALETTE:
        return None
    return parse_nodata_tag(tags[GDAL_NODATA], name)


def _raster_refused(data: bytes, name: str, policy: DecodePolicy) -> UnreadableInputError:
    """Why a raster Pillow cannot open is not read under a colour mode: converting its
    measurements to colours would drop bands or clip them (torchvision's loader fails on
    it too); ``keep`` reads it through the raster path."""
    layout = tiff_layout(data)
    what = describe_layout(layout) if layout is not None else "a BigTIFF"
    return UnreadableInputError(
        f"TIFF raster ({what}): the {policy.mode} policy converts colour images and would "
        "drop bands or clip them; use --mode keep to compute its bands", name)


def _pillow_limit_error(error: Exception, policy: DecodePolicy,
                        name: str) -> UnreadableInputError:
    """Why Pillow's own limit refused a file: the policy's limit, or the caller's Pillow's."""
    from PIL import Image

    found = re.search(r"\((\d+) pixels\)", str(error))
    if found is None or int(found.group(1)) > policy.max_pixels:
        size = f"{found.group(1)} pixels" if found else "the image"
        return RefusedInputError(bomb_reason(size, policy.max_pixels), name)
    # what raising Pillow's limit would lead to, if the pixels cannot fit in memory anyway
    too_large = memory_reason(f"{found.group(1)} pixels", int(found.group(1)))
    if too_large is not None:
        return TransientInputError(too_large, name)
    # this process's setting, not the file: another scheduler, or a later run, decodes it
    return TransientInputError(
        f"{found.group(1)} pixels is within --max-pixels but over the limit of Pillow "
        f"in this process (PIL.Image.MAX_IMAGE_PIXELS = {Image.MAX_IMAGE_PIXELS}), "
        "which normstats never changes in the caller's process; raise it there, or run "
        "with the processes scheduler", name)


def _transformed(image: DecodedImage, policy: DecodePolicy, name: str) -> DecodedImage:
    """The image after the policy's resize and center crop (what the model sees). A mask
    is cropped with its pixels, and what the crop pads is not data; a resize would blend
    nodata or masked values into valid ones, and is refused."""
    if policy.resize is None and policy.center_crop is None:
        return image
    if policy.resize is not None and (image.mask is not None or (
            image.raster and image.nodata is not None)):
        raise UnreadableInputError("Resize would blend nodata or masked values into valid "
                                   "pixels: crop only (--center-crop), or compute the "
                                   "raster unresized", name)
    pixels = apply_transforms(image.pixels, image.channel_names, policy.resize,
                              policy.center_crop, name, policy.max_pixels)
    mask = image.mask
    if mask is not None and policy.center_crop is not None:
        mask = ~center_crop(~mask, policy.center_crop)  # padding: zeros, that is "no data"
    return image._replace(pixels=pixels, mask=mask)


def _either(mask: np.ndarray | None, other: np.ndarray) -> np.ndarray:
    """Values left out by either mask (one band masks every band: broadcast)."""
    return other if mask is None else mask | other
