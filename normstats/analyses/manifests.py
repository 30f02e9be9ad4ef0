"""Dataset manifests: where a known dataset's files lie, and the constants published for it.

A manifest is a TOML file, one per dataset and split (the repository's ``data_manifests/*.toml``
ship with the package as ``normstats_manifests``)::

    name = "cifar10-train"                   # how `normstats verify NAME` finds it
    dataset = "CIFAR-10"
    split = "train"
    description = "..."
    homepage = "https://..."                 # optional

    [source]
    format = "cifar-python"                  # any normstats format (see sources.detect)
    files = ["cifar-10-batches-py/data_batch_1", ...]   # relative to --root, kept inside it
    mode = "RGB"                             # optional decode mode (image files, tar)
    images = 50000                           # optional expected image count
    member = "x_train"                       # optional: npz member; image_ext for tar
    [source.checksums]                       # optional: "md5:..." or "sha256:..."
    "cifar-10-batches-py/data_batch_1" = "md5:c99cafc152244af753f735de768cd75f"

    [[references]]                           # published constants, any number
    label = "kuangliu/pytorch-cifar"
    source = "https://..."                   # where the numbers come from
    note = "..."                             # optional: provenance caveats
    scale = 1.0                              # 1.0: values for pixels in [0, 1]; 255.0: [0, 255]
    tolerance = 5e-5                         # optional, in the values' units (default 5e-5)
    mean = [0.4914, 0.4822, 0.4465]          # keys name the variant each list claims to be
    std = [0.2023, 0.1994, 0.2010]

Manifests are validated by named ``parse_*`` functions; an error names the manifest
and the offending key.
"""

from __future__ import annotations

import hashlib
import math
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from normstats.errors import NormstatsError

__all__ = ["Manifest", "SourceSpec", "Reference", "CLAIMABLE", "load_manifest",
           "parse_manifest", "list_manifests", "manifest_paths", "resolve_path",
           "verify_checksums", "open_manifest_source", "compute_manifest"]

#: Per-channel quantities a published reference can claim, as `DatasetStats` names them.
CLAIMABLE = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
             "rms_per_image_std", "min", "max")
_TOP_KEYS = {"name", "dataset", "split", "description", "homepage", "source", "references"}
_SOURCE_KEYS = {"format", "files", "mode", "images", "channels", "member", "image_ext",
                "layout", "checksums", "counts"}
_REFERENCE_KEYS = {"label", "source", "note", "scale", "tolerance", *CLAIMABLE}
_DIGESTS = ("md5", "sha256")


@dataclass(frozen=True)
class SourceSpec:
    """Where a manifest's images are: format and files relative to the dataset root."""

    format: str
    files: tuple[str, ...]
    mode: str = "RGB"
    images: int | None = None
    channels: tuple[str, ...] | None = None
    member: str | None = None
    image_ext: str | None = None
    layout: str | None = None
    checksums: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Reference:
    """Published constants: per claimed variant, one value per channel, in units of ``scale``."""

    label: str
    source: str
    values: dict[str, tuple[float, ...]]
    scale: float = 1.0
    tolerance: float = 5e-5
    note: str = ""


@dataclass(frozen=True)
class Manifest:
    """One dataset split: its files and the references published for it."""

    name: str
    dataset: str
    split: str
    description: str
    source: SourceSpec
    references: tuple[Reference, ...]
    homepage: str = ""
    path: str = ""


def _fail(where: str, reason: str) -> NormstatsError:
    return NormstatsError(f"invalid manifest: {reason}", path=where)


