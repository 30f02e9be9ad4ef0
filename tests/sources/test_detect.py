"""Format detection by content and name, and the ``format=`` override."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import normstats
from normstats.errors import NormstatsError
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
