""".npz archives: members chosen by name, headers checked before allocating, never pickle."""

from __future__ import annotations

import importlib
import io
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from watchdogs import counting_inflation

import normstats
from normstats.errors import NormstatsError
from normstats.sources.npz import open_npz

fw = importlib.import_module("format_writers")

RGB = fw.images(4, 6, 8, 8, 3)


def test_member_by_name_and_by_path_suffix(tmp_path: Path) -> None:
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=RGB, x_test=RGB[:2])
    assert len(open_npz(str(path))) == len(RGB)  # the usual training name wins
    assert len(open_npz(str(path), "x_test")) == 2
    np.savez(tmp_path / "two.npz", a=RGB, b=RGB)
    with pytest.raises(NormstatsError, match="holds 2 arrays .a, b.; name one"):
        open_npz(str(tmp_path / "two.npz"))
    assert normstats.compute(f"{path}:x_test").images == 2


def test_header_claiming_gigabytes_is_refused_before_allocating(tmp_path: Path) -> None:
    path = fw.write_npz_claiming(tmp_path / "bomb.npz", (100_000, 1000, 1000))
    with pytest.raises(NormstatsError) as caught:
        open_npz(str(path))
    message = str(caught.value)
    assert str(path) in message and "100,000,000,000 bytes" in message
    assert "holds 16" in message


def test_object_arrays_are_refused_not_unpickled(tmp_path: Path) -> None:
    path = tmp_path / "objects.npz"
    np.savez(path, images=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(NormstatsError, match="Python objects .* refused"):
        open_npz(str(path))


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "broken.npz"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(NormstatsError, match="not a readable .npz"):
        open_npz(str(path))


def test_stored_members_are_memory_mapped(tmp_path: Path) -> None:
    source = open_npz(str(fw.write_npz(tmp_path / "d.npz", RGB)))
    assert type(source.tasks()[0].array).__name__ == "MappedRecords"


def npy_header(shape: tuple[int, ...], descr: str | list = "|u1") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": descr, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()


def deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def one_member_zip(name: str, stream: bytes, file_size: int, crc: int,
                   compress_size: int | None = None, method: int = 8) -> bytes:
    """A zip of one member whose directory says what it is told (sizes, CRC)."""
    size = len(stream) if compress_size is None else compress_size
    fields = struct.pack("<HHHHHIII", 20, 0, method, 0, 0, crc, size, file_size)
    local = b"PK\x03\x04" + fields + struct.pack("<HH", len(name), 0) + name.encode()
    central = (b"PK\x01\x02" + struct.pack("<H", 20) + fields
               + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0, 0) + name.encode())
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 1, 1, len(central),
                                      len(local) + len(stream), 0)
    return local + stream + central + end


@pytest.fixture
def inflated() -> Iterator[list[int]]:
    """The bytes every zlib decompressor inflates while the test runs (what memory holds)."""
    with counting_inflation() as counts:
        yield counts


def test_a_member_holding_more_than_it_declares_stops_one_byte_past(tmp_path, inflated):
    """Header and directory say 96 bytes; the deflate stream goes on with 64 MiB of zeros."""
    declared = npy_header((2, 4, 4, 3)) + bytes(range(96))
    path = tmp_path / "lie.npz"
    path.write_bytes(one_member_zip("images.npy", deflated(declared + bytes(64 << 20)),
                                    len(declared), zlib.crc32(declared)))
    assert path.stat().st_size < 100_000
    with pytest.raises(NormstatsError) as caught:
        open_npz(str(path))
    assert str(caught.value) == (f"{path}: member images.npy holds more than the "
                                 f"{len(declared)} bytes its header and size declare (or is cut)")
    assert sum(inflated) <= len(declared) + 1


def test_a_lying_compressed_size_is_refused_before_inflating(tmp_path, inflated):
    declared = npy_header((1024, 1024, 1024))
    path = tmp_path / "lie.npz"
    path.write_bytes(one_member_zip("images.npy", deflated(declared + bytes(1 << 20)),
                                    len(declared) + (1 << 30), 0, compress_size=1 << 31))
    with pytest.raises(NormstatsError, match="claims 2,147,483,648 compressed bytes but the "
                                             "file holds .* a lying zip directory"):
        open_npz(str(path))
    assert sum(inflated) == 0


def test_a_small_npz_inflating_past_the_ratio_is_refused_before_allocating(tmp_path, inflated):
    """64 MiB of zeros deflate to 64 KB (~1000:1): over 100:1, refused from the header."""
    zeros = np.zeros((64, 1024, 1024), np.uint8)
    np.savez_compressed(tmp_path / "bomb.npz", images=zeros)
    assert (tmp_path / "bomb.npz").stat().st_size < 100_000
    with pytest.raises(NormstatsError) as caught:
        normstats.compute(str(tmp_path / "bomb.npz"))
    assert "bomb.npz: member images.npy would inflate " in str(caught.value)
    assert "into 67,108,864 in memory (over 100:1); save it with np.savez" in str(caught.value)
    assert sum(inflated) < 200  # the header only
    np.savez(tmp_path / "stored.npz", images=zeros)  # the advice works: memory-mapped
    assert len(open_npz(str(tmp_path / "stored.npz"))) == 64


@pytest.mark.parametrize(("header", "data"), [
    (npy_header((-1, -96)), bytes(96)),  # the claim's product matches: -1 * -96 = 96
    (npy_header((2, 3), "<M8[s]"), bytes(48)),
    (npy_header((2,), [("a", "|u1"), ("b", "<u2")]), bytes(6)),
], ids=["negative shape", "datetime", "structured"])
@pytest.mark.parametrize("compressed", [False, True])
def test_members_that_are_not_plain_numbers_are_refused(tmp_path, header, data, compressed):
    path = tmp_path / "odd.npz"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED) \
            as archive:
        archive.writestr("images.npy", header + data)
    with pytest.raises(NormstatsError, match="member images.npy is not an array of plain "
                                             "numbers"):
        open_npz(str(path))


def test_a_damaged_deflated_member_fails_its_crc(tmp_path):
    declared = npy_header((2, 4, 4, 3)) + bytes(range(96))
    path = tmp_path / "crc.npz"
    path.write_bytes(one_member_zip("images.npy", deflated(declared), len(declared),
                                    zlib.crc32(declared) ^ 1))
    with pytest.raises(NormstatsError, match="member images.npy fails its CRC-32 check"):
        open_npz(str(path))


def test_a_fifo_named_npz_is_refused_unread(tmp_path):
    os.mkfifo(tmp_path / "pipe.npz")
    with pytest.raises(NormstatsError, match="not a regular file .a FIFO"):
        open_npz(str(tmp_path / "pipe.npz"))
