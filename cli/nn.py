"""``normstats init-check``: Xavier vanishes through deep ReLU nets, Kaiming does not, measured.

The lead registers :data:`init_check_command` in the main group. Importing this module
costs only click; numpy work and matplotlib are imported when the command runs.
"""

from __future__ import annotations

import click

from normstats_cli.errors import user_errors
from normstats_cli.written_files import check_new_file, overwrite_option, write_with

__all__ = ["init_check_command"]


@click.command("init-check")
@click.option(
    "--depth",
    type=click.IntRange(min=2),
    default=30,
    show_default=True,
    help="Number of fully connected layers.",
)
@click.option(
    "--width",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="Units per layer (and input dimension).",
)
@click.option(
    "--batch",
    type=click.IntRange(min=2),
    default=512,
    show_default=True,
    help="White-noise samples pushed through the network.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the numpy Generator for input, gradient and weights.",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also draw the variances into this PNG (needs normstats[plot]).",
)
@overwrite_option
@user_errors
def init_check_command(
    depth: int, width: int, batch: int, seed: int, plot_path: str | None, overwrite: bool
) -> None:
    """Per-layer activation and gradient variance of a deep ReLU net under Xavier,
    Kaiming and Xavier + BatchNorm initialization (white-noise input).

    Xavier's forward variance halves at every ReLU layer; Kaiming's stays level, within a
    small factor of 1 (2 from layer 1: the input is not rectified).
    """
    from normstats.nn.init_check import format_table, plot_variances, run_init_check

    if plot_path is not None:
        from normstats.analyses.plots import require_matplotlib

        check_new_file(plot_path, overwrite)  # before the run, not after it
        require_matplotlib()
    result = run_init_check(depth=depth, width=width, batch=batch, seed=seed)
    click.echo(format_table(result))
    if plot_path is not None:
        write_with(lambda path: plot_variances(result, path), plot_path)
        click.echo(f"plot written to {plot_path}")
