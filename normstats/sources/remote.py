"""Image files behind an fsspec URL (``s3://``, ``gcs://``, ``memory://``, ...), and what a
store's failures mean to a user.

The client lists a folder once through fsspec (sorted, image extensions only, as the local
walk); each task names its files relative to the root and the process that runs it (a
local worker or a cluster worker) opens the filesystem and reads the bytes itself, so only
file names go out and only per-image records come back. A task reads its files with one
``fs.cat`` call, which async backends (s3fs, gcsfs) issue concurrently. Each file is keyed
by the store's own identity of the object (ETag, version id, generation; its size and
last-modified time), so the record cache reuses what is unchanged and decodes a rewritten
object again.

A store's failures are the user's to fix, and each says what to check: an unreachable
endpoint, missing credentials, a missing bucket, access denied (`store_error`). An object
the store listed but would not serve is an `normstats.errors.AccessError`: the run reads
the rest, then fails naming how many (a permission problem is not a bad image).

``file://`` URLs are plain local paths and take the local walk (`FolderSource`), which
also guards against symlink loops; everything else needs its fsspec backend installed
(``pip install s3fs`` for ``s3://``), imported only when such a URL is read. Other formats
behind URLs (tar shards, Parquet, zarr) are `normstats.sources.remote_formats`.
"""

from __future__ import annotations

