"""`normstats verify`: PASS, FAIL, and which variant each published number really is."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import normstats
from normstats.analyses.manifests import Manifest, Reference, SourceSpec, load_manifest
from normstats.analyses.verify import (
    NumberCheck,
    check_reference,
    render_verification,
    verify_stats,
)
from normstats.maths.records import Skipped
from normstats.results.stats import DatasetStats
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
    assert "FAIL: 2 of 3 references of this split pass" in result.output
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
            "count decide; 1 informational reference shown, not deciding") in result.output
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
    assert "skipped 1 input:" in result.output
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


# --- the verdicts and the report, on statistics written out by hand ------------------------

def _stats(**changes: Any) -> DatasetStats:
    """Two channels whose every variant differs and is a binary fraction (exact in float)."""
    values: dict[str, Any] = dict(
        channels=("R", "G"), mean=(0.5, 0.25), std=(0.25, 0.125), std_ddof1=(0.25, 0.1875),
        per_image_std=(0.125, 0.0625), per_image_std_ddof1=(0.1875, 0.09375),
        rms_per_image_std=(0.15625, 0.078125), min=(0.0, 0.0), max=(1.0, 0.5), images=4,
        pixels_per_channel=64, dtype="uint8", scale=255.0, mode="RGB", source="/data/toy")
    values.update(changes)
    return DatasetStats(**values)


def _spec(images: int | None = 4) -> SourceSpec:
    return SourceSpec("folder", ("x",), images=images)


def test_each_number_is_checked_against_its_claim_and_the_closest_variant() -> None:
    check = check_reference(_stats(), Reference("r", "s", {"std": (0.1875, 0.125),
                                                           "max": (0.5, 0.5)}, tolerance=0.0))
    assert check.numbers == (
        NumberCheck("std", "R", 0.1875, 0.25, False, "per_image_std_ddof1", 0.1875),
        NumberCheck("std", "G", 0.125, 0.125, True, "std", 0.125),
        NumberCheck("max", "R", 0.5, 1.0, False, "mean", 0.5),
        NumberCheck("max", "G", 0.5, 0.5, True, "max", 0.5))
    assert [(n.diff, n.best_diff) for n in check.numbers] == [(-0.0625, 0.0), (0.0, 0.0),
                                                              (-0.5, 0.0), (0.0, 0.0)]
    assert not check.passed and check.problem == ""


def test_the_claimed_variant_wins_a_tie_and_undefined_variants_are_left_out() -> None:
    check = check_reference(_stats(), Reference("r", "s", {"std_ddof1": (0.25, 0.1875)}))
    assert [n.best for n in check.numbers] == ["std_ddof1", "std_ddof1"]
    assert check.passed
    vectors = _stats(per_image_std=None, per_image_std_ddof1=None, rms_per_image_std=None,
                     kind="vectors")
    check = check_reference(vectors, Reference("r", "s", {"mean": (0.125, 0.0625)}))
    assert [(n.best, n.best_value) for n in check.numbers] == [("std", 0.25), ("std", 0.125)]


def test_the_tolerance_is_inclusive_and_in_the_reference_s_units() -> None:
    assert check_reference(_stats(), Reference("r", "s", {"mean": (0.75, 0.5)},
                                               tolerance=0.25)).passed
    assert not check_reference(_stats(), Reference("r", "s", {"mean": (0.75, 0.5)},
                                                   tolerance=0.2499)).passed
    in_255 = check_reference(_stats(), Reference("r", "s", {"mean": (127.5, 63.75)},
                                                 scale=255.0, tolerance=0.0))
    assert in_255.passed and [n.computed for n in in_255.numbers] == [127.5, 63.75]
    raw = _stats(scale=1.0, mean=(127.5, 63.75))  # reported in pixel units
    in_1 = check_reference(raw, Reference("r", "s", {"mean": (0.5, 0.25)}, tolerance=0.0))
    assert in_1.passed and [n.computed for n in in_1.numbers] == [0.5, 0.25]
    sixteen = _stats(scale=1.0, dtype="uint16", mean=(65535.0, 0.0))
    assert [n.computed for n in check_reference(sixteen, Reference(
        "r", "s", {"mean": (255.0, 0.0)}, scale=255.0)).numbers] == [255.0, 0.0]


def test_references_that_cannot_be_compared_say_why() -> None:
    wrong_count = check_reference(_stats(), Reference("r", "s", {"mean": (0.5, 0.25),
                                                                 "std": (0.2, 0.1, 0.3)}))
    assert (wrong_count.numbers, wrong_count.problem) == (
        (), "std has 3 values for 2 channels")
    assert not wrong_count.passed
    vectors = _stats(per_image_std=None)
    reference = Reference("r", "s", {"per_image_std": (0.1, 0.1)})
    undefined = check_reference(vectors, reference)
    assert undefined.reference is reference and wrong_count.reference.label == "r"
    assert (undefined.numbers, undefined.problem, undefined.passed) == (
        (), "per_image_std is not defined for this data", False)


def test_the_verdict_counts_the_image_count_and_deciding_references_only() -> None:
    good, bad = Reference("g", "s", {"mean": (0.5, 0.25)}), Reference("b", "s", {"mean": (0, 0)})
    info_bad = dataclasses.replace(bad, decides=False)
    manifest = Manifest("t", "T", "train", "d", _spec(), (good, info_bad))
    result = verify_stats(_stats(), manifest, ("a: md5 ok",))
    assert result.passed and result.count_problem == "" and result.checksums == ("a: md5 ok",)
    assert [c.reference for c in result.deciding] == [good]
    assert [c.reference for c in result.checks] == [good, info_bad]
    assert not verify_stats(_stats(), dataclasses.replace(manifest, references=(good, bad))
                            ).passed
    assert verify_stats(_stats(), dataclasses.replace(manifest, source=_spec(None))).passed
    skipped = _stats(skipped=(Skipped("a.png", "x"), Skipped("b.png", "y")))
    short = verify_stats(skipped, dataclasses.replace(manifest, source=_spec(4000)))
    assert not short.passed
    assert short.count_problem == ("the manifest expects 4,000 images; 4 were computed "
                                   "(2 skipped)")
    assert verify_stats(_stats(images=1234), dataclasses.replace(
        manifest, source=_spec(1000))).count_problem == (
        "the manifest expects 1,000 images; 1,234 were computed (0 skipped)")


REPORT = """\
verify toy-train (Toy train): /data/toy
  4 images, channels R, G, uint8, mode RGB
  checksums: 2 files match
  z.gz: not found; its extracted copy z is read instead
  images: count as expected
  skipped 1 input:
    a.png: not an image

