"""``normstats compare`` and ``normstats condition``: click commands over the library.

Registered in `normstats_cli` with ``main.add_command``; heavy modules are imported
inside the commands so ``normstats --help`` stays instant.
"""

from __future__ import annotations

from typing import Any

import click

from normstats_cli.cache import cache_setting
from normstats_cli.compute_options import cache_place_flags, read_flags, read_options_from
from normstats_cli.distributed import scheduler_option
from normstats_cli.errors import user_errors
from normstats_cli.written_files import check_new_file, overwrite_option, write_with

__all__ = ["compare_command", "condition_command"]


@click.command("compare")
@click.argument("datasets", nargs=-1, required=True)
@click.option("--root", default=None, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the files of datasets given as manifest names.")
@read_flags
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Parallel workers.")
@scheduler_option
@cache_place_flags
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Draw each dataset's per-image std distribution beside its pooled std, "
                   "per channel, to FILE.png (needs normstats[plot]).")
@overwrite_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the numbers as JSON (null where a matrix is singular).")
def compare_command(datasets: tuple[str, ...], root: str | None, plot_path: str | None,
                    overwrite: bool, as_json: bool, **flags: Any) -> None:
    """Compare DATASETS (folders, arrays or manifest names): one row per dataset and
    channel with the mean, pooled and per-image std (ddof 0 and 1), their ratio, the
    between-image share of the variance, and each dataset's mean and std against the
    first's (normstats.compare).

    Every option reads each dataset as in normstats compute."""
    user_errors(_compare)(datasets, root, plot_path, overwrite, as_json, flags)


def _compare(datasets: tuple[str, ...], root: str | None, plot_path: str | None,
             overwrite: bool, as_json: bool, flags: dict[str, Any]) -> None:
    import normstats

    options = read_options_from(flags)  # what is left: workers, scheduler and the cache
    flags["cache"] = cache_setting(flags["cache"], flags.pop("no_cache"))
    if plot_path:
        from normstats.analyses.plots import require_matplotlib

        check_new_file(plot_path, overwrite)  # fail before computing anything
        require_matplotlib()
    comparison = normstats.compare(list(datasets), root=root, options=options, **flags)
    click.echo(comparison.to_json() if as_json else str(comparison))
    if plot_path:
        written = write_with(comparison.plot, plot_path)
        click.echo(f"plot written to {written}", err=True)


@click.command("condition")
@click.argument("path", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True,
              help="Print the numbers as JSON (null where a matrix is singular).")
def condition_command(path: str, as_json: bool) -> None:
    """Condition numbers for PATH: of XᵀX/n for vector data (.npy or zarr, shape (N, d)),
    raw, min-max scaled and standardized, and of its covariance; of the channel covariance
    of images (any dataset normstats compute reads), as is, standardized and whitened."""
    user_errors(_condition)(path, as_json)


def _condition(path: str, as_json: bool) -> None:
    import json

    from normstats.analyses import conditioning as c
    from normstats.sources.arrays import is_zarr_folder, open_array

    array = open_array(path) if path.endswith(".npy") or is_zarr_folder(path) else None
    if array is not None and array.ndim == 2:
        result = c.conditioning(array)
        click.echo(json.dumps(result.to_dict(), indent=2) if as_json
                   else c.render_conditioning(result, path))
        return
    import normstats

    stats = normstats.compute(path, covariance=True)
    channels = c.channel_conditioning(stats)
    click.echo(json.dumps({"channels": list(stats.channels), **channels.to_dict()}, indent=2)
               if as_json else c.render_channel_conditioning(channels, stats))
