"""WebDataset tar shards: streamed, never extracted; truncation detected."""

from __future__ import annotations

import importlib
import tarfile
from pathlib import Path

import pytest
from watchdogs import finishes

import normstats
from normstats.errors import NormstatsError, SkipKind
from normstats.sources.detect import open_format
from normstats.sources.tar.reader import TarSource, scan_shard

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


@pytest.mark.parametrize("entry", ["../elsewhere.tar", "absolute", "link.tar"])
def test_index_entries_stay_inside_its_folder(tmp_path: Path, entry: str) -> None:
    """``..``, an absolute path, and a link inside the folder to a shard elsewhere."""
    import os

    root = tmp_path / "wds"
    root.mkdir()
    fw.write_tar(root / "a.tar", RGB[:2])
    elsewhere = fw.write_tar(tmp_path / "elsewhere.tar", RGB[:3])
    os.symlink(elsewhere, root / "link.tar")
    url = str(elsewhere) if entry == "absolute" else entry
    index = fw.write_index(root / "index.json", {"a.tar": 2, url: 3})
    with pytest.raises(NormstatsError) as caught:
        open_format(str(index), "tar")
    reason = f"'{url}' is an absolute path" if entry == "absolute" else \
        f"'{url}' resolves to {os.path.realpath(elsewhere)}, outside {os.path.realpath(root)}"
    assert str(caught.value) == f"{index}: shardlist entry 1 ('{url}') is outside the " \
        f"index's folder: {reason}; only shards inside it are read"


def test_index_entries_in_subfolders_are_read(tmp_path: Path) -> None:
    (tmp_path / "train" / "part").mkdir(parents=True)
    fw.write_tar(tmp_path / "train" / "part" / "s-0.tar", RGB[:4])
    fw.write_tar(tmp_path / "train" / "s-1.tar", RGB[4:])
    index = fw.write_index(tmp_path / "train" / "index.json",
                           {"part/s-0.tar": 4, "part/../s-1.tar": 5})
    stats = normstats.compute(str(index))
    assert stats.images == 9 and stats.mean == normstats.compute(RGB).mean


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


def _link_shard(path: Path, tar_format: int) -> Path:
    """a.png, then b.png a hard link to it, c.png a symlink to it, d.png a symlink out."""
    import io

    with tarfile.open(path, "w:gz" if path.name.endswith(".gz") else "w",
                      format=tar_format) as tar:
        info = tarfile.TarInfo("a.png")
        info.size = len(_png(40))
        tar.addfile(info, io.BytesIO(_png(40)))
        for name, kind, target in (("b.png", tarfile.LNKTYPE, "a.png"),
                                   ("c.png", tarfile.SYMTYPE, "a.png"),
                                   ("d.png", tarfile.SYMTYPE, "../outside.png")):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    return path


@pytest.mark.parametrize("tar_format", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT],
                         ids=["gnu", "pax"])
@pytest.mark.parametrize("name", ["s.tar", "s.tar.gz"])
def test_hard_and_symbolic_link_members_are_named_as_the_folder_walk_names_links(
        tmp_path, tar_format, name):
    path = _link_shard(tmp_path / name, tar_format)
    stats = normstats.compute(path)
    assert stats.images == 1 and stats.mean == (40 / 255,) * 3
    assert {s.path: (s.reason, s.kind) for s in stats.skipped} == {
        f"{path}:b.png": (f"same file as {path}:a.png (a hard link); counted once",
                          SkipKind.DUPLICATE),
        f"{path}:c.png": (f"same file as {path}:a.png (a symbolic link); counted once",
                          SkipKind.DUPLICATE),
        f"{path}:d.png": ("a symbolic link to '../outside.png', which is not an image file of "
                          "the shard; not followed", SkipKind.REFUSED)}


_FIFO_REASON = "not a regular file (a FIFO (named pipe)); only regular files are read"


@pytest.mark.timeout(20)
def test_a_fifo_named_like_a_shard_in_a_folder_of_shards_is_skipped_unread(tmp_path):
    import os

    fw.write_tar(tmp_path / "a.tar", RGB[:4])
    os.mkfifo(tmp_path / "x.tar")
    stats = finishes(lambda: normstats.compute(tmp_path), fifo=tmp_path / "x.tar")
    assert not isinstance(stats, Exception), stats
    assert stats.images == 4 and stats.mean == normstats.compute(RGB[:4]).mean
    assert {s.path: s.reason for s in stats.skipped} == {str(tmp_path / "x.tar"): _FIFO_REASON}
    failed = finishes(lambda: normstats.compute(tmp_path, on_error="fail"),
                       fifo=tmp_path / "x.tar")
    assert isinstance(failed, NormstatsError) and str(failed) == \
        f"{tmp_path / 'x.tar'}: {_FIFO_REASON}"


