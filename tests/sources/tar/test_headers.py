"""The block-by-block tar header listing: exactly `tarfile`'s listing, base-256 numbers
read, and no size trusted before it is checked against the shard's; through `tarfile`,
extended headers, sparse maps and global pax records bounded before it reads them
(`normstats.sources.tar.guards`), however far a .tar.gz unpacks."""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from watchdogs import finishes

import normstats
from normstats.errors import NormstatsError
from normstats.sources.tar.guards import MAX_EXTENDED_HEADER_BYTES, MAX_GLOBAL_PAX_RECORDS
from normstats.sources.tar.headers import list_members, plain_headers
from normstats.sources.tar.reader import scan_shard


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT,
                                        tarfile.GNU_FORMAT])
def test_the_fast_header_reader_lists_exactly_what_tarfile_lists(tmp_path, tar_format):
    """Names long enough for ustar's prefix field and pax/GNU long names, non-ASCII names,
    folders, links, a name stored twice and empty members: the block reader gives
    tarfile's listing, or steps aside (None) for what it does not read itself."""
    path = tmp_path / "shard.tar"
    long_folder = "d" * 120 if tar_format != tarfile.USTAR_FORMAT else "d" * 90
    with tarfile.open(path, "w", format=tar_format) as tar:
        for name, data in [("a.jpg", b"x" * 700), (f"{long_folder}/b.png", b"y" * 512),
                           ("ünïcode/c.png", b"z"), ("empty.cls", b""), ("a.jpg", b"w" * 3),
                           ("m" * 140 + ".png" if tar_format != tarfile.USTAR_FORMAT
                            else "m.png", b"v" * 9)]:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000.5
            tar.addfile(info, io.BytesIO(data))
        folder = tarfile.TarInfo("folder")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)
        link = tarfile.TarInfo("link.png")
        link.type, link.linkname = tarfile.SYMTYPE, "a.jpg"
        tar.addfile(link)
    expected = [(i.name, i.size if i.isfile() else 0, i.offset_data, i.isfile())
                for i in tarfile.open(path)]
    fast = plain_headers(str(path))
    if fast is not None:
        assert [(h.name, h.size if h.isfile() else 0, h.offset_data, h.isfile())
                for h in fast] == expected
    assert tar_format == tarfile.GNU_FORMAT or fast is not None  # ustar and pax: fast
    listed = list_members(str(path), compressed=False)[0]
    assert [(i.name, i.offset_data) for i in listed] == [(e[0], e[2]) for e in expected]


def _with_size_field(path: Path, field: bytes) -> Path:
    """``path``'s first header with its 12-byte size field replaced (checksum redone)."""
    raw = bytearray(path.read_bytes())
    raw[124:136] = field
    raw[148:156] = b"%06o\0 " % (sum(raw[:148]) + 256 + sum(raw[156:512]))
    path.write_bytes(bytes(raw))
    return path


def _one_png_shard(path: Path, value: int = 70) -> tuple[Path, int]:
    data = _png(value)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("a.png")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path, len(data)


def test_a_base_256_size_equal_to_the_true_size_is_read_exactly_by_the_fast_listing(tmp_path):
    path, size = _one_png_shard(tmp_path / "s.tar")
    _with_size_field(path, b"\x80" + size.to_bytes(11, "big"))
    assert [(h.name, h.size, h.offset_data) for h in plain_headers(str(path))] == \
        [("a.png", size, 512)]
    assert [(i.name, i.size) for i in tarfile.open(path)] == [("a.png", size)]
    stats = normstats.compute(path)
    assert stats.images == 1 and stats.mean == (70 / 255,) * 3


