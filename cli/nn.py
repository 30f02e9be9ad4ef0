"""``normstats init-check``: Xavier vanishes through deep ReLU nets, Kaiming does not, measured.

The lead registers :data:`init_check_command` in the main group. Importing this module
costs only click; numpy work and matplotlib are imported when the command runs.
"""

from __future__ import annotations

import click

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
    type=int,
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
def init_check_command(
    depth: int, width: int, batch: int, seed: int, plot_path: str | None
) -> None:
    """Per-layer activation and gradient variance of a deep ReLU net under Xavier,
    Kaiming and Xavier + BatchNorm initialization (white-noise input).

    Xavier's forward variance halves at every ReLU layer; Kaiming's stays near 1.
    """
    from normstats.errors import NormstatsError
    from normstats.nn.init_check import format_table, plot_variances, run_init_check

    result = run_init_check(depth=depth, width=width, batch=batch, seed=seed)
    click.echo(format_table(result))
    if plot_path is not None:
        try:
            plot_variances(result, plot_path)
        except ImportError as exc:
            raise NormstatsError(str(exc)) from exc
        except OSError as exc:
            raise NormstatsError(f"cannot write the plot: {exc.strerror}", path=plot_path) from exc
        click.echo(f"plot written to {plot_path}")
