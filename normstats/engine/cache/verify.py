"""``--verify-cache``: decode again some (or all) of the files the cache would answer.

A cached record is reused when its file has the same path, size, ``mtime`` and stamp
(inode and status-change time). That is what make and rsync trust, and it cannot see a
file whose bytes were changed while all four were kept (a file system that does not keep
``ctime``, a disk image restored block by block, deliberate tampering). Users who need
certainty ask for a check: the chosen files are taken out of the cache's answer and
decoded like new ones, so the result never depends on the records being checked, and
each file whose fresh verdict (its record, or the reason it fails) differs from the
cached one is reported by name; the next compaction stores the fresh verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from normstats.engine.cache.plan import CachePlan
from normstats.engine.cache.store import LoadedSegment
from normstats.errors import InvalidOptionError
from normstats.maths.records import Records, Skipped

__all__ = ["CacheCheck", "parse_verify", "choose_checks", "cached_verdicts",
           "fresh_verdicts", "compare_verdicts"]

#: A file's verdict: its record as bytes of every array row, or the reason it failed.
Verdict = tuple


@dataclass(frozen=True)
class CacheCheck:
    """What ``--verify-cache`` found: how many cached files were decoded again, and
    which of them no longer match what the cache held."""

    checked: int = 0
    changed: tuple[str, ...] = ()


def parse_verify(value: int | str | None) -> int | None:
    """The number of cached files to check: None for none, -1 for all.

    Examples
    --------
    >>> parse_verify("all"), parse_verify("100"), parse_verify(None)
    (-1, 100, None)
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "all":
        return -1
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count <= 0 or isinstance(value, bool):
        raise InvalidOptionError(f"verify_cache must be a positive number of files or 'all', "
                                 f"got {value!r}")
    return count


def choose_checks(decision: CachePlan, segments: Sequence[LoadedSegment], count: int | None,
                  rng: np.random.Generator | None = None) -> frozenset[str]:
    """The paths of the cached files to decode again: ``count`` drawn at random without
    replacement (all of them for -1 or a count at least their number) by ``rng`` (by
    default a fresh `numpy.random.default_rng`: numpy.random is imported only then).

    Examples
    --------
    >>> from normstats.engine.cache.plan import CachePlan
    >>> choose_checks(CachePlan(), [], 5, np.random.default_rng(0))
    frozenset()
    """
    if not count:
        return frozenset()
    by_name = {s.index.name: s.index for s in segments}
    paths = [by_name[name].paths[row] for name, rows in decision.reuse for row in rows.tolist()]
    paths += [f.path for f in decision.failures]
    if count < 0 or count >= len(paths):
        return frozenset(paths)
    chosen = (rng or np.random.default_rng()).choice(len(paths), size=count, replace=False)
    return frozenset(paths[i] for i in chosen.tolist())


def cached_verdicts(decision: CachePlan, segments: Sequence[LoadedSegment],
                    paths: frozenset[str]) -> dict[str, Verdict]:
    """The cache's verdict on each of ``paths`` under the plan made before checking."""
    verdicts: dict[str, Verdict] = {}
    if not paths:
        return verdicts
    by_name = {s.index.name: s for s in segments}
    for name, rows in decision.reuse:
        records = by_name[name].records
        verdicts.update(_record_verdicts(records, rows.tolist(), paths))
    verdicts.update((f.path, ("failed", f.reason)) for f in decision.failures if f.path in paths)
    return verdicts


def fresh_verdicts(records: Iterable[Records], skipped: Iterable[Skipped],
                   paths: frozenset[str]) -> dict[str, Verdict]:
    """The verdict of this run's decoding on each of ``paths``."""
    verdicts: dict[str, Verdict] = {}
    for part in records:
        verdicts.update(_record_verdicts(part, range(len(part)), paths))
    verdicts.update((s.path, ("failed", s.reason)) for s in skipped if s.path in paths)
    return verdicts


def compare_verdicts(cached: dict[str, Verdict], fresh: dict[str, Verdict]) -> CacheCheck:
    """The files whose fresh verdict differs from the cached one (or is missing).

    Examples
    --------
    >>> compare_verdicts({"a": ("failed", "x"), "b": ("failed", "y")},
    ...                  {"a": ("failed", "x"), "b": ("failed", "z")})
    CacheCheck(checked=2, changed=('b',))
    """
    changed = tuple(sorted(p for p, verdict in cached.items() if fresh.get(p) != verdict))
    return CacheCheck(len(cached), changed)


def _record_verdicts(records: Records, rows: Iterable[int],
                     paths: frozenset[str]) -> Iterable[tuple[str, Verdict]]:
    fields = records.array_fields()
    for row in rows:
        key = records.keys[row]
        if key in paths:
            values = tuple(np.ascontiguousarray(getattr(records, f)[row]).tobytes()
                           for f in fields)
            yield key, (records.signature, *values)
