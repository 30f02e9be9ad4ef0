"""FileList: every sequence operation agrees with a plain list of FileEntry."""

import pickle

import numpy as np
import pytest

from normstats.sources import file_list
from normstats.sources.file_list import FileEntry, FileList

# ASCII, accented, CJK, emoji (4 bytes in UTF-8), an undecodable byte as os.fsdecode
# gives it (a lone surrogate), and an empty path.
PATHS = ["a.png", "b/é.jpg", "c/猫.png", "d/🙂.webp", "e/\udcff.png", "", "f/g/h.tiff"]


@pytest.fixture
def entries() -> list[FileEntry]:
    return [FileEntry(path, 1000 * i + 7, -5 + 10**18 * (i % 3)) for i, path in enumerate(PATHS)]


def test_indexing_and_iteration_match_the_entries(entries):
    files = FileList.of(entries)
    assert len(files) == len(entries)
    assert list(files) == entries
    assert [files[i] for i in range(-len(entries), len(entries))] == entries + entries
    assert files.sizes.tolist() == [e.size for e in entries]
    assert files.mtimes.tolist() == [e.mtime_ns for e in entries]
    for index in (len(entries), -len(entries) - 1):
        with pytest.raises(IndexError):
            files[index]


@pytest.mark.parametrize("key", [slice(None), slice(2, 5), slice(-3, None), slice(5, 2),
                                 slice(None, None, 2), slice(None, None, -1), slice(6, 0, -2),
                                 slice(100, 200)])
def test_slices_match_list_slices(entries, key):
    files = FileList.of(entries)
    part = files[key]
    assert isinstance(part, FileList)
    assert list(part) == entries[key]
    assert part == FileList.of(entries[key])


def test_a_slice_of_a_slice_is_a_view_of_the_same_buffers(entries):
    files = FileList.of(entries)
    inner = files[1:6][1:3]
    assert list(inner) == entries[2:4]
    assert np.shares_memory(inner.sizes, files.sizes)
    with pytest.raises(ValueError):
        inner.sizes[0] = 1  # read-only: a view cannot change the list it came from


def test_pickle_round_trip_and_a_slice_pickles_only_its_own_files(entries):
    files = FileList.of(entries * 500)
    assert pickle.loads(pickle.dumps(files)) == files
    part = files[7:14]
    restored = pickle.loads(pickle.dumps(part))
    assert list(restored) == entries and restored == part
    assert len(pickle.dumps(part)) < len(pickle.dumps(files)) / 100


def test_take_gathers_in_the_given_order(entries):
    files = FileList.of(entries)
    indices = [3, 0, -1, 3]
    assert list(files.take(indices)) == [entries[i] for i in indices]
    assert list(files.take(np.array([], dtype=np.int64))) == []
    with pytest.raises(IndexError):
        files.take([len(entries)])


@pytest.mark.parametrize("indices", [[1, 2, 4, 6], [2, 3, 4], [0, 6], [5, 6], [-3, -2, -1]])
def test_take_in_order_matches_the_entries_from_a_list_or_a_slice(entries, indices):
    """Files taken in order (copied from the first to the last, or a view where they are
    consecutive) are the entries, from the whole list and from a slice of it (whose
    offsets do not start at 0)."""
    doubled = entries + entries
    files, part = FileList.of(doubled), FileList.of(doubled)[3:10]
    assert list(files.take(indices)) == [doubled[i] for i in indices]
    assert list(part.take(indices)) == [doubled[3:10][i] for i in indices]
    assert part.take(indices) == FileList.of([doubled[3:10][i] for i in indices])
    consecutive = np.ptp(np.asarray(indices) % 7) == len(indices) - 1
    assert np.shares_memory(part.take(indices).sizes, part.sizes) == consecutive


