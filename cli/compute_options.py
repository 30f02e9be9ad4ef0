"""The flags of the commands that compute, and how their results are printed.

Each flag is an argument of `normstats.compute` (or a field of `normstats.ReadOptions`)
with the same name, ``--center-crop`` for ``center_crop``: the commands parse flags into
those arguments, `read_options_from` builds the one options object from the reading
flags (the only place the command line makes one), and `render_result` prints what
`normstats.compute` returned. Only presentation is the command line's own: ``--json``,
``--variant``, ``--to``, ``--bgr`` (and ``--no-cache``, its spelling of ``cache=False``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from normstats.results.exporters import FORMATS
from normstats_cli.distributed import scheduler_option

__all__ = ["read_flags", "run_flags", "analysis_flags", "cache_flags", "cache_place_flags",
           "output_flags", "read_options_from", "check_compute_arguments",
           "CommandLineKept", "refuse_values_of_flags", "render_result",
           "render_export", "mean_image_files", "write_mean_images", "MEAN_IMAGE_FILES",
           "MODES", "LAYOUTS"]

MODES = ("RGB", "L", "RGBA", "keep")
LAYOUTS = ("NHWC", "NCHW", "NHW", "NC", "HWC", "CHW", "HW")
#: The reading flags: the fields of `normstats.ReadOptions`, in its order.
_READ = ("mode", "layout", "scale", "channels", "on_error", "max_pixels", "max_file_bytes",
         "resize", "center_crop", "format", "image_key", "allow_missing_chunks",
         "storage_options", "nodata")


def _add(options: list[Callable[[Any], Any]]) -> Callable[[Callable[..., Any]], Any]:
    def decorate(command: Callable[..., Any]) -> Any:
        for option in reversed(options):
            command = option(command)
        return command
    return decorate


read_flags = _add([
    click.option("--mode", type=click.Choice(MODES, case_sensitive=False), default="RGB",
                 show_default=True, metavar="[" + "|".join(MODES) + "]",
                 help="Decode policy for image files: RGB as torchvision's loader; keep = "
                      "native channels and bit depth (16-bit stays 16-bit)."),
    click.option("--layout", type=click.Choice(LAYOUTS, case_sensitive=False), default=None,
                 metavar="[" + "|".join(LAYOUTS) + "]",
                 help="Array layout (default: detected; see the docs)."),
    click.option("--scale", type=float, default=None,
                 help="Divide reported values by this (default: 255 for 8-bit, 65535 for "
                      "16-bit, 1 for float and for TIFF rasters deeper than 8 bits or of "
                      "more than 4 bands)."),
    click.option("--channels", default=None, help="Channel names, comma separated."),
    click.option("--on-error", type=click.Choice(("skip", "fail"), case_sensitive=False),
                 default="skip", show_default=True,
                 help="Skip unreadable files (named) or stop at the first."),
    click.option("--max-pixels", type=click.IntRange(min=1), default=None,
                 help="Decompression-bomb limit per image (default: Pillow's)."),
    click.option("--max-file-bytes", type=click.IntRange(min=1), default=None,
                 help="Skip image files (and tar members) larger than this, unread "
                      "(default: 8 bytes per --max-pixels pixel + 64 MiB)."),
    click.option("--resize", type=click.IntRange(min=1), default=None,
                 help="Statistics after torchvision Resize(N): shorter side to N."),
    click.option("--center-crop", type=click.IntRange(min=1), default=None,
                 help="Statistics after torchvision CenterCrop(N) (after --resize)."),
    click.option("--format", default=None,
                 help="Dataset file format (idx, cifar10-bin, cifar100-bin, cifar-python, tar, "
                      "npz, parquet, arrow, image, ...; default: detected from content and name)."),
    click.option("--image-key", default=None,
                 help="The image field of dict items, the image column of Parquet and "
                      "Arrow files and Hugging Face datasets that have several, or the "
                      "extension of the image member of tar shard samples (jpg, png)."),
    click.option("--allow-missing-chunks", is_flag=True, default=False,
                 help="Read the chunks a zarr store lacks as its fill value (and say how "
                      "many images that made) instead of refusing the store."),
    click.option("--storage-option", "storage_options", multiple=True, metavar="KEY=VALUE",
                 help="An argument of the fsspec filesystem of a URL (repeatable): "
                      "key=..., secret=..., endpoint_url=http://host:9000 for an "
                      "S3-compatible store, anon=true; a dotted KEY is nested "
                      "(client_kwargs.region_name=...); true/false and numbers are typed."),
    click.option("--nodata", default=None, metavar="VALUE",
                 help="Value of missing measurements, left out band by band (nan, -9999; "
                      "default: a TIFF's GDAL_NODATA tag under --mode keep, NaN in float "
                      "rasters). Under --mode keep a file's GDAL mask (a TIFF mask page, a "
                      ".msk sidecar) leaves values out too."),
])

run_flags = _add([
    click.option("--workers", type=click.IntRange(min=1), default=None,
                 help="Parallel workers of the local pool or of --local-cluster "
                      "(default: usable CPUs)."),
    scheduler_option,
    click.option("--task-size", type=click.IntRange(min=1), default=None,
                 help="Images per task."),
    click.option("--progress/--no-progress", default=None,
                 help="Progress bar on stderr (default: when stderr is a terminal)."),
    click.option("--local-cluster", is_flag=True,
                 help="Start a dask.distributed cluster of --workers processes on this "
                      "machine for the run (default: the faster local scheduler)."),
    click.option("--threads-per-worker", type=click.IntRange(min=1), default=None,
                 help="Threads per worker process of --local-cluster (default 1)."),
])

analysis_flags = _add([
    click.option("--sample", type=click.IntRange(min=1), default=None,
                 help="Estimate from N random images, with 95% confidence intervals."),
    click.option("--seed", type=click.IntRange(min=0), default=None,
                 help="Seed of the --sample draw (a non-negative integer)."),
    click.option("--precision", type=float, default=None,
                 help="Double the sample until every 95% half-width is below this."),
    click.option("--percentiles", is_flag=True,
                 help="Also the exact 0.5th/99.5th and 2nd/98th percentiles (integer "
                      "images; one decode, no record cache)."),
    click.option("--by-folder", is_flag=True,
                 help="Also statistics per immediate sub-folder (classes, splits)."),
    click.option("--outliers", is_flag=True,
                 help="Also list unusual images: extreme mean or std, blank, grayscale."),
    click.option("--covariance", is_flag=True,
                 help="Also the channel covariance, correlation and principal axes (exact "
                      "for integer images; cached; see docs/covariance.md)."),
    click.option("--mean-image", type=click.Path(dir_okay=False, path_type=str), default=None,
                 metavar="FILE.npy",
                 help="Also write the mean image (the mean of every pixel position, images "
                      "of one size after --resize/--center-crop) to FILE.npy: float64 "
                      "(H, W, C), channels in the report's order, in the reported scale (one "
                      "decode, no record cache)."),
    click.option("--mean-image-std", type=click.Path(dir_okay=False, path_type=str),
                 default=None, metavar="FILE.npy",
                 help="Also write the per-position std over images to FILE.npy (as "
                      "--mean-image)."),
    click.option("--overwrite", is_flag=True,
                 help="Replace the --mean-image/--mean-image-std files if they exist "
                      "(default: refuse)."),
])

#: Where the record cache is (or that there is none): compute and compare.
_CACHE_PLACE = [
    click.option("--cache", type=click.Path(file_okay=False, path_type=str), default=None,
                 help="Record cache directory (default: $NORMSTATS_CACHE, else "
                      "$XDG_CACHE_HOME/normstats or ~/.cache/normstats)."),
    click.option("--no-cache", is_flag=True, help="Neither read nor write the cache."),
]
cache_place_flags = _add(_CACHE_PLACE)
cache_flags = _add([
    *_CACHE_PLACE,
    click.option("--verify-cache", metavar="N|all", default=None,
                 help="Decode N randomly drawn cached files (or all) again and name any whose "
                      "cached record no longer matches; the result uses the fresh records."),
])

output_flags = _add([
    click.option("--json", "as_json", is_flag=True,
                 help="Print the result as one JSON object (DatasetStats.to_json)."),
    click.option("--variant", default="std", show_default=True,
                 help="Std variant of the Normalize line and of --to (std, per_image_std, ...)."),
    click.option("--to", type=click.Choice(FORMATS, case_sensitive=False), default=None,
                 help="Print the constants in a framework's convention instead of the report "
                      "(see docs/exporters.md)."),
    click.option("--bgr", is_flag=True, help="Reverse the channel order in the --to export."),
])


def read_options_from(flags: dict[str, Any]) -> Any:
    """The `normstats.ReadOptions` of the reading flags, which are taken out of ``flags``."""
    from normstats import ReadOptions

    return ReadOptions(**{name: flags.pop(name) for name in _READ if name in flags})


def check_compute_arguments(arguments: dict[str, Any]) -> None:
    """Contradictory arguments of `normstats.compute` are mistakes of the command line
    (exit status 2), found before any work."""
    from normstats.analyses.compute import check_arguments
    from normstats.errors import InvalidOptionError

    checked = ("sample", "seed", "precision", "percentiles", "by_folder", "outliers", "cache",
               "verify_cache", "workers", "scheduler", "local_cluster", "threads_per_worker",
               "covariance")
    given = {name: arguments[name] for name in checked if name in arguments}
    given["mean_image"] = bool(arguments.get("mean_image") or arguments.get("mean_image_std"))
    try:
        check_arguments(**given)
    except InvalidOptionError as error:
        raise click.UsageError(str(error)) from None


class CommandLineKept(click.Command):
    """A command that keeps its arguments as typed (``ctx.meta["typed"]``): what a message
    about a mistake quotes (`refuse_values_of_flags`)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["typed"] = list(args)
        return super().parse_args(ctx, args)


