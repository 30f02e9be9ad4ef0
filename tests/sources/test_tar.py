"""WebDataset tar shards: streamed, never extracted; truncation detected."""

from __future__ import annotations

import importlib
import tarfile
from pathlib import Path

import pytest

import normstats
from normstats.errors import NormstatsError
from normstats.sources.detect import open_format
from normstats.sources.tar import TarSource, scan_shard

fw = importlib.import_module("format_writers")

RGB = fw.images(6, 9, 6, 5, 3)


def _cut_after_member(path: Path, samples: int) -> None:
    """Cut a plain shard right after sample ``samples`` (both its members)."""
    shard = scan_shard(str(path))
    keep = shard.members[samples - 1]
    # the .cls member follows the image: header (512) + one data block (512)
    end = keep.offset + -(-keep.size // 512) * 512 + 1024
    path.write_bytes(path.read_bytes()[:end])


def test_labels_are_ignored_and_the_index_is_used(tmp_path: Path) -> None:
    fw.write_tar(tmp_path / "shard-000.tar", RGB[:5])
    fw.write_tar(tmp_path / "shard-001.tar.gz", RGB[5:], compressed=True)
    index = fw.write_index(tmp_path / "index.json", {"shard-000.tar": 5,
                                                     "shard-001.tar.gz": 4})
    source = open_format(str(index), "tar")
    assert len(source) == 9 and source.ignored == 9
    stats = normstats.compute(str(index))
    assert stats.mean == normstats.compute(RGB).mean and stats.images == 9


def test_cut_at_a_member_boundary_with_a_known_count(tmp_path: Path) -> None:
    path = fw.write_tar(tmp_path / "shard-000.tar", RGB)
    _cut_after_member(path, 6)
    fw.write_index(tmp_path / "index.json", {"shard-000.tar": 9})
    with pytest.raises(NormstatsError) as caught:
        open_format(str(tmp_path / "index.json"), "tar")
    message = str(caught.value)
    assert str(path) in message and "6 samples but its index says 9" in message


def test_cut_at_a_member_boundary_without_a_count_misses_the_end_blocks(tmp_path: Path) -> None:
    path = fw.write_tar(tmp_path / "shard-000.tar", RGB)
    _cut_after_member(path, 6)
    with pytest.raises(NormstatsError, match="end-of-archive"):
        TarSource([str(path)])


def test_gz_shard_cut_at_a_member_boundary_is_caught_by_the_count(tmp_path: Path) -> None:
    path = fw.write_tar(tmp_path / "shard-000.tar.gz", RGB[:4], compressed=True)
    with pytest.raises(NormstatsError, match="4 samples but its index says 9"):
        TarSource([str(path)], counts={str(path): 9})


def test_truncated_inside_a_member_and_truncated_gzip(tmp_path: Path) -> None:
    plain = fw.write_tar(tmp_path / "a.tar", RGB)
    plain.write_bytes(plain.read_bytes()[:2000])
    with pytest.raises(NormstatsError, match="a.tar: truncated"):
        TarSource([str(plain)])
    packed = fw.write_tar(tmp_path / "b.tar.gz", RGB, compressed=True)
    packed.write_bytes(packed.read_bytes()[:-30])
    with pytest.raises(NormstatsError, match="b.tar.gz: truncated"):
        TarSource([str(packed)])


def test_corrupt_member_is_skipped_and_named(tmp_path: Path) -> None:
    import io
    import tarfile

    path = tmp_path / "shard.tar"
    with tarfile.open(path, "w") as tar:
        for name, data in (("a.png", fw.png_bytes(RGB[0])), ("b.png", b"\x89PNG broken")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    stats = normstats.compute(str(path))
    assert stats.images == 1 and stats.skipped[0].path == f"{path}:b.png"


def test_index_entries_stay_inside_its_folder(tmp_path: Path) -> None:
    fw.write_index(tmp_path / "index.json", {"../elsewhere.tar": 3})
    with pytest.raises(NormstatsError, match="outside the index's folder"):
        open_format(str(tmp_path / "index.json"), "tar")


def _shard(path: Path, entries: list, gz: bool = False) -> Path:
    """A tar (or .tar.gz) of (name, bytes) files, ("dir", name) folders, ("link", name)."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for entry in entries:
            if entry[0] == "dir":
                info = tarfile.TarInfo(entry[1])
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry[0] == "link":
                info = tarfile.TarInfo(entry[1])
                info.type, info.linkname = tarfile.SYMTYPE, "a.png"
                tar.addfile(info)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return path


def _png(value: int) -> bytes:
    import io

    import numpy as np
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_name_stored_twice_counts_its_last_copy_in_tar_and_tar_gz(tmp_path: Path) -> None:
    """tar's rule: extracting gives the last copy, so both containers count that one."""
    entries = [("a.png", _png(10)), ("b.png", _png(20)), ("a.png", _png(250))]
    plain = normstats.compute(_shard(tmp_path / "s.tar", entries))
    packed = normstats.compute(_shard(tmp_path / "s.tar.gz", entries, gz=True))
    expected = (20 + 250) / 2 / 255
    assert plain.images == packed.images == 2
    assert plain.mean == packed.mean == (expected,) * 3


def test_a_valid_tar_ending_with_a_folder_or_a_link_is_not_called_cut(tmp_path: Path) -> None:
    entries = [("a.png", _png(10)), ("b.png", _png(30)), ("dir", "extra"), ("link", "c.png")]
    stats = normstats.compute(_shard(tmp_path / "s.tar", entries))
    assert stats.images == 2 and stats.mean == (20 / 255,) * 3


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT,
                                        tarfile.GNU_FORMAT])
def test_the_fast_header_reader_lists_exactly_what_tarfile_lists(tmp_path, tar_format):
    """Names long enough for ustar's prefix field and pax/GNU long names, non-ASCII names,
    folders, links, a name stored twice and empty members: the block reader gives
    tarfile's listing, or steps aside (None) for what it does not read itself."""
    import io

    from normstats.sources.tar import _list_members
    from normstats.sources.tar_headers import plain_headers

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
    listed = _list_members(str(path), compressed=False)
    assert [(i.name, i.offset_data) for i in listed] == [(e[0], e[2]) for e in expected]
