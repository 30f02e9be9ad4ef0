"""`open_source`: the source for whatever the user passed (a path, an array, a dataset).

A folder of images, a ``.npy`` file or zarr array, a dataset file recognised by
`normstats.sources.detect`, a URL, an in-memory array, a map-style dataset or any
iterable of images.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Unpack

import numpy as np

from normstats.errors import (
    EmptyDatasetError,
    InvalidOptionError,
    NormstatsError,
    RefusedInputError,
    numbered,
)
from normstats.maths.records import Skipped
from normstats.sources.archives import unread_archive
from normstats.sources.arrays import ArraySource
from normstats.sources.base import Source
from normstats.sources.decoding.file_read import (
    IMAGE_EXTENSIONS,
    not_a_dataset_path,
    open_regular,
)
from normstats.sources.decoding.policy import MODE_CHANNELS
from normstats.sources.decoding.transforms import transformed_source
from normstats.sources.folder import FolderSource
from normstats.sources.items import array_of_lists, tensor_pixels
from normstats.sources.labelled import unlabelled
from normstats.sources.options import ReadArguments, ReadOptions, read_options
from normstats.sources.path_patterns import (
    describe_paths,
    expand_paths,
    is_pattern,
    missing_reason,
    one_path_per_file,
    regular_files,
    split_member,
)
from normstats.sources.remote import is_url, local_path

if TYPE_CHECKING:
    from normstats.sources.iterable import IterableSource

__all__ = ["open_source"]

# The readers of other formats load when a path or object needs them: a run over a
# folder of images does not import the tar, Parquet, CIFAR, IDX, npz and dataset readers
# (~20 ms of every start).


def open_source(data: Any, *, options: ReadOptions | None = None,
                **read: Unpack[ReadArguments]) -> Source | IterableSource:
    """The source for ``data``: a path (folder, ``.npy``, zarr), an array, a map-style
    dataset (``__len__`` and ``__getitem__``: read by index in parallel tasks), a
    ``DataLoader`` (read batch by batch) or any other iterable of images.

    ``options`` (a `ReadOptions`) and the keyword arguments ``read`` (its fields, which
    replace the object's) say how to read it; ``resize`` and ``center_crop`` apply to
    whatever decodes image files, and are an error for arrays.

    A URL (``s3://bucket/train``, ``gcs://``, ``memory://``, ...) is read through fsspec,
    with ``storage_options`` (credentials, an endpoint), as the same files on disk: a
    folder of images, tar shards, Parquet files, a zarr store, brace ranges and globs of
    them (`normstats.sources.remote_formats`); ``file://`` URLs are plain local paths.

    Dataset files (IDX, CIFAR batches, tar shards, ``.npz``) are recognised by content
    and name (`normstats.sources.detect`); ``format`` overrides. A source is returned as is
    (with ``resize`` and ``center_crop`` added to its decode policy, when given).

    Examples
    --------
    >>> import numpy as np
    >>> type(open_source(np.zeros((2, 4, 4, 3), np.uint8))).__name__
    'ArraySource'
    """
    options = read_options(options, dict(read))
    if hasattr(data, "tasks") and hasattr(data, "scheduler"):
        source = data
    else:
        source = _open(data, options)
    return transformed_source(source, options.resize, options.center_crop)


def _open(data: Any, options: ReadOptions) -> Source | IterableSource:
    data, options = unlabelled(data, options)  # an xarray DataArray: its array, its layout
    if isinstance(data, bytes | bytearray):  # iterable, of ints: never images
        raise NormstatsError(
            f"cannot compute statistics of a {type(data).__name__} object: pass a path as a "
            "str (os.fsdecode(path) for a bytes path), or images decoded into arrays")
    tensor = type(data).__module__.startswith("torch") and hasattr(data, "detach")
    if options.batched and (isinstance(data, str | os.PathLike | np.ndarray) or tensor
                            or _is_path_list(data) or _is_array_like(data)):
        raise InvalidOptionError(f"batched=True is for iterables whose items are batches of "
                                 f"images; a {type(data).__name__} is read as it is")
    if is_url(data) or (_is_path_list(data) and any(map(is_url, data))):
        data = _local_or_urls(data)
        if isinstance(data, list) and is_url(data[0]):  # fsspec: s3://, gcs://, memory://, ...
            from normstats.sources.remote_formats import open_urls

            return open_urls(data, options)
    if _is_pil_image(data):  # one image, as one image file's path or an (H, W, C) array is
        data = [data]
    if options.storage_options:
        raise InvalidOptionError("storage_options are for URLs (s3://bucket/train, ...), and "
                                 "this data is not one: leave them out")
    if _is_path_list(data):
        return _fitting(_open_paths(list(data), options), options)
    if isinstance(data, str | os.PathLike):
        path = os.fspath(data)
        if not os.path.lexists(split_member(path)[0]) and is_pattern(path):
            return _fitting(_open_paths([path], options), options)
        return _fitting(_open_path(path, options), options)
    if isinstance(data, list) and (pixels := array_of_lists(data)) is not None:
        data = pixels  # images as nested lists of numbers: the array numpy makes of them
    if tensor:
        data = tensor_pixels(data)  # a stack of images: read as the array it holds
    if isinstance(data, np.ndarray) or _is_array_like(data):
        return ArraySource(data, layout=options.layout, channel_names=options.channels,
                           allow_missing_chunks=options.allow_missing_chunks,
                       nodata=options.nodata)
    return _open_object(data, options)


def _open_object(data: Any, options: ReadOptions) -> Source | IterableSource:
    """The source of a dataset object: map-style (by index) or any iterable of images."""
    from normstats.sources.hf_dataset import hf_source
    from normstats.sources.image_folder import ImageFolderFiles, plain_image_folder
    from normstats.sources.iterable import IterableSource, is_data_loader
    from normstats.sources.mapped import MappedSource, is_map_style

    if options.nodata is not None:  # their items are not decoded under the policy
        raise InvalidOptionError("nodata is left out of image files, dataset files and numpy "
                                 "arrays, not of the items of a dataset object or iterable: "
                                 "pass the folder, or the images as a numpy masked array")
    if (arrow := hf_source(data, options)) is not None:  # a Hugging Face Dataset's table
        return arrow
    if (keys := _entries(data)) is not None:  # indexed by name: its entries, not images
        raise InvalidOptionError(_entries_reason(data, keys))
    mode, layout, image_key = options.mode, options.layout, options.image_key
    if is_map_style(data) and not is_data_loader(data) and not options.batched:
        if plain_image_folder(data, mode):
            return ImageFolderFiles(data, fail_fast=options.fail_fast,
                                    max_pixels=options.max_pixels,
                                    max_file_bytes=options.max_file_bytes)
        return MappedSource(data, mode=mode, layout=layout, image_key=image_key,
                            fail_fast=options.fail_fast)
    if isinstance(data, Iterable):
        return IterableSource(data, layout=layout, mode=mode, image_key=image_key,
                              batched=options.batched)
    raise NormstatsError(f"cannot compute statistics of a {type(data).__name__}: pass a folder, "
                         "a .npy or zarr path, an array, a dataset (with __len__ and "
                         "__getitem__) or an iterable of images")


def _is_pil_image(data: Any) -> bool:
    """Whether ``data`` is one PIL image (checked without importing Pillow)."""
    return type(data).__module__.startswith("PIL.") and hasattr(data, "getdata")


def _local_or_urls(data: str | list | tuple) -> str | list[str]:
    """URLs as a list of URLs, or (``file://`` URLs only) local paths: one, or a list.

    Examples
    --------
    >>> _local_or_urls("file:///data/train"), _local_or_urls(["s3://b/x", "s3://b/y"])
    ('/data/train', ['s3://b/x', 's3://b/y'])
    """
    given = [data] if isinstance(data, str) else list(data)
    paths = [local_path(item) or item if is_url(item) else os.fspath(item) for item in given]
    remote = [is_url(path) for path in paths]
    if all(remote):
        return paths
    if any(remote):
        raise InvalidOptionError("a dataset is either URLs or local paths; got both "
                                 f"({paths[remote.index(True)]} and {paths[remote.index(False)]})")
    return paths[0] if isinstance(data, str) else paths


def _is_path_list(data: Any) -> bool:
    return isinstance(data, list | tuple) and bool(data) and \
        all(isinstance(item, str | os.PathLike) for item in data)


def _open_path(path: str, options: ReadOptions) -> Source:
    """The source of one local path (a folder, an array, a dataset file, an image)."""
    if not os.path.exists(split_member(path)[0]):
        raise NormstatsError(missing_reason(split_member(path)[0]), path=path)
    if (reason := not_a_dataset_path(split_member(path)[0])) is not None:
        raise RefusedInputError(reason, path=path)
    format = options.format
    _check_format_fits(path, format)
    if format is None and os.path.isdir(path):
        fmt = "zarr" if _is_zarr(path) else "folder"
    else:
        from normstats.sources.detect import detect_format

        fmt = format or detect_format(path)
    if fmt not in ("folder", "zarr", "npy"):
        from normstats.sources.detect import open_format

        if fmt not in _KEYED_FORMATS:
            _refuse_image_key(options, f"{path} ({fmt})", " (an .npz array is picked as "
                              "PATH.npz:NAME)" if fmt == "npz" else "")
        return open_format(path, fmt, policy=options.policy, layout=options.layout,
                           fail_fast=options.fail_fast, channel_names=options.channels,
                           column=options.image_key, image_ext=options.image_key)
    if os.path.isdir(path) and not _is_zarr(path):
        source = FolderSource(path, options.policy, fail_fast=options.fail_fast)
        if len(source) == 0 and (shards := shard_folder(path, options)) is not None:
            return shards
        if len(source) == 0 and not source.skipped:
            raise EmptyDatasetError(_no_image_files(path, source.ignored), path=path)
        _refuse_image_key(options, f"{path} (a folder of image files)")
        return source
    _refuse_image_key(options, f"{path} (an array)")
    return ArraySource(path, layout=options.layout, channel_names=options.channels,
                       allow_missing_chunks=options.allow_missing_chunks,
                       nodata=options.nodata)


#: Files `_no_image_files` looks into for an archive: enough for a download's folder.
_ARCHIVE_LOOKS = 100
#: Files that are datasets of their own, which a folder of them is not (a glob is).
_ARRAY_FILES = (".npy", ".npz", ".arrow")


def _no_image_files(path: str, others: int) -> str:
    """Why the folder ``path``, holding no image file, tar shard or Parquet file, is no
    dataset: it is empty, or it holds ``others`` files of other kinds, named by one of
    them; an archive among the first `_ARCHIVE_LOOKS` (the zip a dataset was downloaded
    as) is named with the command that unpacks it.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "train.zip"), "wb").write(b"PK\\x03\\x04")
    >>> _no_image_files(d, 1).split(", which")[0].endswith(f"{d}/train.zip is a zip archive")
    True
    """
    if others == 0:
        return "an empty folder (no image file, tar shard or Parquet file)"
    example, looked = None, 0
    for folder, subfolders, names in os.walk(path):
        subfolders.sort()
        for name in sorted(names):
            file = os.path.join(folder, name)
            example, looked = example or file, looked + 1
            try:
                with open_regular(file) as handle:  # a FIFO is refused unread
                    archive = unread_archive(file, handle.read(8))
            except OSError:
                continue
            if archive is not None:
                return f"no image files in it, and {file} is {archive}"
            if looked >= _ARCHIVE_LOOKS:
                break
        if looked >= _ARCHIVE_LOOKS:
            break
    shown = ", ".join(e for e in (".jpg", ".png", ".tif", ".webp", ".bmp") if e in IMAGE_EXTENSIONS)
    said = (f"no image files in it ({numbered(others, 'other file')}, e.g. {example}): "
            f"normstats reads image files ({shown}, ...), tar shards and Parquet files")
    extension = os.path.splitext(example or "")[1].lower()
    if extension in _ARRAY_FILES and os.path.dirname(example or "") == path.rstrip(os.sep):
        said += (f"; its {extension} files are datasets of their own: pass them, e.g. "
                 f"'{os.path.join(path, '*' + extension)}' (one dataset, their union)")
    return said


#: The file formats whose samples hold several fields, one of them the image: a Parquet or
#: Arrow column, a tar shard's member by its extension (WebDataset's key: jpg, png, ...).
_KEYED_FORMATS = ("tar", "parquet", "arrow")


def _refuse_image_key(options: ReadOptions, what: str, instead: str = "") -> None:
    """Refuse ``image_key`` for data whose every entry is one image (``what``, and what to
    do ``instead``): it would be ignored, and an ignored option reads as if it had picked
    something."""
    if options.image_key is None:
        return
    raise InvalidOptionError(f"--image-key picks the image of samples that hold several "
                             f"fields (Parquet and Arrow columns, tar members by extension, "
                             f"dict items); {what} holds one image an entry{instead}")


#: Layouts no decoded image file has: channels first, or no channel axis.
_NOT_DECODED = ("NCHW", "CHW", "NHW", "HW", "NC")


def _fitting(source: Source, options: ReadOptions) -> Source:
    """``source``, refused when ``mode`` or ``layout`` contradicts what it holds: both
    would be ignored (a mode converts decoded image files, a layout describes arrays), and
    the report would read as if they had applied (``--mode L`` on an RGB array)."""
    wanted = MODE_CHANNELS.get(options.mode)
    if isinstance(source, ArraySource) and wanted is not None and source.kind == "images":
        held = int(source.array.shape[source.layout.index("C")]) if "C" in source.layout \
            else 1
        if held != wanted:
            raise InvalidOptionError(
                f"--mode {options.mode} converts decoded image files; {source.description} "
                f"holds {held}-channel arrays, read as stored: convert them first")
    if getattr(source, "policy", None) is not None and options.layout in _NOT_DECODED:
        raise InvalidOptionError(
            f"--layout {options.layout} describes arrays; {source.description} holds image "
            "files, each decoded to height x width x channels")
    return source


def _check_format_fits(path: str, format: str | None) -> None:
    """``--format folder`` names folders, file formats name files: never ignored (the
    name itself is checked by `normstats.sources.options.parse_format`)."""
    if format is None:
        return
    folder = os.path.isdir(path)
    if format == "folder" and not folder:
        raise InvalidOptionError(f"{path}: --format folder reads a folder of images, and this "
                                 f"is a file (leave --format out to detect its format)")
    if format not in ("folder", "zarr") and folder:
        raise InvalidOptionError(f"{path}: --format {format} reads a file, and this is a "
                                 "folder")


def shard_folder(path: str, options: ReadOptions) -> Source | None:
    """A folder holding no image files but tar shards (WebDataset) or Parquet files
    (Hugging Face): its shards as one source, in sorted order; None when it has neither.
    A folder written by Hugging Face's ``save_to_disk`` is read through its ``state.json``
    (`normstats.sources.arrow.saved_dataset`).

    Examples
    --------
    >>> import tempfile
    >>> shard_folder(tempfile.mkdtemp(), ReadOptions()) is None
    True
    """
    from normstats.sources.arrow import saved_dataset
    from normstats.sources.parquet import PARQUET_EXTENSIONS, ParquetSource
    from normstats.sources.tar.reader import TarSource

    saved = saved_dataset(path, options.policy, options.fail_fast, options.image_key)
    if saved is not None:
        return saved
    tars, parquets = [], []
    for folder, subfolders, names in os.walk(path):
        subfolders.sort()
        for name in sorted(names):
            lower = name.lower()
            if lower.endswith((".tar", ".tar.gz", ".tgz")):
                tars.append(os.path.join(folder, name))
            elif lower.endswith(PARQUET_EXTENSIONS):
                parquets.append(os.path.join(folder, name))
    if tars and parquets:
        raise NormstatsError(f"holds both tar shards ({len(tars)}) and Parquet files "
                             f"({len(parquets)}); name the ones to read, e.g. "
                             f"'{path}/*.tar'", path=path)
    if not tars and not parquets:
        return None
    skipped: list[Skipped] = []
    shards = regular_files(tars or parquets, skipped, options.fail_fast)
    if not shards:
        raise NormstatsError(f"holds no regular file of its {len(tars or parquets)} shards "
                             f"({skipped[0].path}: {skipped[0].reason})", path=path)
    if tars:
        source: Source = TarSource(shards, options.policy, options.fail_fast,
                                   image_ext=options.image_key)
    else:
        source = ParquetSource(shards, options.policy, options.fail_fast, options.image_key)
    source.description = f"{path} ({len(shards)} {'tar' if tars else 'Parquet'} files)"
    source.skipped = tuple(sorted(skipped, key=lambda s: s.path)) + tuple(source.skipped)
    return source


def _open_paths(given: list[str | os.PathLike], options: ReadOptions) -> Source:
    """Several PATHs (and the paths their patterns name) as one dataset: their union.

    Image files are read as one listing, tar shards as one shard source, Parquet files
    as one Parquet source, anything else (folders, arrays, dataset files) on its own.
    """
    from normstats.sources.concat import ConcatSource
    from normstats.sources.image_files import ImageFilesSource
    from normstats.sources.parquet import ParquetSource
    from normstats.sources.tar.reader import TarSource

    paths = _union(expand_paths(given))
    if len(paths) == 1:
        return _open_path(paths[0], options)
    policy, fail_fast = options.policy, options.fail_fast
    # one pass: a glob of 100,000 files is classified in linear time
    grouped: dict[str, list[str]] = {"image": [], "tar": [], "parquet": [], "other": []}
    for path in paths:
        grouped[_group_of(path, options.format)].append(path)
    images = grouped["image"]  # the listing counts each physical file once
    # the others are few: one per physical file (device, inode), whatever named it first
    duplicates: list[Skipped] = []
    tars, parquets, others = (one_path_per_file(grouped[kind], duplicates)
                              for kind in ("tar", "parquet", "other"))
    parts: list[Source] = []
    if images:
        if not tars and not parquets:
            _refuse_image_key(options, f"{describe_paths(images)} (image files)")
        parts.append(ImageFilesSource(images, policy, fail_fast))
    if tars:
        parts.append(TarSource(tars, policy, fail_fast, image_ext=options.image_key))
    if parquets:
        parts.append(ParquetSource(parquets, policy, fail_fast, options.image_key))
    parts += [_open_path(p, options) for p in others]
    dropped = {s.path for s in duplicates}
    description = describe_paths([p for p in paths if p not in dropped])
    source = parts[0] if len(parts) == 1 else ConcatSource(parts, description)
    source.description = description
    source.skipped = tuple(source.skipped) + tuple(duplicates)  # named, never counted
    return source


def _union(paths: list[str]) -> list[str]:
    """``paths`` with each file or folder once: a path named twice, or lying inside a
    folder also named (``train/`` and ``train/*.tar``), is read with the first only.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); f = os.path.join(d, "a.png"); _ = open(f, "wb")
    >>> _union([d, f, d]) == [d]
    True
    """
    paths = list(dict.fromkeys(paths))
    folders = [os.path.realpath(p) for p in paths if os.path.isdir(p)]
    if not folders:  # files only: the listing counts each physical file once itself
        return paths
    kept, seen = [], set()
    for path in paths:
        real = os.path.realpath(path)  # ~30 µs: only when a folder may contain the path
        if real in seen or any(real.startswith(folder + os.sep) for folder in folders):
            continue
        seen.add(real)
        kept.append(path)
    return kept


def _group_of(path: str, format: str | None) -> str:
    """How `_open_paths` reads ``path``: with the image files, the tar shards, the Parquet
    files, or on its own ("other": folders, arrays, dataset files, what is unknown)."""
    from normstats.sources.detect import detect_format
    from normstats.sources.image_files import is_image_file

    if format in (None, "image") and is_image_file(path):
        return "image"
    if format is None and not os.path.isdir(path) and os.path.exists(path):
        try:
            format = detect_format(path)
        except NormstatsError:
            return "other"  # opened on its own, where the error names it
    if format == "tar" and not path.lower().endswith(".json"):
        return "tar"
    return "parquet" if format == "parquet" else "other"


def _is_zarr(path: str) -> bool:
    return os.path.exists(os.path.join(path, "zarr.json")) or \
        os.path.exists(os.path.join(path, ".zarray"))


def image_folder(data: Any, options: ReadOptions) -> str | None:
    """The local folder ``data`` names when `open_source` reads it as a folder of image
    files (a path to a folder that is no zarr store, read as a folder), else None: a test
    on the name alone, made before the folder is walked.

    Examples
    --------
    >>> import tempfile
    >>> image_folder(tempfile.mkdtemp(), ReadOptions()) is not None
    True
    >>> image_folder("s3://bucket/train", ReadOptions()), image_folder([1, 2], ReadOptions())
    (None, None)
    """
    if not isinstance(data, str | os.PathLike) or options.format not in (None, "folder"):
        return None
    path = os.fspath(data)
    if not isinstance(path, str) or is_url(path) or not os.path.isdir(path) or _is_zarr(path):
        return None
    return path


def _entries(data: Any) -> list[Any] | None:
    """The keys of a container of named entries (a dict such as ``{"train": x, "test":
    y}``, the ``NpzFile`` of ``np.load("data.npz")``, a zarr group), None for anything
    else. Read as a dataset, such a container would give its keys (or fail on index 0)
    where images were expected."""
    if isinstance(data, Mapping):
        return list(data)
    if type(data).__module__.startswith("zarr") and hasattr(data, "array_keys"):
        return sorted((*data.array_keys(), *data.group_keys()))
    return None


def _entries_reason(data: Any, keys: list[Any]) -> str:
    """Why a container of named entries is not a dataset, naming them (`_entries`).

    Examples
    --------
    >>> print(_entries_reason({}, ["train", "test"]).replace(": ", ":\\n").replace(" (", "\\n("))
    a dict of the entries 'train', 'test' is not a dataset:
    pass the one to compute, e.g. data['train']
    (or list(data.values()) when its entries are the images)
    """
    module, name = type(data).__module__.split(".")[0], type(data).__name__
    kind = name if module == "builtins" else f"{module} {name}"  # a zarr Group, ...
    if not keys:
        return f"an empty {kind}: no images to compute"
    shown = ", ".join(map(repr, keys[:8])) + (f" and {len(keys) - 8} more" if len(keys) > 8
                                               else "")
    return (f"a {kind} of the entries {shown} is not a dataset: pass the one to compute, "
            f"e.g. data[{keys[0]!r}] (or list(data.values()) when its entries are the images)")


def _is_array_like(data: Any) -> bool:
    """zarr and dask arrays: shape, dtype and slicing, but not an iterable of images."""
    return all(hasattr(data, name) for name in ("shape", "dtype", "__getitem__")) and \
        not type(data).__module__.startswith("torch")