@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", ["s.tar", "s.tar.gz"])
def test_a_huge_base_256_size_is_named_without_allocating_or_hanging(tmp_path, name):
    """2**80 bytes: `tarfile` used to fail with "cannot fit 'int' into an offset-sized
    integer" (a plain tar) and to seek through the gzip stream forever (a .tar.gz)."""
    import gzip
    import tracemalloc

    path, _ = _one_png_shard(tmp_path / "s.tar")
    _with_size_field(path, b"\x80" + (1 << 80).to_bytes(11, "big"))
    if name.endswith(".gz"):
        path = tmp_path / name
        path.write_bytes(gzip.compress((tmp_path / "s.tar").read_bytes()))
    tracemalloc.start()
    try:
        error = finishes(lambda: scan_shard(str(path)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(error, NormstatsError) and "\n" not in str(error)
    assert str(error).startswith(f"{path}: truncated inside member a.png: its header gives "
                                 f"{1 << 80:,} bytes")
    assert peak < 1 << 20


def test_a_negative_base_256_size_is_refused(tmp_path):
    path, _ = _one_png_shard(tmp_path / "s.tar")
    _with_size_field(path, b"\xff" * 11 + b"\x00")  # -256
    with pytest.raises(NormstatsError, match="member a.png has a negative size .-256. in"):
        scan_shard(str(path))


def _gz(path: Path, head: bytes, filler: bytes, copies: int, tail: bytes) -> Path:
    """A gzip file of ``head + filler * copies + tail``, written in milliseconds however far
    it unpacks: after a full flush, every copy of ``filler`` deflates to the same bytes."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    packed = deflate.compress(filler) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(head)
    for _ in range(copies):
        crc = zlib.crc32(filler, crc)
    size = len(head) + len(filler) * copies + len(tail)
    path.write_bytes(b"".join([
        b"\x1f\x8b\x08\0\0\0\0\0\x02\xff", deflate.compress(head),
        deflate.flush(zlib.Z_FULL_FLUSH), packed * copies, deflate.compress(tail),
        deflate.flush(), struct.pack("<II", crc, size & 0xFFFFFFFF)]))
    return path


def _png_member() -> bytes:
    """One PNG member and the end of the archive, as a plain tar."""
    buffer, data = io.BytesIO(), _png(70)
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("a.png")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _extended_header_of_zeros(path: Path, kind: bytes, mib: int) -> Path:
    """A ``.tar.gz`` whose first header is an extended header of type ``kind`` claiming
    ``mib`` MiB (of zeros, which follow: ~1 KB of the file a MiB), then one PNG member
    (with ``mib=64``, the two ``...-claiming-64-mib-of-zeros.tar.gz`` regression inputs)."""
    info = tarfile.TarInfo("././@LongLink" if kind in b"LK" else "././@PaxHeader")
    info.type, info.size = kind, mib << 20
    head = info.tobuf(tarfile.GNU_FORMAT if kind in b"LK" else tarfile.USTAR_FORMAT)
    return _gz(path, head, bytes(1 << 20), mib, _png_member())


def _peak_of(run) -> tuple[object, int]:
    """What ``run()`` returns or raises (a hang fails the test) and the peak of memory
    Python allocated meanwhile (the budget leaves the unguarded reads time to show it)."""
    tracemalloc.start()
    try:
        outcome = finishes(run, seconds=60)
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("kind", "called"), [(b"x", "a pax header"),
                                              (b"L", "a GNU long name header")])
def test_an_extended_header_claiming_a_gigabyte_is_refused_before_it_is_read(tmp_path, kind,
                                                                             called):
    """A 1 MB .tar.gz whose first header claims 1 GiB of zeros: `tarfile` used to read it
    whole (over 2 GiB held, 8-30 s) before the listing saw a member."""
    path = _extended_header_of_zeros(tmp_path / "s.tar.gz", kind, 1024)
    assert path.stat().st_size < 2 << 20
    error, peak = _peak_of(lambda: scan_shard(str(path)))
    assert peak < 64 << 20, f"{peak:,} bytes held"
    assert isinstance(error, NormstatsError) and "\n" not in str(error)
    assert str(error) == (
        f"{path}: {called} of 1,073,741,824 bytes (the header "
        f"'././@{'LongLink' if kind == b'L' else 'PaxHeader'}' at byte 0 of the tar), where "
        "normstats reads at most 1 MiB (1,048,576 bytes): a damaged or hostile shard")


def _extended_shard(path: Path, kind: bytes, size: int) -> Path:
    """A shard whose one member's name makes `tarfile` write an extended header of type
    ``kind`` (a pax path record or a GNU long name) of exactly ``size`` bytes."""
    digits = len(str(size))  # "<size> path=<name>\n", or the name and a NUL
    name = "n" * (size - digits - 7 if kind == b"x" else size - 1)
    fmt = tarfile.PAX_FORMAT if kind == b"x" else tarfile.GNU_FORMAT
    data = _png(70)
    with tarfile.open(path, "w:gz" if path.name.endswith(".gz") else "w", format=fmt) as tar:
        info = tarfile.TarInfo(name[:-4] + ".png")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    first = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else \
        path.read_bytes()
    assert tarfile.TarInfo.frombuf(first[:512], "utf-8", "strict").size == size
    return path


@pytest.mark.parametrize("name", ["s.tar", "s.tar.gz"])
@pytest.mark.parametrize("kind", [b"x", b"L"])
def test_extended_headers_up_to_the_limit_are_read_and_one_byte_more_is_refused(
        tmp_path, kind, name):
    """The same limit for the block reader (a plain tar's pax header) and `tarfile` (GNU
    long names, any .tar.gz): a 1 MiB name is listed as `tarfile` lists it."""
    path = _extended_shard(tmp_path / name, kind, MAX_EXTENDED_HEADER_BYTES)
    listed = list_members(str(path), compressed=name.endswith(".gz"))[0]
    assert [(i.name, i.size) for i in listed] == \
        [(i.name, i.size) for i in tarfile.open(path)]
    assert len(listed[0].name) > 1_048_000
    path = _extended_shard(tmp_path / name, kind, MAX_EXTENDED_HEADER_BYTES + 1)
    with pytest.raises(NormstatsError, match=r"header of 1,048,577 bytes \(the header "
                                             r"'.*' at byte 0 of the tar\), where normstats "
                                             r"reads at most 1 MiB"):
        list_members(str(path), compressed=name.endswith(".gz"))


def _sparse_bomb(path: Path, form: str) -> Path:
    """A .tar.gz with one sparse member whose map runs on for 64 MiB: old GNU extension
    blocks, each saying another follows, or a pax 1.0 map of 32 Mi numbers."""
    info = tarfile.TarInfo("a.png")
    if form == "gnu":
        info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
        head = bytearray(info.tobuf(tarfile.GNU_FORMAT))
        head[482] = 1  # an extension block follows
        head[148:156] = b"%06o\0 " % (sum(head[:148]) + 256 + sum(head[156:]))
        block = b"%011o\0%011o\0" % (1, 1) * 21
        filler = (block + b"\x01" + bytes(7)) * 2048  # each says another follows
        return _gz(path, bytes(head), filler, 64, bytes(1024))
    info.size = (64 << 20) + 10
    info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                        "GNU.sparse.name": "a.png", "GNU.sparse.realsize": "100"}
    head = info.tobuf(tarfile.PAX_FORMAT) + b"999999999\n"  # numbers in the map
    return _gz(path, head, b"0\n" * (1 << 19), 64, bytes(1024))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("form", ["gnu", "pax-1.0"])
def test_a_sparse_map_running_on_is_refused_before_it_is_read(tmp_path, form):
    """`tarfile` reads a sparse member's map whole before the listing sees the member (for
    these 64 MiB of map, 200-270 MiB held and 24-115 s of parsing, 1,000 times that from a
    2 MB shard); normstats reads no sparse member, so it refuses one at its header."""
    path = _sparse_bomb(tmp_path / "s.tar.gz", form)
    assert path.stat().st_size < 1 << 20
    error, peak = _peak_of(lambda: scan_shard(str(path)))
    assert peak < 64 << 20, f"{peak:,} bytes held"
    assert str(error) == (f"{path}: member a.png is a sparse file, which normstats does not "
                          "read from a shard")


def _global_then_members(path: Path, records: int, members: int) -> Path:
    """A plain tar: a pax global header of ``records`` records, then ``members`` empty
    members, each with its own pax header (a float mtime)."""
    bodies = [b" k%d=v\n" % number for number in range(records)]
    # a record's length counts its own digits (one or two here)
    data = b"".join(b"%d%s" % (len(body) + len(str(len(body) + 2)), body) for body in bodies)
    info = tarfile.TarInfo("pax_global_header")
    info.type, info.size = tarfile.XGLTYPE, len(data)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for number in range(members):
            member = tarfile.TarInfo(f"{number:06d}.cls")
            member.mtime = 1_700_000_000.5
            tar.addfile(member)
    path.write_bytes(info.tobuf(tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)
                     + buffer.getvalue())
    return path


@pytest.mark.timeout(120)
def test_pax_global_headers_are_bounded_and_no_member_keeps_a_copy_of_pax_records(tmp_path):
    """`tarfile` copies the global records into every member: a 1.5 MB tar of 88,000
    records and 1,000 members held 3.7 GB. The records of a 1 MB one are refused at the
    next header; a few records are read, and the members listed keep no copy."""
    path = _global_then_members(tmp_path / "big.tar", 88_000, 200)
    assert path.stat().st_size < 2 << 20
    error, peak = _peak_of(lambda: scan_shard(str(path)))
    assert peak < 64 << 20, f"{peak:,} bytes held"
    assert str(error) == (f"{path}: pax global headers of 88,000 records before the header "
                          "at byte 1,045,504 of the tar, where normstats reads at most 64 "
                          "(each member gets a copy): a damaged or hostile shard")
    for name in ("s.tar", "s.tar.gz"):
        path = _global_then_members(tmp_path / "s.tar", MAX_GLOBAL_PAX_RECORDS, 3)
        if name.endswith(".gz"):
            path = tmp_path / name
            path.write_bytes(gzip.compress((tmp_path / "s.tar").read_bytes()))
        listed = list_members(str(path), compressed=name.endswith(".gz"))[0]
        assert [i.name for i in listed] == [i.name for i in tarfile.open(path)] == \
            ["000000.cls", "000001.cls", "000002.cls"]
        assert [i.pax_headers for i in listed] == [{}, {}, {}]
    path = _global_then_members(tmp_path / "s.tar", MAX_GLOBAL_PAX_RECORDS + 1, 3)
    with pytest.raises(NormstatsError, match="pax global headers of 65 records before"):
        list_members(str(path), compressed=False)
