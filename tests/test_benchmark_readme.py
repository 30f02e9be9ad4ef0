"""benchmarks/README.md is rendered from benchmarks/results.json: no figure typed by hand.

Fast: renders from the committed results file, runs no benchmark.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import render  # noqa: E402
import run  # noqa: E402

ORDER = list(run.SECTIONS)
# a measured figure in prose: a number followed by a unit or a ratio sign (not a size 32×32)
FIGURE = re.compile(r"\d[\d,.]*\s*(×(?!\s*\d)|x\b|%|µs|ms|MiB|GiB|MB|GB|s\b|images/s)")


def results() -> dict:
    return json.loads(render.RESULTS.read_text())


def test_readme_is_the_rendering_of_the_committed_results():
    assert render.render_files(ORDER) == render.README.read_text(), (
        "benchmarks/README.md differs from its rendering: run `python benchmarks/run.py "
        "--render` after editing README.template.md or results.json")


def test_every_registered_section_has_results_and_a_table_in_the_template():
    template = render.TEMPLATE.read_text()
    assert set(ORDER) <= set(results())
    assert [name for name in ORDER if f"{{{{table:{name}}}}}" not in template] == []


def test_every_table_number_comes_from_the_results_file():
    data = results()
    produced = set()
    for section in data.values():
        for table in section["tables"].values():
            produced.update(render.table_lines(table))
    produced.update(render.goals_table(data, ORDER).splitlines())
    table_lines = [line for line in render.README.read_text().splitlines()
                   if line.startswith("|") and re.search(r"\d", line)]
    assert table_lines, "the README has no tables"
    assert [line for line in table_lines if line not in produced] == []


def test_the_template_types_no_figure():
    template = render.TEMPLATE.read_text()
    prose = render.PLACEHOLDER.sub("", template)
    assert not [line for line in prose.splitlines() if line.startswith("|")]
    assert FIGURE.findall(prose) == []


def test_goals_met_is_computed_against_the_threshold():
    section = {"tables": {}, "values": {}, "machine": {"line": "m", "date": "d", "load": "0"},
               "goals": [{"goal": "fast", "value": 1.9, "op": ">=", "threshold": 2,
                          "format": "{:.1f}×"},
                         {"goal": "small", "value": 0.04, "op": "<", "threshold": 0.05,
                          "format": "{:.1%}"}]}
    lines = render.goals_table({"x": section}, ["x", "y"]).splitlines()
    assert lines[2] == "| fast | **1.9×** | >= 2.0× | no |"
    assert lines[3] == "| small | **4.0%** | < 5.0% | yes |"
    assert "python benchmarks/run.py --only y" in lines[4]


def test_a_goal_is_unreachable_only_where_its_measured_floor_misses_the_threshold():
    def intercept(value: float, floor: float) -> dict:
        return {"goal": "intercept", "value": value, "op": "<=", "threshold": 0.2,
                "format": "{:.3f} s", "floor": {"what": "the ceiling's own", "value": floor}}
    assert render.verdict(intercept(0.19, 0.25)) == "yes"
    assert render.verdict(intercept(0.34, 0.18)) == "no"  # the floor leaves room: ours to fix
    assert render.verdict(intercept(0.34, 0.32)) == \
        "no: not reachable on this run's machine, the ceiling's own is 0.320 s"


def test_a_goal_past_normstats_own_bound_names_it_and_a_floor_comes_first():
    def share(value: float, bound: float, floor: float | None = None) -> dict:
        made = {"goal": "share", "value": value, "op": ">=", "threshold": 0.6,
                "format": "{:.0%}", "bound": {"what": "the kernel alone", "value": bound}}
        if floor is not None:
            made["floor"] = {"what": "the memory", "value": floor}
        return made
    assert render.verdict(share(0.62, 0.5)) == "yes"  # a bound never hides a goal met
    assert render.verdict(share(0.32, 0.7)) == "no"  # the kernel leaves room: ours to fix
    assert render.verdict(share(0.32, 0.45)) == \
        "no: past normstats' own bound on this run's machine, the kernel alone is 45%"
    assert render.verdict(share(0.32, 0.45, floor=0.5)).startswith("no: not reachable")


def test_cells_render_spreads_strings_and_formats():
    table = {"columns": [["tool", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"]],
             "rows": [["numpy", 1.23456, [1.0, 2.5]]]}
    assert render.table_lines(table)[2] == "| numpy | 1.235 | 1.000–2.500 |"
