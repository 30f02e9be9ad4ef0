"""Reliability matrix, part 9: one line, never a traceback (docs/reliability.md).

Inputs that used to end in a traceback, a multi-line block or a broken line: malformed
``.npy`` headers, manifest values of the wrong type, ``--cache`` naming a file,
``--local-cluster --on-error fail``, file names holding newlines or terminal escapes, a
folder manifest whose tree links out of ``--root``, a manifest copy missing images, and
Pillow's own warnings and log lines, which name no file.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import assert_matches_oracle
from PIL import Image

from normstats_cli import main


def _one_error_line(result, expected: str) -> None:
    """Exit status 1 and exactly one line, ``normstats: error: <expected>``."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines() == [f"normstats: error: {expected}"]


def _npy_with_header(path: Path, header: str) -> None:
    data = np.zeros((2, 4, 4, 3), np.uint8).tobytes()
    text = header.encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data)


@pytest.mark.parametrize(("header", "reason"), [
    ("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 4, 4, 3), ",
     "not a plain .npy array (its header cannot be parsed: TokenError)"),
    ("{'descr': '|u1', 'fortran_order': False, 'shape': (2, 4, 4, 3) 5, }",
     "not a plain .npy array (its header cannot be parsed: SyntaxError)"),
    ("{'descr': '|u1', 'fortran_order': False, 'shape': (-2, 4, 4, 3), }",
     "not a plain .npy array (negative dimensions are not allowed)"),
    ("{'descr': '|u1', 'fortran_order': False, 'shape': __import__('os'), }",
     "not a plain .npy array (its header is not a plain Python literal)"),
], ids=["unclosed", "syntax_error", "negative_shape", "code"])
def test_malformed_npy_headers_are_one_line(tmp_path, header, reason):
    path = tmp_path / "bad.npy"
    _npy_with_header(path, header)
    _one_error_line(CliRunner().invoke(main, ["compute", str(path)]), f"{path}: {reason}")


_MANIFEST = '''name = "toy"
dataset = "Toy"
split = "train"
description = "two arrays"
[source]
format = "npy"
files = [{files}]
{extra}
'''


@pytest.mark.parametrize(("files", "extra", "reason"), [
    ('"a.npy"', 'counts = {"a.npy" = "abc"}',
     "'source.counts['a.npy']' must be a positive integer, got 'abc'"),
    ('"a.npy"', "channels = 5",
     "'source.channels' must be a list of channel names such as [\"R\", \"G\", \"B\"], got 5"),
    ('"a.npy"', 'checksums = "md5:abc"',
     "'source.checksums' must be a table of file = value ([source.checksums]), got 'md5:abc'"),
    ('"a\\u0000.npy"', "", "path 'a\\x00.npy' holds a NUL character"),
    ('"a.npy"', "mode = 3", "'mode' must be a non-empty string, got 3"),
], ids=["count_text", "channels_number", "checksums_string", "nul_in_path", "mode_number"])
def test_manifest_values_of_the_wrong_type_name_the_key_and_the_file(tmp_path, files, extra,
                                                                      reason):
    root = tmp_path / "root"
    root.mkdir()
    np.save(root / "a.npy", np.zeros((2, 4, 4, 3), np.uint8))
    manifest = tmp_path / "toy.toml"
    manifest.write_text(_MANIFEST.format(files=files, extra=extra))
    for command in (["compute", "--manifest", str(manifest)], ["verify", str(manifest)]):
        result = CliRunner().invoke(main, [*command, "--root", str(root)])
        _one_error_line(result, f"{manifest}: invalid manifest: {reason}")


def test_cache_naming_a_file_is_a_usage_error(tmp_path, png_folder):
    root, _ = png_folder
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    for command in (["compute", str(root)], ["cache", "list"], ["cache", "clear"],
                    ["cache", "show", str(root)]):
        result = CliRunner().invoke(main, [*command, "--cache", str(blocker)])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert f"Invalid value for '--cache': Directory '{blocker}' is a file." in result.output


