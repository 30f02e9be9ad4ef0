"""Timing and agreement helpers shared by the benchmark sections, and the row format.

A section's table is ``{"columns": [[name, format], ...], "rows": [[cell, ...], ...]}``: a
cell is a string, a number (shown with its column's format) or ``[low, high]`` (a spread).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

import normstats


def measure(function: Callable[[], object], repeats: int) -> tuple[float, float, float, object]:
    """Median, min and max seconds over ``repeats`` calls, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), result


def measure_alternated(functions: Sequence[Callable[[], object]], repeats: int
                       ) -> list[tuple[float, float, float, object]]:
    """`measure` of each of ``functions``, their calls interleaved round by round: a shared
    machine that slows down for a while slows every candidate alike, so ratios hold."""
    times: list[list[float]] = [[] for _ in functions]
    results: list[object] = [None] * len(functions)
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            results[index] = function()
            times[index].append(time.perf_counter() - start)
    return [(statistics.median(t), min(t), max(t), result) for t, result in zip(times, results)]


def difference(result: object, stats: normstats.DatasetStats) -> str | float:
    """Largest absolute difference of a peer's (mean, std, per-image std) from normstats."""
    if isinstance(result, normstats.DatasetStats):
        result = (result.mean, result.std, result.per_image_std)
    if result is None or result[0] is None:
        return "(computes nothing)"
    pairs = [(result[0], stats.mean), (result[1], stats.std), (result[2], stats.per_image_std)]
    gaps = [np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b)))
            for a, b in pairs if a is not None]
    return float(max(gaps))


PEER_COLUMNS = [["tool", ""], ["median s", "{:.3f}"], ["spread s", "{:.3f}"],
                ["images/s", "{:,.0f}"], ["normstats speed-up vs tool", "{:.1f}×"],
                ["max difference from normstats", "{:.1e}"]]


def peer_table(rows: list[tuple], work: int, reference: str) -> dict:
    """Rows (name, median, low, high, difference) as a table against ``reference``."""
    base = {row[0]: row[1] for row in rows}[reference]
    return {"columns": PEER_COLUMNS,
            "rows": [[name, med, [low, high], work / med, med / base, diff]
                     for name, med, low, high, diff in rows]}


def goal(text: str, value: float, op: str, threshold: float, shown: str,
         floor: tuple[str, float] | None = None,
         bound: tuple[str, float] | None = None) -> dict:
    """A goal of the issue: ``value op threshold`` decides "met"; ``shown`` formats value.

    ``floor`` is (what it is, its value, in ``shown``'s units): a figure of the same run
    that no tool reaches past, say the decode-only process's own intercept for a goal on
    normstats' intercept. Where the floor itself misses the threshold, the goals table
    says the goal cannot be met on the machine of that run, and why.

    ``bound`` is the same for a figure that normstats' own method cannot pass, whatever
    surrounds it, say its compiled pass alone on the same bytes: where that misses the
    threshold, the table names it, so the gap reads as the method's, not the
    surroundings'."""
    made = {"goal": text, "value": value, "op": op, "threshold": threshold, "format": shown}
    if floor is not None:
        made["floor"] = {"what": floor[0], "value": floor[1]}
    if bound is not None:
        made["bound"] = {"what": bound[0], "value": bound[1]}
    return made
