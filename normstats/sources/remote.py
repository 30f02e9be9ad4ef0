"""A folder of images behind an fsspec URL: ``memory://``, ``s3://``, ``gcs://``, ...

The client lists the folder once through fsspec (sorted, image extensions only, as the
local walk); each task names its files relative to the root and the process that runs
it (a local worker or a cluster worker) opens the filesystem and reads the bytes itself,
so only file names go out and only per-image records come back. A task reads its files
with one ``fs.cat`` call, which async backends (s3fs, gcsfs) issue concurrently.

``file://`` URLs are plain local paths and take the local walk (`FolderSource`), which
also guards against symlink loops; everything else needs its fsspec backend installed
(``pip install s3fs`` for ``s3://``).
"""

from __future__ import annotations

import posixpath
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from normstats.errors import (
    NormstatsError,
    RefusedInputError,
    TransientInputError,
    UnreadableInputError,
)
from normstats.maths.records import Skipped
from normstats.sources.base import Task, TaskResult
from normstats.sources.decoding.decode import (
    IMAGE_EXTENSIONS,
    DecodedImage,
    DecodePolicy,
    decode_bytes,
)
from normstats.sources.decoding.file_read import too_large_reason
from normstats.sources.file_list import FileEntry, FileList
from normstats.sources.folder import ListedFiles, ListedTask, records_of_images
from normstats.sources.walk import WalkResult

__all__ = ["is_url", "local_path", "RemoteFolderSource", "RemoteFolderTask", "walk_url"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: Any) -> bool:
    """True for ``protocol://...`` strings (fsspec URLs), False for plain paths.

    Examples
    --------
    >>> is_url("s3://bucket/train"), is_url("memory://x"), is_url("/data/train")
    (True, True, False)
    """
    return isinstance(path, str) and _URL.match(path) is not None


def local_path(url: str) -> str | None:
    """The plain path of a ``file://`` URL, None for any other protocol.

    Examples
    --------
    >>> local_path("file:///data/train"), local_path("memory://train")
    ('/data/train', None)
    """
    if not url.lower().startswith("file://"):
        return None
    return url[len("file://"):] or "/"


def _filesystem(url: str, storage_options: dict) -> tuple[Any, str]:
    import fsspec  # lazy: only URLs need it

    try:
        return fsspec.core.url_to_fs(url, **storage_options)
    except (ImportError, ValueError) as error:
        raise NormstatsError(f"cannot open this URL: {error}", path=url) from None


def walk_url(url: str, storage_options: dict | None = None) -> WalkResult:
    """List the image files under ``url``, sorted by path relative to it.

    Examples
    --------
    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/walk-doc/a.png", b"x")
    >>> [f.path for f in walk_url("memory://walk-doc").files]
    ['a.png']
    """
    fs, root = _filesystem(url, storage_options or {})
    root = root.rstrip("/")
    try:
        if not fs.isdir(root):
            raise NormstatsError("not a folder", path=url)
        listing = fs.find(root, detail=True)
    except OSError as error:
        raise NormstatsError(f"cannot list folder: {error}", path=url) from None
    files, ignored = [], 0
    for path, info in listing.items():
        rel = posixpath.relpath(path, root)
        if posixpath.splitext(rel)[1].lower() not in IMAGE_EXTENSIONS:
            ignored += 1
        else:
            files.append(FileEntry(rel, int(info.get("size") or 0), _mtime_ns(info),
                                   _content_tag(info)))
    files.sort(key=lambda f: f.path)
    return WalkResult(FileList.of(files), (), ignored)


def _mtime_ns(info: dict) -> int:
    """Modification time from whichever field the backend reports (0 if none)."""
    for name in ("mtime", "LastModified", "updated", "last_modified", "created"):
        value = info.get(name)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1e9)
        if isinstance(value, int | float):
            return int(value * 1e9)
    return 0


def _content_tag(info: dict) -> int:
    """The store's own version tag of an object (ETag, checksum, generation) as an int64
    stamp, so an object rewritten with the same size and time is not served from the cache
    (0 if the backend reports none).
    """
    import hashlib  # lazy: a local run does not load OpenSSL's digests for this

    for name in ("ETag", "etag", "md5Hash", "crc32c", "checksum", "generation", "version_id"):
        value = info.get(name)
        if value not in (None, ""):
            digest = hashlib.blake2b(str(value).encode(), digest_size=8).digest()
            return int.from_bytes(digest, "little", signed=True)
    return 0


