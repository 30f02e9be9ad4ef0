"""The comparison figure: per channel, each dataset's per-image std beside its pooled std.

One panel per channel, the datasets side by side in each (the same colour in every panel):
a violin of the per-image population stds (its middle line the mean per-image std), and
the pooled std as a black bar across it, its value written above. Where the bar stands
above the violin, images differ from one another more than their pixels vary within them.
Vector data (N, d) has no per-image std: a panel per feature shows each dataset's std of
that feature over its rows, in the data's own units.

matplotlib is an optional extra (``pip install 'normstats[plot]'``) and is imported only
when a figure is drawn, with the non-interactive Agg backend (no display needed).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from normstats.errors import NormstatsError

if TYPE_CHECKING:  # compare draws with this module: no import back at run time
    from normstats.analyses.compare import Compared

__all__ = ["plot_comparison", "require_matplotlib"]

_MISSING = "matplotlib is not installed: pip install 'normstats[plot]'"


def require_matplotlib() -> Any:
    """`matplotlib.pyplot` on the Agg backend, or a one-line error saying how to install it."""
    try:
        import matplotlib
    except ImportError:
        raise NormstatsError(_MISSING) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(name: str, width: int = 22) -> str:
    """A dataset's name short enough for an axis: a path by its last parts."""
    if len(name) <= width:
        return name
    return "…" + name[-(width - 1):]


def _channel_panel(ax: Any, entries: list[Compared], channel: int, colors: list[str],
                   columns: list[dict[int, int]], unit: str = "channel") -> None:
    """The panel of the first dataset's ``channel``: each dataset's own channel paired with
    it (``columns``: `paired_channels` per dataset), or "no R" where it has none."""
    positions = np.arange(len(entries))
    for x, entry, color, column in zip(positions, entries, colors, columns):
        if channel not in column:  # grayscale L against R, say: nothing to compare
            ax.annotate(f"no {entries[0].stats.channels[channel]}", (x, 0),
                        textcoords="offset points", xytext=(0, 4), ha="center", va="bottom",
                        fontsize=8, color="0.3")
            continue
        own = column[channel]
        stds = None if entry.per_image_std is None else entry.per_image_std[:, own]
        if stds is not None and len(stds) > 1 and np.ptp(stds) > 0:
            parts = ax.violinplot(stds, positions=[x], widths=0.7, showextrema=False,
                                  showmeans=True)
            for body in parts["bodies"]:
                body.set_facecolor(color)
                body.set_edgecolor(color)
                body.set_alpha(0.45)
            parts["cmeans"].set_color(color)
        elif stds is not None and len(stds):
            ax.plot([x - 0.25, x + 0.25], [stds.mean()] * 2, color=color, linewidth=2)
        pooled = entry.stats.std[own]
        ax.plot([x - 0.38, x + 0.38], [pooled, pooled], color="black", linewidth=2.5,
                solid_capstyle="butt")
        ax.annotate(f"{pooled:.3f}", (x, pooled), textcoords="offset points", xytext=(0, 4),
                    ha="center", va="bottom", fontsize=8)
        per_image = entry.stats.per_image_std
        if per_image is not None and pooled > 0:  # the table's per-image/pooled ratio
            ax.annotate(f"ratio {per_image[own] / pooled:.2f}", (x, 0),
                        textcoords="offset points", xytext=(0, 4), ha="center",
                        va="bottom", fontsize=8, color="0.3")
    names = [_label(e.name) for e in entries]
    tilted = any(len(name) > 10 for name in names)
    ax.set_xticks(positions, names, rotation=15 if tilted else 0,
                  ha="right" if tilted else "center", fontsize=8)
    ax.set_xlim(-0.6, len(entries) - 0.4)
    ax.set_title(f"{unit} {entries[0].stats.channels[channel]}")
    ax.grid(axis="y", alpha=0.3)


def plot_comparison(entries: list[Compared], path: str | os.PathLike,
                    columns: list[dict[int, int]]) -> str:
    """Draw the comparison figure to ``path`` (PNG, SVG or PDF by extension).

    One panel per channel of the first dataset: for each dataset, side by side, the
    distribution of its per-image std (a violin, its mean marked) and its pooled std (a
    black bar, labelled), in its channel paired with that one as in the table
    (`normstats.analyses.compare.paired_channels`: by name, else by position); "no R" for
    a dataset without such a channel. ``columns`` holds, per dataset, the first dataset's
    channel -> its own.

    Raises
    ------
    NormstatsError
        When matplotlib is missing (install ``normstats[plot]``).
    """
    channels = len(entries[0].stats.channels)
    plt = require_matplotlib()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    colors = [f"C{i}" for i in range(len(entries))]
    vectors = all(entry.stats.kind == "vectors" for entry in entries)
    scale = entries[0].stats.scale
    width = max(3.2, 0.9 * len(entries) + 1.4)
    fig, axes = plt.subplots(1, channels, figsize=(width * channels, 4.4), sharey=True,
                             squeeze=False)
    try:
        for c in range(channels):
            _channel_panel(axes[0, c], entries, c, colors, columns,
                           "feature" if vectors else "channel")
        values = "values" if vectors else "pixel values"
        axes[0, 0].set_ylabel("std (raw values)" if vectors and scale == 1 else
                              f"std ({values} / {scale:g})")
        top = max(max(e.stats.std) for e in entries)
        top = max([top] + [float(e.per_image_std.max()) for e in entries
                           if e.per_image_std is not None and e.per_image_std.size])
        axes[0, 0].set_ylim(0, top * 1.15 if top > 0 else 1)  # from 0: heights compare
        pooled = Line2D([], [], color="black", linewidth=2.5, label="pooled std")
        handles = [Patch(facecolor="0.6", alpha=0.6, label="per-image std of each image "
                         "(line: their mean)"), pooled,
                   Line2D([], [], linestyle="none", label="ratio: mean per-image std / "
                          "pooled std")]
        if vectors:  # no images: each feature's spread over the rows, nothing per image
            pooled.set_label("std of each feature over its rows")
            handles = [pooled]
        fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False,
                   fontsize=9)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        fig.savefig(os.fspath(path), dpi=110)
    finally:
        plt.close(fig)
    return os.fspath(path)
