"""`ReadOptions`: how a dataset is read and reported, one frozen object for every entry point.

`normstats.compute`, `normstats.images`, `normstats.records`, `open_source` and the
command line take the same options with the same names (``image_key`` is
``--image-key``, ``center_crop`` is ``--center-crop``), either as one object,
``options=ReadOptions(...)``, or as keyword arguments, the convenient spelling of it
(keywords given beside an object replace its fields). Every option is checked here,
once, by a named ``parse_*`` function; choices forgive case as the command line does
(``layout="nhwc"``, ``mode="rgb"``, ``on_error="FAIL"``).

The decode part (mode, pixel and byte limits, resize, crop) is `ReadOptions.policy`, a
`normstats.sources.decoding.policy.DecodePolicy`: internal, what readers and the record
cache take (the cache keys on it), built from these options and never by users.

How a run is carried out (workers, scheduler, task size, progress, cache) is not part
of what is read: those stay arguments of the calls that run.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypedDict

from normstats.errors import InvalidOptionError
from normstats.maths.scale import parse_scale
from normstats.sources.arrays import parse_layout
from normstats.sources.decoding.policy import (
    DEFAULT_MAX_PIXELS,
    DecodePolicy,
    parse_limit,
    parse_mode,
    parse_nodata,
)
from normstats.sources.decoding.transforms import check_transform_sizes, parse_size

__all__ = ["ReadOptions", "ReadArguments", "READ_FIELDS", "ON_ERROR", "parse_on_error",
           "parse_channels", "parse_format", "parse_storage_options", "parse_storage_value",
           "read_options"]

ON_ERROR = ("skip", "fail")


def parse_on_error(on_error: str) -> str:
    """``"skip"`` or ``"fail"``, whatever the case.

    Examples
    --------
    >>> parse_on_error("FAIL")
    'fail'
    """
    if not isinstance(on_error, str) or on_error.lower() not in ON_ERROR:
        raise InvalidOptionError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
    return on_error.lower()


def parse_channels(channels: str | tuple[str, ...] | list[str] | None
                   ) -> tuple[str, ...] | None:
    """Channel names as a tuple; a string is split at commas, as ``--channels R,G,B``.

    Examples
    --------
    >>> parse_channels("R, G,B"), parse_channels(["x"])
    (('R', 'G', 'B'), ('x',))
    """
    if channels is None:
        return None
    names = channels.split(",") if isinstance(channels, str) else list(channels)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise InvalidOptionError(f"channels must be non-empty names, got {channels!r}")
    return tuple(n.strip() for n in names)


def parse_format(format: str | None) -> str | None:
    """A dataset format name in lower case (None: detect it).

    Examples
    --------
    >>> parse_format("IDX"), parse_format(None)
    ('idx', None)
    """
    if format is None:
        return None
    from normstats.sources.detect import FORMATS  # the readers load only when named

    if not isinstance(format, str) or format.lower() not in FORMATS:
        raise InvalidOptionError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}"
                                 + _result_format_hint(format))
    return format.lower()


#: Names of ways to print a result, which users give ``format`` (``--format``) meaning the
#: result's: it names the dataset's files.
_RESULT_FORMATS = ("json", "csv", "yaml", "yml", "toml", "text", "txt", "table", "markdown")


def _result_format_hint(format: object) -> str:
    """The hint for a format of the result given where the dataset's belongs.

    Examples
    --------
    >>> "stats.to_json()" in _result_format_hint("JSON")
    True
    >>> _result_format_hint("png")
    ''
    """
    if not isinstance(format, str) or format.lower() not in _RESULT_FORMATS:
        return ""
    return (" (the format of the dataset's files; the result as JSON is stats.to_json(), "
            "--json on the command line, and in a framework's words stats.to(FRAMEWORK), "
            "--to FRAMEWORK)")


def _parse_flag(value: bool, option: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidOptionError(f"{option} must be True or False, got {value!r}")
    return value


def _parse_batched(value: bool | None) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise InvalidOptionError(f"batched must be True, False or None, got {value!r}")
    return value


_INTEGER = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_WORDS = {"true": True, "false": False, "none": None, "null": None}


def parse_storage_value(text: str) -> Any:
    """The value of a ``--storage-option KEY=VALUE``: ``true``/``false`` (any case) are
    booleans, ``none``/``null`` None, decimal numbers ints or floats, a value in double
    quotes the text inside them, anything else the text itself.

    Examples
    --------
    >>> [parse_storage_value(v) for v in ("TRUE", "10", "2.5", '"10"', "http://h:9000")]
    [True, 10, 2.5, '10', 'http://h:9000']
    """
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    if text.lower() in _WORDS:
        return _WORDS[text.lower()]
    if _INTEGER.fullmatch(text):
        return int(text)
    return float(text) if _FLOAT.fullmatch(text) else text


def parse_storage_options(value: dict[str, Any] | list[str] | tuple[str, ...] | None
                          ) -> dict[str, Any] | None:
    """The keyword arguments of the fsspec filesystem of a URL (None: none).

    A dict is taken as it is (a copy); a sequence of ``"KEY=VALUE"`` strings, the
    command line's ``--storage-option``, becomes one: a dotted key is a nested dict
    (``client_kwargs.endpoint_url=http://127.0.0.1:9000`` is
    ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}``), and values are
    read by `parse_storage_value`.

    Examples
    --------
    >>> parse_storage_options(["anon=false", "client_kwargs.region_name=eu-west-1"])
    {'anon': False, 'client_kwargs': {'region_name': 'eu-west-1'}}
    """
    if value is None or (isinstance(value, dict | list | tuple) and not value):
        return None
    if isinstance(value, dict):
        if not all(isinstance(key, str) and key for key in value):
            raise InvalidOptionError(f"storage_options keys must be names, got {list(value)!r}")
        return copy.deepcopy(value)
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise InvalidOptionError("storage_options must be a dict or a list of 'KEY=VALUE' "
                                 f"strings, got a {type(value).__name__}")
    options: dict[str, Any] = {}
    for number, item in enumerate(value, 1):
        key, sep, text = item.partition("=")
        names = [name.strip() for name in key.split(".")]
        if not sep or not all(names):  # never echoed: it may be a secret missing its KEY=
            raise InvalidOptionError(f"storage option {number} is not KEY=VALUE (a dotted "
                                     "KEY, such as client_kwargs.endpoint_url, is nested)")
        _set_nested(options, names, parse_storage_value(text))
    return options


def _set_nested(options: dict[str, Any], names: list[str], value: Any) -> None:
    for depth, name in enumerate(names[:-1], 1):
        options = options.setdefault(name, {})
        if not isinstance(options, dict):
            raise InvalidOptionError(f"storage option {'.'.join(names[:depth])} is given both "
                                     f"a value and keys under it")
    if isinstance(options.get(names[-1]), dict):
        raise InvalidOptionError(f"storage option {'.'.join(names)} is given both a value and "
                                 "keys under it")
    if names[-1] in options:
        raise InvalidOptionError(f"storage option {'.'.join(names)} is given twice")
    options[names[-1]] = value


def _parse_key(value: str | None) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidOptionError(f"image_key must be a name, got {value!r}")
    return value


@dataclass(frozen=True)
class ReadOptions:
    """How a dataset is read, and how its statistics are reported.

    Attributes
    ----------
    mode : {"RGB", "L", "RGBA", "keep"}
        Decode policy for image files; "RGB" matches torchvision's default loader,
        "keep" keeps native channels and bit depth (16-bit stays 16-bit).
    layout : str, optional
        Array layout ("NHWC", "NCHW", "NHW", "NC", "HWC", "CHW", "HW"), or the layout of
        every item of a dataset or iterable ("HWC", "CHW"); detected from the shape when
        None (`normstats.sources.arrays`, `normstats.sources.items`; an xarray
        ``DataArray`` by its dimension names, `normstats.sources.labelled`).
    scale : float, optional
        Divisor of the reported values (default: the dtype maximum for integer images,
        1 for floats, vectors and TIFF rasters deeper than 8 bits or of more than 4 bands,
        which are measurements: `normstats.maths.scale`). Pixels (`normstats.images`) are
        never scaled.
    channels : tuple of str or str, optional
        Channel names (default R, G, B for decoded colour images; c0, c1, ... for arrays);
        a string is split at commas.
    on_error : {"skip", "fail"}
        Skip unreadable inputs (named in ``stats.skipped``) or stop at the first one.
    max_pixels : int, optional
        Decompression-bomb limit in pixels per image (default: Pillow's, ~89.5 M).
    max_file_bytes : int, optional
        Image files and tar members larger than this are skipped unread (default
        ``8 × max_pixels + 64 MiB``).
    resize, center_crop : int, optional
        torchvision's ``Resize(resize)`` then ``CenterCrop(center_crop)`` on each decoded
        image file: statistics of what the model sees.
    format : str, optional
        Dataset file format ("idx", "cifar10-bin", "tar", "npz", "parquet", ...);
        detected from content and name when None.
    image_key : str, optional
        The image field of dict items, the image column of Parquet and Arrow files and
        Hugging Face datasets that have several (default: the one ``Image`` feature, or
        found by name or type), or the extension of the image member of tar shard samples
        (WebDataset's key: ``jpg``, ``png``; default: the first image member). Refused for
        data whose entries are one image each (folders, arrays, IDX, ``.npz``).
    allow_missing_chunks : bool
        Read the chunks a zarr store lacks as its fill value (and say how many images that
        made) instead of refusing the store.
    batched : bool, optional
        Whether each item of an iterable is a batch of images, (N, C, H, W) or
        (N, H, W, C), to split into its images. None (default) detects it: a ``DataLoader``
        that collates and a webdataset pipeline ending in ``.batched(n)`` yield batches,
        other iterables yield images. Python only (no command-line flag: files and arrays
        are never batches); any other data refuses ``batched=True``.
    storage_options : dict or list of str, optional
        Keyword arguments of the fsspec filesystem of a URL (``s3://``, ``gcs://``, ...):
        credentials, ``endpoint_url`` of an S3-compatible store, ``anon=True``. Also
        ``"KEY=VALUE"`` strings as ``--storage-option`` takes them (`parse_storage_options`).
        Only URLs take them: a local path or an array refuses them.
    nodata : float or str, optional
        The value of missing measurements, left out band by band ("nan", "-9999"): of
        every decoded image and of arrays. None (default): a TIFF's own GDAL_NODATA tag
        under ``mode="keep"``, NaN in the float bands of rasters, the mask of a numpy
        masked array. See ``docs/multispectral.md``.

    Examples
    --------
    >>> options = ReadOptions(mode="rgb", layout="nhwc", channels="R,G,B")
    >>> options.mode, options.layout, options.channels
    ('RGB', 'NHWC', ('R', 'G', 'B'))
    """

    mode: str = "RGB"
    layout: str | None = None
    scale: float | None = None
    channels: tuple[str, ...] | None = None
    on_error: str = "skip"
    max_pixels: int | None = None
    max_file_bytes: int | None = None
    resize: int | None = None
    center_crop: int | None = None
    format: str | None = None
    image_key: str | None = None
    allow_missing_chunks: bool = False
    batched: bool | None = None
    storage_options: dict[str, Any] | None = field(default=None, hash=False, repr=False)
    nodata: float | None = None

    def __post_init__(self) -> None:
        parsed = {
            "mode": parse_mode(self.mode), "layout": parse_layout(self.layout),
            "scale": None if self.scale is None else parse_scale(self.scale),
            "channels": parse_channels(self.channels),
            "on_error": parse_on_error(self.on_error),
            "max_pixels": parse_limit(self.max_pixels, "max_pixels"),
            "max_file_bytes": parse_limit(self.max_file_bytes, "max_file_bytes"),
            "resize": parse_size(self.resize, "resize"),
            "center_crop": parse_size(self.center_crop, "center_crop"),
            "format": parse_format(self.format), "image_key": _parse_key(self.image_key),
            "allow_missing_chunks": _parse_flag(self.allow_missing_chunks,
                                                "allow_missing_chunks"),
            "batched": _parse_batched(self.batched),
            "storage_options": parse_storage_options(self.storage_options),
            "nodata": parse_nodata(self.nodata),
        }
        for name, value in parsed.items():
            object.__setattr__(self, name, value)  # frozen: each field set once, here
        check_transform_sizes(self.resize, self.center_crop,
                              self.max_pixels or DEFAULT_MAX_PIXELS)

    @property
    def fail_fast(self) -> bool:
        """Whether the first unreadable input stops the run (``on_error="fail"``)."""
        return self.on_error == "fail"

    @functools.cached_property
    def policy(self) -> DecodePolicy:
        """The decode policy of image files under these options: what readers decode with
        and what the record cache keys on."""
        return DecodePolicy(self.mode, self.max_pixels or DEFAULT_MAX_PIXELS, self.resize,
                            self.center_crop, self.max_file_bytes, self.nodata)

    def with_changes(self, **changes: Any) -> ReadOptions:
        """A copy with ``changes`` (validated); an unknown name is an error naming the known.

        Examples
        --------
        >>> ReadOptions().with_changes(layout="nchw").layout
        'NCHW'
        """
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InvalidOptionError(f"unknown option {unknown[0]!r}; the options of reading "
                                     f"are {', '.join(f.name for f in fields(self))}")
        return replace(self, **changes) if changes else self


#: The names of the options, in order: what `read_options` takes as keyword arguments.
READ_FIELDS = tuple(f.name for f in fields(ReadOptions))


class ReadArguments(TypedDict, total=False):
    """The fields of `ReadOptions` as keyword arguments (for type checkers: ``**read``)."""

    mode: str
    layout: str | None
    scale: float | None
    channels: tuple[str, ...] | str | None
    on_error: str
    max_pixels: int | None
    max_file_bytes: int | None
    resize: int | None
    center_crop: int | None
    format: str | None
    image_key: str | None
    allow_missing_chunks: bool
    batched: bool | None
    storage_options: dict[str, Any] | list[str] | None
    nodata: float | str | None


def read_options(options: ReadOptions | None, read: dict[str, Any]) -> ReadOptions:
    """The options of a call: ``options`` (default: the defaults) with ``read``, the
    keyword arguments given beside it, replacing its fields.

    Examples
    --------
    >>> read_options(ReadOptions(mode="L"), {"resize": 8}).policy.mode
    'L'
    """
    if options is not None and not isinstance(options, ReadOptions):
        raise InvalidOptionError(f"options must be a ReadOptions, got {type(options).__name__}")
    return (options or ReadOptions()).with_changes(**read)
