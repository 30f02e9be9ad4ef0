"""Reading one image file to its end: every byte, whatever ``os.read`` hands back per call
and however the file changes between the ``fstat`` that sizes the first read and the
reads themselves; never more than the limit."""

from __future__ import annotations

import os

import numpy as np
import pytest

import normstats.sources.decoding.file_read as file_read
from normstats.errors import RefusedInputError
from normstats.sources.decoding.file_read import read_image_file, read_whole_file

REAL_READ = os.read
REAL_FSTAT = os.fstat


def data_of(size: int) -> bytes:
    return np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()


@pytest.fixture
def short_reads(monkeypatch):
    """``os.read`` that hands back at most ``most[0]`` bytes a call (a network or FUSE
    file system may; Linux itself stops every read at 2 GiB − 4 KiB), counting calls."""
    most, calls = [1], []

    def read(descriptor: int, count: int) -> bytes:
        calls.append(count)
        return REAL_READ(descriptor, min(count, most[0]))

    monkeypatch.setattr(file_read.os, "read", read)
    return most, calls


@pytest.mark.parametrize("at_most, size", [(1, 0), (1, 1), (1, 100), (7, 100), (7, 7_000),
                                           (4096, 70_000), (65535, 70_000), (65535, 1 << 16)])
@pytest.mark.parametrize("hint", [None, 0, "exact", 10**6])
def test_short_reads_still_read_every_byte(tmp_path, short_reads, at_most, size, hint):
    most, calls = short_reads
    most[0] = at_most
    data = data_of(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    size_hint = size if hint == "exact" else hint
    assert read_whole_file(str(path), size_hint) == data
    assert len(calls) >= -(-size // at_most)  # the loop went on after each short read
    assert read_whole_file(str(path), size_hint, limit=size) == data


def test_short_reads_never_pass_the_limit(tmp_path, short_reads):
    most, calls = short_reads
    most[0] = 3
    path = tmp_path / "f.bin"
    path.write_bytes(data_of(50))
    with pytest.raises(RefusedInputError, match="file of 50 bytes is over the limit of 49"):
        read_image_file(str(path), "f.bin", limit=49)
    assert calls == []  # refused from its size, before any read


@pytest.fixture
def change_after_stat(monkeypatch):
    """``os.fstat`` that, once it has sized the file, rewrites it to ``after[0]``: the file
    changes between the stat and the reads, as when a writer is still at work."""
    after: list[bytes] = []

    def fstat(descriptor: int) -> os.stat_result:
        info = REAL_FSTAT(descriptor)
        if after:
            with open(f"/proc/self/fd/{descriptor}", "r+b") as handle:
                handle.write(after[0])
                handle.truncate(len(after[0]))
        return info

    monkeypatch.setattr(file_read.os, "fstat", fstat)
    return after


@pytest.mark.parametrize("before, grown", [(0, 1), (10, 11), (10, 70_000), (65_536, 200_000)])
@pytest.mark.parametrize("hint", [None, "before"])
def test_a_file_that_grows_after_its_stat_is_read_to_its_new_end(tmp_path, change_after_stat,
                                                                  before, grown, hint):
    path = tmp_path / "f.bin"
    path.write_bytes(data_of(before))
    change_after_stat.append(data_of(grown))
    assert read_whole_file(str(path), before if hint else None) == data_of(grown)


@pytest.mark.parametrize("before, shrunk", [(1, 0), (100, 10), (70_000, 65_536)])
@pytest.mark.parametrize("hint", [None, "before"])
def test_a_file_that_shrinks_after_its_stat_is_read_to_its_new_end(tmp_path, change_after_stat,
                                                                    before, shrunk, hint):
    path = tmp_path / "f.bin"
    path.write_bytes(data_of(before))
    change_after_stat.append(data_of(shrunk))
    assert read_whole_file(str(path), before if hint else None) == data_of(shrunk)


@pytest.mark.parametrize("limit, before", [(10, 10), (100, 100), (65_536, 65_536), (100, 10),
                                           (200_000, 5)])
def test_growth_past_the_limit_is_refused_after_one_byte_more(tmp_path, change_after_stat,
                                                              monkeypatch, limit, before):
    path = tmp_path / "f.bin"
    path.write_bytes(data_of(before))
    change_after_stat.append(data_of(limit * 3))
    asked = []
    monkeypatch.setattr(file_read.os, "read",
                        lambda fd, count: asked.append(count) or REAL_READ(fd, count))
    with pytest.raises(RefusedInputError, match=f"file of {limit + 1:,} bytes is over the "
                                                f"limit of {limit:,} bytes"):
        read_image_file(str(path), "f.bin", limit=limit)
    assert sum(asked) == limit + 1  # never more than one byte past the limit is read


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_open_regular_reads_a_file_and_refuses_anything_else_before_a_read(tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"abc")
    with file_read.open_regular(str(path)) as handle:
        assert handle.read() == b"abc" and handle.mode == "rb"
        assert os.get_blocking(handle.fileno())  # opened without blocking, then set back
    os.mkfifo(tmp_path / "p.npy")
    before = open_descriptors()
    for name, kind in (("p.npy", "a FIFO (named pipe)"), (".", "a directory")):
        with pytest.raises(RefusedInputError) as raised:
            file_read.open_regular(str(tmp_path / name))
        assert str(raised.value) == (f"{tmp_path / name}: not a regular file ({kind}); only "
                                     "regular files are read")
    assert open_descriptors() == before  # every refused descriptor was closed
    with pytest.raises(FileNotFoundError):
        file_read.open_regular(str(tmp_path / "missing.npy"))


def test_a_non_regular_image_file_is_refused_by_name(tmp_path):
    os.mkfifo(tmp_path / "p.png")
    before = open_descriptors()
    with pytest.raises(RefusedInputError) as raised:
        read_image_file(str(tmp_path / "p.png"), "cats/p.png")
    assert str(raised.value) == \
        "cats/p.png: not a regular file (a FIFO (named pipe)); only regular files are read"
    with pytest.raises(RefusedInputError, match=r"^d\.png: not a regular file \(a directory\)"):
        read_image_file(str(tmp_path), "d.png")
    assert open_descriptors() == before


@pytest.mark.parametrize("error, reason", [
    (FileNotFoundError(2, "No such file or directory"),
     "file disappeared before it could be read"),
    (IsADirectoryError(21, "Is a directory"), "is a directory, not an image file"),
    (PermissionError(13, "Permission denied"), "permission denied"),
    (OSError(5, "Input/output error"), "cannot read file: Input/output error"),
    (OSError("no strerror"), "cannot read file: no strerror")])
def test_what_the_moment_did_is_transient_and_named(tmp_path, monkeypatch, error, reason):
    from normstats.errors import TransientInputError

    def fail(*args):
        raise error

    monkeypatch.setattr(file_read.os, "open", fail)
    with pytest.raises(TransientInputError) as raised:
        read_image_file(str(tmp_path / "x.png"), "x.png")
    assert str(raised.value) == f"x.png: {reason}"


def test_kinds_sizes_and_limits_are_named_in_words(tmp_path):
    import socket
    import stat

    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / "s.png"))
        assert file_read.not_regular_reason(os.stat(tmp_path / "s.png").st_mode) == \
            "not a regular file (a socket); only regular files are read"
    for mode, kind in ((stat.S_IFCHR, "a character device"), (stat.S_IFBLK, "a block device"),
                       (stat.S_IFDIR, "a directory"), (stat.S_IFLNK, "not a plain file")):
        assert file_read.not_regular_reason(mode | 0o644) == \
            f"not a regular file ({kind}); only regular files are read"
    assert file_read.not_regular_reason(stat.S_IFREG) is None
    os.mkfifo(tmp_path / "p.npy")
    assert file_read.not_a_dataset_path(str(tmp_path / "p.npy")) == \
        "not a regular file (a FIFO (named pipe)); only regular files are read"
    assert file_read.not_a_dataset_path("/dev/null") == \
        "not a regular file (a character device); only regular files are read"
    assert file_read.not_a_dataset_path(str(tmp_path)) is None
    assert file_read.not_a_dataset_path(str(tmp_path / "missing")) is None
    (tmp_path / "f.npy").write_bytes(b"")
    assert file_read.not_a_dataset_path(str(tmp_path / "f.npy")) is None
    assert file_read.too_large_reason(12_345_678, 1_000) == (
        "file of 12,345,678 bytes is over the limit of 1,000 bytes; raise --max-file-bytes "
        "if it is trusted")
    assert file_read.default_file_limit(0) == 64 << 20
    assert file_read.default_file_limit(3) == 24 + (64 << 20)
    assert file_read.default_file_limit(2.9e6) == 8 * 2_900_000 + (64 << 20)


