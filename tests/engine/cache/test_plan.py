"""The pure planning function of the record cache: what to reuse, what to decode."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from normstats.engine.cache.plan import (
    CachedFailure,
    SegmentIndex,
    is_cacheable_failure,
    needs_compaction,
    plan,
)
from normstats.errors import SkipKind
from normstats.maths.records import Skipped
from normstats.sources.file_list import FileEntry


def segment(name: str, entries: list[tuple[str, int, int]],
            failures: tuple[CachedFailure, ...] = (), stored: bool = False) -> SegmentIndex:
    """A segment index; ``stored``: with its paths' bytes as a cache segment holds them."""
    paths = tuple(p for p, _, _ in entries)
    sizes = np.array([s for _, s, _ in entries], dtype=np.int64)
    mtimes = np.array([m for _, _, m in entries], dtype=np.int64)
    path_bytes = np.frombuffer("\0".join(paths).encode(), np.uint8) if stored else None
    return SegmentIndex(name, paths, sizes, mtimes, failures, path_bytes=path_bytes)


def test_empty_cache_computes_everything():
    files = [FileEntry("a", 1, 1), FileEntry("b", 2, 2)]
    decision = plan(files, [])
    assert list(decision.compute) == files
    assert decision.cached == 0 and decision.stale == 0 and not decision.reuse


def test_unchanged_changed_new_and_deleted_files():
    seg = segment("s1", [("a", 1, 1), ("b", 2, 2), ("gone", 3, 3)])
    files = [FileEntry("a", 1, 1), FileEntry("b", 2, 5), FileEntry("c", 4, 4)]
    decision = plan(files, [seg])
    assert [f.path for f in decision.compute] == ["b", "c"]  # b: mtime changed, c: new
    assert [(name, rows.tolist()) for name, rows in decision.reuse] == [("s1", [0])]
    assert decision.stale == 2  # the old b and the deleted file
    assert decision.segments_used == {"s1"}


def test_size_change_alone_invalidates():
    decision = plan([FileEntry("a", 9, 1)], [segment("s1", [("a", 1, 1)])])
    assert [f.path for f in decision.compute] == ["a"]


def test_newest_segment_wins_among_duplicates():
    old, new = segment("s1", [("a", 1, 1)]), segment("s2", [("x", 5, 5), ("a", 1, 1)])
    decision = plan([FileEntry("a", 1, 1)], [old, new])
    assert [(name, rows.tolist()) for name, rows in decision.reuse] == [("s2", [1])]
    assert decision.stale == 2 and decision.segments_used == {"s2"}


def test_cached_failures_reused_only_when_the_file_is_unchanged():
    failure = CachedFailure("bad.jpg", 10, 7, "file of 9 bytes is over the limit", 0,
                            SkipKind.REFUSED)
    seg = segment("s1", [], (failure,))
    assert plan([FileEntry("bad.jpg", 10, 7)], [seg]).failures == (failure,)
    changed = plan([FileEntry("bad.jpg", 11, 8)], [seg])
    assert changed.failures == () and [f.path for f in changed.compute] == ["bad.jpg"]
    assert failure.skipped() == Skipped("bad.jpg", "file of 9 bytes is over the limit",
                                        SkipKind.REFUSED)


def test_only_verdicts_on_the_file_are_cacheable():
    assert [kind for kind in SkipKind if is_cacheable_failure(kind)] == \
        [SkipKind.UNREADABLE, SkipKind.REFUSED]


def test_compaction_rule():
    assert not needs_compaction(1, 0, 0)
    assert not needs_compaction(0, 0, 0)
    assert needs_compaction(2, 0, 0) and needs_compaction(1, 1, 0) and needs_compaction(1, 0, 1)


names = st.sampled_from([f"f{i}" for i in range(12)])
keys = st.tuples(names, st.integers(1, 3), st.integers(1, 3))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(keys, max_size=6), max_size=4),
       st.dictionaries(names, st.tuples(st.integers(1, 3), st.integers(1, 3))))
def test_every_file_is_either_reused_once_with_its_exact_key_or_computed(raw_segments, listed):
    segments = []
    for number, entries in enumerate(raw_segments):
        unique = list({p: (p, s, m) for p, s, m in entries}.values())
        segments.append(segment(f"s{number}", unique))
    files = [FileEntry(p, s, m) for p, (s, m) in sorted(listed.items())]
    decision = plan(files, segments)
    by_name = {s.name: s for s in segments}
    reused = [(by_name[name].paths[r], int(by_name[name].sizes[r]), int(by_name[name].mtimes[r]))
              for name, rows in decision.reuse for r in rows]
    assert len({p for p, _, _ in reused}) == len(reused)
    assert all(listed[p] == (s, m) for p, s, m in reused)
    computed = {f.path for f in decision.compute}
    assert computed | {p for p, _, _ in reused} == set(listed)
    assert not computed & {p for p, _, _ in reused}
    assert decision.stale == sum(s.entries for s in segments) - len(reused)


def test_a_path_held_twice_is_answered_by_its_first_matching_row():
    seg = segment("s1", [("a", 9, 9), ("b", 2, 2), ("a", 1, 1), ("a", 1, 1)])
    decision = plan([FileEntry("a", 1, 1), FileEntry("b", 2, 2)], [seg])
    assert [(name, rows.tolist()) for name, rows in decision.reuse] == [("s1", [1, 2])]
    assert [listed.tolist() for listed in decision.listed] == [[1, 0]]
    assert decision.stale == 2 and not decision.compute


def test_a_failure_in_a_newer_segment_answers_before_an_older_record():
    failure = CachedFailure("a", 1, 1, "truncated", 0, SkipKind.UNREADABLE)
    old, new = segment("s1", [("a", 1, 1)]), segment("s2", [], (failure,))
    decision = plan([FileEntry("a", 1, 1)], [old, new])
    assert decision.failures == (failure,) and decision.reuse == () and decision.stale == 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8), st.booleans())
def test_a_segment_of_exactly_the_listing_is_matched_as_any_other(keys, changed, stored):
    """The row-for-row match of a segment listing exactly the listed paths (a compacted
    group; known by its stored path bytes, or by its paths) decides what the path-by-path
    match decides."""
    files = [FileEntry(f"f{i}", s, m) for i, (s, m) in enumerate(keys)]
    entries = [(f.path, f.size + changed[i], f.mtime_ns) for i, f in enumerate(files)]
    exact = plan(files, [segment("s1", entries, stored=stored)])
    by_path = plan(files, [segment("s1", entries[::-1], stored=stored)])  # another order
    assert [f.path for f in exact.compute] == [f.path for f in by_path.compute]
    reused = sorted(entries[r][0] for _, rows in exact.reuse for r in rows.tolist())
    assert reused == sorted(entries[::-1][r][0] for _, rows in by_path.reuse
                            for r in rows.tolist())
    for decision in (exact, by_path):
        for (_, rows), listed in zip(decision.reuse, decision.listed):
            assert all(files[li].path == (entries if decision is exact else entries[::-1])[r][0]
                       for r, li in zip(rows.tolist(), listed.tolist()))
