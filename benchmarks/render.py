"""Render benchmarks/README.md from the results file and the prose template.

The template (``README.template.md``) holds the fixed prose; every figure comes from
``results.json`` through these placeholders:

- ``{{machine}}``: one line per distinct machine the sections ran on;
- ``{{goals}}``: the "Goals at a glance" table, "met" computed against each threshold (and
  against the goal's measured floor, `verdict`);
- ``{{table:SECTION}}``: the section's table(s), headed by when and under what load they ran;
- ``{{value:SECTION.NAME:FORMAT}}``: one named figure of a section, e.g.
  ``{{value:overhead.dask_over_pool:{:.1%}}}``.

A section missing from the results renders as a note saying how to measure it.
"""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
TEMPLATE = HERE / "README.template.md"
README = HERE / "README.md"
OPS = {">=": operator.ge, "<=": operator.le, "<": operator.lt, ">": operator.gt}
PLACEHOLDER = re.compile(r"\{\{(machine|goals|table:(\w+)|value:(\w+)\.(\w+):(.*?))\}\}(?!\})")


def cell(value: object, fmt: str) -> str:
    """One table cell: strings as they are, numbers in ``fmt``, [low, high] as a spread."""
    if isinstance(value, list):
        return "–".join(cell(v, fmt) for v in value)
    if isinstance(value, str) or not fmt:
        return str(value)
    return fmt.format(value)


def table_lines(table: dict) -> list[str]:
    names = [name for name, _ in table["columns"]]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in table["rows"]:
        lines.append("| " + " | ".join(cell(value, fmt) for value, (_, fmt)
                                        in zip(row, table["columns"], strict=True)) + " |")
    return lines


def missing(name: str) -> str:
    return f"*(not measured yet: `python benchmarks/run.py --only {name}`)*"


def section_tables(results: dict, name: str) -> str:
    if name not in results:
        return missing(name)
    section = results[name]
    run = section["machine"]
    speed = f", a 10⁶-step Python loop {run['loop_ms']:.0f} ms" if "loop_ms" in run else ""
    lines = [f"`python benchmarks/run.py --only {name}`, {run['date']}, load average "
             f"{run['load']}{speed}:", ""]
    for table in section["tables"].values():
        lines += table_lines(table) + [""]
    return "\n".join(lines).rstrip("\n")


def verdict(goal: dict) -> str:
    """"yes", "no", or, where the goal's floor (a figure no tool gets past, measured in the
    same run) misses the threshold itself, "no" with that floor: not reachable there; or
    where its bound (a figure normstats' own method does not get past, say its compiled
    pass alone) does, "no" with that bound."""
    if OPS[goal["op"]](goal["value"], goal["threshold"]):
        return "yes"
    floor, bound = goal.get("floor"), goal.get("bound")
    if floor is not None and not OPS[goal["op"]](floor["value"], goal["threshold"]):
        return (f"no: not reachable on this run's machine, {floor['what']} is "
                f"{goal['format'].format(floor['value'])}")
    if bound is not None and not OPS[goal["op"]](bound["value"], goal["threshold"]):
        return (f"no: past normstats' own bound on this run's machine, {bound['what']} is "
                f"{goal['format'].format(bound['value'])}")
    return "no"


def goals_table(results: dict, order: list[str]) -> str:
    lines = ["| goal | measured | threshold | met |", "|---|---|---|---|"]
    for name in order:
        for goal in results.get(name, {}).get("goals", []):
            lines.append(f"| {goal['goal']} | **{goal['format'].format(goal['value'])}** | "
                         f"{goal['op']} {goal['format'].format(goal['threshold'])} | "
                         f"{verdict(goal)} |")
        if name not in results:
            lines.append(f"| section `{name}` | {missing(name)} | | |")
    return "\n".join(lines)


def machine_lines(results: dict) -> str:
    lines = {}
    for name, section in results.items():
        run = section["machine"]
        lines.setdefault(run["line"], []).append(name)
    return "\n".join(f"- {line} (sections: {', '.join(names)})"
                     for line, names in lines.items())


def render(results: dict, template: str, order: list[str]) -> str:
    """The README text for ``results`` (section name → measured section)."""
    def replace(match: re.Match) -> str:
        whole, table, section, value, fmt = match.groups()
        if whole == "machine":
            return machine_lines(results)
        if whole == "goals":
            return goals_table(results, order)
        if table:
            return section_tables(results, table)
        if section not in results or value not in results[section]["values"]:
            # a section measured before this figure existed: say how to measure it
            return f"*(not measured yet: `python benchmarks/run.py --only {section}`)*"
        return fmt.format(results[section]["values"][value])
    return PLACEHOLDER.sub(replace, template)


def render_files(order: list[str]) -> str:
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    return render(results, TEMPLATE.read_text(), order)
