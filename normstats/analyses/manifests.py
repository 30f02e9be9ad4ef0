"""Dataset manifests: where a known dataset's files lie, and the constants published for it.

A manifest is a TOML file, one per dataset and split (the repository's ``data_manifests/*.toml``
ship with the package as ``normstats_manifests``); its keys are described and checked in
`normstats.analyses.manifest_schema` and ``docs/manifests.md``. This module finds and loads
manifests, keeps their paths inside the dataset root, checks checksums and computes them.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tomllib
import zlib
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from normstats.analyses.manifest_schema import (
    CLAIMABLE,
    Manifest,
    Reference,
    SourceSpec,
    check_relative,
    manifest_error,
    parse_manifest,
)
from normstats.errors import NormstatsError, RefusedInputError
from normstats.maths.records import Skipped
from normstats.sources.archives import is_gzip
from normstats.sources.decoding.file_read import not_a_dataset_path, open_regular
from normstats.sources.options import READ_FIELDS, ReadOptions, read_options
from normstats.sources.path_patterns import one_path_per_file

__all__ = ["Manifest", "SourceSpec", "Reference", "CLAIMABLE", "load_manifest",
           "parse_manifest", "list_manifests", "manifest_paths", "resolve_path",
           "verify_checksums", "open_manifest_source", "compute_manifest"]

_DIGESTS = ("md5", "sha256")


def resolve_path(manifest: Manifest, root: str, name: str) -> str:
    """``name`` under ``root``, refused when it (or a symlink on the way) leaves the root.

    Examples
    --------
    >>> m = parse_manifest({"name": "t", "dataset": "T", "split": "s", "description": "d",
    ...     "source": {"format": "idx", "files": ["x"]}}, "t.toml")
    >>> resolve_path(m, "/data", "sub/x")
    '/data/sub/x'
    """
    check_relative(name, manifest.path or manifest.name)
    real_root = os.path.realpath(root)
    full = os.path.join(root, *PurePosixPath(name).parts)
    real = os.path.realpath(full)
    if real != real_root and not real.startswith(real_root.rstrip(os.sep) + os.sep):
        raise NormstatsError(f"manifest path {name!r} resolves outside the dataset root "
                             f"{root} (to {real})", path=manifest.path or manifest.name)
    return full


def _shipped() -> Any:
    return resources.files("normstats_manifests")


def manifest_paths() -> list[str]:
    """The shipped manifest files, sorted."""
    return sorted(str(p) for p in _shipped().iterdir() if p.name.endswith(".toml"))


#: Largest manifest file read: a TOML listing of a million files is about 64 MB.
MANIFEST_LIMIT = 64 << 20


def load_manifest(name_or_path: str) -> Manifest:
    """A shipped manifest by name (``cifar10-train``) or any manifest file by path.

    Examples
    --------
    >>> load_manifest("cifar10-train").source.images
    50000
    """
    path = name_or_path
    if not os.path.exists(path) or os.path.isdir(path):
        path = str(_shipped() / f"{name_or_path}.toml")
        if not os.path.isfile(path):
            names = ", ".join(m.name for m in list_manifests())
            raise NormstatsError(f"no manifest named {name_or_path!r} and no such file; "
                                 f"shipped: {names}")
    try:
        with open_regular(path) as handle:  # a FIFO named x.toml: refused, not waited on
            text = handle.read(MANIFEST_LIMIT + 1)
        if len(text) > MANIFEST_LIMIT:
            raise manifest_error(path, f"larger than {MANIFEST_LIMIT:,} bytes; a manifest "
                                 "lists files, it does not hold them")
        data = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise manifest_error(path, f"not UTF-8 text (byte {error.start}); a manifest is "
                             "a TOML file") from None
    except tomllib.TOMLDecodeError as error:
        raise manifest_error(path, f"not valid TOML ({error})") from None
    except OSError as error:
        raise manifest_error(path, f"cannot read it ({error.strerror or error})") from None
    return parse_manifest(data, path)


def list_manifests() -> list[Manifest]:
    """Every shipped manifest, validated, sorted by name."""
    return sorted((load_manifest(p) for p in manifest_paths()), key=lambda m: m.name)


def verify_checksums(manifest: Manifest, root: str) -> list[str]:
    """Check every listed checksum; return one line per file, or raise on a mismatch."""
    lines = []
    for name, expected in manifest.source.checksums.items():
        path = resolve_path(manifest, root, name)
        if not os.path.exists(path):  # a FIFO is there: `_digest` refuses it, naming it
            extracted = _extracted_copy(manifest, root, name)
            if extracted is None:
                raise missing_file_error(manifest, root, path)
            lines.append(f"{name}: not found; its extracted copy {os.path.basename(extracted)} "
                         "is read instead (the checksum is of the compressed file, so the "
                         "image count and the references check its pixels)")
            continue
        algo, digest = expected.split(":")
        actual = _digest(path, algo)
        if actual != digest and name.endswith(".gz") and _whole_gzip(path):
            # A copy compressed again has other bytes even with the same pixels; no
            # checksum of the decompressed data is published, so, as for an extracted
            # copy, the image count and the references check what it holds.
            lines.append(f"{name}: {algo} differs from the published file, but it is one "
                         "complete gzip stream (a copy compressed again?): its pixels are "
                         "checked by the image count and the references, not by the checksum")
            continue
        if actual != digest:
            raise NormstatsError(f"{algo} checksum mismatch: expected {digest}, got {actual} "
                                 f"(not the published file, or a damaged download"
                                 f"{_not_gzip_hint(path, name)})", path=path)
        lines.append(f"{name}: {algo} ok")
    return lines


def _not_gzip_hint(path: str, name: str) -> str:
    """For a listed ``.gz`` file that is no gzip stream at all: what a browser that
    decompressed the download while keeping its name leaves, and how to have it read as
    the extracted copy it is (whose pixels the image count and references check)."""
    if not name.endswith(".gz") or is_gzip(path):
        return ""
    return (f"; it is no gzip stream: if a browser saved it decompressed under its .gz name, "
            f"rename it {os.path.basename(name[:-3])} and it is read as the extracted copy")


def _whole_gzip(path: str) -> bool:
    """True when ``path`` is a gzip stream that decompresses to its end with a right CRC
    (a damaged download fails here; a re-compressed copy passes)."""
    try:
        with open_regular(path) as handle, gzip.GzipFile(fileobj=handle, mode="rb") as stream:
            while stream.read(1 << 20):
                pass
    except (OSError, EOFError, zlib.error):
        return False
    return True


def _extracted_copy(manifest: Manifest, root: str, name: str) -> str | None:
    """The extracted copy of a listed ``.gz`` file under ``root``, if only that is there
    (users often ``gunzip`` MNIST's files)."""
    if not name.endswith(".gz"):
        return None
    path = resolve_path(manifest, root, name[:-3])
    return path if os.path.isfile(path) else None


def manifest_file(manifest: Manifest, root: str, name: str) -> str:
    """The path read for the listed file ``name``: itself, or its extracted copy."""
    path = resolve_path(manifest, root, name)
    if not os.path.exists(path):
        return _extracted_copy(manifest, root, name) or path
    return path


def _digest(path: str, algo: str) -> str:
    hasher = hashlib.new(algo, usedforsecurity=False)
    try:
        with open_regular(path) as handle:
            while block := handle.read(1 << 20):
                hasher.update(block)
    except OSError as error:
        raise NormstatsError(f"cannot read file ({error.strerror or error})", path=path) from None
    return hasher.hexdigest()


def open_manifest_source(manifest: Manifest, root: str,
                         options: ReadOptions | None = None) -> Any:
    """The source of a manifest's files under ``root`` (several files read as one).

    The manifest says how its files are read (format, mode, layout, channels); of
    ``options``, the limits (``max_pixels``, ``max_file_bytes``), ``on_error`` and the
    transforms (``resize``, ``center_crop``) apply.
    """
    from normstats.sources import open_source
    from normstats.sources.concat import ConcatSource

    spec = manifest.source
    given = options or ReadOptions()
    read = ReadOptions(mode=spec.mode, layout=spec.layout, channels=spec.channels,
                       format=spec.format, on_error=given.on_error, max_pixels=given.max_pixels,
                       max_file_bytes=given.max_file_bytes)
    duplicates: list[Skipped] = []  # a file listed twice (or with its link) is read once
    paths = one_path_per_file([manifest_file(manifest, root, f) for f in spec.files],
                              duplicates, f"listed twice in manifest {manifest.name}")
    counts = {resolve_path(manifest, root, f): n for f, n in spec.counts.items()}
    extra = {"member": spec.member, "image_ext": spec.image_ext, "counts": counts}
    parts = []
    for path in paths:
        if not os.path.exists(path):
            raise missing_file_error(manifest, root, path)
        if (reason := not_a_dataset_path(path)) is not None:  # a FIFO: before any reader
            raise RefusedInputError(reason, path)
        parts.append(_open_one(path, spec.format, read, extra, open_source, root))
    source = parts[0] if len(parts) == 1 else ConcatSource(parts, f"{root} ({manifest.name})")
    source.skipped = tuple(source.skipped) + tuple(duplicates)
    return open_source(source, resize=given.resize, center_crop=given.center_crop)


#: What a dataset is downloaded as, and the command that extracts it into a folder.
_ARCHIVES = {(".tar.gz", ".tgz", ".tar", ".tar.bz2", ".tar.xz"): "tar -xf {archive} -C {root}",
             (".zip",): "unzip {archive} -d {root}"}


def missing_file_error(manifest: Manifest, root: str, path: str) -> NormstatsError:
    """The error for a listed file missing under ``root``; when ``root`` holds an archive
    (the download, cifar-10-python.tar.gz, or any other), it says to extract it if the
    files are inside: a manifest lists the extracted files, not the archive they came in.

    Examples
    --------
    >>> import tempfile, os
    >>> root = tempfile.mkdtemp(); _ = open(os.path.join(root, "cifar-10-python.tar.gz"), "wb")
    >>> manifest = load_manifest("cifar10-train")
    >>> print(missing_file_error(manifest, root, os.path.join(root, "data_batch_1")).reason)
    ... # doctest: +ELLIPSIS
    file of manifest cifar10-train not found under the root ...; the root holds the archive \
cifar-10-python.tar.gz: if the manifest's files are inside it, extract it first (tar -xf ...)
    """
    reason = f"file of manifest {manifest.name} not found under the root {root}"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        names = []
    for name in names:
        for endings, command in _ARCHIVES.items():
            if name.lower().endswith(endings):
                extract = command.format(archive=os.path.join(root, name), root=root)
                reason += (f"; the root holds the archive {name}: if the manifest's files "
                           f"are inside it, extract it first ({extract})")
                return NormstatsError(reason, path=path)
    return NormstatsError(reason, path=path)


def _open_one(path: str, format: str, read: ReadOptions, extra: dict[str, Any],
              open_source: Any, root: str) -> Any:
    from normstats.sources.detect import FILE_FORMATS, open_format
    from normstats.sources.folder import FolderSource

    if format == "folder" and os.path.isdir(path):  # links out of the root: not followed
        return FolderSource(path, read.policy, fail_fast=read.fail_fast, confine_to=root)
    if format in FILE_FORMATS:
        return open_format(path, format, policy=read.policy, layout=read.layout,
                           fail_fast=read.fail_fast, channel_names=read.channels, **extra)
    return open_source(path, options=read)


def compute_manifest(manifest: Manifest, root: str, *, options: ReadOptions | None = None,
                     **arguments: Any) -> Any:
    """`normstats.compute` of a manifest's files under ``root``, checksums verified first.

    ``options`` and ``arguments`` are those of `normstats.compute` (workers, scheduler,
    scale, by_folder, ...); the manifest says how its files are read (see
    `open_manifest_source`), and names their channels unless ``channels`` does.
    Returns the `DatasetStats`.
    """
    from normstats.analyses.compute import compute

    verify_checksums(manifest, root)
    read = read_options(options, {k: arguments.pop(k) for k in READ_FIELDS if k in arguments})
    source = open_manifest_source(manifest, root, read)
    reported = read.with_changes(channels=read.channels or manifest.source.channels,
                                 resize=None, center_crop=None)  # the source has them
    return compute(source, options=reported, **arguments)
