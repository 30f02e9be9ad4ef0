"""TIFF rasters of any band count and sample type, read with tifffile: the raster path.

Pillow reads the TIFFs photographs are stored in: up to four 8-bit samples per pixel.
Remote-sensing, microscopy and medical rasters hold 13 bands of uint16, float32 dB values
or int16 with negative numbers, which Pillow cannot identify; tifffile (with imagecodecs'
codecs: deflate, LZW, zstd, JPEG, ...) reads them, tiled or striped, planar or
interleaved, classic TIFF or BigTIFF. `needs_raster_path` says which files take this path
(any TIFF that is not 8-bit with at most 4 samples, and every BigTIFF); the others stay
with Pillow, so the statistics of 8-bit RGB TIFFs do not change. Only the first page
(image file directory) is read, as for every multi-frame file.

A raster is a measurement, not a colour: only ``--mode keep`` reads one (the colour modes
refuse it, as they refuse a 16-bit PNG, rather than drop bands or clip), and one deeper
than 8 bits or of more than 4 bands is reported in raw units (`normstats.maths.scale`).
Its GDAL_NODATA tag (42113) names the value of missing measurements, left out band by band
(``--nodata`` replaces it), and NaN is missing in float bands. Band names come from GDAL's
band descriptions (tag 42112) where the file has them.

Masks: GDAL keeps a dataset's mask in the file itself as a page marked as a mask
(NewSubfileType bit 4; ``GDAL_TIFF_INTERNAL_MASK=YES``), after the image or after its
overviews, or in a sidecar TIFF (``<file>.msk``: `normstats.sources.decoding.sidecar`):
1-bit or 8-bit, one band for every band or one per band, 0 where there is no data.
`decode_raster` reads the mask page, `tiff_mask` that of a TIFF Pillow decodes, and
`mask_file` a sidecar's; a mask of another size or band count than its image is an error,
never ignored.

Untrusted bytes: the declared size is checked before tifffile allocates anything (the
pixel limit, the byte budget of 8 bytes a pixel that every decoder keeps to, this
machine's memory), and strips or tiles must lie inside the file (tifffile would read a
missing one as zeros).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from normstats.errors import RefusedInputError, TransientInputError, UnreadableInputError
from normstats.maths.records import FLOAT_LIMIT, TOO_LARGE_REASON
from normstats.sources.decoding.file_read import BYTES_PER_PIXEL
from normstats.sources.decoding.pillow_pixels import bomb_reason, memory_reason
from normstats.sources.decoding.png_fast import quiet_decoder_logs
from normstats.sources.decoding.policy import DecodedImage, DecodePolicy
from normstats.sources.decoding.tiff_header import (
    EXTRA_SAMPLES,
    PHOTOMETRIC,
    following_directory,
    tiff_tags,
)

__all__ = ["needs_raster_path", "keeps_as_raster", "decode_raster", "tiff_mask", "mask_file",
           "parse_nodata_tag", "band_names", "TIFF_SIGNATURES", "BIGTIFF_SIGNATURES", "GDAL_NODATA",
           "GDAL_METADATA", "RASTER_KINDS", "MASK_SEARCH", "tifffile_version",
           "READING_RULES"]

TIFF_SIGNATURES = (b"II*\x00", b"MM\x00*")
BIGTIFF_SIGNATURES = (b"II+\x00", b"MM\x00+")
#: GDAL's private tags: the nodata value (ASCII) and the metadata XML (band descriptions).
GDAL_NODATA, GDAL_METADATA = 42113, 42112
#: numpy kinds of the sample types read (uint8 to uint32, int8 to int32, float16 to float64).
RASTER_KINDS = frozenset("iuf")
#: The most bytes of the metadata XML searched for band descriptions.
_METADATA_LIMIT = 1 << 20
_ITEM = re.compile(r"<Item\s([^>]*)>([^<]*)</Item>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_PHOTOMETRIC_RGB = 2
_SAMPLES, _BITS, _FORMAT = 277, 258, 339
#: Colour samples per photometric interpretation (grey, RGB, palette, CMYK, YCbCr, CIELab).
_COLOUR_SAMPLES = {0: 1, 1: 1, 2: 3, 3: 1, 5: 4, 6: 3, 8: 3}
#: Extra-sample values that mean alpha (associated, unassociated): Pillow reads those.
_ALPHA = (1, 2)
#: Pages after the first searched for its mask page: GDAL writes it right after the image,
#: or after the overviews (reduced-resolution pages) in a cloud-optimized layout.
MASK_SEARCH = 64
#: Sample depths of a mask: GDAL writes 1-bit masks (photometric MASK), or 8-bit ones.
_MASK_BITS = (1, 8)


def needs_raster_path(data: bytes) -> bool:
    """True for a TIFF that Pillow does not read sample for sample: a BigTIFF; a classic
    TIFF with more than 4 samples per pixel, samples deeper than 8 bits, or signed or float
    samples; or one whose samples beyond its colours are not alpha (Pillow reads 2-band
    grey or 4-band RGB with unspecified extra samples as L or RGB, dropping bands; and
    band-sequential grey as its first band). The others go to Pillow (or its fast paths),
    under every mode, so the statistics of 8-bit photographs stored as TIFF do not change.

    Examples
    --------
    >>> import io, tifffile
    >>> def tiff(array, **options):
    ...     buffer = io.BytesIO(); tifffile.imwrite(buffer, array, **options)
    ...     return buffer.getvalue()
    >>> needs_raster_path(tiff(np.zeros((2, 2, 3), np.uint8)))
    False
    >>> needs_raster_path(tiff(np.zeros((2, 2, 13), np.uint16)))
    True
    >>> needs_raster_path(tiff(np.zeros((2, 2, 2), np.uint8), photometric="minisblack",
    ...                        planarconfig="contig"))
    True
    """
    head = data[:4]
    if head in BIGTIFF_SIGNATURES:
        return True
    if head not in TIFF_SIGNATURES:
        return False
    tags = tiff_tags(data, (_SAMPLES, _BITS, _FORMAT, PHOTOMETRIC, EXTRA_SAMPLES))
    if tags is None:  # Pillow words what is wrong with it
        return False
    samples, bits = tags.get(_SAMPLES, (1,))[0], tags.get(_BITS, (1,))
    if samples > 4 or max(bits) > 8 or any(f in (2, 3) for f in tags.get(_FORMAT, (1,))):
        return True
    colours = _COLOUR_SAMPLES.get(tags.get(PHOTOMETRIC, (-1,))[0])
    if colours is None or samples <= colours:
        return False
    extra = tags.get(EXTRA_SAMPLES, ())
    return len(extra) < samples - colours or any(e not in _ALPHA for e in extra)


def keeps_as_raster(data: bytes) -> bool:
    """Whether a TIFF takes the raster path under ``--mode keep``: each one
    `needs_raster_path` names, and a grey page that other pages follow. That page may be
    the first of one array tifffile spread over pages (``tifffile.imwrite`` of an 8-bit
    (H, W, 13) tile), which `decode_raster` finds and Pillow would read as the image; the
    raster path reads any other such page as Pillow does, the same grey values.

    Examples
    --------
    >>> import io, tifffile
    >>> def tiff(array):
    ...     buffer = io.BytesIO(); tifffile.imwrite(buffer, array); return buffer.getvalue()
    >>> keeps_as_raster(tiff(np.zeros((2, 2), np.uint8)))
    False
    >>> keeps_as_raster(tiff(np.zeros((2, 2, 13), np.uint8)))
    True
    """
    if needs_raster_path(data):
        return True
    tags = tiff_tags(data, (_SAMPLES, PHOTOMETRIC))
    return tags is not None and tags.get(_SAMPLES, (1,))[0] == 1 and \
        tags.get(PHOTOMETRIC, (-1,))[0] in (0, 1) and bool(following_directory(data))


def decode_raster(data: bytes, name: str, policy: DecodePolicy) -> DecodedImage:
    """The first page of a TIFF as (H, W, bands) pixels, its band names, nodata value and
    mask (its mask page: `tiff_mask`).

    Raises
    ------
    UnreadableInputError
        Damaged or truncated data, a sample type without statistics, a nodata tag that is
        not a number, a mask page that does not fit the image; `RefusedInputError` over the
        size limits (a subclass).
    TransientInputError
        A declared size larger than this machine's memory.

    Examples
    --------
    >>> import io, tifffile
    >>> buffer = io.BytesIO()
    >>> tifffile.imwrite(buffer, np.arange(26, dtype=np.uint16).reshape(1, 2, 13),
    ...                  photometric="minisblack", planarconfig="contig",
    ...                  extratags=[(GDAL_NODATA, "s", 0, "0", False)])
    >>> image = decode_raster(buffer.getvalue(), "t.tif", DecodePolicy("keep"))
    >>> image.pixels.shape, image.channel_names[:2], image.nodata, image.raster
    ((1, 2, 13), ('b1', 'b2'), 0.0, True)
    """
    import tifffile

    try:
        with quiet_decoder_logs(), tifffile.TiffFile(io.BytesIO(data)) as tiff:
            page = tiff.pages.first
            if (shape := _array_over_pages(page)) is not None:
                raise UnreadableInputError(
                    f"one array of shape {shape} that tifffile stored as pages of "
                    f"{page.shape}: a raster is read from its first page, as GDAL reads it, "
                    "which would leave out the others; write the bands into one page, "
                    "tifffile.imwrite(path, array, photometric='minisblack', "
                    "planarconfig='contig'), or compute the array itself, "
                    "normstats.compute(tifffile.imread(path))", name)
            _check_page(page, len(data), policy, name)
            pixels = _bands_last(page.asarray(maxworkers=1), page.axes, name)
            mask = _mask_page(tiff, data, pixels.shape, name)
            tags = page.tags
            nodata_tag = tags[GDAL_NODATA].value if GDAL_NODATA in tags else None
            metadata = tags[GDAL_METADATA].value if GDAL_METADATA in tags else None
            photometric = int(page.photometric)
            extra = tuple(int(e) for e in page.extrasamples)
    except (UnreadableInputError, TransientInputError):
        raise
    except MemoryError:
        raise  # the machine's limit, worded by decode_bytes
    except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
        raise UnreadableInputError(f"truncated or corrupt TIFF raster ({error})", name) from None
    if pixels.dtype.kind not in RASTER_KINDS or pixels.dtype.itemsize > 8 or (
            pixels.dtype.kind in "iu" and pixels.dtype.itemsize > 4):
        raise UnreadableInputError(f"TIFF samples of type {pixels.dtype} have no statistics "
                                   "here (bands of 8 to 32-bit integers or float)", name)
    if pixels.dtype.kind == "f":
        _check_finite(pixels, name)
    nodata = policy.nodata if policy.nodata is not None else parse_nodata_tag(nodata_tag, name)
    names = band_names(metadata, pixels.shape[2], photometric, extra)
    return DecodedImage(pixels, names, nodata, True, mask)


def _array_over_pages(page: Any) -> tuple[int, ...] | None:
    """The shape of the one array whose first page ``page`` is, when tifffile's description
    of it (``{"shape": [16, 16, 13]}``) says it continues on the next pages: what
    ``tifffile.imwrite`` makes of an (H, W, bands) array of more than 4 bands unless told
    ``planarconfig='contig'``. None for a page that holds its whole array."""
    if not page.is_shaped:
        return None
    try:
        shape = tuple(int(n) for n in json.loads(page.description)["shape"])
    except (ValueError, KeyError, TypeError):
        return None
    return shape if math.prod(shape) > page.size else None


def tiff_mask(data: bytes, shape: tuple[int, ...], name: str) -> np.ndarray | None:
    """The mask page of a TIFF whose first page decoded to pixels of ``shape`` (H, W, C),
    as bool (H, W, 1 or C), True where there is no data; None without one. Only a file
    with a second directory is parsed (most are not: a cheap look at the first directory
    says so).

    Raises
    ------
    UnreadableInputError
        A damaged directory chain or mask page, or a mask that does not fit the image.

    Examples
    --------
    >>> import io, tifffile
    >>> with tifffile.TiffWriter(buffer := io.BytesIO()) as writer:
    ...     writer.write(np.full((2, 3), 7, np.uint8))
    ...     writer.write(np.array([[1, 1, 0], [1, 1, 1]], bool), subfiletype=4,
    ...                  photometric="mask")
    >>> tiff_mask(buffer.getvalue(), (2, 3, 1), "m.tif")[:, :, 0].tolist()
    [[False, False, True], [False, False, False]]
    """
    if following_directory(data) == 0:
        return None
    import tifffile

    try:
        with quiet_decoder_logs(), tifffile.TiffFile(io.BytesIO(data)) as tiff:
            return _mask_page(tiff, data, shape, name)
    except UnreadableInputError:
        raise
    except MemoryError:
        raise  # the machine's limit, worded by decode_bytes
    except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
        raise UnreadableInputError(f"truncated or corrupt TIFF directories ({error})",
                                   name) from None


def mask_file(data: bytes, what: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    """The mask a mask file (GDAL's ``.msk`` sidecar, a TIFF) holds for pixels of ``shape``
    (H, W, C): bool (H, W, 1 or C), True where there is no data. ``what`` names the file in
    errors, which name the image ``name``.

    Raises
    ------
    UnreadableInputError
        Not a TIFF, damaged, or not of the image's size and band count.

    Examples
    --------
    >>> import io, tifffile
    >>> tifffile.imwrite(buffer := io.BytesIO(), np.array([[0, 255]], np.uint8))
    >>> mask_file(buffer.getvalue(), "mask file t.tif.msk", (1, 2, 4), "t.tif").tolist()
    [[[True], [False]]]
    """
    if data[:4] not in TIFF_SIGNATURES + BIGTIFF_SIGNATURES:
        raise UnreadableInputError(f"its {what} is not a TIFF (GDAL writes masks as TIFF)",
                                   name)
    import tifffile

    try:
        with quiet_decoder_logs(), tifffile.TiffFile(io.BytesIO(data)) as tiff:
            return _mask_of_page(tiff.pages.first, shape, len(data), what, name)
    except UnreadableInputError:
        raise
    except MemoryError:
        raise  # the machine's limit, worded by decode_bytes
    except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
        raise UnreadableInputError(f"truncated or corrupt {what} ({error})", name) from None


def _mask_page(tiff: Any, data: bytes, shape: tuple[int, ...], name: str) -> np.ndarray | None:
    """The first full-resolution mask page among the pages after the first, skipping
    overviews and their masks; None when another image (a next frame) or the end comes
    first. A chain that says a directory follows which cannot be read is damage: a mask
    there would be lost without a word."""
    following = following_directory(data)
    if following == 0:
        return None
    for index in range(1, MASK_SEARCH + 1):
        try:
            page = tiff.pages.get(index)
        except IndexError:  # the end of the chain, or a link to outside the file
            page = None
        if page is None:
            if index == 1 and following is not None:
                raise UnreadableInputError(
                    "truncated or corrupt TIFF: the directory after the first page cannot "
                    "be read (GDAL keeps a file's mask there)", name)
            return None
        if page.is_mask and not page.is_reduced:
            return _mask_of_page(page, shape, len(data), f"mask page (page {index + 1})", name)
        if not (page.is_mask or page.is_reduced):
            return None
    return None


def _mask_of_page(page: Any, shape: tuple[int, ...], file_bytes: int, what: str,
                  name: str) -> np.ndarray:
    """A mask page as bool (H, W, 1 or C), True where it is 0, once its directory says it
    fits pixels of ``shape`` and its data lies inside the file (checked before tifffile
    allocates: a mask is never larger than the image it covers)."""
    height, width, bands = shape
    if (int(page.imagelength), int(page.imagewidth)) != (height, width):
        raise UnreadableInputError(
            f"its {what} is {page.imagewidth}x{page.imagelength} but the image is "
            f"{width}x{height}; a mask covers its image pixel for pixel", name)
    samples = int(page.samplesperpixel)
    if samples not in (1, bands):
        raise UnreadableInputError(
            f"its {what} has {samples} bands for an image of {bands}: a mask has one band "
            "(for every band) or one band per band", name)
    if int(page.bitspersample) not in _MASK_BITS or int(page.sampleformat) != 1:
        raise UnreadableInputError(
            f"its {what} holds {page.bitspersample}-bit samples of sample format "
            f"{int(page.sampleformat)}; masks are 1-bit or 8-bit unsigned (0: no data)", name)
    _check_strips(page, file_bytes, what, name)
    try:
        values = page.asarray(maxworkers=1)
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001 - any decoder failure is this file's fault
        raise UnreadableInputError(f"truncated or corrupt {what} ({error})", name) from None
    return _bands_last(values, page.axes, name) == 0


def _check_finite(pixels: np.ndarray, name: str) -> None:
    """Refuse float bands holding ±inf or values whose squares overflow float64 (NaN is
    nodata, left out by the records)."""
    finite = pixels[np.isfinite(pixels)]
    if finite.size < np.count_nonzero(~np.isnan(pixels)):
        raise UnreadableInputError("contains infinite values (NaN is left out as nodata; "
                                   "infinity is not a measurement)", name)
    if finite.size and float(np.abs(finite).max()) > FLOAT_LIMIT:
        raise UnreadableInputError(TOO_LARGE_REASON, name)


#: What decides a raster's valid values, a part of every record cache group's key: records
#: cached under other rules are read again. 2: mask pages and ``.msk`` sidecars are nodata.
READING_RULES = "2"


@functools.cache
def tifffile_version() -> str:
    """tifffile's installed version, read from its metadata folder's name without importing
    it (the import costs ~80 ms, which a run of JPEGs with a record cache would pay for its
    key); "absent" without it.

    Examples
    --------
    >>> import tifffile
    >>> tifffile_version() == tifffile.__version__
    True
    """
    spec = importlib.util.find_spec("tifffile")
    if spec is None or spec.origin is None:
        return "absent"
    folders = Path(spec.origin).parent.parent.glob("tifffile-*.dist-info")
    names = sorted(f.name[len("tifffile-"):-len(".dist-info")] for f in folders)
    return names[-1] if len(names) == 1 else "?"


def _check_page(page: Any, file_bytes: int, policy: DecodePolicy, name: str) -> None:
    """Refuse, from the directory alone, a page over the limits or with data outside the
    file, before tifffile allocates the output."""
    height, width = int(page.imagelength), int(page.imagewidth)
    pixels = height * width
    if pixels > policy.max_pixels:
        raise RefusedInputError(bomb_reason(f"{width}x{height} = {pixels} pixels",
                                            policy.max_pixels), name)
    values = math.prod(page.shape)
    if pixels == 0 or values == 0:
        raise UnreadableInputError("image has no pixels", name)
    if page.dtype is None:
        raise UnreadableInputError(f"TIFF samples of {page.bitspersample} bits in sample "
                                   f"format {int(page.sampleformat)} have no numeric type", name)
    needed = values * np.dtype(page.dtype).itemsize
    if needed > BYTES_PER_PIXEL * policy.max_pixels:
        raise RefusedInputError(
            f"decompression bomb: {page.samplesperpixel} bands of {width}x{height} "
            f"{page.dtype} = {needed:,} bytes exceed the limit of {BYTES_PER_PIXEL} bytes x "
            f"{policy.max_pixels} pixels; raise --max-pixels if the file is trusted", name)
    reason = memory_reason(f"{width}x{height} = {pixels} pixels", needed)
    if reason is not None:
        raise TransientInputError(reason, name)
    _check_strips(page, file_bytes, "TIFF raster", name)


def _check_strips(page: Any, file_bytes: int, what: str, name: str) -> None:
    """Refuse a page whose strips or tiles are missing or lie outside the file (tifffile
    would read them as zeros: pixels, or in a mask, "no data"), or too short for its size
    when uncompressed."""
    offsets, counts = page.dataoffsets, page.databytecounts
    if not offsets or len(offsets) != len(counts):
        raise UnreadableInputError(f"{what} without strip or tile offsets", name)
    for offset, count in zip(offsets, counts):
        if offset <= 0 or count <= 0 or offset + count > file_bytes:
            raise UnreadableInputError(
                f"truncated or corrupt {what} (a strip or tile lies outside the file or "
                "is missing; it would be read as zeros)", name)
    height, width = int(page.imagelength), int(page.imagewidth)
    stored = height * -(-width * int(page.samplesperpixel) * int(page.bitspersample) // 8)
    if int(page.compression) == 1 and sum(counts) < stored:
        raise UnreadableInputError(f"truncated {what}: {sum(counts):,} bytes of "
                                   f"uncompressed data where its size needs {stored:,}", name)


def _bands_last(pixels: np.ndarray, axes: str, name: str) -> np.ndarray:
    """(H, W, bands) of a page's array: band-sequential (planar) pages come (S, H, W)."""
    if pixels.ndim != len(axes):
        raise UnreadableInputError(f"TIFF page of axes {axes} decoded to an array of shape "
                                   f"{pixels.shape}", name)
    if axes == "YX":
        return pixels[:, :, None]
    if axes == "YXS":
        return pixels
    if axes == "SYX":
        return np.ascontiguousarray(np.moveaxis(pixels, 0, -1))
    raise UnreadableInputError(f"TIFF page of axes {axes} is not one image of bands "
                               "(depth or volume pages are not read)", name)


def parse_nodata_tag(value: Any, name: str) -> float | None:
    """The number a GDAL_NODATA tag holds (its ASCII text, as GDAL writes it), or None.

    Examples
    --------
    >>> parse_nodata_tag("-9999\\x00", "t.tif"), parse_nodata_tag(None, "t.tif")
    (-9999.0, None)
    >>> parse_nodata_tag("nan", "t.tif")
    nan
    """
    if value is None:
        return None
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    text = text.strip("\x00 \t\r\n")
    try:
        return float(text)
    except ValueError:
        raise UnreadableInputError(f"its GDAL_NODATA tag {text[:40]!r} is not a number; give "
                                   "--nodata to say which value is missing", name) from None


def band_names(metadata: Any, bands: int, photometric: int,
               extra: tuple[int, ...] = ()) -> tuple[str, ...]:
    """Band names: GDAL's band descriptions when every band has a distinct one; R, G, B
    (and A) for an RGB photometric, L (and A) for grey, where every extra sample is alpha;
    else b1, b2, ... (GDAL's numbering).

    Examples
    --------
    >>> xml = ('<GDALMetadata><Item name="DESCRIPTION" sample="0" role="description">B01'
    ...        '</Item><Item name="DESCRIPTION" sample="1" role="description">B02</Item>'
    ...        '</GDALMetadata>')
    >>> band_names(xml, 2, 1), band_names(None, 3, 2), band_names(None, 2, 1, (2,))
    (('B01', 'B02'), ('R', 'G', 'B'), ('L', 'A'))
    >>> band_names(None, 5, 1, (0, 0, 0, 0))
    ('b1', 'b2', 'b3', 'b4', 'b5')
    """
    described = _descriptions(metadata, bands)
    if described is not None:
        return described
    colours = ("R", "G", "B") if photometric == _PHOTOMETRIC_RGB else ("L",)
    alpha = len(extra) == bands - len(colours) <= 1 and all(e in _ALPHA for e in extra)
    if alpha and bands - len(colours) in (0, 1):
        return (colours + ("A",))[:bands]
    return tuple(f"b{i + 1}" for i in range(bands))


def _descriptions(metadata: Any, bands: int) -> tuple[str, ...] | None:
    if not isinstance(metadata, str):
        return None
    import html  # GDAL's band descriptions only: most runs never read one

    found: dict[int, str] = {}
    for attributes, text in _ITEM.findall(metadata[:_METADATA_LIMIT]):
        fields = dict(_ATTRIBUTE.findall(attributes))
        if fields.get("role") == "description" and fields.get("sample", "").isdigit():
            found[int(fields["sample"])] = html.unescape(text).strip()
    names = tuple(found.get(i, "") for i in range(bands))
    if all(names) and len(set(names)) == bands:
        return names
    return None
