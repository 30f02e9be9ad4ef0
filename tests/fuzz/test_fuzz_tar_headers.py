"""Fuzz target: the fast tar header listing against Python's own `tarfile`.

Shards written by `tarfile` (ustar, GNU, pax; files, folders, links, long names) have
header fields overwritten — sizes in octal or base-256, random bytes, checksums
recomputed or left wrong — and are cut or gzip-compressed. The block reader either lists
exactly what `tarfile` lists (names, sizes, data offsets, kinds, link names, where the
archive ends), steps aside (None) for `tarfile`, or refuses with a `NormstatsError`;
the whole listing ends in a listing or a `NormstatsError`, never another exception; no
read asks for more than the file holds; and a compressed shard is listed or refused
holding under 64 MiB, however far it unpacks (a saved ``.tar.gz`` is kept packed: the
extended headers of zeros saved so unpack to 64 MiB).
"""

from __future__ import annotations

import gzip
import io
import tarfile
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given, reject
from hypothesis import strategies as st

from normstats.errors import NormstatsError
from normstats.sources.decoding.file_read import open_regular
from normstats.sources.tar import headers as tar_headers
from normstats.sources.tar.reader import scan_shard

FORMATS = (tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT)
#: Header fields worth hitting: name, mode, uid, size, mtime, checksum, type, link name,
#: magic, prefix (GNU: times), and the first bytes of a pax record.
FIELDS = ((0, 100), (100, 8), (108, 8), (124, 12), (136, 12), (148, 8), (156, 1),
          (157, 100), (257, 8), (345, 155), (0, 4))

names = st.sampled_from(["a.png", "d/b.jpg", "ü/c.png", "e" * 99 + ".png",
                         "f" * 90 + "/" + "g" * 60 + ".jpg", "h" * 150 + ".png", "i/"])
members = st.lists(st.tuples(names, st.sampled_from(["file", "dir", "sym", "lnk"]),
                             st.integers(0, 1100)), min_size=1, max_size=4)
numbers = st.one_of(st.integers(0, 2000), st.integers(-(1 << 40), 1 << 90))
edits = st.lists(st.tuples(
    st.integers(0, 40),                        # which 512-byte block
    st.sampled_from(FIELDS),
    st.one_of(st.binary(min_size=1, max_size=12),
              numbers.map(lambda n: ("base256", n)),
              numbers.map(lambda n: ("octal", n)))), max_size=5)


def _shard(fmt: int, entries: list) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=fmt) as tar:
        for name, kind, size in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = size
                tar.addfile(info, io.BytesIO(bytes([size % 251]) * size))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE,
                         "lnk": tarfile.LNKTYPE}[kind]
            info.linkname = "" if kind == "dir" else "a.png"
            tar.addfile(info)
    return buffer.getvalue()


def _edited(data: bytes, changes: list, checksums: bool) -> bytes:
    raw = bytearray(data)
    for block, (start, width), value in changes:
        at = block * 512 + start
        if at + width > len(raw):
            continue
        if isinstance(value, tuple):
            kind, number = value
            value = (bytes([0x80 if number >= 0 else 0xFF])
                     + (number % 256 ** (width - 1)).to_bytes(width - 1, "big")
                     if kind == "base256" else
                     (b"%0*o\0" % (width - 1, number)) if number >= 0 else b"-1\0")
        value = value[:width]
        raw[at:at + len(value)] = value
        if checksums:
            header = raw[block * 512:block * 512 + 512]
            total = sum(header[:148]) + 256 + sum(header[156:])
            raw[block * 512 + 148:block * 512 + 156] = b"%06o\0 " % (total % 8 ** 6)
    return bytes(raw)


def _tarfile_listing(path: Path) -> tuple[list, int]:
    with tarfile.open(path, "r:") as tar:
        found = [(i.name, i.size if i.isfile() else 0, i.offset_data, i.isfile(),
                  i.islnk(), i.issym(), i.linkname if i.islnk() or i.issym() else "")
                 for i in tar]
        return found, tar.offset


class _Watched:
    """A shard file that fails the test when asked for more bytes than it holds."""

    def __init__(self, path: str) -> None:
        self.handle = open_regular(path)
        self.size = Path(path).stat().st_size

    def read(self, count: int = -1) -> bytes:
        # a header block at the end, or a pax header's padding, may read short: no more
        assert count is not None and 0 <= count and \
            (count <= 512 or self.handle.tell() + count < self.size + 512), \
            f"read of {count} bytes at {self.handle.tell()} in a file of {self.size}"
        return self.handle.read(count)

    def __getattr__(self, name: str):
        return getattr(self.handle, name)

    def __enter__(self) -> _Watched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


def check_shard(data: bytes, folder: Path, compressed: bool = False,
                packed: bool = False) -> None:
    """The property of this target, for the shard ``data`` written into ``folder``
    (``packed``: ``data`` is the ``.tar.gz`` itself)."""
    compressed = compressed or packed
    path = folder / ("shard.tar.gz" if compressed else "shard.tar")
    path.write_bytes(gzip.compress(data, mtime=0) if compressed and not packed else data)
    watched = open_regular if compressed else _Watched  # gzip reads whole buffers
    with mock.patch.object(tar_headers, "open_regular", watched):
        if not compressed:
            try:
                fast = tar_headers.plain_headers(str(path))
            except NormstatsError:
                fast = None
            if fast is not None:
                expected, end = _tarfile_listing(path)
                assert [(h.name, h.size if h.isfile() else 0, h.offset_data, h.isfile(),
                         h.islnk(), h.issym(), h.linkname if h.islnk() or h.issym() else "")
                        for h in fast] == expected
                assert tar_headers.list_members(str(path), False)[1] == end
        if compressed:
            tracemalloc.start()
        try:
            scan_shard(str(path))
        except NormstatsError as error:
            assert "\n" not in str(error) and str(path) in str(error)
        finally:
            if compressed:
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                assert peak < 64 << 20, f"{peak:,} bytes held listing a shard of {len(data):,}"


@fuzz_settings(250)
@given(fmt=st.sampled_from(FORMATS), entries=members, changes=edits,
       checksums=st.booleans(), cut=st.one_of(st.none(), st.integers(0, 6000)),
       compressed=st.integers(0, 9).map(lambda n: n == 0))
def test_fast_listing_agrees_with_tarfile_or_refuses(tmp_path_factory, fmt, entries, changes,
                                                     checksums, cut, compressed):
    try:
        data = _shard(fmt, entries)
    except ValueError:  # a name this format cannot store
        reject()
    data = _edited(data, changes, checksums)
    check_shard(data if cut is None else data[:cut], tmp_path_factory.mktemp("tar"),
                compressed)


@pytest.mark.timeout(30)  # some of them made tarfile loop forever or seek for ages
@pytest.mark.parametrize("saved", regression_inputs("tar"), ids=lambda p: p.name)
def test_saved_tar_inputs(tmp_path: Path, saved: Path) -> None:
    check_shard(saved.read_bytes(), tmp_path, compressed=saved.stem.endswith("-gz"),
                packed=saved.name.endswith(".tar.gz"))
