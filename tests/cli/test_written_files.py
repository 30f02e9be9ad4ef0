"""The command line never replaces a user's files unasked, and says where its output went."""

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

from normstats_cli import main


def test_demo_refuses_a_folder_holding_files_and_leaves_them_untouched(tmp_path):
    mine = tmp_path / "mine"
    (mine / "class_a").mkdir(parents=True)
    (mine / "class_a" / "img_0000.jpg").write_bytes(b"my photo")
    (mine / "broken.jpg").write_bytes(b"my other photo")
    result = CliRunner().invoke(main, ["demo", "--out", str(mine)])
    assert result.exit_code == 1
    assert "is not empty" in result.output
    assert (mine / "class_a" / "img_0000.jpg").read_bytes() == b"my photo"
    assert (mine / "broken.jpg").read_bytes() == b"my other photo"
    assert sorted(p.name for p in mine.rglob("*")) == ["broken.jpg", "class_a", "img_0000.jpg"]


@pytest.mark.parametrize("existing_empty", [False, True])
def test_demo_writes_into_a_new_or_empty_folder_and_says_it_is_kept(tmp_path, existing_empty):
    out = tmp_path / "demo"
    if existing_empty:
        out.mkdir()
    result = CliRunner().invoke(main, ["demo", "--out", str(out), "--images", "6"])
    assert result.exit_code == 0, result.output
    assert f"kept in {out}" in result.output
    assert len(list(out.rglob("*.png"))) + len(list(out.rglob("*.jpg"))) == 7


def test_demo_without_out_says_its_folder_is_temporary():
    result = CliRunner().invoke(main, ["demo", "--images", "3"])
    assert result.exit_code == 0, result.output
    assert "in a temporary folder removed when the run ends (keep it with --out DIR)" \
        in result.output


def _two_folders(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(
                tmp_path / name / f"{i}.png")
    return str(tmp_path / "a"), str(tmp_path / "b")


def test_plot_refuses_an_existing_file_unless_overwrite(tmp_path):
    a, b = _two_folders(tmp_path)
    plot = tmp_path / "figure.png"
    plot.write_bytes(b"the user's figure")
    refused = CliRunner().invoke(main, ["compare", a, b, "--plot", str(plot)])
    assert refused.exit_code == 1 and "pass --overwrite" in refused.output
    assert plot.read_bytes() == b"the user's figure"
    replaced = CliRunner().invoke(main, ["compare", a, b, "--plot", str(plot), "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_init_check_plot_goes_only_to_a_new_file(tmp_path):
    plot = tmp_path / "variances.png"
    small = ["--depth", "3", "--width", "4", "--batch", "4"]
    first = CliRunner().invoke(main, ["init-check", "--plot", str(plot), *small])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(main, ["init-check", "--plot", str(plot), *small])
    assert again.exit_code == 1 and "exists" in again.output