PASS  good  (scale 1, tolerance 5e-05)
      source: src
      note: a note
      claims               ch    published    computed       diff       best match (diff)
      mean                 R           0.5         0.5  +0.00e+00 ok    mean 0.5 (+0.00e+00)
      mean                 G          0.25        0.25  +0.00e+00 ok    mean 0.25 (+0.00e+00)

FAIL  bad  (scale 1, tolerance 0.001)
      source: src2
      claims               ch    published    computed       diff       best match (diff)
      std                  R        0.1875        0.25  -6.25e-02 FAIL  per_image_std_ddof1 \
0.1875 (+0.00e+00)
      std                  G       0.09375       0.125  -3.12e-02 FAIL  per_image_std_ddof1 \
0.09375 (+0.00e+00)

info (matches)  info  (scale 255, tolerance 0.5)
      source: src3
      claims               ch    published    computed       diff       best match (diff)
      mean                 R         127.5       127.5  +0.00e+00 ok    mean 127.5 (+0.00e+00)
      mean                 G         63.75       63.75  +0.00e+00 ok    mean 63.75 (+0.00e+00)

FAIL  wrong  (scale 1, tolerance 5e-05)
      source: src4
      cannot compare: mean has 1 values for 2 channels

FAIL: 1 of 3 references of this split passes; 1 informational reference shown, not deciding\
"""


def test_the_report_word_for_word() -> None:
    manifest = Manifest("toy-train", "Toy", "train", "d", _spec(), (
        Reference("good", "src", {"mean": (0.5, 0.25)}, note="a note"),
        Reference("bad", "src2", {"std": (0.1875, 0.09375)}, tolerance=1e-3),
        Reference("info", "src3", {"mean": (127.5, 63.75)}, scale=255.0, tolerance=0.5,
                  decides=False),
        Reference("wrong", "src4", {"mean": (0.5,)})))
    stats = _stats(skipped=(Skipped("a.png", "not an image"),))
    checksums = ("x: md5 ok", "y: md5 ok", "z.gz: not found; its extracted copy z is read "
                 "instead")
    assert render_verification(verify_stats(stats, manifest, checksums)) == REPORT


def test_reports_without_deciding_references_say_what_decides() -> None:
    plain = Manifest("toy-test", "Toy", "test", "d", _spec(None), ())
    assert render_verification(verify_stats(_stats(), plain, ("x: md5 ok",))) == (
        "verify toy-test (Toy test): /data/toy\n"
        "  4 images, channels R, G, uint8, mode RGB\n"
        "  checksums: 1 file matches\n\n\n"
        "PASS: no published constants of this split to compare; checksums and the image count "
        "decide")
    informational = Manifest("toy-test", "Toy", "test", "d", _spec(5), (
        Reference("info", "src3", {"mean": (0.4, 0.25)}, decides=False),))
    assert render_verification(verify_stats(_stats(), informational, (
        "x: md5 ok", "y.gz: md5 differs"))) == (
        "verify toy-test (Toy test): /data/toy\n"
        "  4 images, channels R, G, uint8, mode RGB\n"
        "  checksums: 1 file matches\n"
        "  y.gz: md5 differs\n"
        "  images: the manifest expects 5 images; 4 were computed (0 skipped)  FAIL\n\n"
        "info (differs)  info  (scale 1, tolerance 5e-05)\n"
        "      source: src3\n"
        "      claims               ch    published    computed       diff       best match "
        "(diff)\n"
        "      mean                 R           0.4         0.5  -1.00e-01 FAIL  mean 0.5 "
        "(-1.00e-01)\n"
        "      mean                 G          0.25        0.25  +0.00e+00 ok    mean 0.25 "
        "(+0.00e+00)\n\n"
        "FAIL: no published constants of this split to compare; the image count decides (see "
        "the checksum line above); 1 informational reference shown, not deciding")


def test_numbers_are_printed_to_eight_significant_digits() -> None:
    manifest = Manifest("toy-test", "Toy", "test", "d", _spec(), (
        Reference("third", "s", {"mean": (0.3333, 0.25), "max": (0.33, 0.5)},
                  tolerance=1e-4),))
    text = render_verification(verify_stats(_stats(mean=(1 / 3, 0.25)), manifest))
    assert text.splitlines()[7:] == [
        "      mean                 R        0.3333  0.33333333  -3.33e-05 ok    mean "
        "0.33333333 (-3.33e-05)",
        "      mean                 G          0.25        0.25  +0.00e+00 ok    mean 0.25 "
        "(+0.00e+00)",
        "      max                  R          0.33           1  -6.70e-01 FAIL  mean "
        "0.33333333 (-3.33e-03)",
        "      max                  G           0.5         0.5  +0.00e+00 ok    max 0.5 "
        "(+0.00e+00)",
        "",
        "FAIL: 0 of 1 reference of this split pass"]
    assert text.splitlines()[2] == "  images: count as expected"
