"""The ``normstats`` command line: a thin click layer over the library.

Heavy modules are imported inside commands, so ``normstats --help`` stays instant.
Every failure ends with exit status 1 and one line ``normstats: error: <reason>``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import click

from normstats_cli.cache import cache_group, cache_setting, compute_cache_options, record_extras
from normstats_cli.compare import compare_command, condition_command
from normstats_cli.compute_options import (
    check_output_options,
    extra_options,
    pop_extras,
    render_export,
    run_extras,
)
from normstats_cli.distributed import cluster_options, scheduler_option
from normstats_cli.errors import user_errors
from normstats_cli.manifests import compute_manifest_from_cli, manifests_command, verify_command

__all__ = ["main", "run"]

_MODES = ("RGB", "L", "RGBA", "keep")
_LAYOUTS = ("NHWC", "NCHW", "NHW", "NC", "HWC", "CHW", "HW")


class _Group(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:
        click.ClickException.show = _show_one_line  # type: ignore[method-assign]
        click.UsageError.show = _show_usage_line  # type: ignore[method-assign]
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        # The last line of defence: whatever a command did not foresee still ends in one
        # line (exit status 1), not a traceback; NORMSTATS_DEBUG=1 shows the traceback.
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except MemoryError:
            raise click.ClickException("out of memory; try fewer --workers or a smaller "
                                       "--task-size") from None
        except Exception as error:  # noqa: BLE001 - reported, never swallowed
            if os.environ.get("NORMSTATS_DEBUG"):
                raise
            raise click.ClickException(
                f"unexpected {type(error).__name__}: {error} (a normstats bug: please report "
                "the command; NORMSTATS_DEBUG=1 shows the traceback)") from None


def _show_one_line(self: click.ClickException, file: Any = None) -> None:
    click.echo(f"normstats: error: {self.format_message()}", err=True)


def _show_usage_line(self: click.UsageError, file: Any = None) -> None:
    """Mistakes on the command line: one line too, pointing at the command's help."""
    where = f" (see {self.ctx.command_path} --help)" if self.ctx is not None else ""
    click.echo(f"normstats: error: {self.format_message()}{where}", err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="normstats")
def main() -> None:
    """Exact per-channel normalization constants of image datasets."""


