"""The block-by-block tar header listing: exactly `tarfile`'s listing, base-256 numbers
read, and no size trusted before it is checked against the shard's."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import normstats
from normstats.errors import NormstatsError
from normstats.sources.tar import scan_shard
from normstats.sources.tar_headers import list_members, plain_headers


def _png(value: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def _finishes(run, seconds: float = 15):
    """What ``run()`` returns or raises, from a thread: a hang fails the test."""
    import threading

    outcome: list = []

    def target() -> None:
        try:
            outcome.append(run())
        except Exception as error:  # noqa: BLE001 - the test looks at it
            outcome.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s: a hang")
    return outcome[0]


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
        error = _finishes(lambda: scan_shard(str(path)))
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
