"""The ``compute`` command's export, preprocessing, sampling and percentile options.

Kept out of `normstats_cli` so that module stays a thin list of commands:
`extra_options` adds the options, `pop_extras` takes those that are not arguments of
`normstats.compute` (``--resize`` and ``--center-crop`` are, and pass straight
through), and `run_extras` / `render_export` produce the output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from normstats.maths.exporters import FORMATS

__all__ = ["Extras", "extra_options", "pop_extras", "run_extras", "render_export",
           "check_output_options"]

_RUN_KEYS = ("workers", "scheduler", "task_size", "progress")
_OPEN_KEYS = ("mode", "layout", "max_pixels", "max_file_bytes", "format", "image_key")


@dataclass(frozen=True)
class Extras:
    """The options of `extra_options` that change what ``compute`` does or prints."""

    to: str | None = None
    bgr: bool = False
    sample: int | None = None
    seed: int | None = None
    precision: float | None = None
    percentiles: bool = False

    @property
    def sampling(self) -> bool:
        return self.sample is not None or self.precision is not None

    @property
    def handles_computation(self) -> bool:
        """True when `run_extras` must compute instead of `normstats.compute`."""
        return self.sampling or self.percentiles


def extra_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --to/--bgr, --resize/--center-crop, --sample/--seed/--precision, --percentiles."""
    options = [
        click.option("--to", "--export", "to", type=click.Choice(FORMATS, case_sensitive=False),
                     default=None,
                     help="Print the constants in a framework's convention instead of the "
                          "report (the --variant std; see docs/exporters.md)."),
        click.option("--bgr", is_flag=True, help="Reverse the channel order in the export."),
        click.option("--resize", type=click.IntRange(min=1), default=None,
                     help="Statistics after torchvision Resize(N): shorter side to N."),
        click.option("--center-crop", "center_crop", type=click.IntRange(min=1), default=None,
                     help="Statistics after torchvision CenterCrop(N) (after --resize)."),
        click.option("--sample", type=click.IntRange(min=1), default=None,
                     help="Estimate from N random images, with 95% confidence intervals."),
        click.option("--seed", type=click.IntRange(min=0), default=None,
                     help="Seed of the --sample draw (a non-negative integer)."),
        click.option("--precision", type=float, default=None,
                     help="Double the sample until every 95% half-width is below this."),
        click.option("--percentiles", is_flag=True,
                     help="Also the exact 0.5th/99.5th percentiles (integer images; one "
                          "decode, no record cache)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def pop_extras(options: dict[str, Any]) -> Extras:
    """Remove this module's options from ``options`` (leaving resize/center_crop in)."""
    return Extras(**{name: options.pop(name) for name in
                     ("to", "bgr", "sample", "seed", "precision", "percentiles")})


def check_output_options(extras: Extras, as_json: bool) -> None:
    """Refuse output options that contradict each other, before any work."""
    if extras.to and as_json:
        raise click.UsageError("--to prints the constants for one framework and --json the "
                               "whole report: choose one (--to json gives the constants as "
                               "JSON)")


def render_export(stats: Any, extras: Extras, variant: str, note: str = "") -> str:
    """``stats.to(...)`` with an optional leading note (an estimate says so).

    The export holds only the constants, so skipped files are reported on stderr: a user
    pasting them must still learn that some files were left out.
    """
    _report_skipped(stats)
    text = stats.to(extras.to, variant=variant, bgr=extras.bgr)
    if not note:
        return text
    if extras.to in ("hf", "json"):  # JSON: the note goes in the metadata
        data = json.loads(text)
        (data["_normstats"] if extras.to == "hf" else data)["note"] = note
        return json.dumps(data, indent=2)
    return f"# {note}\n{text}"


def _report_skipped(stats: Any) -> None:
    from normstats.maths.text_report import render_skipped

    lines = render_skipped(stats)
    if lines:
        click.echo("normstats: " + "\n".join(lines), err=True)


def run_extras(data: Any, channels: tuple[str, ...] | None, variant: str, as_json: bool,
               extras: Extras, options: dict[str, Any]) -> str:
    """Compute by sampling or with percentiles, and render the output text."""
    if extras.sampling and extras.percentiles:
        raise click.UsageError("--percentiles needs every pixel: not with --sample/--precision")
    if extras.sampling:
        return _sampled(data, channels, variant, as_json, extras, options)
    return _with_percentiles(data, channels, variant, as_json, extras, options)


def _sampled(data: Any, channels: tuple[str, ...] | None, variant: str, as_json: bool,
             extras: Extras, options: dict[str, Any]) -> str:
    from normstats.analyses.sampling import render_estimate
    from normstats.analyses.sampling_run import sample_estimate
    from normstats.maths.text_report import render_report
    from normstats.sources import open_source
    from normstats.sources.decoding.transforms import transformed_source

    source = open_source(data, fail_fast=options.get("on_error") == "fail", channel_names=channels,
                         **{k: options[k] for k in _OPEN_KEYS if options.get(k) is not None})
    source = transformed_source(source, options.get("resize"), options.get("center_crop"))
    estimate = sample_estimate(source, extras.sample, seed=extras.seed,
                               precision=extras.precision, scale=options.get("scale"),
                               channels=channels,
                               **{k: options[k] for k in _RUN_KEYS if k in options})
    if as_json:
        return json.dumps(estimate.to_dict(), indent=2)
    banner = render_estimate(estimate)
    if extras.to:
        return render_export(estimate.stats, extras, variant, banner[0])
    return "\n".join(banner[:1] + [render_report(estimate.stats, variant), ""] + banner[1:])


def _with_percentiles(data: Any, channels: tuple[str, ...] | None, variant: str,
                      as_json: bool, extras: Extras, options: dict[str, Any]) -> str:
    from normstats.engine.histogram_run import compute_with_histogram, robust_range
    from normstats.maths.text_report import render_report

    stats, histogram = compute_with_histogram(data, channels=channels, **options)
    ranges = robust_range(stats, histogram)
    if as_json:
        return json.dumps({**stats.to_dict(), "percentiles": {k: list(v) for k, v in
                                                              ranges.items()}}, indent=2)
    if extras.to:
        return render_export(stats, extras, variant)
    lines = ["robust range for min-max scaling (exact 0.5th / 99.5th percentiles):"]
    lines += [f"  {name}: {low:.4f} .. {high:.4f}"
              for name, low, high in zip(stats.channels, ranges["p0.5"], ranges["p99.5"])]
    return "\n".join([render_report(stats, variant), ""] + lines)
