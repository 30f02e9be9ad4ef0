"""The comparison figure: per-image std distributions and pixel histograms, per channel.

matplotlib is an optional extra (``pip install 'normstats[plot]'``) and is imported only
when a figure is drawn, with the non-interactive Agg backend (no display needed).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from normstats.analyses.compare import Compared
from normstats.errors import NormstatsError

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


def _shared_bins(entries: list[Compared], channel: int) -> np.ndarray:
    """40 bins over every dataset's per-image stds and pooled std, so bars line up."""
    values = [e.per_image_std[:, channel] for e in entries if e.per_image_std is not None]
    values.append(np.array([e.stats.std[channel] for e in entries]))
    low, high = float(min(v.min() for v in values)), float(max(v.max() for v in values))
    return np.linspace(low, high if high > low else low + 1e-12, 41)


def _std_panel(ax: Any, entries: list[Compared], channel: int, colors: list[str]) -> None:
    bins = _shared_bins(entries, channel)
    for entry, color in zip(entries, colors):
        if entry.per_image_std is not None:
            ax.hist(entry.per_image_std[:, channel], bins=bins, alpha=0.45,
                    color=color, label=f"{entry.name} per-image std")
        ax.axvline(entry.stats.std[channel], color=color, linestyle="--", linewidth=1.5,
                   label=f"{entry.name} pooled std {entry.stats.std[channel]:.4f}")
    ax.set_title(f"{entries[0].stats.channels[channel]}: per-image std vs pooled")
    ax.set_xlabel("std (reported scale)")
    ax.set_ylabel("images")
    ax.legend(fontsize="x-small")


def _pixel_panel(ax: Any, entries: list[Compared], channel: int, colors: list[str]) -> None:
    drawn = False
    for entry, color in zip(entries, colors):
        hist = entry.histogram
        if hist is None:
            continue
        counts = hist.counts[channel]
        values = (np.arange(counts.size) + hist.offset) / entry.stats.scale
        ax.plot(values, counts / counts.sum(), color=color, linewidth=1, label=entry.name)
        drawn = True
    ax.set_title(f"{entries[0].stats.channels[channel]}: pixel values")
    ax.set_xlabel("pixel value (reported scale)")
    ax.set_ylabel("fraction of pixels")
    if drawn:
        ax.legend(fontsize="x-small")
    else:
        ax.text(0.5, 0.5, "no exact histogram (float data)", ha="center", transform=ax.transAxes)


def plot_comparison(entries: list[Compared], path: str | os.PathLike) -> str:
    """Draw the comparison figure to ``path`` (PNG, SVG or PDF by extension).

    Row 1, per channel: the distribution of per-image std of each dataset, its pooled
    std as a dashed line. Row 2: the pixel-value histogram of each dataset.

    Raises
    ------
    NormstatsError
        When matplotlib is missing (install ``normstats[plot]``).
    """
    channels = len(entries[0].stats.channels)
    if any(len(e.stats.channels) != channels for e in entries):
        raise NormstatsError("cannot plot datasets with different channel counts together: "
                             + ", ".join(f"{e.name} {len(e.stats.channels)}" for e in entries))
    plt = require_matplotlib()
    colors = [f"C{i}" for i in range(len(entries))]
    fig, axes = plt.subplots(2, channels, figsize=(4.2 * channels, 6.5), squeeze=False)
    try:
        for c in range(channels):
            _std_panel(axes[0, c], entries, c, colors)
            _pixel_panel(axes[1, c], entries, c, colors)
        fig.tight_layout()
        fig.savefig(os.fspath(path), dpi=100)
    finally:
        plt.close(fig)
    return os.fspath(path)