def test_local_cluster_on_error_fail_is_one_line_without_the_workers_block(png_folder):
    root, _ = png_folder
    (root / "dog" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(20))
    run = subprocess.run([sys.executable, "-m", "normstats", "compute", str(root),
                          "--local-cluster", "--workers", "2", "--on-error", "fail",
                          "--no-cache"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stderr
    assert "Compute Failed" not in run.stderr and "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("normstats: error:")]
    assert len(errors) == 1 and errors[0].startswith("normstats: error: dog/broken.png: ")
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_names_with_newlines_and_escapes_are_printed_on_one_line(tmp_path, png_folder):
    root, images = png_folder
    (root / "two\nlines.png").write_bytes(b"not an image")
    (root / "red\x1b[31m.png").write_bytes(b"not an image")
    reason = "not an image (content is none of PNG, JPEG, BMP, TIFF, WEBP, GIF, PPM)"
    report = CliRunner().invoke(main, ["compute", str(root), "--no-cache"])
    assert report.exit_code == 0
    assert f"  red\\x1b[31m.png: {reason}" in report.output.splitlines()
    assert f"  two\\nlines.png: {reason}" in report.output.splitlines()
    assert "\x1b" not in report.output
    failed = CliRunner().invoke(main, ["compute", str(root), "--no-cache", "--on-error",
                                       "fail", "--scheduler", "sync"])
    _one_error_line(failed, f"red\\x1b[31m.png: {reason}")


def test_a_folder_manifest_does_not_follow_links_out_of_its_root(tmp_path, rng):
    root, outside = tmp_path / "root", tmp_path / "elsewhere"
    images = [rng.integers(0, 256, (5, 4, 3), dtype=np.uint8) for _ in range(3)]
    (root / "train" / "a").mkdir(parents=True)
    outside.mkdir()
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(root / "train" / "a" / f"{i}.png")
    Image.fromarray(images[0]).save(outside / "secret.png")
    (root / "train" / "b").symlink_to(outside, target_is_directory=True)
    (root / "train" / "a" / "x.png").symlink_to(outside / "secret.png")
    (root / "train" / "a" / "inside.png").symlink_to(root / "train" / "a" / "0.png")
    manifest = tmp_path / "toy.toml"
    manifest.write_text(_MANIFEST.replace('format = "npy"', 'format = "folder"').format(
        files='"train"', extra="images = 3"))
    result = CliRunner().invoke(main, ["compute", "--manifest", str(manifest), "--root",
                                       str(root), "--json", "--no-cache"])
    assert result.exit_code == 0, result.output
    import json

    stats = json.loads(result.stdout)
    assert stats["images"] == 3
    real = os.path.realpath(root)
    assert {s["path"]: s["reason"] for s in stats["skipped"]} == {
        "a/inside.png": "same file as a/0.png (a hard or symbolic link); counted once",
        "a/x.png": f"a link out of the dataset root {real} (to "
                   f"{os.path.realpath(outside / 'secret.png')}); not followed",
        "b": f"a link out of the dataset root {real} (to {os.path.realpath(outside)}); "
             "not followed"}
    from normstats.results.stats import DatasetStats

    assert_matches_oracle(DatasetStats.from_dict(stats), images, 255)


def test_compute_manifest_warns_when_the_copy_misses_images(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    np.save(root / "a.npy", np.zeros((2, 4, 4, 3), np.uint8))
    manifest = tmp_path / "toy.toml"
    manifest.write_text(_MANIFEST.format(files='"a.npy"', extra="images = 5"))
    result = CliRunner().invoke(main, ["compute", "--manifest", str(manifest), "--root",
                                       str(root)])
    assert result.exit_code == 0
    assert ("normstats: warning: manifest toy expects 5 images; 2 were computed (0 skipped): "
            "these are not the constants of the complete split") in result.stderr


def _palette_png_with_transparency_bytes(path: Path) -> np.ndarray:
    """A P-mode PNG whose tRNS holds a byte per palette entry; its pixels as torchvision's
    loader sees them (``convert("RGB")``, Pillow's warning silenced here)."""
    import warnings

    image = Image.new("P", (4, 4))
    image.putpalette([v % 256 for v in range(0, 16 * 3 * 17, 17)])
    image.putdata(list(range(16)))
    image.save(path, transparency=bytes([0, 128, 255, 7]))
    with Image.open(path) as opened, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(opened.convert("RGB"))


def _tiff_of_7_samples(path: Path) -> None:
    from sources.decoding.test_decode import tiff_bytes

    path.write_bytes(tiff_bytes(3, 2, 7, 8, 1))


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_pillows_bare_warnings_and_log_lines_never_reach_stderr(tmp_path, scheduler):
    """Pillow's palette warning and its TIFF plugin's log line named no file: the first is
    noise (the pixels are exactly ``convert``'s), the second is said by the skip reason."""
    root = tmp_path / "data"
    root.mkdir()
    expected = _palette_png_with_transparency_bytes(root / "p.png")
    _tiff_of_7_samples(root / "seven.tif")
    run = subprocess.run([sys.executable, "-W", "default", "-m", "normstats", "compute",
                          str(root), "--json", "--no-cache", "--scheduler", scheduler],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""  # no "UserWarning: Palette images ...", no "More samples ..."
    import json

    from normstats.results.stats import DatasetStats

    stats = DatasetStats.from_dict(json.loads(run.stdout))
    assert_matches_oracle(stats, [expected], 255)
    assert [(s.path, s.reason) for s in stats.skipped] == [
        ("seven.tif", "TIFF raster (7 samples per pixel, 8-bit unsigned integer): the RGB "
                      "policy converts colour images and would drop bands or clip them; use "
                      "--mode keep to compute its bands")]