def test_equality_hashing_and_the_sequence_mixins(entries):
    files = FileList.of(entries)
    same = FileList.of(list(entries))
    assert files == same and hash(files) == hash(same)
    assert files != FileList.of(entries[:-1])
    assert files != FileList.of([*entries[:-1], FileEntry(entries[-1].path, 0, 0)])
    assert files[2:4] == same[2:4] and hash(files[2:4]) == hash(FileList.of(entries[2:4]))
    assert entries[3] in files and FileEntry("nope", 0, 0) not in files
    assert files.index(entries[4]) == 4 and list(reversed(files)) == entries[::-1]
    assert FileList.of(files) is files


def test_iteration_crosses_chunk_boundaries(monkeypatch):
    monkeypatch.setattr(file_list, "_CHUNK", 3)
    entries = [FileEntry(f"{i}.png", i, i) for i in range(10)]
    assert list(FileList.of(entries)) == entries
    assert list(FileList.of(entries)[2:9]) == entries[2:9]


def test_empty_list():
    files = FileList.of([])
    assert len(files) == 0 and list(files) == [] and list(files[3:]) == []
    assert pickle.loads(pickle.dumps(files)) == files
    assert "0 files" in repr(files)


def test_from_columns_rejects_mismatched_columns():
    with pytest.raises(ValueError, match="one offset more"):
        FileList.from_columns(["a", "b"], [1], [1, 2])


@pytest.mark.parametrize("paths", [["a", "", "é/x", "b\udcff", "zz", "q"], ["only"], [],
                                   ["", ""], ["with\0nul", "b"]])
def test_paths_joined_and_decoded_at_once_are_each_path(monkeypatch, paths):
    """Paths are joined a run at a time (here three) and decoded in one call; a path holding
    the separator itself is decoded one by one."""
    monkeypatch.setattr(file_list, "_JOIN_CHUNK", 3)
    files = FileList.from_columns(paths, range(len(paths)), [0] * len(paths))
    for part in (files, files[1:], files[:-1]):
        listed = [f.path for f in part]
        assert part.paths() == listed
        assert part.joined_paths().tobytes() == b"\0".join(
            p.encode("utf-8", "surrogatepass") for p in listed)


def test_taking_files_in_order_or_not_gives_those_files():
    files = FileList.from_columns([f"{i}/é{i}.png" for i in range(9)], range(9), range(9))[2:]
    for rows in ([0, 2, 3, 6], [6, 0, 3], [4], [0, 1, 2, 3, 4, 5, 6]):
        assert list(files.take(rows)) == [files[r] for r in rows]


def test_a_list_has_exactly_its_own_paths_in_order(entries):
    """Compared as bytes and lengths: the same bytes split elsewhere, a path missing or
    added, another order or one character changed are other paths; every slice (a view
    starting mid-buffer) has exactly its own."""
    files = FileList.of(entries)
    assert files.has_paths(PATHS)
    for start in range(len(PATHS)):
        assert files[start:].has_paths(PATHS[start:])
        assert files[:start].has_paths(PATHS[:start])
    moved = ["a.p", "ngb/é.jpg", *PATHS[2:]]  # the same bytes, split elsewhere
    assert "".join(moved) == "".join(PATHS)
    for other in (moved, PATHS[:-1], [*PATHS, "x"], PATHS[::-1], ["a.pnh", *PATHS[1:]],
                  ["a.png", "b/e\u0301.jpg", *PATHS[2:]]):
        assert not files.has_paths(other)


def test_a_path_is_found_in_a_sorted_list_by_its_bytes():
    """UTF-8 bytes sort as the strings do (a lone surrogate, a 4-byte emoji too): every
    listed path is found at its own index, and a path not listed (before the first,
    between two, after the last, a prefix of one) is None."""
    paths = sorted(PATHS)
    files = FileList.from_columns(paths, range(len(paths)), [0] * len(paths))
    assert [files.find_sorted(p) for p in paths] == list(range(len(paths)))
    assert [files[1:].find_sorted(p) for p in paths[1:]] == list(range(len(paths) - 1))
    for absent in ("\0", "a.pn", "a.png0", "c", "zzz", "\U0010ffff", "e/\udcfe.png"):
        assert files.find_sorted(absent) is None, absent