@pytest.mark.timeout(20)
@pytest.mark.parametrize("fmt", [None, "tar"])
def test_a_fifo_in_a_brace_range_of_shards_finishes_and_is_named(tmp_path, fmt):
    """Told the format, the shards are read and the FIFO skipped; detecting the format
    of each PATH stops at the FIFO with a one-line error (a PATH is checked first)."""
    import os

    fw.write_tar(tmp_path / "s-0.tar", RGB[:4])
    os.mkfifo(tmp_path / "s-1.tar")
    fw.write_tar(tmp_path / "s-2.tar", RGB[4:])
    stats = finishes(lambda: normstats.compute(str(tmp_path / "s-{0..2}.tar"), format=fmt),
                      fifo=tmp_path / "s-1.tar")
    if fmt is None:
        assert isinstance(stats, NormstatsError) and \
            str(stats) == f"{tmp_path / 's-1.tar'}: {_FIFO_REASON}"
        return
    assert stats.images == 9 and stats.mean == normstats.compute(RGB).mean
    assert [(s.path, s.reason) for s in stats.skipped] == [(str(tmp_path / "s-1.tar"),
                                                            _FIFO_REASON)]


def test_a_fifo_as_the_shard_index_is_one_line(tmp_path):
    import os

    os.mkfifo(tmp_path / "index.json")
    from normstats.sources.tar.reader import read_shard_index

    error = finishes(lambda: read_shard_index(str(tmp_path / "index.json")),
                      fifo=tmp_path / "index.json")
    assert isinstance(error, NormstatsError) and \
        str(error) == f"{tmp_path / 'index.json'}: {_FIFO_REASON}"


@pytest.mark.timeout(20)
def test_a_fifo_given_to_the_shard_source_is_skipped_unread(tmp_path):
    """The source itself refuses it, whoever listed it (a glob, a manifest, the API)."""
    import os

    fw.write_tar(tmp_path / "a.tar", RGB[:4])
    os.mkfifo(tmp_path / "x.tar")
    paths = [str(tmp_path / "a.tar"), str(tmp_path / "x.tar")]
    source = finishes(lambda: TarSource(paths), fifo=tmp_path / "x.tar")
    assert len(source) == 4
    assert [(s.path, s.reason) for s in source.skipped] == [(paths[1], _FIFO_REASON)]
    failed = finishes(lambda: TarSource(paths, fail_fast=True), fifo=tmp_path / "x.tar")
    assert isinstance(failed, NormstatsError) and str(failed) == f"{paths[1]}: {_FIFO_REASON}"


def _masked_shard(path: Path, images: list, masks: list) -> None:
    """WebDataset samples of an image (``png``) and its mask (``seg.png``), in that order."""
    import io

    from PIL import Image

    with tarfile.open(path, "w") as tar:
        for i, (image, mask) in enumerate(zip(images, masks)):
            for ext, pixels in (("png", image), ("seg.png", mask)):
                buffer = io.BytesIO()
                Image.fromarray(pixels).save(buffer, "PNG")
                info = tarfile.TarInfo(f"{i:04d}.{ext}")
                info.size = len(buffer.getvalue())
                tar.addfile(info, io.BytesIO(buffer.getvalue()))


def test_image_key_picks_the_member_of_each_sample_by_extension(tmp_path: Path) -> None:
    """--image-key was ignored for tar shards: a shard of images and masks was the images'
    statistics whatever the key. It is WebDataset's key, the member's extension, local
    and behind a URL; a key no sample has names the extensions there are. Without it, a
    sample of two images is refused, naming both: the first member in tar order was taken,
    the mask where a writer put it first."""
    import fsspec
    import numpy as np
    from oracle import assert_matches_oracle

    rng = np.random.default_rng(8)
    images = [rng.integers(0, 256, (5, 4, 3), dtype=np.uint8) for _ in range(4)]
    masks = [np.repeat(rng.integers(0, 4, (5, 4, 1), dtype=np.uint8), 3, axis=2)
             for _ in range(4)]
    shard = tmp_path / "shard-000.tar"
    _masked_shard(shard, images, masks)
    with pytest.raises(NormstatsError, match=r"shard-000.tar: sample 0000 holds several images "
                                             r"\(png, seg.png\); choose one with --image-key "
                                             r"\(image_key=\), e.g. --image-key png"):
        normstats.compute(shard)
    assert_matches_oracle(normstats.compute(shard, image_key="png"), images, 255)
    assert_matches_oracle(normstats.compute(shard, image_key="seg.png"), masks, 255)
    assert_matches_oracle(normstats.compute(tmp_path, image_key="SEG.png"), masks, 255)
    fsspec.filesystem("memory").pipe("/image-key/shard-000.tar", shard.read_bytes())
    assert_matches_oracle(normstats.compute("memory://image-key/shard-000.tar",
                                            image_key="seg.png"), masks, 255)
    with pytest.raises(NormstatsError, match=r"0000: sample has no jpg member \(--image-key; "
                                             r"it holds png, seg.png\)"):
        normstats.compute(shard, image_key="jpg")
