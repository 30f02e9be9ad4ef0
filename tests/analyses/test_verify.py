"""`normstats verify`: PASS, FAIL, and which variant each published number really is."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import normstats
from normstats.analyses.manifests import Reference, load_manifest
from normstats.analyses.verify import check_reference, verify_stats
from normstats_cli import main

fw = importlib.import_module("format_writers")

def _photos(count: int) -> np.ndarray:
    """Images whose brightness and contrast both vary, so every std variant differs."""
    rng = np.random.default_rng(11)
    centre = rng.integers(40, 216, size=(count, 1, 1, 1))
    spread = rng.integers(3, 40, size=(count, 1, 1, 1))
    noise = rng.integers(-100, 101, size=(count, 32, 32, 3)) * spread // 100
    return np.clip(centre + noise, 0, 255).astype(np.uint8)


RGB = _photos(20)


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, normstats.DatasetStats]:
    """Two CIFAR-10 binary batches under a root, and their statistics from memory."""
    root = tmp_path / "root"
    (root / "cifar-10-batches-bin").mkdir(parents=True)
    fw.write_cifar_bin(root / "cifar-10-batches-bin" / "data_batch_1.bin", RGB[:12])
    fw.write_cifar_bin(root / "cifar-10-batches-bin" / "data_batch_2.bin", RGB[12:])
    return root, normstats.compute(RGB, channels=("R", "G", "B"))


def _manifest(tmp_path: Path, stats: normstats.DatasetStats, images: int = 20) -> Path:
    def values(numbers: tuple[float, ...], digits: int = 4) -> str:
        return "[" + ", ".join(f"{v:.{digits}f}" for v in numbers) + "]"

    path = tmp_path / "toy.toml"
    path.write_text(f'''name = "toy-cifar"
dataset = "Toy CIFAR"
split = "train"
description = "hand-written manifest for two generated batches"

[source]
format = "cifar10-bin"
files = ["cifar-10-batches-bin/data_batch_1.bin", "cifar-10-batches-bin/data_batch_2.bin"]
images = {images}

[[references]]
label = "correct pooled constants"
source = "computed for this test"
tolerance = 5e-5
mean = {values(stats.mean)}
std = {values(stats.std)}

[[references]]
label = "per-image sample std pasted as the std"
source = "the CIFAR-10 0.2023 mistake, reproduced"
tolerance = 5e-5
mean = {values(stats.mean)}
std = {values(stats.per_image_std_ddof1, 6)}

[[references]]
label = "the same in [0, 255]"
source = "mmcv style"
scale = 255.0
tolerance = 0.02
mean = {values(tuple(v * 255 for v in stats.mean), 3)}
''')
    return path


def test_pass_fail_and_the_variant_each_number_matches(tmp_path: Path, dataset) -> None:
    root, expected = dataset
    manifest = load_manifest(str(_manifest(tmp_path, expected)))
    stats = normstats.analyses.manifests.compute_manifest(manifest, str(root))
    assert stats.images == 20 and stats.mean == expected.mean
    result = verify_stats(stats, manifest)
    good, pasted, scaled = result.checks
    assert good.passed and scaled.passed and not pasted.passed and not result.passed
    stds = [n for n in pasted.numbers if n.claimed == "std"]
    assert [n.best for n in stds] == ["per_image_std_ddof1"] * 3
    assert all(abs(n.best_diff) <= 5e-5 < abs(n.diff) for n in stds)
    assert {n.best for n in good.numbers} == {"mean", "std"}


def test_cli_exit_status_and_report(tmp_path: Path, dataset) -> None:
    root, expected = dataset
    manifest = _manifest(tmp_path, expected)
    result = CliRunner().invoke(main, ["verify", str(manifest), "--root", str(root)])
    assert result.exit_code == 1
    assert "PASS  correct pooled constants" in result.output
    assert "FAIL  per-image sample std pasted as the std" in result.output
    assert "per_image_std_ddof1" in result.output
    assert "FAIL: 2 of 3 reference(s) of this split pass" in result.output
    text = manifest.read_text().split("[[references]]")
    manifest.write_text(text[0] + "[[references]]" + text[1])
    passing = CliRunner().invoke(main, ["verify", str(manifest), "--root", str(root)])
    assert passing.exit_code == 0 and "PASS: 1 of 1" in passing.output


def _write_idx(path: Path, images: np.ndarray) -> None:
    import gzip
    import struct

    data = struct.pack(">BBBBIII", 0, 0, 8, 3, *images.shape) + images.tobytes()
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data, mtime=0))
    else:
        path.write_bytes(data)


def test_a_correct_copy_of_a_test_split_passes_with_its_training_row_informational(
        tmp_path: Path, monkeypatch) -> None:
    """The shipped mnist-test manifest, its checksum pointed at a generated file: the
    training-split constants it shows for information differ and never fail the copy; a
    damaged file is listed as skipped; the extracted file is accepted in place of the .gz."""
    import hashlib

    import normstats.analyses.manifests as manifests

    digits = np.random.default_rng(5).integers(0, 256, (10_000, 28, 28), dtype=np.uint8)
    root = tmp_path / "root"
    root.mkdir()
    gz = root / "t10k-images-idx3-ubyte.gz"
    _write_idx(gz, digits)
    shipped = manifests.load_manifest("mnist-test")
    checksum = "md5:" + hashlib.md5(gz.read_bytes()).hexdigest()
    source = dataclasses.replace(shipped.source, checksums={gz.name: checksum})
    monkeypatch.setattr(manifests, "load_manifest",
                        lambda name: dataclasses.replace(shipped, source=source))
    result = CliRunner().invoke(main, ["verify", "mnist-test", "--root", str(root)])
    assert result.exit_code == 0, result.output
    assert "info (differs)  PyTorch examples Normalize((0.1307,), (0.3081,))" in result.output
    assert ("PASS: no published constants of this split to compare; checksums and the image "
            "count decide; 1 informational reference(s) shown, not deciding") in result.output
    gz.unlink()
    _write_idx(root / "t10k-images-idx3-ubyte", digits)  # what gunzip leaves
    extracted = CliRunner().invoke(main, ["verify", "mnist-test", "--root", str(root)])
    assert extracted.exit_code == 0, extracted.output
    assert "its extracted copy t10k-images-idx3-ubyte is read instead" in extracted.output
    _write_idx(root / "t10k-images-idx3-ubyte", digits[:9_999])
    short = CliRunner().invoke(main, ["verify", "mnist-test", "--root", str(root)])
    assert short.exit_code == 1 and "expects 10,000 images; 9,999" in short.output
    (root / "t10k-images-idx3-ubyte").unlink()
    import gzip
    import struct

    payload = struct.pack(">BBBBIII", 0, 0, 8, 3, *digits.shape) + digits.tobytes()
    gz.write_bytes(gzip.compress(payload, compresslevel=1, mtime=12345))  # other bytes
    again = CliRunner().invoke(main, ["verify", "mnist-test", "--root", str(root)])
    assert again.exit_code == 0, again.output
    assert "md5 differs from the published file, but it is one complete gzip stream" \
        in again.output
    assert "PASS: no published constants of this split to compare; the image count decides" \
        in again.output
    cut = gz.read_bytes()[:-20]  # a damaged download: the stream ends early
    gz.write_bytes(cut)
    damaged = CliRunner().invoke(main, ["verify", "mnist-test", "--root", str(root)])
    assert damaged.exit_code == 1 and "md5 checksum mismatch" in damaged.output


def test_verify_lists_skipped_files(tmp_path: Path, png_folder) -> None:
    root, _ = png_folder
    (root / "cat" / "broken.png").write_bytes(b"not a png")
    manifest = tmp_path / "folder.toml"
    manifest.write_text(f'''name = "toy-folder"
dataset = "Toy"
split = "train"
description = "a folder"
[source]
format = "folder"
files = ["{root.name}"]
[[references]]
label = "anything"
source = "here"
mean = [0.5, 0.5, 0.5]
tolerance = 1.0
''')
    result = CliRunner().invoke(main, ["verify", str(manifest), "--root", str(root.parent)])
    assert "skipped 1 input(s):" in result.output
    assert "cat/broken.png: not an image" in result.output


def test_an_image_count_that_disagrees_fails(tmp_path: Path, dataset) -> None:
    root, expected = dataset
    manifest = load_manifest(str(_manifest(tmp_path, expected, images=50000)))
    result = verify_stats(expected, manifest)
    assert not result.passed and "expects 50,000 images" in result.count_problem


def test_channel_count_mismatch_is_a_clear_failure() -> None:
    stats = normstats.compute(np.zeros((2, 3, 3, 1), np.uint8))
    check = check_reference(stats, Reference("rgb", "x", {"mean": (0.1, 0.2, 0.3)}))
    assert not check.passed and "3 values for 1 channel" in check.problem