import functools
import posixpath
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from normstats.errors import (
    AccessError,
    InvalidOptionError,
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

__all__ = ["is_url", "local_path", "filesystem", "store_error", "object_error", "list_url",
           "entry_of", "walk_url", "walk_listing", "common_folder", "is_store_failure",
           "RemoteFolderSource", "RemoteFolderTask"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: The package that reads each protocol, for the message of a missing one.
_BACKENDS = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
             "abfs": "adlfs", "abfss": "adlfs", "hf": "huggingface_hub", "http": "aiohttp",
             "https": "aiohttp"}
#: Where the clients of object stores raise from: their errors are the store's answers.
_CLIENT_MODULES = ("botocore", "aiobotocore", "aiohttp", "urllib3", "requests", "google",
                   "azure", "httpx", "httpx2", "httpcore", "huggingface_hub")


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


def _protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def filesystem(url: str, storage_options: dict | None = None) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` (built with ``storage_options``) and its path there.

    Raises
    ------
    NormstatsError
        The protocol's backend is not installed (naming the ``pip install``), or the
        filesystem refuses ``storage_options``.

    Examples
    --------
    >>> fs, path = filesystem("memory://data/train")
    >>> type(fs).__name__, path
    ('MemoryFileSystem', '/data/train')
    """
    import fsspec  # lazy: only URLs need it; its backends load only for their protocol

    try:
        _check_names(fsspec.get_filesystem_class(_protocol(url)), storage_options or {}, url)
        fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        if not path.strip("/"):  # the whole store: s3fs refuses to list it, others try
            raise InvalidOptionError(f"{url} names no bucket or folder: name the one to read, "
                                     f"e.g. {_protocol(url)}://BUCKET/train")
        return fs, path
    except NormstatsError:
        raise
    except ImportError:
        package = _BACKENDS.get(_protocol(url), f"the fsspec backend of {_protocol(url)}://")
        raise NormstatsError(f"reading {_protocol(url)}:// URLs needs {package}: pip install "
                             f"{package}", path=url) from None
    except TypeError as error:  # a storage option the filesystem does not take
        raise InvalidOptionError(f"{url}: the {_protocol(url)}:// filesystem refused its "
                                 f"storage options ({error})") from None
    except ValueError as error:
        raise NormstatsError(f"cannot open this URL: {error}", path=url) from None


#: What fsspec's own base class reads from any filesystem's keyword arguments.
_FSSPEC_OPTIONS = frozenset(("skip_instance_cache", "use_listings_cache",
                             "listings_expiry_time", "max_paths", "asynchronous", "loop"))
#: Filesystems that keep keyword arguments they do not know without a word: a misspelt
#: ``endpoint_url`` would read from AWS instead of the store meant.
_SILENT = ("s3fs",)


def _check_names(cls: type, options: dict, url: str) -> None:
    """Refuse a storage option that ``cls`` would drop unread (s3fs takes ``**kwargs``)."""
    if not options or not cls.__module__.startswith(_SILENT):
        return
    named = _named_arguments(cls)
    unknown = sorted(set(options) - named)
    if unknown:
        raise InvalidOptionError(f"{url}: the {_protocol(url)}:// filesystem takes no storage "
                                 f"option {unknown[0]!r}; it takes {', '.join(sorted(named))}")


@functools.cache
def _named_arguments(cls: type) -> frozenset[str]:
    """The keyword arguments the ``__init__`` of ``cls`` and its bases name."""
    import inspect

    named = set(_FSSPEC_OPTIONS)
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            named |= {p.name for p in inspect.signature(klass.__init__).parameters.values()
                      if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    return frozenset(named)


def is_store_failure(error: BaseException) -> bool:
    """Whether ``error`` is a store's answer (an OS error, or one its client library
    raised), rather than a fault of normstats.

    Examples
    --------
    >>> is_store_failure(PermissionError("Access Denied")), is_store_failure(KeyError("x"))
    (True, False)
    """
    module = type(error).__module__.split(".")[0]
    return isinstance(error, OSError) or module in _CLIENT_MODULES


def _detail(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


#: The clients' own kinds of failure, by class name anywhere in an error's bases: normstats
#: never imports botocore or aiohttp, whose classes these are.
_NO_CREDENTIALS = frozenset(("NoCredentialsError", "PartialCredentialsError",
                             "CredentialRetrievalError"))
_UNREACHABLE = frozenset(("ConnectionError", "HTTPClientError", "ConnectTimeoutError",
                          "ReadTimeoutError", "ClientConnectorError", "ServerTimeoutError",
                          "TimeoutError", "NetworkError", "TimeoutException"))  # last: httpx


def _kinds(error: BaseException) -> set[str]:
    return {klass.__name__ for klass in type(error).__mro__}


def _cause(error: BaseException, url: str) -> tuple[str, str]:
    """(what happened, what to check) for a store's failure."""
    s3 = _protocol(url) in ("s3", "s3a")
    kinds, detail = _kinds(error), _detail(error)
    if isinstance(error, FileNotFoundError):
        return f"not found ({detail})", "the bucket and the path"
    if kinds & _NO_CREDENTIALS:
        return (f"no credentials ({detail})",
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, --storage-option key=... "
                "--storage-option secret=..., or --storage-option anon=true for a public "
                "bucket" if s3 else "the credentials in the storage options or environment")
    if isinstance(error, PermissionError):
        return (f"access denied ({detail})",
                "the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or "
                "--storage-option key=/secret=) and their permissions on it" if s3 else
                "the credentials and their permissions")
    if kinds & _UNREACHABLE:
        return (f"cannot reach the store ({detail})",
                "the endpoint (--storage-option endpoint_url=http://host:port, or "
                "AWS_ENDPOINT_URL) and the network" if s3 else "the URL and the network")
    return detail, "the URL, the storage options and the credentials"


def store_error(error: BaseException, url: str, doing: str = "listing") -> NormstatsError:
    """The one-line error of a store's failure while ``doing`` something to ``url``, with
    what to check (the endpoint, the credentials, the bucket).

    Examples
    --------
    >>> str(store_error(PermissionError("Access Denied"), "gs://b/x"))
    'gs://b/x: listing: access denied (Access Denied); check the credentials and their permissions'
    """
    what, check = _cause(error, url)
    return NormstatsError(f"{doing}: {what}; check {check}", path=url)


def object_error(error: BaseException, name: str, url: str) -> UnreadableInputError:
    """The skip of one listed object (named ``name``) its store would not serve: a vanished
    object is transient, as a vanished file; a refusal or an unreachable store is an
    `AccessError`, which fails the run once every task ran.

    Examples
    --------
    >>> type(object_error(PermissionError("Access Denied"), "a.png", "s3://b")).__name__
    'AccessError'
    >>> type(object_error(FileNotFoundError("gone"), "a.png", "s3://b")).__name__
    'TransientInputError'
    """
    if isinstance(error, FileNotFoundError):
        return TransientInputError("file disappeared before it could be read", name)
    if isinstance(error, PermissionError) or not isinstance(error, OSError) or \
            _kinds(error) & _UNREACHABLE:
        what, check = _cause(error, url)
        return AccessError(f"{what}; check {check}", name)
    return TransientInputError(f"cannot read file: {_detail(error)}", name)


def list_url(fs: Any, root: str, url: str) -> dict[str, dict]:
    """Every file under the folder ``root`` of ``fs``: its full path -> fsspec info.

    Raises
    ------
    NormstatsError
        Nothing at ``root`` (naming a missing bucket), or the store's failure (`store_error`).
    """
    fs.invalidate_cache()  # fsspec keeps listings per filesystem: list what is there now
    try:
        if not fs.isdir(root):
            if fs.exists(root):
                raise NormstatsError("not a folder", path=url)
            raise NormstatsError(_missing_reason(fs, root), path=url)
        return fs.find(root, detail=True)
    except NormstatsError:
        raise
    except Exception as error:
        if is_store_failure(error):
            raise store_error(error, url) from None
        raise


def _missing_reason(fs: Any, root: str) -> str:
    """Why nothing is at ``root``: its bucket (first path part) is missing, or the path."""
    bucket = root.strip("/").split("/", 1)[0]
    try:
        if bucket and bucket != root.strip("/") and not fs.exists(bucket):
            return f"no such bucket {bucket!r} (or no access to it)"
    except OSError:
        pass
    return "no such file or folder"


def entry_of(path: str, info: dict) -> FileEntry:
    """The `FileEntry` of an object ``path`` (relative to its root) from its fsspec info.

    Examples
    --------
    >>> e = entry_of("a.png", {"size": 3, "ETag": '"x"'})
    >>> e.size, e.mtime_ns, e.stamp != 0
    (3, 0, True)
    """
    return FileEntry(path, int(info.get("size") or 0), _mtime_ns(info), _content_tag(info))


def walk_url(url: str, storage_options: dict | None = None) -> WalkResult:
    """List the image files under ``url``, sorted by path relative to it.

    Examples
    --------
    >>> import fsspec
    >>> fsspec.filesystem("memory").pipe("/walk-doc/a.png", b"x")
    >>> [f.path for f in walk_url("memory://walk-doc").files]
    ['a.png']
    """
    fs, root = filesystem(url, storage_options)
    return walk_listing(list_url(fs, root.rstrip("/"), url), root.rstrip("/"))


def walk_listing(listing: dict[str, dict], root: str) -> WalkResult:
    """The image files of ``listing`` (full path -> info), relative to ``root``; the other
    files are counted as ignored."""
    files, ignored = [], 0
    for path, info in listing.items():
        rel = posixpath.relpath(path, root) if root else path.lstrip("/")
        if posixpath.splitext(rel)[1].lower() not in IMAGE_EXTENSIONS:
            ignored += 1
        else:
            files.append(entry_of(rel, info))
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


#: The store's version tags of an object: content (ETag, MD5, CRC) and version (S3
#: version id, GCS generation); every one present goes into the stamp.
_TAGS = ("ETag", "etag", "md5Hash", "crc32c", "checksum", "VersionId", "version_id",
         "generation")


def _content_tag(info: dict) -> int:
    """The store's own identity of an object's content and version as an int64 stamp, so
    an object rewritten with the same size and time is not served from the cache (0 if
    the backend reports none)."""
    import hashlib  # lazy: a local run does not load OpenSSL's digests for this

    tags = [f"{name}={info[name]}" for name in _TAGS if info.get(name) not in (None, "")]
    if not tags:
        return 0
    digest = hashlib.blake2b("\n".join(tags).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


@dataclass(frozen=True)
class RemoteFolderTask(ListedTask):
    """Read a run of files through fsspec and return their per-image records.

    ``files`` may be given as any sequence of `FileEntry` (see `ListedTask`).
    """

    url: str
    files: FileList
    policy: DecodePolicy
    fail_fast: bool = False
    storage_options: dict = field(default_factory=dict, hash=False, repr=False)  # secrets

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
                image = decode_bytes(self._bytes_of(contents, entry.path), entry.path,
                                     self.policy)
            except UnreadableInputError as error:
                if self.fail_fast:
                    raise
                skipped.append(Skipped(entry.path, error.reason, error.kind))
                continue
            decoded.append((entry.path, image))
        return decoded, tuple(skipped)

    def _read_all(self) -> dict[str, Any]:
        """Bytes (or the read error) of every file, keyed by relative path."""
        fs, root = filesystem(self.url, self.storage_options)
        root = root.rstrip("/")
        limit = self.policy.file_byte_limit
        # Objects listed over the byte limit are never fetched (their listed size decides).
        over = {e.path: _TooLarge(e.size, limit) for e in self.files if e.size > limit}
        paths = {f"{root}/{e.path}" if root else e.path: e.path
                 for e in self.files if e.path not in over}
        try:
            contents = fs.cat(list(paths), on_error="return") if paths else {}
        except Exception as error:  # the store failed the whole batch: each file says so
            if not is_store_failure(error):
                raise
            contents = dict.fromkeys(paths, error)
        if not isinstance(contents, dict):  # a single path comes back as bytes
            contents = {next(iter(paths)): contents}
        return {**{paths.get(path, path): data for path, data in contents.items()}, **over}

    def _bytes_of(self, contents: dict[str, Any], name: str) -> bytes:
        data = contents.get(name)
        if data is None:
            raise TransientInputError("file disappeared before it could be read", name)
        if isinstance(data, _TooLarge):
            raise RefusedInputError(str(data), name)
        if isinstance(data, BaseException):
            raise object_error(data, name, self.url)
        return data


class _TooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(too_large_reason(size, limit))


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
    walk : WalkResult, optional
        The files to read, relative to ``url``, when they are already listed (named by
        a pattern); by default every image file under ``url``.

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
                 storage_options: dict | None = None, walk: WalkResult | None = None) -> None:
        self.storage_options = dict(storage_options or {})
        started = time.perf_counter()
        url = url.rstrip("/") or url
        if walk is None:
            walk = walk_url(url, self.storage_options)
        self.walk_seconds = time.perf_counter() - started
        self.adopt(url, policy or DecodePolicy(), fail_fast, walk)

    def task(self, files: FileList) -> Task:
        return RemoteFolderTask(self.root, files, self.policy, self.fail_fast,
                                self.storage_options)


def common_folder(paths: Iterable[str]) -> str:
    """The deepest folder holding every one of ``paths`` (fsspec paths, ``/`` separated).

    Examples
    --------
    >>> common_folder(["b/x/1.png", "b/x/y/2.png"]), common_folder(["b/a.png"])
    ('b/x', 'b')
    """
    return posixpath.commonpath([posixpath.dirname(p.rstrip("/")) for p in paths])
