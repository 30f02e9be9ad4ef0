"""The walk's C stat loop (`normstats.sources._stat_batch.stat_names`): each name's numbers,
on one thread or several, against ``os.stat``."""

from __future__ import annotations

import os
from array import array

import pytest

from normstats.sources._stat_batch import stat_names


def _expected(folder: int, names: list[str]) -> list[tuple[int, ...]]:
    """What the C loop writes for each name: ``os.stat``'s numbers, or (-errno, 0, ...)."""
    rows = []
    for name in names:
        try:
            info = os.stat(name, dir_fd=folder)
        except OSError as error:
            rows.append((-error.errno, 0, 0, 0, 0, 0))
        else:
            rows.append((info.st_mode, info.st_dev, info.st_ino, info.st_size,
                         info.st_mtime_ns, info.st_ctime_ns))
    return rows


def _rows(stats: array) -> list[tuple[int, ...]]:
    """(mode, device, inode, size, mtime, ctime) of each file; device and inode as
    unsigned numbers, as os.stat gives them."""
    values = stats.tolist()
    return [(values[k], values[k + 1] % 2**64, values[k + 2] % 2**64, *values[k + 3:k + 6])
            for k in range(0, len(values), 6)]


@pytest.fixture
def folder(tmp_path):
    """A folder of 700 files of distinct sizes and times, a subfolder, a link to a file and a
    dangling one; its descriptor."""
    for i in range(700):
        path = tmp_path / f"{i:04d}.png"
        path.write_bytes(b"x" * (i % 97))
        os.utime(path, ns=(i * 1_000_003, i * 7_000_001))
    (tmp_path / "sub").mkdir()
    os.symlink("0001.png", tmp_path / "link.png")
    os.symlink("nowhere.png", tmp_path / "dangling.png")
    descriptor = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    yield descriptor
    os.close(descriptor)


@pytest.mark.parametrize("threads", [1, 2, 3, 4, 8])
def test_every_thread_count_stats_every_name_in_its_row(folder, threads):
    """Missing names and a dangling link at the start, the end and both sides of every
    part's boundary (700 names on up to 8 threads), a folder and a followed link among
    them: each row is its own name's, the failures counted."""
    names = sorted(os.listdir(folder))
    missing = {0, 1, 87, 88, 174, 175, 349, 350, 524, 525, len(names) + 2}
    for position in sorted(missing):
        names.insert(position, f"missing-{position}.png")
    stats = array("q", bytes(48 * len(names)))
    failed = stat_names(folder, names, stats, threads)
    expected = _expected(folder, names)
    assert _rows(stats) == expected
    assert failed == sum(row[0] < 0 for row in expected) == len(missing) + 1  # + dangling
    assert expected[names.index("link.png")] == expected[names.index("0001.png")]


def test_a_batch_smaller_than_a_part_runs_on_one_thread(folder):
    """Under 64 names a thread, fewer threads start (none below 128 names), same rows."""
    names = sorted(os.listdir(folder))[:130]
    for count in (0, 1, 63, 127, 128, 130):
        stats = array("q", bytes(48 * count))
        assert stat_names(folder, names[:count], stats, 8) == 0
        assert _rows(stats) == _expected(folder, names[:count])


def test_refused_arguments_leave_the_output_alone(folder):
    names = sorted(os.listdir(folder))[:200]
    stats = array("q", [7] * (6 * 200))
    for threads in (0, -1, 9):
        with pytest.raises(ValueError, match="threads must be 1 to 8"):
            stat_names(folder, names, stats, threads)
    with pytest.raises(ValueError, match="contiguous int64"):
        stat_names(folder, names, array("q", bytes(48 * 199)), 2)
    with pytest.raises(ValueError, match="contiguous int64"):
        stat_names(folder, names, array("i", bytes(48 * 200)), 2)
    with pytest.raises(TypeError):  # a name that is not a path, after 150 encoded
        stat_names(folder, [*names[:150], 3, *names[150:]], array("q", bytes(48 * 201)), 2)
    assert set(stats) == {7}
    assert stat_names(folder, names, stats) == 0  # one thread unless asked
    assert _rows(stats) == _expected(folder, names)
