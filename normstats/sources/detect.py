"""Which dataset format a path holds, by content first and name second; ``format=`` overrides.

=================  =====================================================================
format             recognised by
=================  =====================================================================
``folder``         a directory (without zarr metadata)
``zarr``           a directory with ``zarr.json`` or ``.zarray``
``npy``            ``\\x93NUMPY`` magic
``npz``            a zip (``PK\\x03\\x04``) named ``*.npz``
``idx``            IDX magic (``00 00 <type> <ndim>``), raw or inside a ``.gz``
``tar``            ``ustar`` magic, ``.tar``/``.tar.gz``/``.tgz``, or a wids ``.json`` index
``cifar10-bin``    ``.bin`` named ``data_batch_*``/``test_batch``, or size a multiple of 3073
``cifar100-bin``   ``train.bin``/``test.bin``, or size a multiple of 3074
``stl10-bin``      ``*_X.bin``
``cifar-python``   a pickle (protocol 2+) -- read by the restricted unpickler only
``parquet``        ``PAR1`` magic or ``.parquet``/``.pq``: an image column (pyarrow extra)
``arrow``          ``ARROW1`` magic or ``.arrow`` (Hugging Face's files): an image column
``image``          one image file (an image extension): a one-image dataset
=================  =====================================================================
"""

from __future__ import annotations

import gzip
import os
from typing import Any

from normstats.errors import InvalidOptionError, NormstatsError
from normstats.sources.archives import unread_archive
from normstats.sources.arrow import ARROW_EXTENSIONS, ArrowFileSource
from normstats.sources.cifar import (
    RECORD_FORMATS,
    cifar_binary_kind,
    open_cifar_python,
    open_records,
)
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.decoding.policy import IMAGE_EXTENSIONS, DecodePolicy
from normstats.sources.idx import looks_like_idx, open_idx
from normstats.sources.image_files import ImageFilesSource
from normstats.sources.npz import open_npz
from normstats.sources.parquet import PARQUET_EXTENSIONS, ParquetSource
from normstats.sources.path_patterns import split_member
from normstats.sources.tar.reader import TarSource, read_shard_index

__all__ = ["FORMATS", "FILE_FORMATS", "detect_format", "open_format"]

FILE_FORMATS = ("idx", *RECORD_FORMATS, "cifar-python", "tar", "npz", "parquet", "arrow",
                "image")
FORMATS = ("folder", "zarr", "npy", *FILE_FORMATS)


def _head(path: str, size: int = 512) -> bytes:
    """The first ``size`` bytes of ``path``; a FIFO or device is refused unread (`open_regular`)."""
    try:
        with open_regular(path) as handle:
            return handle.read(size)
    except OSError as error:
        raise NormstatsError(f"cannot read file ({error.strerror or error})", path=path) from None


def _gzip_head(path: str) -> bytes:
    """The first 512 decompressed bytes of ``path``, or nothing when it is not gzip."""
    try:
        with open_regular(path) as handle, gzip.GzipFile(fileobj=handle, mode="rb") as stream:
            return stream.read(512)
    except (OSError, EOFError):
        return b""


def _listed_image(head: bytes) -> tuple[str, bool] | None:
    """The image file that the first line of ``head`` names when it reads as a line of
    text naming one (a YOLO ``train.txt``), alone or followed by a label (ImageNet's
    ``val.txt``: whether it was), else None.

    Examples
    --------
    >>> _listed_image(b"data/images/0001.jpg\\ndata/images/0002.jpg\\n")
    ('data/images/0001.jpg', False)
    >>> _listed_image(b"n01440764/val_00000293.JPEG 0\\n")
    ('n01440764/val_00000293.JPEG', True)
    >>> _listed_image(b"\\x89PNG") is None
    True
    """
    try:
        lines = head.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None
    first = lines[0].strip() if lines else ""
    if not first.isprintable():
        return None
    for name, labelled in ((first, False), (first.split(maxsplit=1)[0] if first else "", True)):
        if os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
            return name, labelled
    return None


