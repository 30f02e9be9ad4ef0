"""``--covariance`` on the command line: the report's covariance section, the JSON, the
lighting and ZCA exports, and the refusals of what it cannot be combined with."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import normstats
from normstats_cli import main


@pytest.fixture
def array(tmp_path, rng):
    base = rng.integers(0, 200, (30, 6, 6, 1))
    pixels = np.concatenate([base, base + rng.integers(0, 50, base.shape),
                             rng.integers(0, 256, base.shape)], axis=3).astype(np.uint8)
    path = tmp_path / "x.npy"
    np.save(path, pixels)
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, ["compute", *args])


def test_the_report_shows_covariance_correlation_axes_and_conditioning(array):
    result = invoke(str(array), "--covariance", "--channels", "R,G,B")
    assert result.exit_code == 0, result.output
    for words in ("channel covariance (population, ddof 0; pixels divided by 255)",
                  "channel correlation", "principal axes", "eigval",
                  "condition number κ of the covariance"):
        assert words in result.output
    assert "channel covariance" not in invoke(str(array)).output


def test_the_json_is_the_library_result(array):
    result = invoke(str(array), "--covariance", "--json")
    assert result.exit_code == 0, result.output
    expected = normstats.compute(np.load(array), covariance=True)
    assert normstats.DatasetStats.from_json(result.output).covariance == expected.covariance
    assert json.loads(invoke(str(array), "--json").output)["covariance"] is None


@pytest.mark.parametrize("fmt, name", [("lighting", "Lighting("), ("zca", "ChannelWhitening(")])
def test_the_covariance_exports(array, fmt, name):
    result = invoke(str(array), "--covariance", "--to", fmt)
    assert result.exit_code == 0 and name in result.output
    refused = invoke(str(array), "--to", fmt)
    assert refused.exit_code == 1 and "needs the channel covariance" in refused.output


def test_covariance_needs_every_image(array):
    result = invoke(str(array), "--covariance", "--sample", "10")
    assert result.exit_code == 2 and "--covariance needs every image" in result.output


def test_conditioning_json_is_strict_json_and_one_image_is_singular(tmp_path):
    """A singular covariance (one flat image) printed `Infinity`, which JSON has not (jq and
    JSON.parse reject it), and its header counted "1 images"."""
    path = tmp_path / "one.npy"
    np.save(path, np.full((1, 1, 1, 3), 7, np.uint8))
    result = CliRunner().invoke(main, ["condition", str(path), "--json"])
    assert result.exit_code == 0, result.output
    numbers = json.loads(result.output, parse_constant=lambda name: pytest.fail(name))
    assert numbers == {"channels": ["c0", "c1", "c2"], "raw": None, "standardized": None,
                       "whitened": None}
    report = CliRunner().invoke(main, ["condition", str(path)]).output
    assert "(1 image, channels c0, c1, c2)" in report
    vectors = tmp_path / "v.npy"
    np.save(vectors, np.array([[1.0, 1.0], [2.0, 2.0]]))  # collinear: singular
    as_json = json.loads(CliRunner().invoke(main, ["condition", str(vectors), "--json"]).output,
                         parse_constant=lambda name: pytest.fail(name))
    assert as_json["covariance"]["raw"] is None
