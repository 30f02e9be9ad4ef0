"""``normstats compare`` and ``normstats condition``: click commands over the library.

Registered in `normstats_cli` with ``main.add_command``; heavy modules are imported
inside the commands so ``normstats --help`` stays instant.
"""

from __future__ import annotations

import os
from typing import Any

import click

from normstats_cli.compute_options import read_flags, read_options_from
from normstats_cli.distributed import scheduler_option
from normstats_cli.errors import user_errors
from normstats_cli.written_files import check_new_file, overwrite_option, write_with

__all__ = ["compare_command", "condition_command", "load_compared"]


def _resolve(spec: str, root: str | None, options: Any) -> tuple[Any, Any, str]:
    """What to compute for a dataset argument: a path, or a manifest's source under root;
    with the options to compute it with."""
    from normstats.sources.path_patterns import is_pattern

    if os.path.exists(spec) or is_pattern(spec):  # a glob or brace range: the paths it names
        return spec, options, spec
    from normstats.analyses.manifests import load_manifest, open_manifest_source, verify_checksums
    from normstats.errors import NormstatsError

    manifest = load_manifest(spec)
    if root is None:
        raise NormstatsError(f"{spec} is a manifest name: give the folder holding its files "
                             "with --root")
    verify_checksums(manifest, root)
    reported = options.with_changes(channels=options.channels or manifest.source.channels,
                                    resize=None, center_crop=None)  # the source has them
    return open_manifest_source(manifest, root, options), reported, manifest.name


def load_compared(spec: str, *, root: str | None = None, plot: bool = False,
                  options: Any = None, **run: Any) -> Any:
    """Compute one dataset of a comparison (with per-image stds and histogram for plots).

    ``options`` (a `normstats.ReadOptions`) say how to read it; ``run`` are the run
    arguments of `normstats.compute` (workers, scheduler).
    """
    import normstats
    from normstats.analyses.compare import BetweenShare, Compared, per_image_stds
    from normstats.engine.histogram_run import compute_with_histogram
    from normstats.errors import InvalidOptionError

    data, options, name = _resolve(spec, root, options or normstats.ReadOptions())
    shares = [BetweenShare()]  # the exact between-image share, from every record
    if not plot:
        stats = normstats.compute(data, options=options, on_result=shares[0], **run)
        return Compared(name, stats, between=shares[0].shares(stats.images))
    records: list[Any] = []

    def collect(result: Any) -> None:
        shares[-1](result)
        if result.records is not None:
            records.append(result.records)

    try:
        stats, histogram = compute_with_histogram(data, options, on_result=collect, **run)
    except InvalidOptionError:  # float pixels or vectors: no exact histogram
        records.clear()
        shares.append(BetweenShare())
        stats, histogram = normstats.compute(data, options=options, on_result=collect,
                                             cache=False, **run), None
    per_image = per_image_stds(records, stats.scale) if stats.kind == "images" else None
    return Compared(name, stats, per_image, histogram, shares[-1].shares(stats.images))


@click.command("compare")
@click.argument("datasets", nargs=-1, required=True)
@click.option("--root", default=None, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the files of datasets given as manifest names.")
@read_flags
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Parallel workers.")
@scheduler_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Draw per-image std distributions and pixel histograms to FILE.png "
                   "(needs normstats[plot]).")
@overwrite_option
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
def compare_command(datasets: tuple[str, ...], root: str | None, plot_path: str | None,
                    overwrite: bool, as_json: bool, **flags: Any) -> None:
    """Compare DATASETS (folders, arrays or manifest names): mean, pooled and per-image std.

    Every option reads each dataset as in normstats compute."""
    user_errors(_compare)(datasets, root, plot_path, overwrite, as_json, flags)


def _compare(datasets: tuple[str, ...], root: str | None, plot_path: str | None,
             overwrite: bool, as_json: bool, flags: dict[str, Any]) -> None:
    from normstats.analyses.compare import comparison_json, render_comparison

    options = read_options_from(flags)  # what is left: workers and scheduler
    if plot_path:
        from normstats.analyses.plots import require_matplotlib

        check_new_file(plot_path, overwrite)  # fail before computing anything
        require_matplotlib()
    entries = [load_compared(spec, root=root, plot=bool(plot_path), options=options, **flags)
               for spec in datasets]
    click.echo(comparison_json(entries) if as_json else render_comparison(entries))
    if plot_path:
        from normstats.analyses.plots import plot_comparison

        written = write_with(lambda path: plot_comparison(entries, path), plot_path)
        click.echo(f"plot written to {written}", err=True)


@click.command("condition")
@click.argument("path", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
def condition_command(path: str, as_json: bool) -> None:
    """Condition numbers of XᵀX/n for vector data PATH (.npy or zarr, shape (N, d)):
    raw, min-max scaled and standardized."""
    user_errors(_condition)(path, as_json)


def _condition(path: str, as_json: bool) -> None:
    import json

    from normstats.analyses.conditioning import conditioning, render_conditioning
    from normstats.sources.arrays import open_array

    result = conditioning(open_array(path))
    click.echo(json.dumps(result.to_dict(), indent=2) if as_json
               else render_conditioning(result, path))
