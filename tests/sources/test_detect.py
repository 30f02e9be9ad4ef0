"""Format detection by content and name, and the ``format=`` override."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest
from oracle import assert_matches_oracle

import normstats
from normstats.errors import NormstatsError, UnreadableInputError
from normstats.sources.detect import detect_format

fw = importlib.import_module("format_writers")

RGB = fw.images(7, 3, 32, 32, 3)


def test_detected_by_content_whatever_the_name(tmp_path: Path) -> None:
    assert detect_format(str(fw.write_idx(tmp_path / "digits.bin", RGB[..., 0]))) == "idx"
    assert detect_format(str(fw.write_idx(tmp_path / "d.dat", RGB[..., 0], True))) == "idx"
    assert detect_format(str(fw.write_tar(tmp_path / "shard", RGB))) == "tar"
    assert detect_format(str(fw.write_cifar_python(tmp_path / "test_batch", RGB))) == \
        "cifar-python"
    np.save(tmp_path / "a.npy", RGB)
    assert detect_format(str(tmp_path / "a.npy")) == "npy"


def test_detected_by_name(tmp_path: Path) -> None:
    assert detect_format(str(fw.write_cifar_bin(tmp_path / "test_batch.bin", RGB))) == \
        "cifar10-bin"
    assert detect_format(str(fw.write_cifar_bin(tmp_path / "test.bin", RGB, 2))) == \
        "cifar100-bin"
    assert detect_format(str(fw.write_npz(tmp_path / "d.npz", RGB))) == "npz"


def test_format_overrides_detection(tmp_path: Path) -> None:
    path = fw.write_cifar_bin(tmp_path / "records.dat", RGB)
    with pytest.raises(NormstatsError, match="pass --format"):
        normstats.compute(str(path))
    assert normstats.compute(str(path), format="cifar10-bin").images == 3
    with pytest.raises(NormstatsError, match="unknown format 'gif'"):
        normstats.compute(str(path), format="gif")


@pytest.mark.timeout(20)
@pytest.mark.parametrize("name", ["images.npy", "digits.gz", "index.json", "noname"])
def test_a_fifo_is_refused_before_its_first_byte_is_read(tmp_path: Path, name: str) -> None:
    """Detection reads a file's first bytes: a FIFO is refused by the one door
    (`open_regular`) instead of waiting for a writer (pytest-timeout ends a hang)."""
    os.mkfifo(tmp_path / name)
    with pytest.raises(UnreadableInputError) as caught:
        detect_format(str(tmp_path / name))
    assert str(caught.value) == (f"{tmp_path / name}: not a regular file (a FIFO (named "
                                 "pipe)); only regular files are read")


@pytest.mark.parametrize("line, call", [
    ("{}", "open('train.txt').read().splitlines()"),  # YOLO's train.txt
    ("{} 0", "[line.split()[0] for line in open('train.txt')]"),  # ImageNet's val.txt
])
def test_a_text_file_listing_images_gives_the_call_that_reads_them(tmp_path, monkeypatch,
                                                                    line, call):
    from PIL import Image

    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (3, 4, 3), dtype=np.uint8) for _ in range(2)]
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(f"{i}.png")
    (tmp_path / "train.txt").write_text("".join(line.format(f"{i}.png") + "\n"
                                                for i in range(2)))
    with pytest.raises(NormstatsError, match=r"a text file listing image files \(0\.png, ") \
            as caught:
        normstats.compute("train.txt")
    assert f"normstats.compute({call}) (relative paths" in str(caught.value)
    stats = normstats.compute(eval(call), cache=False)  # the call the message gives
    assert_matches_oracle(stats, images, 255)
