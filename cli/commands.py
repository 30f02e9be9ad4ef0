"""The ``normstats`` commands: a thin click layer over the library.

Heavy modules are imported inside commands, so ``normstats --help`` stays instant.
Every failure ends with exit status 1 and one line ``normstats: error: <reason>``.
"""

from __future__ import annotations

import os
from typing import Any

import click

from normstats_cli.cache import cache_group, cache_setting
from normstats_cli.compare import compare_command, condition_command
from normstats_cli.compute_options import (
    CommandLineKept,
    analysis_flags,
    cache_flags,
    check_compute_arguments,
    mean_image_files,
    output_flags,
    read_flags,
    read_options_from,
    refuse_values_of_flags,
    render_result,
    run_flags,
    write_mean_images,
)
from normstats_cli.errors import user_errors
from normstats_cli.manifests import compute_manifest_from_cli, manifests_command, verify_command

__all__ = ["main"]

#: Whether ``compute`` walks a folder in a child while it loads the rest
#: (`normstats.sources.walk_ahead`): only in the command's own process
#: (`normstats_cli.run`), never where `main` is called inside another program (a test
#: runner, a notebook).
walk_ahead_allowed = False

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


def _print_version(ctx: click.Context, _: click.Parameter, value: bool) -> None:
    """``--version``: the version and the kernel in use (an installation built without a C
    compiler computes the same results with numpy, more slowly)."""
    if not value or ctx.resilient_parsing:
        return
    import normstats

    click.echo(f"normstats {normstats.__version__}\nkernel: {normstats.kernel_info()}")
    ctx.exit()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version,
              help="Print the version and the statistics kernel in use (compiled C or numpy).")
def main() -> None:
    """Exact per-channel normalization constants of image datasets."""


@main.command(cls=CommandLineKept)
@click.argument("paths", nargs=-1, type=click.Path(path_type=str), metavar="[PATH]...")
@read_flags
@run_flags
@analysis_flags
@cache_flags
@output_flags
@click.option("--manifest", default=None, help="Compute a known dataset (normstats manifests) "
                                               "instead of PATH; needs --root.")
@click.option("--root", default=None, type=click.Path(exists=True, file_okay=False),
              help="Folder holding the --manifest files.")
@user_errors
def compute(paths: tuple[str, ...], as_json: bool, variant: str, to: str | None, bgr: bool,
            manifest: str | None, root: str | None, no_cache: bool, overwrite: bool,
            **arguments: Any) -> None:
    """Compute the normalization constants of PATH: a folder of images (or of WebDataset
    tar shards or Parquet files, or a Hugging Face save_to_disk folder), an image, .npy,
    zarr, IDX, CIFAR batch, tar shard, .npz, Parquet or Arrow file. Several PATHs, globs
    ('train/*.tar') and brace ranges ('shard-{000000..000099}.tar') are computed as one
    dataset, their union. Folders, images, tar shards, Parquet files and zarr stores may
    lie behind a URL (s3://bucket/train, gcs://..., with --storage-option KEY=VALUE for
    credentials or an S3-compatible endpoint). Or a known dataset with --manifest NAME
    --root DIR.

    Every option is the argument of normstats.compute (or field of normstats.ReadOptions)
    of the same name, but the printing ones (--json, --variant, --to, --bgr), --no-cache
    (cache=False), --manifest/--root, and --mean-image/--mean-image-std, which take the
    file to write the array to (mean_image=True) and --overwrite to replace it."""
    from normstats.sources import walk_ahead

    # a folder is walked in a child while this process loads numpy and normstats
    with walk_ahead.walking(paths[0] if walk_ahead_allowed and len(paths) == 1 and not manifest
                            else None):
        import normstats

        if to and as_json:
            raise click.UsageError("--to prints the constants for one framework and --json "
                                   "the whole result: choose one")
        refuse_values_of_flags(click.get_current_context(), paths)
        options = read_options_from(arguments)
        arguments["cache"] = cache_setting(arguments["cache"], no_cache)
        check_compute_arguments(arguments)
        files = mean_image_files(arguments, overwrite)
        if files and arguments["cache"] is not False and any(os.path.isdir(p) for p in paths):
            click.echo("normstats: the mean image needs the pixels, so every image is "
                       "decoded (the record cache holds per-image numbers, not pixels)",
                       err=True)
        if manifest:
            stats = _manifest(manifest, root, paths, options, arguments)
        elif not paths:
            raise click.UsageError("give PATH, or --manifest NAME --root DIR")
        else:
            stats = normstats.compute(paths[0] if len(paths) == 1 else list(paths),
                                      options=options, **arguments)
        write_mean_images(stats, files)
        click.echo(render_result(stats, variant, as_json, to, bgr))


def _manifest(name: str, root: str | None, paths: tuple[str, ...], options: Any,
              arguments: dict[str, Any]) -> Any:
    """``compute --manifest NAME --root DIR``: the manifest's own files under DIR."""
    if paths:
        raise click.UsageError(f"--manifest computes the manifest's own files under --root; "
                               f"remove the extra PATH {' '.join(paths)}")
    if any(arguments.get(k) is not None for k in ("sample", "precision", "verify_cache")) \
            or arguments.get("percentiles"):
        raise click.UsageError("--sample, --precision, --percentiles and --verify-cache take "
                               "PATH, not --manifest")
    return compute_manifest_from_cli(name, root, options=options, **arguments)


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
    from normstats.results.text_report import printable, render_report
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