def test_the_compiled_batch_read_is_built_where_the_tests_run():
    """The batch read below is of the compiled loop (a build without it answers None for
    every file, which the folder then reads one by one)."""
    assert file_read._read_files is not None


@pytest.mark.parametrize("sizes", [[0], [1, 100, 4096], [70_000, 1 << 20, 3]])
def test_the_batch_read_gives_every_plain_file_whole(tmp_path, sizes):
    paths = []
    for number, size in enumerate(sizes):
        paths.append(str(tmp_path / f"{number}.png"))
        (tmp_path / f"{number}.png").write_bytes(data_of(size))
    os.symlink(paths[-1], tmp_path / "link.png")  # links are followed, as open() does
    paths.append(str(tmp_path / "link.png"))
    before = open_descriptors()
    found = file_read.read_plain_files(paths, limit=max(sizes))
    assert found == [read_whole_file(path) for path in paths]
    assert all(type(data) is bytes for data in found)
    assert open_descriptors() == before


def test_the_batch_read_leaves_every_unusual_file_to_read_whole_file(tmp_path):
    """Over the limit, missing, a folder, a FIFO (never waited on), a device that never
    ends, a file whose size says 0 but which reads more (/proc), a path with a NUL: None,
    each; read_image_file then gives each its verdict. The plain files between them are
    read, and no descriptor is left open."""
    (tmp_path / "big.png").write_bytes(data_of(11))
    (tmp_path / "ok.png").write_bytes(data_of(10))
    os.mkfifo(tmp_path / "pipe.png")
    unusual = [str(tmp_path / "big.png"), str(tmp_path / "missing.png"), str(tmp_path),
               str(tmp_path / "pipe.png"), "/dev/zero", "/proc/self/status", "a\0b.png"]
    paths = [str(tmp_path / "ok.png"), *unusual, str(tmp_path / "ok.png")]
    before = open_descriptors()
    found = file_read.read_plain_files(paths, limit=10)
    assert found == [data_of(10), *[None] * len(unusual), data_of(10)]
    assert open_descriptors() == before
    assert len(read_whole_file("/proc/self/status")) > 0  # what the fallback then reads
    with pytest.raises(RefusedInputError, match="file of 11 bytes is over the limit of 10"):
        read_image_file(str(tmp_path / "big.png"), "big.png", limit=10)


def test_the_batch_read_takes_limits_past_any_file(tmp_path):
    (tmp_path / "a.png").write_bytes(b"abc")
    assert file_read.read_plain_files((str(tmp_path / "a.png"),), limit=10**30) == [b"abc"]
