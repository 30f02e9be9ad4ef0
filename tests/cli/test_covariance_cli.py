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