@dataclass(frozen=True)
class RemoteFolderTask(ListedTask):
    """Read a run of files through fsspec and return their per-image records.

    ``files`` may be given as any sequence of `FileEntry` (see `ListedTask`).
    """

    url: str
    files: FileList
    policy: DecodePolicy
    fail_fast: bool = False
    storage_options: dict = field(default_factory=dict, hash=False)

    def run(self) -> TaskResult:
        decoded, skipped = self.decode_all()
        return TaskResult(records_of_images(decoded), skipped)

    def decode_all(self) -> tuple[list[tuple[str, DecodedImage]], tuple[Skipped, ...]]:
        """Read and decode every file: (key, image) pairs, and the files skipped."""
        contents = self._read_all()
        decoded: list[tuple[str, DecodedImage]] = []
        skipped: list[Skipped] = []
        for entry in self.files:
            try:
                image = decode_bytes(_bytes_of(contents, entry.path), entry.path, self.policy)
            except UnreadableInputError as error:
                if self.fail_fast:
                    raise
                skipped.append(Skipped(entry.path, error.reason, error.kind))
                continue
            decoded.append((entry.path, image))
        return decoded, tuple(skipped)

    def _read_all(self) -> dict[str, Any]:
        """Bytes (or the read error) of every file, keyed by relative path."""
        fs, root = _filesystem(self.url, self.storage_options)
        root = root.rstrip("/")
        limit = self.policy.file_byte_limit
        # Objects listed over the byte limit are never fetched (their listed size decides).
        over = {e.path: _TooLarge(e.size, limit) for e in self.files if e.size > limit}
        paths = {f"{root}/{e.path}": e.path for e in self.files if e.path not in over}
        contents = fs.cat(list(paths), on_error="return") if paths else {}
        if not isinstance(contents, dict):  # a single path comes back as bytes
            contents = {next(iter(paths)): contents}
        return {**{paths.get(path, path): data for path, data in contents.items()}, **over}


class _TooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(too_large_reason(size, limit))


def _bytes_of(contents: dict[str, Any], name: str) -> bytes:
    data = contents.get(name)
    if isinstance(data, FileNotFoundError) or data is None:
        raise TransientInputError("file disappeared before it could be read", name)
    if isinstance(data, _TooLarge):
        raise RefusedInputError(str(data), name)
    if isinstance(data, BaseException):
        raise TransientInputError(f"cannot read file: {data}", name)
    return data


class RemoteFolderSource(ListedFiles):
    """Every image file under an fsspec URL, decoded under one `DecodePolicy`.

    Parameters
    ----------
    url : str
        ``protocol://path`` of the folder (``memory://``, ``s3://bucket/train``, ...).
    policy : DecodePolicy, optional
        Mode policy and decompression-bomb limit (default RGB).
    fail_fast : bool
        Stop at the first unreadable file instead of skipping it.
    storage_options : dict, optional
        Passed to the fsspec filesystem (credentials, endpoint, anon=True, ...).

    Examples
    --------
    >>> import fsspec, io
    >>> from PIL import Image
    >>> buffer = io.BytesIO(); Image.new("RGB", (4, 4)).save(buffer, "PNG")
    >>> fsspec.filesystem("memory").pipe("/doc-src/a.png", buffer.getvalue())
    >>> source = RemoteFolderSource("memory://doc-src")
    >>> len(source), source.tasks()[0].run().images
    (1, 1)
    """

    def __init__(self, url: str, policy: DecodePolicy | None = None, fail_fast: bool = False,
                 storage_options: dict | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        started = time.perf_counter()
        walk = walk_url(url, self.storage_options)
        self.walk_seconds = time.perf_counter() - started
        self.adopt(url, policy or DecodePolicy(), fail_fast, walk)

    def task(self, files: FileList) -> Task:
        return RemoteFolderTask(self.root, files, self.policy, self.fail_fast,
                                self.storage_options)