def _unknown(table: dict[str, Any], allowed: set[str], where: str, context: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise _fail(where, f"unknown key(s) {', '.join(extra)} in {context}; allowed: "
                           f"{', '.join(sorted(allowed))}")


def _text(table: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = table.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise _fail(where, f"'{key}' must be a non-empty string")
    return value


def _number(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(where, f"'{key}' must be a finite number, got {value!r}")
    return float(value)


def parse_source(table: Any, where: str) -> SourceSpec:
    """Validate the ``[source]`` table."""
    if not isinstance(table, dict):
        raise _fail(where, "missing [source] table")
    _unknown(table, _SOURCE_KEYS, where, "[source]")
    files = table.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise _fail(where, "'source.files' must be a non-empty list of relative paths")
    for name in (*files, *table.get("checksums", {})):
        _check_relative(name, where)
    checksums = {str(k): parse_checksum(v, where, k)
                 for k, v in table.get("checksums", {}).items()}
    images = table.get("images")
    if images is not None and (not isinstance(images, int) or images <= 0):
        raise _fail(where, f"'source.images' must be a positive integer, got {images!r}")
    channels = table.get("channels")
    return SourceSpec(
        format=_text(table, "format", where), files=tuple(files),
        mode=table.get("mode", "RGB"), images=images,
        channels=tuple(channels) if channels else None, member=table.get("member"),
        image_ext=table.get("image_ext"), layout=table.get("layout"), checksums=checksums,
        counts={str(k): int(v) for k, v in table.get("counts", {}).items()})


def parse_checksum(value: Any, where: str, name: str) -> str:
    """``"md5:<32 hex>"`` or ``"sha256:<64 hex>"``, lower-cased."""
    algo, _, digest = str(value).lower().partition(":")
    size = {"md5": 32, "sha256": 64}.get(algo)
    if size is None or len(digest) != size or any(c not in "0123456789abcdef" for c in digest):
        raise _fail(where, f"checksum of {name!r} must be 'md5:<32 hex>' or "
                           f"'sha256:<64 hex>', got {value!r}")
    return f"{algo}:{digest}"


def parse_reference(table: Any, where: str, index: int) -> Reference:
    """Validate one ``[[references]]`` entry."""
    context = f"references[{index}]"
    if not isinstance(table, dict):
        raise _fail(where, f"{context} must be a table")
    _unknown(table, _REFERENCE_KEYS, where, context)
    values = {}
    for key in CLAIMABLE:
        if key in table:
            numbers = table[key]
            if not isinstance(numbers, list) or not numbers:
                raise _fail(where, f"{context}.{key} must be a list of numbers")
            values[key] = tuple(_number(v, where, f"{context}.{key}") for v in numbers)
    if not values:
        raise _fail(where, f"{context} publishes no values (give any of {', '.join(CLAIMABLE)})")
    scale = _number(table.get("scale", 1.0), where, f"{context}.scale")
    tolerance = _number(table.get("tolerance", 5e-5), where, f"{context}.tolerance")
    if scale <= 0 or tolerance < 0:
        raise _fail(where, f"{context}: scale must be positive and tolerance not negative")
    return Reference(_text(table, "label", where), _text(table, "source", where), values,
                     scale, tolerance, _text(table, "note", where, required=False))


def parse_manifest(data: dict[str, Any], where: str) -> Manifest:
    """Validate a parsed TOML document into a `Manifest`.

    Examples
    --------
    >>> m = parse_manifest({"name": "toy", "dataset": "Toy", "split": "train",
    ...     "description": "d", "source": {"format": "idx", "files": ["a-idx3-ubyte"]},
    ...     "references": [{"label": "x", "source": "y", "mean": [0.5]}]}, "toy.toml")
    >>> m.references[0].values
    {'mean': (0.5,)}
    """
    _unknown(data, _TOP_KEYS, where, "the manifest")
    references = data.get("references", [])
    if not isinstance(references, list):
        raise _fail(where, "'references' must be an array of tables ([[references]])")
    return Manifest(
        name=_text(data, "name", where), dataset=_text(data, "dataset", where),
        split=_text(data, "split", where), description=_text(data, "description", where),
        source=parse_source(data.get("source"), where),
        references=tuple(parse_reference(r, where, i) for i, r in enumerate(references)),
        homepage=_text(data, "homepage", where, required=False), path=where)


def _check_relative(name: str, where: str) -> None:
    pure = PurePosixPath(name.replace("\\", "/"))
    if not name or pure.is_absolute() or ".." in pure.parts or (len(name) > 1 and name[1] == ":"):
        raise _fail(where, f"path {name!r} escapes the dataset root (it must be relative, "
                           "without '..')")


def resolve_path(manifest: Manifest, root: str, name: str) -> str:
    """``name`` under ``root``, refused when it (or a symlink on the way) leaves the root.

    Examples
    --------
    >>> m = parse_manifest({"name": "t", "dataset": "T", "split": "s", "description": "d",
    ...     "source": {"format": "idx", "files": ["x"]}}, "t.toml")
    >>> resolve_path(m, "/data", "sub/x")
    '/data/sub/x'
    """
    _check_relative(name, manifest.path or manifest.name)
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


def load_manifest(name_or_path: str) -> Manifest:
    """A shipped manifest by name (``cifar10-train``) or any manifest file by path.

    Examples
    --------
    >>> load_manifest("cifar10-train").source.images
    50000
    """
    path = name_or_path
    if not os.path.isfile(path):
        path = str(_shipped() / f"{name_or_path}.toml")
        if not os.path.isfile(path):
            names = ", ".join(m.name for m in list_manifests())
            raise NormstatsError(f"no manifest named {name_or_path!r} and no such file; "
                                 f"shipped: {names}")
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise _fail(path, f"not valid TOML ({error})") from None
    return parse_manifest(data, path)


def list_manifests() -> list[Manifest]:
    """Every shipped manifest, validated, sorted by name."""
    return sorted((load_manifest(p) for p in manifest_paths()), key=lambda m: m.name)


def verify_checksums(manifest: Manifest, root: str) -> list[str]:
    """Check every listed checksum; return one line per file, or raise on a mismatch."""
    lines = []
    for name, expected in manifest.source.checksums.items():
        path = resolve_path(manifest, root, name)
        if not os.path.isfile(path):
            raise NormstatsError(f"file of manifest {manifest.name} not found under the root "
                                 f"{root}", path=path)
        algo, digest = expected.split(":")
        actual = _digest(path, algo)
        if actual != digest:
            raise NormstatsError(f"{algo} checksum mismatch: expected {digest}, got {actual} "
                                 "(not the published file)", path=path)
        lines.append(f"{name}: {algo} ok")
    return lines


def _digest(path: str, algo: str) -> str:
    hasher = hashlib.new(algo, usedforsecurity=False)
    try:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                hasher.update(block)
    except OSError as error:
        raise NormstatsError(f"cannot read file ({error.strerror or error})", path=path) from None
    return hasher.hexdigest()


def open_manifest_source(manifest: Manifest, root: str, *, max_pixels: int | None = None,
                         fail_fast: bool = False, max_file_bytes: int | None = None) -> Any:
    """The source of a manifest's files under ``root`` (several files read as one)."""
    from normstats.sources import open_source
    from normstats.sources.concat import ConcatSource

    spec = manifest.source
    paths = [resolve_path(manifest, root, f) for f in spec.files]
    counts = {resolve_path(manifest, root, f): n for f, n in spec.counts.items()}
    extra = {"member": spec.member, "image_ext": spec.image_ext, "counts": counts,
             "max_file_bytes": max_file_bytes}
    parts = []
    for path in paths:
        if not os.path.exists(path):
            raise NormstatsError(f"file of manifest {manifest.name} not found under the root "
                                 f"{root}", path=path)
        parts.append(_open_one(path, spec, max_pixels, fail_fast, extra, open_source))
    return parts[0] if len(parts) == 1 else ConcatSource(parts, f"{root} ({manifest.name})")


def _open_one(path: str, spec: SourceSpec, max_pixels: int | None, fail_fast: bool,
              extra: dict[str, Any], open_source: Any) -> Any:
    from normstats.sources.detect import FILE_FORMATS, open_format

    if spec.format in FILE_FORMATS:
        return open_format(path, spec.format, mode=spec.mode, layout=spec.layout,
                           max_pixels=max_pixels, fail_fast=fail_fast,
                           channel_names=spec.channels, **extra)
    return open_source(path, mode=spec.mode, layout=spec.layout, max_pixels=max_pixels,
                       fail_fast=fail_fast, channel_names=spec.channels, format=spec.format,
                       max_file_bytes=extra["max_file_bytes"])


def compute_manifest(manifest: Manifest, root: str, **options: Any) -> Any:
    """`normstats.compute` of a manifest's files under ``root``, checksums verified first.

    ``options`` are those of `normstats.compute` (workers, scheduler, scale, ...).
    Returns the `DatasetStats`.
    """
    from normstats.engine.compute import compute

    verify_checksums(manifest, root)
    source = open_manifest_source(manifest, root, max_pixels=options.pop("max_pixels", None),
                                  fail_fast=options.get("on_error") == "fail",
                                  max_file_bytes=options.pop("max_file_bytes", None))
    for ignored in ("mode", "layout", "format"):
        options.pop(ignored, None)
    if options.get("channels") is None:
        options["channels"] = manifest.source.channels
    return compute(source, **options)
