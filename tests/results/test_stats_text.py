"""`DatasetStats` reads well: ``str`` is the command line's report, ``repr`` rebuilds it."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

import normstats
from normstats.maths.records import Skipped  # noqa: F401 - named by the repr
from normstats.results.stats import DatasetStats  # noqa: F401 - named by the repr
from normstats_cli import main


def test_str_is_the_cli_report_and_repr_is_a_valid_dataclass_repr(tmp_path, rng):
    images = rng.integers(0, 256, (6, 5, 4, 3), dtype=np.uint8)
    np.save(tmp_path / "x.npy", images)
    stats = normstats.compute(tmp_path / "x.npy")
    cli = CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy"), "--no-cache"]).output
    assert str(stats).strip() == cli.strip()
    assert "torchvision.transforms.Normalize(" in str(stats)
    assert eval(repr(stats)) == stats  # noqa: S307 - our own repr, rebuilt in a test