def detect_format(path: str) -> str:
    """The format of ``path`` by the table in this module's docstring.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "t10k-images-idx3-ubyte")
    >>> _ = open(p, "wb").write(bytes([0, 0, 8, 3]) + bytes(12))
    >>> detect_format(p), detect_format(d)
    ('idx', 'folder')
    """
    if os.path.isdir(path):
        marks = ("zarr.json", ".zarray")
        return "zarr" if any(os.path.exists(os.path.join(path, m)) for m in marks) else "folder"
    path = split_member(path)[0]
    name, head = os.path.basename(path).lower(), _head(path)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK\x03\x04") and name.endswith(".npz"):
        return "npz"
    if head.startswith(b"PAR1") or name.endswith(PARQUET_EXTENSIONS):
        return "parquet"
    if head.startswith(b"ARROW1") or name.endswith(ARROW_EXTENSIONS):
        return "arrow"
    if looks_like_idx(head) or head[257:262] == b"ustar":
        return "idx" if looks_like_idx(head) else "tar"
    if head.startswith(b"\x1f\x8b"):
        inner = _gzip_head(path)
        if looks_like_idx(inner) or inner[257:262] == b"ustar":
            return "idx" if looks_like_idx(inner) else "tar"
    if name.endswith((".tar", ".tar.gz", ".tgz")) or (name.endswith(".json")
                                                      and b"shardlist" in _head(path, 4096)):
        return "tar"
    if "-idx" in name and "-ubyte" in name:
        return "idx"
    if name.endswith(".bin") and (kind := cifar_binary_kind(path)):
        return kind
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "cifar-python"
    if os.path.splitext(name)[1] in IMAGE_EXTENSIONS:
        return "image"
    if (archive := unread_archive(path, head)) is not None:
        raise NormstatsError(archive, path=path)
    if (listed := _listed_image(head)) is not None:
        name, labelled = listed
        files = f"[line.split()[0] for line in open({path!r})]" if labelled \
            else f"open({path!r}).read().splitlines()"
        raise NormstatsError(
            f"a text file listing image files ({name}, ...), which normstats does not read "
            f"as a dataset: pass the files themselves, e.g. from Python normstats.compute("
            f"{files}) (relative paths from the working folder)", path=path)
    raise NormstatsError(f"cannot tell the dataset format; pass --format (one of "
                         f"{', '.join(FORMATS)})", path=path)


def open_format(path: str, fmt: str, *, policy: DecodePolicy | None = None,
                layout: str | None = None, fail_fast: bool = False,
                channel_names: tuple[str, ...] | None = None, **extra: Any) -> Any:
    """Open ``path`` as a source of format ``fmt`` (one of `FILE_FORMATS`); image files
    decode under ``policy`` (default: `DecodePolicy`'s defaults).

    ``extra`` passes format options from manifests: ``member`` (npz), ``counts`` and
    ``image_ext`` (tar), ``column`` (parquet, arrow).
    """
    if fmt not in FILE_FORMATS:
        raise InvalidOptionError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "idx":
        return open_idx(path, layout, channel_names)
    if fmt in RECORD_FORMATS:
        return open_records(path, fmt)
    if fmt == "cifar-python":
        return open_cifar_python(path)
    if fmt == "npz":
        return open_npz(path, extra.get("member"), layout, channel_names)
    policy = policy or DecodePolicy()
    if fmt == "image":
        return ImageFilesSource([path], policy, fail_fast)
    if fmt == "parquet":
        return ParquetSource([path], policy, fail_fast, extra.get("column"))
    if fmt == "arrow":
        return ArrowFileSource([path], policy, fail_fast, extra.get("column"))
    paths, counts = [path], dict(extra.get("counts") or {})
    if path.lower().endswith(".json"):
        counts.update(read_shard_index(path))
        paths = list(counts)
    return TarSource(paths, policy, fail_fast, counts, extra.get("image_ext"))