def _compute_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--mode", type=click.Choice(_MODES, case_sensitive=False), default="RGB",
                     show_default=True, metavar="[" + "|".join(_MODES) + "]",
                     help="Decode policy for image files: RGB as torchvision's loader; keep = "
                          "native channels and bit depth (16-bit stays 16-bit)."),
        click.option("--layout", type=click.Choice(_LAYOUTS, case_sensitive=False), default=None,
                     metavar="[" + "|".join(_LAYOUTS) + "]",
                     help="Array layout (default: detected; see the docs)."),
        click.option("--scale", type=float, default=None,
                     help="Divide reported values by this (default: 255 for 8-bit, "
                          "65535 for 16-bit, 1 for float)."),
        click.option("--channels", default=None, help="Channel names, comma separated."),
        click.option("--on-error", type=click.Choice(("skip", "fail"), case_sensitive=False),
                     default="skip",
                     show_default=True, help="Skip unreadable files (named) or stop at the "
                                             "first."),
        click.option("--max-pixels", type=click.IntRange(min=1), default=None,
                     help="Decompression-bomb limit per image (default: Pillow's)."),
        click.option("--max-file-bytes", type=click.IntRange(min=1), default=None,
                     help="Skip image files (and tar members) larger than this, unread "
                          "(default: 8 bytes per --max-pixels pixel + 64 MiB)."),
        click.option("--allow-missing-chunks", is_flag=True, default=False,
                     help="Read the chunks a zarr store lacks as its fill value (and say how "
                          "many images that made) instead of refusing the store."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="Parallel workers of the local pool or of --local-cluster "
                          "(default: usable CPUs)."),
        scheduler_option,
        click.option("--task-size", type=click.IntRange(min=1), default=None,
                     help="Images per Dask task."),
        click.option("--progress/--no-progress", default=None,
                     help="Progress bar on stderr (default: when stderr is a terminal)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=str), metavar="[PATH]...")
@_compute_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@click.option("--variant", default="std", show_default=True,
              help="Std variant of the Normalize line (std, per_image_std, ...).")
@click.option("--format", "format", default=None,
              help="Dataset file format (idx, cifar10-bin, cifar100-bin, cifar-python, tar, "
                   "npz, parquet, image, ...; default: detected from content and name).")
@click.option("--column", "image_key", default=None,
              help="The image column of Parquet files that have several.")
@click.option("--manifest", default=None, help="Compute a known dataset (normstats manifests) "
                                               "instead of PATH; needs --root.")
@click.option("--root", default=None, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the --manifest files.")
@compute_cache_options
@extra_options
@user_errors
@cluster_options
def compute(paths: tuple[str, ...], as_json: bool, variant: str, channels: str | None,
            manifest: str | None, root: str | None, cache_dir: str | None, no_cache: bool,
            verify_cache: str | None, by_folder: bool, outliers: bool, **options: Any) -> None:
    """Compute the normalization constants of PATH: a folder of images (or of WebDataset
    tar shards or Parquet files), an image, .npy, zarr, IDX, CIFAR batch, tar shard, .npz
    or Parquet file. Several PATHs, globs ('train/*.tar') and brace ranges
    ('shard-{000000..000099}.tar') are computed as one dataset, their union. Or a known
    dataset with --manifest NAME --root DIR."""
    import json

    import normstats
    from normstats.maths.text_report import render_report

    names = tuple(c.strip() for c in channels.split(",")) if channels else None
    more = pop_extras(options)  # --to/--bgr/--sample/--seed/--precision/--percentiles
    check_output_options(more, as_json)
    collector = None
    path: str | list[str] | None = (None if not paths else paths[0] if len(paths) == 1
                                    else list(paths))
    if manifest and paths:
        raise click.UsageError(f"--manifest computes the manifest's own files under --root; "
                               f"remove the extra PATH {' '.join(paths)}")
    if manifest and more.handles_computation:
        raise click.UsageError("--sample, --precision and --percentiles take PATH, not --manifest")
    if verify_cache is not None and (manifest or more.handles_computation or no_cache):
        raise click.UsageError("--verify-cache checks the record cache of a plain compute of "
                               "PATH: not with --manifest, --sample, --precision, "
                               "--percentiles or --no-cache")
    if manifest:
        stats = compute_manifest_from_cli(manifest, root, channels=names, **options)
    elif path is None:
        raise click.UsageError("give PATH, or --manifest NAME --root DIR")
    elif more.handles_computation:
        click.echo(run_extras(path, names, variant, as_json, more, options))
        return
    else:
        collector = None
        if by_folder or outliers:
            from normstats.analyses.record_reports import RecordCollector

            collector = RecordCollector()
        stats = normstats.compute(path, channels=names, on_result=collector,
                                  cache=cache_setting(cache_dir, no_cache),
                                  verify_cache=verify_cache, **options)
    extras, lines = record_extras(stats, collector, by_folder, outliers)
    if more.to:
        click.echo(render_export(stats, more, variant))
    elif as_json:
        click.echo(json.dumps({**stats.to_dict(), **extras}, indent=2))
    else:
        click.echo("\n".join([render_report(stats, variant)] + lines))


@main.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Write the generated dataset into this new (or empty) folder and keep it "
                   "(default: a temporary folder, removed when the run ends).")
@click.option("--images", type=click.IntRange(min=1), default=120, show_default=True,
              help="Number of good images (one truncated JPEG is added).")
@user_errors
def demo(out: str | None, images: int) -> None:
    """Build a small synthetic photo dataset offline and compute its constants."""
    import tempfile

    import normstats
    from normstats.maths.text_report import printable, render_report
    from normstats_cli.demo import write_demo_dataset
    from normstats_cli.written_files import check_new_folder, write_with

    if out is not None:
        check_new_folder(out)
    with tempfile.TemporaryDirectory(prefix="normstats-demo-") as scratch:
        root = write_with(lambda folder: write_demo_dataset(folder, images=images),
                          out or scratch)
        where = (f"kept in {printable(str(root))}" if out is not None else
                 "in a temporary folder removed when the run ends (keep it with --out DIR)")
        click.echo(f"demo dataset: {images} synthetic photos (PNG, JPEG, some grayscale) "
                   f"and one truncated JPEG, {where}\n", err=True)
        # a temporary folder's records would outlive it in the cache
        stats = normstats.compute(root, cache=None if out is not None else False)
        click.echo(render_report(stats))


def _register_optional_commands() -> None:
    try:
        from normstats_cli.nn import init_check_command
    except ImportError:
        return
    main.add_command(init_check_command)


_register_optional_commands()
main.add_command(cache_group)
main.add_command(manifests_command)
main.add_command(verify_command)
main.add_command(compare_command)
main.add_command(condition_command)



def run() -> None:
    """The ``normstats`` command (console script and ``python -m normstats``).

    The process ends with the command, so its objects are frozen first: the interpreter's
    last garbage collection at exit then skips them (~15 ms of every run on a folder,
    where the ceiling a run is measured against pays ~10 ms to exit). Library callers and
    tests call `main`, which leaves the collector alone.
    """
    import gc

    try:
        main()
    finally:
        gc.freeze()


if __name__ == "__main__":
    main(sys.argv[1:])