def refuse_values_of_flags(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """A PATH typed right after an on/off flag that names no file or folder was meant as
    the flag's value (``--percentiles 1 99``, ``--covariance true``): say so (exit status
    2), where the run would have said only that the path does not exist.

    Examples
    --------
    >>> @click.command(cls=CommandLineKept)
    ... @click.argument("paths", nargs=-1)
    ... @click.option("--percentiles", is_flag=True)
    ... def command(paths, percentiles):
    ...     refuse_values_of_flags(click.get_current_context(), paths)
    >>> command(["images", "--percentiles", "99"], standalone_mode=False)
    Traceback (most recent call last):
    click.exceptions.UsageError: --percentiles is an on/off flag and takes no value: '99', \
read as a PATH, is no file or folder
    """
    import os

    typed = ctx.meta.get("typed", [])
    flags = {name for param in ctx.command.params
             if isinstance(param, click.Option) and param.is_flag for name in param.opts}
    for before, token in zip(typed, typed[1:]):
        if before in flags and token in paths and "://" not in token and \
                not any(c in token for c in "*?[{") and not os.path.exists(token):
            raise click.UsageError(f"{before} is an on/off flag and takes no value: "
                                   f"{token!r}, read as a PATH, is no file or folder")


#: The flags that name a file for an array of the result, and what each array is.
MEAN_IMAGE_FILES = {"mean_image": "mean image", "mean_image_std": "per-position std"}
#: Names of pictures, which a ``.npy`` file written under them would only pretend to be.
PICTURE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")


def mean_image_files(arguments: dict[str, Any], overwrite: bool) -> dict[str, str]:
    """The files of ``--mean-image`` and ``--mean-image-std``, checked before any work; in
    ``arguments`` each flag becomes the library's ``mean_image=True`` (or False)."""
    from normstats_cli.written_files import check_new_file

    files = {name: arguments[name] for name in MEAN_IMAGE_FILES if arguments.get(name)}
    if len(set(files.values())) < len(files):
        raise click.UsageError("--mean-image and --mean-image-std name the same file")
    for name, path in files.items():
        stem, dot, suffix = path.rpartition(".")
        if dot and f".{suffix.lower()}" in PICTURE_SUFFIXES:
            option = "--" + name.replace("_", "-")
            raise click.UsageError(f"{option} writes the exact float64 array with numpy.save, "
                                   f"not a picture: name it {stem}.npy ({path} would hold a "
                                   ".npy file that no image viewer opens)")
        check_new_file(path, overwrite)
    for name in MEAN_IMAGE_FILES:
        arguments[name] = name in files
    return files


def write_mean_images(stats: Any, files: dict[str, str]) -> None:
    """Write each asked array of ``stats`` to its ``.npy`` file (the exact name given)."""
    import numpy as np

    from normstats.results.text_report import printable
    from normstats_cli.written_files import write_with

    def save(array: Any, path: str) -> None:
        with open(path, "wb") as handle:  # np.save(path) would add ".npy" to other names
            np.save(handle, array, allow_pickle=False)

    for name, path in files.items():
        array = getattr(stats, name)
        write_with(lambda p, a=array: save(a, p), path)
        click.echo(f"normstats: {MEAN_IMAGE_FILES[name]} {'×'.join(map(str, array.shape))} "
                   f"float64 (H, W, C; channels {', '.join(stats.channels)}; pixels divided by "
                   f"{stats.scale:g}) written to {printable(path)}", err=True)


def render_result(stats: Any, variant: str, as_json: bool, to: str | None, bgr: bool) -> str:
    """What ``normstats compute`` prints of a result: its JSON, an export, or the report
    with what the result carries beside the constants (each renderer loaded only for a
    result that carries what it renders)."""
    from normstats.results.text_report import render_report

    if as_json:
        return stats.to_json()
    banner = []
    if stats.estimate is not None:
        from normstats.analyses.sampling import render_estimate

        banner = render_estimate(stats)
    if to:
        return render_export(stats, to, variant, bgr, banner[0] if banner else "")
    lines = banner[:1] + [render_report(stats, variant)] + ([""] + banner[1:] if banner else [])
    if stats.percentiles is not None:
        lines += ["", "robust range for min-max scaling (exact 0.5th / 99.5th percentiles; "
                      "2nd / 98th to clip rasters by):"]
        p = stats.percentiles
        lines += [f"  {name}: {low:.4f} .. {high:.4f}   (2-98: {p2:.4f} .. {p98:.4f})"
                  for name, low, high, p2, p98 in
                  zip(stats.channels, p["p0.5"], p["p99.5"], p["p2"], p["p98"])]
    if stats.by_folder is not None or stats.outliers is not None:
        from normstats.analyses.record_reports import render_by_folder, render_outliers

        if stats.by_folder is not None:
            lines += [""] + render_by_folder(stats.by_folder)
        if stats.outliers is not None:
            lines += [""] + render_outliers(stats.outliers)
    if stats.covariance is not None:
        from normstats.results.text_report import render_covariance

        lines += [""] + render_covariance(stats)
    return "\n".join(lines)


def render_export(stats: Any, to: str, variant: str, bgr: bool, note: str = "") -> str:
    """``stats.to(...)`` with an optional leading note (an estimate says so).

    The export holds only the constants, so skipped files are reported on stderr: a user
    pasting them must still learn that some files were left out.
    """
    from normstats.results.exporters import constants
    from normstats.results.text_report import render_skipped

    lines = render_skipped(stats)
    if lines:
        click.echo("normstats: " + "\n".join(lines), err=True)
    text = stats.to(to, variant=variant, bgr=bgr)
    if to == "hf":
        # JSON holds no comment and every key of it survives save_pretrained: what the
        # numbers are goes to stderr instead
        header = constants(stats, variant, bgr).header(f"pixels divided by {stats.scale:g}")
        said = [note] + [line.removeprefix("# normstats: ").removeprefix("# ")
                         for line in header.splitlines()]
        click.echo("\n".join(f"normstats: {line}" for line in said if line), err=True)
        return text
    return f"# {note}\n{text}" if note else text
