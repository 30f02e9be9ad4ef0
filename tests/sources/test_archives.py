"""Compressed files and archives told by content: gzip read whatever the name says, the
archives normstats does not read refused with the command that unpacks them."""

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import zipfile

import numpy as np
import pytest
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats.errors import EmptyDatasetError, NormstatsError
from normstats.sources.archives import is_gzip, unread_archive


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def _tar_bytes(images: list[np.ndarray]) -> bytes:
    """A WebDataset shard of ``images`` (000000.png, ...), uncompressed."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for i, pixels in enumerate(images):
            data = _png(pixels)
            info = tarfile.TarInfo(f"{i:06d}.png")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def photos(rng):
    from conftest import random_images

    return random_images(rng, 6)


@pytest.mark.parametrize("name, compress", [
    ("shard.tar", gzip.compress),  # a gzip stream named as a plain tar
    ("shard.dat", gzip.compress),  # named as nothing normstats knows
    ("shard.tar.gz", lambda data: data),  # a plain tar named as gzip
])
def test_a_tar_shard_is_read_by_its_content_whatever_its_name(tmp_path, photos, name,
                                                              compress):
    path = tmp_path / name
    path.write_bytes(compress(_tar_bytes(photos)))
    assert is_gzip(str(path)) == (compress is gzip.compress)
    stats = normstats.compute(path, workers=1, cache=False)
    assert stats.images == len(photos)
    assert_matches_oracle(stats, photos, 255)


def _idx_bytes(images: np.ndarray) -> bytes:
    return struct.pack(">BBBB", 0, 0, 8, 3) + struct.pack(">III", *images.shape) + \
        images.tobytes()


@pytest.mark.parametrize("name, compress", [
    ("train-images-idx3-ubyte.gz", lambda data: data),  # a browser decompressed it
    ("train-images-idx3-ubyte", gzip.compress),  # gzip without the .gz
])
def test_an_idx_file_is_read_by_its_content_whatever_its_name(tmp_path, rng, name, compress):
    images = rng.integers(0, 256, (7, 5, 4), dtype=np.uint8)
    (tmp_path / name).write_bytes(compress(_idx_bytes(images)))
    stats = normstats.compute(tmp_path / name, workers=1, cache=False)
    assert stats.images == 7
    assert_matches_oracle(stats, [image[:, :, None] for image in images], 255)


def _zip(path, photos) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for i, pixels in enumerate(photos):
            archive.writestr(f"train/{i}.png", _png(pixels))


@pytest.mark.parametrize("name, write, command", [
    ("train.zip", _zip, "unzip {d}/train.zip -d {d}/train) and compute the folder"),
    ("train.tar.xz", lambda p, photos: p.write_bytes(lzma.compress(_tar_bytes(photos))),
     "xz -dk {d}/train.tar.xz gives {d}/train.tar)"),
    ("train.tar.bz2", lambda p, photos: p.write_bytes(bz2.compress(_tar_bytes(photos))),
     "bzip2 -dk {d}/train.tar.bz2 gives {d}/train.tar)"),
])
def test_an_archive_normstats_does_not_read_is_named_with_its_command(tmp_path, photos, name,
                                                                      write, command):
    """A zip, an xz or bzip2 tar: named, and how to turn it into what normstats reads,
    whether given as the dataset, as --format tar, or found alone in a folder."""
    path = tmp_path / name
    write(path, photos)
    expected = command.format(d=tmp_path)
    with pytest.raises(NormstatsError, match="which normstats does not read") as given:
        normstats.compute(path, workers=1, cache=False)
    assert str(given.value).endswith(expected)
    with pytest.raises(NormstatsError, match="not a tar shard but") as as_tar:
        normstats.compute(path, format="tar", workers=1, cache=False)
    assert str(as_tar.value).endswith(expected)
    with pytest.raises(EmptyDatasetError, match="no image files in it, and") as in_folder:
        normstats.compute(tmp_path, workers=1, cache=False)
    assert str(in_folder.value).endswith(expected)


@pytest.mark.parametrize("magic, kind", [
    (b"PK\x05\x06", "a zip archive"),  # an empty zip
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
    (b"Rar!\x1a\x07\x01\x00", "a rar archive"),
])
def test_other_archives_are_named_by_their_magic(magic, kind):
    assert unread_archive("data/train.bin", magic + bytes(8)).startswith(f"{kind}, which ")


def test_files_that_are_no_archive_are_not_named_one():
    for head in (b"\x89PNG\r\n\x1a\n", b"\x1f\x8b\x08\x00", b"PK", b""):
        assert unread_archive("x", head) is None


def test_a_folder_without_image_files_says_what_it_holds(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(EmptyDatasetError, match="an empty folder"):
        normstats.compute(empty, cache=False)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "labels.csv").write_text("file,label\n")
    (tmp_path / "notes" / "README").write_text("a dataset\n")
    with pytest.raises(EmptyDatasetError, match=r"no image files in it \(2 other files, e\.g\. "
                       r".*notes/README\): normstats reads image files \(\.jpg, \.png"):
        normstats.compute(tmp_path / "notes", cache=False)


def test_a_folder_of_array_files_gives_the_glob_that_reads_them(tmp_path, rng):
    """A folder of .npy files is no dataset normstats reads (each file is one): the
    refusal gives the glob that reads them as one, which gives their union's numbers."""
    parts = [rng.integers(0, 256, (3, 4, 5, 3), dtype=np.uint8) for _ in range(2)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"{i}.npy", part)
    with pytest.raises(EmptyDatasetError) as caught:
        normstats.compute(tmp_path, cache=False)
    glob = f"{tmp_path}/*.npy"
    assert str(caught.value).endswith(f"; its .npy files are datasets of their own: pass "
                                      f"them, e.g. '{glob}' (one dataset, their union)")
    union = normstats.compute(glob, cache=False)
    assert_matches_oracle(union, list(np.concatenate(parts)), 255)
