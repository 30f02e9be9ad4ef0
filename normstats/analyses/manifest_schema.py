"""The manifest schema: what a manifest file may say, checked key by key.

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
and the offending key. Finding, loading and computing manifests is
`normstats.analyses.manifests`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from normstats.errors import NormstatsError

__all__ = ["Manifest", "SourceSpec", "Reference", "CLAIMABLE", "parse_manifest",
           "parse_source", "parse_reference", "parse_checksum", "check_relative",
           "manifest_error"]

#: Per-channel quantities a published reference can claim, as `DatasetStats` names them.
CLAIMABLE = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
             "rms_per_image_std", "min", "max")
_TOP_KEYS = {"name", "dataset", "split", "description", "homepage", "source", "references"}
_SOURCE_KEYS = {"format", "files", "mode", "images", "channels", "member", "image_ext",
                "layout", "checksums", "counts"}
_REFERENCE_KEYS = {"label", "source", "note", "scale", "tolerance", "decides", *CLAIMABLE}


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
    #: False for a reference shown for information only (training-split constants that
    #: scripts apply to a test split): it never decides the verdict of `verify`.
    decides: bool = True


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


def manifest_error(where: str, reason: str) -> NormstatsError:
    """The one-line error of an invalid manifest ``where``."""
    return NormstatsError(f"invalid manifest: {reason}", path=where)


def _unknown(table: dict[str, Any], allowed: set[str], where: str, context: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        keys = "key" if len(extra) == 1 else "keys"
        raise manifest_error(where, f"unknown {keys} {', '.join(extra)} in {context}; allowed: "
                           f"{', '.join(sorted(allowed))}")


def _text(table: dict[str, Any], key: str, where: str, required: bool = True) -> str:
    value = table.get(key, None if required else "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise manifest_error(where, f"'{key}' must be a non-empty string, got {value!r}")
    return value


def _number(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise manifest_error(where, f"'{key}' must be a finite number, got {value!r}")
    return float(value)


def parse_source(table: Any, where: str) -> SourceSpec:
    """Validate the ``[source]`` table: every key's type, every path relative."""
    if not isinstance(table, dict):
        raise manifest_error(where, "missing [source] table")
    _unknown(table, _SOURCE_KEYS, where, "[source]")
    files = table.get("files")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise manifest_error(where, "'source.files' must be a non-empty list of relative paths")
    checksum_table = _table(table, "checksums", where)
    counts_table = _table(table, "counts", where)
    for name in (*files, *checksum_table, *counts_table):
        check_relative(name, where)
    checksums = {str(k): parse_checksum(v, where, k) for k, v in checksum_table.items()}
    counts = {str(k): _positive(v, where, f"source.counts[{k!r}]")
              for k, v in counts_table.items()}
    images = table.get("images")
    if images is not None:
        images = _positive(images, where, "source.images")
    channels = table.get("channels")
    if channels is not None and (not isinstance(channels, list) or not channels or not all(
            isinstance(c, str) and c for c in channels)):
        raise manifest_error(where, f"'source.channels' must be a list of channel names such as "
                           f"[\"R\", \"G\", \"B\"], got {channels!r}")
    optional = {key: _text(table, key, where, required=False) or None
                for key in ("member", "image_ext", "layout")}
    return SourceSpec(
        format=_text(table, "format", where), files=tuple(files),
        mode=_text(table, "mode", where, required=False) or "RGB", images=images,
        channels=tuple(channels) if channels else None, checksums=checksums, counts=counts,
        **optional)


def _table(table: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise manifest_error(where, f"'source.{key}' must be a table of file = value "
                           f"([source.{key}]), got {value!r}")
    return value


def _positive(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise manifest_error(where, f"'{key}' must be a positive integer, got {value!r}")
    return value


def parse_checksum(value: Any, where: str, name: str) -> str:
    """``"md5:<32 hex>"`` or ``"sha256:<64 hex>"``, lower-cased."""
    algo, _, digest = str(value).lower().partition(":")
    size = {"md5": 32, "sha256": 64}.get(algo)
    if size is None or len(digest) != size or any(c not in "0123456789abcdef" for c in digest):
        raise manifest_error(where, f"checksum of {name!r} must be 'md5:<32 hex>' or "
                           f"'sha256:<64 hex>', got {value!r}")
    return f"{algo}:{digest}"


def parse_reference(table: Any, where: str, index: int) -> Reference:
    """Validate one ``[[references]]`` entry."""
    context = f"references[{index}]"
    if not isinstance(table, dict):
        raise manifest_error(where, f"{context} must be a table")
    _unknown(table, _REFERENCE_KEYS, where, context)
    values = {}
    for key in CLAIMABLE:
        if key in table:
            numbers = table[key]
            if not isinstance(numbers, list) or not numbers:
                raise manifest_error(where, f"{context}.{key} must be a list of numbers")
            values[key] = tuple(_number(v, where, f"{context}.{key}") for v in numbers)
    if not values:
        raise manifest_error(where, f"{context} publishes no values (give any of "
                                    f"{', '.join(CLAIMABLE)})")
    scale = _number(table.get("scale", 1.0), where, f"{context}.scale")
    tolerance = _number(table.get("tolerance", 5e-5), where, f"{context}.tolerance")
    if scale <= 0 or tolerance < 0:
        raise manifest_error(where, f"{context}: scale must be positive and tolerance not negative")
    decides = table.get("decides", True)
    if not isinstance(decides, bool):
        raise manifest_error(where, f"{context}.decides must be true or false, got {decides!r}")
    return Reference(_text(table, "label", where), _text(table, "source", where), values,
                     scale, tolerance, _text(table, "note", where, required=False), decides)


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
        raise manifest_error(where, "'references' must be an array of tables ([[references]])")
    return Manifest(
        name=_text(data, "name", where), dataset=_text(data, "dataset", where),
        split=_text(data, "split", where), description=_text(data, "description", where),
        source=parse_source(data.get("source"), where),
        references=tuple(parse_reference(r, where, i) for i, r in enumerate(references)),
        homepage=_text(data, "homepage", where, required=False), path=where)


def check_relative(name: str, where: str) -> None:
    if "\0" in name:
        raise manifest_error(where, f"path {name!r} holds a NUL character")
    pure = PurePosixPath(name.replace("\\", "/"))
    if not name or pure.is_absolute() or ".." in pure.parts or (len(name) > 1 and name[1] == ":"):
        raise manifest_error(where, f"path {name!r} escapes the dataset root (it must be relative, "
                           "without '..')")
