"""`normstats compute` with --to, --bgr, --resize, --center-crop, --sample, --percentiles."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
from click.testing import CliRunner

import normstats
from normstats_cli import main


@pytest.fixture
def array_file(tmp_path, rng):
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (400, 6, 6, 3), dtype=np.uint8))
    return str(path)


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["compute", *args, "--workers", "1"])
    assert result.exit_code == 0, result.output
    return result.output


def test_to_exports_the_chosen_variant(png_folder):
    root, _ = png_folder
    stats = normstats.compute(root, workers=1)
    out = _run(str(root), "--to", "torchvision", "--variant", "per_image_std", "--no-cache")
    call = ast.parse(out).body[-1].value  # after the import line
    args = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    assert args == {"mean": stats.mean, "std": stats.per_image_std}
    assert "'per_image_std'" in out.splitlines()[0]


def test_bgr_and_json_formats(png_folder):
    root, _ = png_folder
    stats = normstats.compute(root, workers=1)
    result = CliRunner().invoke(main, ["compute", str(root), "--to", "hf", "--bgr", "--no-cache",
                                       "--workers", "1"])
    assert result.exit_code == 0, result.output
    hf = json.loads(result.stdout)
    assert hf["image_mean"] == list(stats.mean[::-1])
    # JSON holds no comment: what the numbers are is said on stderr
    assert "std variant 'std'" in result.stderr and "channel order B, G, R" in result.stderr
    assert result.stderr.startswith(f"normstats: {root}; std variant") and \
        result.stderr.count("normstats:") == 1  # once: it used to read "normstats: normstats:"


def test_resize_and_crop_options(png_folder):
    root, _ = png_folder
    expected = normstats.compute(root, resize=4, center_crop=3, workers=1, cache=False)
    data = json.loads(_run(str(root), "--resize", "4", "--center-crop", "3", "--json",
                           "--no-cache"))
    assert data["mean"] == list(expected.mean)
    assert data["mode"] == "RGB, Resize(4), CenterCrop(3)"
    assert data["pixels_per_channel"] == 24 * 9


def test_sample_says_it_is_an_estimate(array_file):
    out = _run(array_file, "--sample", "50", "--seed", "3")
    assert out.startswith("ESTIMATE from a uniform random sample of 50 of 400 images (seed 3: "
                          "--seed 3 draws the same images)")
    assert "±" in out and "clusters" not in out.splitlines()[0]


def test_precision_json(array_file):
    data = json.loads(_run(array_file, "--sample", "20", "--precision", "0.01", "--seed", "0",
                           "--json"))
    assert data["estimate"]["seed"] == 0
    assert max(max(v) for v in data["estimate"]["half_width"].values()) < 0.01


def test_sampled_export_is_marked(array_file):
    out = _run(array_file, "--sample", "30", "--to", "keras")
    assert out.startswith("# ESTIMATE")


def test_percentiles(array_file):
    pixels = np.load(array_file).reshape(-1, 3)
    out = _run(array_file, "--percentiles", "--json")
    data = json.loads(out)
    assert data["percentiles"]["p99.5"] == [float(np.percentile(pixels[:, c], 99.5)) / 255
                                            for c in range(3)]
    assert "robust range" in _run(array_file, "--percentiles")


def test_percentiles_and_sample_exclude_each_other(array_file):
    result = CliRunner().invoke(main, ["compute", array_file, "--percentiles", "--sample", "5"])
    assert result.exit_code != 0 and "--percentiles" in result.output


def test_mean_image_files_hold_what_the_library_computes(tmp_path, png_folder):
    root, _ = png_folder
    mean, std = tmp_path / "mean.npy", tmp_path / "std"  # any name: written as given
    result = CliRunner().invoke(main, ["compute", str(root), "--resize", "4", "--center-crop",
                                       "4", "--mean-image", str(mean), "--mean-image-std",
                                       str(std), "--workers", "1", "--json"])
    assert result.exit_code == 0, result.output
    library = normstats.compute(root, resize=4, center_crop=4, mean_image_std=True,
                                workers=1, cache=False)
    assert np.array_equal(np.load(mean), library.mean_image)
    assert np.array_equal(np.load(std), library.mean_image_std)
    assert "every image is decoded" in result.stderr  # the cache cannot answer it
    assert "mean image 4×4×3 float64" in result.stderr and "R, G, B" in result.stderr
    assert json.loads(result.stdout)["mean_image"] == library.mean_image.tolist()
    again = CliRunner().invoke(main, ["compute", str(root), "--resize", "4", "--center-crop",
                                      "4", "--mean-image", str(mean)])
    assert again.exit_code == 1 and "exists; choose a new name or pass --overwrite" \
        in again.output
    replaced = CliRunner().invoke(main, ["compute", str(root), "--resize", "4",
                                         "--center-crop", "4", "--mean-image", str(mean),
                                         "--overwrite", "--no-cache"])
    assert replaced.exit_code == 0 and "every image is decoded" not in replaced.stderr


@pytest.mark.parametrize("name", ["mean.png", "MEAN.TIFF"])
def test_a_mean_image_named_as_a_picture_is_refused_before_any_work(tmp_path, png_folder,
                                                                   name):
    """``--mean-image mean.png`` wrote the .npy array under that name: a "PNG" that no image
    viewer opens."""
    root, _ = png_folder
    result = CliRunner().invoke(main, ["compute", str(root), "--mean-image-std",
                                       str(tmp_path / name)])
    stem = str(tmp_path / name).rpartition(".")[0]
    assert result.exit_code == 2 and result.output == (
        f"normstats: error: --mean-image-std writes the exact float64 array with numpy.save, "
        f"not a picture: name it {stem}.npy ({tmp_path / name} would hold a .npy file that no "
        "image viewer opens) (see main compute --help)\n")  # CliRunner names it main
    assert not (tmp_path / name).exists()


def test_mean_image_of_two_sizes_is_one_line(tmp_path, png_folder):
    root, _ = png_folder  # images of three sizes
    result = CliRunner().invoke(main, ["compute", str(root), "--mean-image",
                                       str(tmp_path / "m.npy")])
    assert result.exit_code == 1
    assert result.output.count("\n") == 2  # the cache note, then the error
    assert "the mean image needs images of one size" in result.output
    assert not (tmp_path / "m.npy").exists()


@pytest.mark.parametrize("args", [["--sample", "10"], ["--verify-cache", "2"]])
def test_mean_image_with_what_it_cannot_go_with_is_a_usage_error(array_file, tmp_path, args):
    result = CliRunner().invoke(main, ["compute", array_file, "--mean-image-std",
                                       str(tmp_path / "s.npy"), *args])
    assert result.exit_code == 2 and "--mean-image" in result.output
