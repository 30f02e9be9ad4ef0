"""The multispectral output in README.md and docs/multispectral.md is real: the docs script
writes the same tiles, and the command line prints the lines they show."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from click.testing import CliRunner

from normstats_cli import main

ROOT = Path(__file__).resolve().parent.parent


def _example():
    spec = importlib.util.spec_from_file_location(
        "multispectral_example", ROOT / "docs" / "multispectral_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_documented_report_is_what_the_command_prints(tmp_path, monkeypatch):
    _example().write_tiles(tmp_path / "s2_tiles")
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke(main, ["compute", "s2_tiles", "--mode", "keep", "--no-cache"])
    assert run.exit_code == 0, run.output
    printed = run.output.splitlines()
    table = [line for line in printed if line.startswith(("  B0", "  B1", "  B8A"))]
    assert len(table) == 13
    for document in ("README.md", "docs/multispectral.md"):
        text = (ROOT / document).read_text()
        shown = [line for line in printed[:4] + table if line in text]
        assert printed[1] in shown and table[0] in shown and table[-1] in shown, document
    csv = CliRunner().invoke(main, ["compute", "s2_tiles", "--mode", "keep", "--no-cache",
                                    "--percentiles", "--to", "bands-csv"]).output
    docs = (ROOT / "docs" / "multispectral.md").read_text()
    assert csv.splitlines()[1] in docs and csv.splitlines()[-1] in docs
