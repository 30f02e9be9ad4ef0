"""What a URL names, read as the same files on disk are: a folder of images, WebDataset tar
shards, Parquet files, a zarr store, and brace ranges or globs of them.

``s3://bucket/shards/shard-{000..099}.tar`` expands as a local path does (braces as in
bash, then each name globbed through the store when it holds ``*``, ``?`` or ``[``), and
the names it gives are grouped as `normstats.sources.opening` groups local paths: image
files read as one listing, tar shards as one shard source, Parquet files as one Parquet
source, folders and zarr stores each on their own.

A tar shard is read whole by the task that decodes it (one GET streamed to a temporary
file beside the worker, then read by the local shard reader, whose checks all apply):
listing its members in the client would cost the whole shard too. Its sample count is
known once it is read, so a run over shards has no total for its progress bar. Parquet
files are read by row group through fsspec's ranged reads; a zarr store by zarr's own
fsspec store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import posixpath
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from normstats.errors import AccessError, InvalidOptionError, NormstatsError, RefusedInputError
from normstats.maths.records import Skipped
from normstats.sources.arrays import ArraySource, not_an_array_reason
from normstats.sources.base import Source, Task, TaskResult
from normstats.sources.concat import ConcatSource
from normstats.sources.decoding.decode import (
    IMAGE_EXTENSIONS,
    DecodedImage,
    DecodePolicy,
    OutputBuffer,
    channel_names_for,
)
from normstats.sources.options import ReadOptions
from normstats.sources.parquet import CellReader, ParquetSource, ParquetTask, _pyarrow, image_column
from normstats.sources.path_patterns import describe_paths, expand_braces
from normstats.sources.remote import (
    RemoteFolderSource,
    common_folder,
    filesystem,
    is_store_failure,
    list_url,
    object_error,
    store_error,
    walk_listing,
)

__all__ = ["open_urls", "RemoteTarSource", "RemoteTarTask", "RemoteParquetSource",
           "RemoteParquetTask", "StoreCells", "URL_FORMATS"]

_GLOB = re.compile(r"[*?\[]")
_TAR_EXTENSIONS = (".tar", ".tar.gz", ".tgz")
_PARQUET_EXTENSIONS = (".parquet", ".pq")
#: The formats read behind a URL (``format=`` may name one of them).
URL_FORMATS = ("folder", "zarr", "tar", "parquet", "image")


def open_urls(urls: Sequence[str], options: ReadOptions) -> Source:
    """The source of the datasets ``urls`` name (patterns expanded), read as one.

    Examples
    --------
    >>> import fsspec, io
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (4, 4)).save(buffer, "PNG")
    >>> fsspec.filesystem("memory").pipe({f"/doc-urls/{i}.png": buffer.getvalue()
    ...                                   for i in range(3)})
    >>> len(open_urls(["memory://doc-urls/{0..1}.png"], ReadOptions()))
    2
    """
    if options.format is not None and options.format not in URL_FORMATS:
        raise InvalidOptionError(f"--format {options.format} reads local files; behind a URL "
                                 f"normstats reads {', '.join(URL_FORMATS)}")
    storage = options.storage_options or {}
    named: dict[str, dict] = {}
    for url in urls:
        for name, info in _expand(url, storage):
            named.setdefault(name, info)  # a name given twice is read once
    groups: dict[str, list[tuple[str, dict]]] = {"image": [], "tar": [], "parquet": [],
                                                 "folder": []}
    for name, info in named.items():
        groups[_format_of(name, info, options.format, storage)].append((name, info))
    parts = _parts(groups, options)
    description = describe_paths(list(urls))  # a pattern as the user wrote it
    if len(parts) > 1:
        return ConcatSource(parts, description)
    if len(named) > 1:
        parts[0].description = description
    return parts[0]


def _parts(groups: dict[str, list[tuple[str, dict]]], options: ReadOptions) -> list[Source]:
    storage = options.storage_options or {}
    policy, fail_fast = options.policy, options.fail_fast
    parts: list[Source] = []
    if groups["image"]:
        parts.append(_image_files(groups["image"], options))
    if groups["tar"]:
        parts.append(RemoteTarSource([u for u, _ in groups["tar"]], policy, fail_fast, storage,
                                     options.image_key))
    if groups["parquet"]:
        parts.append(RemoteParquetSource([u for u, _ in groups["parquet"]], policy, fail_fast,
                                         options.image_key, storage))
    parts += [_open_folder(url, options) for url, _ in groups["folder"]]
    return parts


def _expand(url: str, storage: dict) -> list[tuple[str, dict]]:
    """(URL, fsspec info) of everything ``url`` names: braces expanded, globs matched."""
    http = url.lower().startswith(("http://", "https://"))  # '?' starts a query there
    names = expand_braces(url)
    fs, _ = filesystem(names[0], storage)
    fs.invalidate_cache()  # fsspec keeps listings per filesystem: ask the store now
    found: list[tuple[str, dict]] = []
    plain: list[str] = []
    for name in names:
        path = filesystem(name, storage)[1]
        if http or not _GLOB.search(path):
            plain.append(name)
            continue
        try:
            matches = fs.glob(path, detail=True)
        except Exception as error:
            if is_store_failure(error):
                raise store_error(error, name) from None
            raise
        found += [(fs.unstrip_protocol(p), matches[p]) for p in sorted(matches)]
    found += _looked_up(fs, plain, url if len(names) > 1 else None, storage)
    if not found:
        raise NormstatsError("nothing matches this pattern", path=url)
    return found


def _looked_up(fs: Any, names: list[str], pattern: str | None,
               storage: dict) -> list[tuple[str, dict]]:
    """(URL, info) of each of ``names``: many names in one folder (a brace range of 1,000
    shards) from one listing of that folder, not one request each."""
    listed: dict[str, dict] = {}
    paths = [filesystem(name, storage)[1].rstrip("/") for name in names]
    folders = [posixpath.dirname(p) for p in paths]
    for folder in set(folders):
        if folders.count(folder) > 1:
            try:
                listed.update((entry["name"].rstrip("/"), entry)
                              for entry in fs.ls(folder, detail=True))
            except Exception as error:
                if not is_store_failure(error):
                    raise
                # the lookups below name what is wrong, one path at a time
    return [(name, listed.get(path) or _info(fs, path, name, pattern))
            for name, path in zip(names, paths)]


def _info(fs: Any, path: str, url: str, pattern: str | None) -> dict:
    try:
        try:
            return fs.info(path)
        except PermissionError:  # a bucket's HEAD may be denied where listing it is not
            if fs.isdir(path):
                return {"name": path, "type": "directory", "size": 0}
            raise
    except FileNotFoundError:
        where = f" (from the brace pattern {pattern})" if pattern else ""
        try:
            list_url(fs, path, url)  # names a missing bucket, or access denied
        except NormstatsError as error:
            raise NormstatsError(f"{error.reason}{where}", path=url) from None
        raise NormstatsError(f"no such file or folder{where}", path=url) from None
    except Exception as error:
        if is_store_failure(error):
            raise store_error(error, url, "reading") from None
        raise


def _format_of(url: str, info: dict, format: str | None, storage: dict) -> str:
    """How a named object is read: "image", "tar", "parquet", or "folder" (a folder or
    zarr store, opened on its own)."""
    folder = info.get("type") == "directory"
    if format is not None:
        if (format in ("folder", "zarr")) != folder:
            raise InvalidOptionError(f"{url}: --format {format} reads a "
                                     f"{'folder' if format in ('folder', 'zarr') else 'file'}"
                                     f", and this is a {'folder' if folder else 'file'}")
        return "folder" if folder else format
    if folder:
        return "folder"
    name = url.lower()
    if posixpath.splitext(name)[1] in IMAGE_EXTENSIONS:
        return "image"
    if name.endswith(_TAR_EXTENSIONS):
        return "tar"
    if name.endswith(_PARQUET_EXTENSIONS):
        return "parquet"
    head = _head(url, storage)
    if head.startswith(b"PAR1"):
        return "parquet"
    if head[257:262] == b"ustar":
        return "tar"
    raise NormstatsError("cannot read this file behind a URL: normstats reads folders of "
                         "images, image files, tar shards, Parquet files and zarr stores there "
                         "(copy other formats to a local path)", path=url)


def _head(url: str, storage: dict) -> bytes:
    fs, path = filesystem(url, storage)
    try:
        return fs.cat_file(path, start=0, end=512)
    except Exception as error:
        if is_store_failure(error):
            raise store_error(error, url, "reading") from None
        raise


def _image_files(named: list[tuple[str, dict]], options: ReadOptions) -> Source:
    """Image files named one by one: one listing, relative to the folder they share."""
    storage = options.storage_options or {}
    if len({url.split("://", 1)[0] for url, _ in named}) > 1:
        raise NormstatsError("image files of several stores (protocols) in one dataset: give "
                             "the folders, or each store's files, instead")
    fs, _ = filesystem(named[0][0], storage)
    paths = {fs._strip_protocol(url): info for url, info in named}
    root = common_folder(paths)
    walk = walk_listing(paths, root)
    source = RemoteFolderSource(fs.unstrip_protocol(root), options.policy, options.fail_fast,
                                storage, walk)
    source.description = named[0][0] if len(named) == 1 else \
        f"{len(named)} image files in {fs.unstrip_protocol(root)}"
    return source


def _open_folder(url: str, options: ReadOptions) -> Source:
    """A folder behind a URL: a zarr store, its image files, or else its shards."""
    storage = options.storage_options or {}
    fs, root = filesystem(url, storage)
    root = root.rstrip("/")
    if options.format == "zarr" or (options.format is None and _is_zarr(fs, root, url)):
        return _open_zarr(url, options)
    listing = list_url(fs, root, url)
    walk = walk_listing(listing, root)
    if len(walk.files) or options.format == "folder":
        return RemoteFolderSource(url, options.policy, options.fail_fast, storage, walk)
    tars = [fs.unstrip_protocol(p) for p in sorted(listing) if p.lower().endswith(_TAR_EXTENSIONS)]
    parquets = [fs.unstrip_protocol(p) for p in sorted(listing)
                if p.lower().endswith(_PARQUET_EXTENSIONS)]
    if tars and parquets:
        raise NormstatsError(f"holds both tar shards ({len(tars)}) and Parquet files "
                             f"({len(parquets)}); name the ones to read, e.g. "
                             f"'{url.rstrip('/')}/*.tar'", path=url)
    if tars:
        source: Source = RemoteTarSource(tars, options.policy, options.fail_fast, storage,
                                         options.image_key)
    elif parquets:
        source = RemoteParquetSource(parquets, options.policy, options.fail_fast,
                                     options.image_key, storage)
    else:  # an empty folder: reported as a local one is (no usable image)
        return RemoteFolderSource(url, options.policy, options.fail_fast, storage, walk)
    source.description = f"{url} ({len(tars or parquets)} {'tar' if tars else 'Parquet'} files)"
    return source


def _is_zarr(fs: Any, root: str, url: str) -> bool:
    try:
        return any(fs.exists(f"{root}/{mark}") for mark in ("zarr.json", ".zarray"))
    except Exception as error:
        if is_store_failure(error):
            raise store_error(error, url) from None
        raise


def _open_zarr(url: str, options: ReadOptions) -> Source:
    import zarr

    try:
        array = zarr.open_array(url, mode="r", storage_options=options.storage_options or None)
    except Exception as error:  # noqa: BLE001 - zarr raises many types; all mean the same
        if is_store_failure(error) and not isinstance(error, FileNotFoundError):
            raise store_error(error, url, "opening the zarr store") from None
        raise NormstatsError(not_an_array_reason(url, error, options.storage_options or None),
                             path=url) from None
    source = ArraySource(array, layout=options.layout, channel_names=options.channels,
                         allow_missing_chunks=options.allow_missing_chunks,
                         nodata=options.nodata)
    source.description = url
    return source


@dataclass(frozen=True)
class RemoteTarTask:
    """Read one tar shard behind a URL and decode its image samples.

    The shard is fetched whole into a temporary folder under the shard's own name, so its
    records are keyed as a local run of the same shard keys them
    (``shard-000.tar/000017.jpg``), and read there by `normstats.sources.tar.reader`.
    """

    url: str
    policy: DecodePolicy
    fail_fast: bool = False
    storage_options: dict = field(default_factory=dict, hash=False, repr=False)  # secrets
    #: The extension of the image member of each sample (WebDataset's key), or None: any.
    image_ext: str | None = None

    @property
    def size(self) -> int:
        return 1  # one shard; its samples are counted as it is read

    def run(self) -> TaskResult:
        with self._shard() as (task, skipped):
            result = TaskResult(None) if task is None else task.run()
            return TaskResult(result.records, self._named(skipped + result.skipped, task))

    def decode_all(self) -> tuple[list[tuple[str, DecodedImage]], tuple[Skipped, ...]]:
        """Every decoded image of the shard (key, image), and what was skipped."""
        with self._shard() as (task, skipped):
            decoded, more = ([], ()) if task is None else task.decode_all()
            return decoded, self._named(skipped + more, task)

    @contextlib.contextmanager
    def _shard(self) -> Iterator[tuple[Any, tuple[Skipped, ...]]]:
        """The local shard task of the fetched copy and the samples its listing skipped;
        (None, the shard's skip) when the store would not serve it."""
        from normstats.sources.tar.reader import TarTask, scan_shard

        fs, path = filesystem(self.url, self.storage_options)
        with tempfile.TemporaryDirectory(prefix="normstats-shard-") as folder:
            local = os.path.join(folder, posixpath.basename(path))
            try:
                fs.get_file(path, local)
            except Exception as error:
                if not is_store_failure(error):
                    raise
                failure = object_error(error, self.url, self.url)
                if self.fail_fast:
                    raise failure from None
                yield None, (Skipped(self.url, failure.reason, failure.kind),)
                return
            try:
                shard = scan_shard(local, image_ext=self.image_ext)
            except NormstatsError as error:  # named by its URL, not the temporary copy
                raise type(error)(error.reason, self.url) from None
            yield TarTask(local, shard.compressed, shard.members, self.policy,
                          self.fail_fast), shard.skipped

    def _named(self, skipped: tuple[Skipped, ...], task: Any) -> tuple[Skipped, ...]:
        """``skipped`` named by the shard's URL instead of its temporary copy."""
        if task is None:
            return skipped
        return tuple(dataclasses.replace(s, path=self.url + s.path[len(task.path):])
                     if s.path.startswith(task.path) else s for s in skipped)


class RemoteTarSource:
    """WebDataset tar shards behind URLs, a task each.

    Examples
    --------
    >>> import fsspec, io, tarfile
    >>> from PIL import Image
    >>> image, shard = io.BytesIO(), io.BytesIO()
    >>> Image.new("RGB", (2, 2)).save(image, "PNG")
    >>> with tarfile.open(fileobj=shard, mode="w") as tar:
    ...     info = tarfile.TarInfo("0001.png"); info.size = len(image.getvalue())
    ...     tar.addfile(info, io.BytesIO(image.getvalue()))
    >>> fsspec.filesystem("memory").pipe("/doc-tar/s-0.tar", shard.getvalue())
    >>> RemoteTarSource(["memory://doc-tar/s-0.tar"]).tasks()[0].run().images
    1
    """

    kind = "images"
    scheduler = "processes"
    skipped: tuple[Skipped, ...] = ()
    ignored = 0

    def __init__(self, urls: Sequence[str], policy: DecodePolicy | None = None,
                 fail_fast: bool = False, storage_options: dict | None = None,
                 image_ext: str | None = None) -> None:
        self.urls = tuple(urls)
        self.image_ext = image_ext
        self.policy = policy or DecodePolicy()
        self.fail_fast = fail_fast
        self.storage_options = dict(storage_options or {})
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.description = self.urls[0] if len(self.urls) == 1 else \
            f"{len(self.urls)} tar shards"

    def __len__(self) -> int:
        return 0  # samples are counted as the shards are read

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        return [RemoteTarTask(url, self.policy, self.fail_fast, self.storage_options,
                              self.image_ext) for url in self.urls]


def _outside_reason(name: str) -> str | None:
    """Why an image path a Parquet file behind a URL gives leaves the file's folder."""
    if "\0" in name or "://" in name or name.startswith("/"):
        return f"{name!r} is not a path inside the Parquet file's folder"
    if posixpath.normpath(name).split("/")[0] == "..":
        return f"{name!r} leads out of the Parquet file's folder"
    return None


@dataclass(frozen=True)
class StoreCells(CellReader):
    """Cells of a Parquet file behind a URL: an image path is fetched from the store,
    relative to the file's folder and confined to it, never from the local disk."""

    folder: str = ""
    storage_options: dict = field(default_factory=dict, hash=False, repr=False)  # secrets

    def decode(self, key: str, cell: Any, scratch: OutputBuffer | None = None) -> DecodedImage:
        path = cell.get("path") if isinstance(cell, dict) and cell.get("bytes") is None \
            else (cell if self.kind == "path" else None)
        if path:
            cell = {"bytes": self._fetch(key, path), "path": None}
        return super().decode(key, cell, scratch)

    def _fetch(self, key: str, name: str) -> bytes:
        reason = _outside_reason(name)
        if reason is not None:
            raise RefusedInputError(f"image path {reason}: only images inside the Parquet "
                                    "file's folder are read", key)
        url = f"{self.folder}/{posixpath.normpath(name)}"
        fs, path = filesystem(url, self.storage_options)
        try:
            return fs.cat_file(path)
        except Exception as error:
            if not is_store_failure(error):
                raise
            raise object_error(error, key, url) from None


@dataclass(frozen=True)
class RemoteParquetTask(ParquetTask):
    """Rows of one row group of a Parquet file behind a URL, read by ranged reads."""

    storage_options: dict = field(default_factory=dict, hash=False, repr=False)  # secrets

    @property
    def reader(self) -> CellReader:
        return StoreCells(self.kind, self.policy, None, folder=posixpath.dirname(self.path),
                          storage_options=self.storage_options)

    def cells(self) -> Iterator[tuple[str, Any]]:
        fs, path = filesystem(self.path, self.storage_options)
        try:
            with fs.open(path, "rb") as handle:
                table = _pyarrow().ParquetFile(handle).read_row_group(self.group,
                                                                      columns=[self.column])
        except Exception as error:
            if not is_store_failure(error):
                raise
            failure = object_error(error, self.path, self.path)
            raise AccessError(failure.reason, self.path) from None
        values = table.column(0).slice(self.start, self.stop - self.start).to_pylist()
        name = posixpath.basename(self.path)
        for offset, cell in enumerate(values):
            yield f"{name}:{self.first_row + self.start + offset}", cell


class RemoteParquetSource(ParquetSource):
    """Parquet files behind URLs with an image column, read by row group as local ones."""

    def __init__(self, urls: Sequence[str], policy: DecodePolicy | None = None,
                 fail_fast: bool = False, column: str | None = None,
                 storage_options: dict | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        self.policy = policy or DecodePolicy()
        self.fail_fast = fail_fast
        self.files = [self._layout(url, column) for url in urls]
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.description = urls[0] if len(urls) == 1 else f"{len(urls)} Parquet files"
        self.skipped: tuple[Skipped, ...] = ()
        self.ignored = 0

    def _layout(self, url: str, column: str | None) -> tuple[str, str, str, list[int]]:
        fs, path = filesystem(url, self.storage_options)
        try:
            with fs.open(path, "rb") as handle:
                parquet = _pyarrow().ParquetFile(handle)
                schema, metadata = parquet.schema_arrow, parquet.metadata
        except NormstatsError:
            raise
        except Exception as error:  # noqa: BLE001 - pyarrow raises many types
            if is_store_failure(error) and not type(error).__module__.startswith("pyarrow"):
                raise store_error(error, url, "reading the Parquet file") from None
            raise NormstatsError(f"not a readable Parquet file ({error})", path=url) from None
        name, kind = image_column(schema, url, column)
        return (url, name, kind, [metadata.row_group(g).num_rows
                                  for g in range(metadata.num_row_groups)])

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        return [RemoteParquetTask(**{f.name: getattr(t, f.name) for f in dataclasses.fields(t)},
                                  storage_options=self.storage_options)
                for t in super().tasks(task_size, workers)]
