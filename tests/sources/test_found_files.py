"""FoundFiles: the walk's columns turned into a FileList, each physical file once."""

from __future__ import annotations

import stat

import numpy as np

from normstats.errors import SkipKind
from normstats.sources.found_files import (
    FoundFiles,
    _all_distinct,
    _first_of_each_identity,
)

_REGULAR = stat.S_IFREG | 0o644


def _row(device: int, inode: int, size: int, mtime: int = 1, ctime: int = 2,
         mode: int = _REGULAR) -> tuple[int, ...]:
    return mode, device, inode, size, mtime, ctime


def test_files_keep_their_order_paths_and_numbers():
    found = FoundFiles()
    found.extend(["a/1.png", "a/é.png"], [_row(1, 10, 5), _row(1, 11, 6, 7, 8)], [])
    found.extend(["b.png"], [_row(1, 12, 9)], [])
    files = found.first_link_of_each_file([])
    assert [(f.path, f.size, f.mtime_ns) for f in files] == \
        [("a/1.png", 5, 1), ("a/é.png", 6, 7), ("b.png", 9, 1)]


def test_a_second_link_is_skipped_naming_the_first_path():
    found, skipped = FoundFiles(), []
    found.extend(["a.png", "b.png", "c.png"], [_row(1, 7, 5), _row(1, 8, 5), _row(1, 7, 5)],
                 skipped)
    files = found.first_link_of_each_file(skipped)
    assert [f.path for f in files] == ["a.png", "b.png"]
    assert [(s.path, s.reason, s.kind) for s in skipped] == \
        [("c.png", "same file as a.png (a hard or symbolic link); counted once",
          SkipKind.DUPLICATE)]


def test_the_same_inode_on_two_devices_is_two_files():
    found = FoundFiles()
    found.extend(["a.png", "b.png"], [_row(1, 7, 5), _row(2, 7, 5)], [])
    assert len(found.first_link_of_each_file([])) == 2


def test_files_that_are_not_regular_are_skipped_with_their_kind():
    found, skipped = FoundFiles(), []
    found.extend(["a.png", "fifo.png", "b.png"],
                 [_row(1, 1, 5), _row(1, 2, 0, mode=stat.S_IFIFO | 0o644), _row(1, 3, 6)],
                 skipped)
    assert [f.path for f in found.first_link_of_each_file(skipped)] == ["a.png", "b.png"]
    assert [(s.path, s.kind) for s in skipped] == [("fifo.png", SkipKind.REFUSED)]


def test_times_beyond_int64_saturate():
    found = FoundFiles()
    found.extend(["a.png", "b.png"], [_row(1, 1, 5, mtime=2**70), _row(1, 2, 5, mtime=-2**70)],
                 [])
    assert [f.mtime_ns for f in found.first_link_of_each_file([])] == [2**63 - 1, -2**63]


def test_first_of_each_identity_against_a_dictionary():
    rng = np.random.default_rng(3)
    devices = rng.integers(0, 3, 500).astype(np.uint64)
    inodes = rng.integers(0, 60, 500).astype(np.uint64)
    first_seen: dict[tuple[int, int], int] = {}
    expected = [first_seen.setdefault((int(d), int(i)), position)
                for position, (d, i) in enumerate(zip(devices, inodes))]
    assert _first_of_each_identity(devices, inodes).tolist() == expected
    assert _all_distinct(inodes) == (len(set(inodes.tolist())) == len(inodes))
    assert _all_distinct(np.arange(100, dtype=np.uint64)[::-1].copy())
