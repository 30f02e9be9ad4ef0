"""Several datasets side by side: pooled against per-image std, and how far each one is
from the first.

`compare` computes every dataset (paths, manifest names, arrays: anything
`normstats.compute` reads) and returns a `Comparison`: its ``rows`` (one dict per dataset
and channel), ``to_json()``, the text table as ``str()``, and ``plot(path)``. Each row
holds, in the reported scale:

- ``mean``, ``std`` (pooled), ``per_image_std`` and ``per_image_std_ddof1``: see
  `normstats.DatasetStats`;
- ``ratio`` = per_image_std / std;
- ``between`` = Σ_i n_i·(μ_i − μ)² / Σ (x − μ)²: the share of the pooled variance that
  comes from differences between image means, each image weighted by its pixel count n_i
  (law of total variance: σ² = Σ_i (n_i/n)·σ_i² + Σ_i (n_i/n)·(μ_i − μ)²), exact from the
  records (`BetweenShare`);
- ``mean_vs_first`` = (mean − mean₁) / std₁ and ``std_vs_first`` = std / std₁, with mean₁
  and std₁ the first dataset's: this dataset normalized with the first one's constants
  (0 and 1 when they agree).

`Compared` pairs a dataset's `DatasetStats` with its per-image stds (for the plot).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Unpack

import numpy as np

from normstats.errors import InvalidOptionError, NormstatsError, numbered
from normstats.maths.exact import FIXED_BITS, fixed_sum, int64_sum
from normstats.maths.moments import FloatMoments
from normstats.maths.records import IntegerRecords, Records
from normstats.results.stats import DatasetStats
from normstats.results.text_report import counted
from normstats.sources.options import ReadArguments, ReadOptions, read_options

__all__ = ["compare", "Comparison", "Compared", "comparison_rows", "render_comparison",
           "comparison_json", "BetweenShare", "between_image_share", "per_image_stds",
           "difference_rows", "paired_channels", "explanation", "EXPLANATION", "VERSUS_FIRST"]

EXPLANATION = (
    "Why they differ: the pooled std measures every pixel around the dataset mean, so it "
    "includes how much images differ from one another (bright against dark scenes, "
    "different colour casts); the per-image std averages each image's spread around its own "
    "mean and leaves that between-image part out. By the law of total variance, with each "
    "image weighted by its pixel count, pooled variance = mean per-image variance + "
    "variance of the image means; 'between' is the share of the pooled variance that "
    "comes from differences between image means (0 when every image has the same mean, 1 "
    "when every image is flat; '-' for a constant channel). For images of one size the "
    "ratio per-image/pooled is at most 1 and falls as images differ more; with mixed "
    "sizes the per-image std weighs a small image like a large one, so the ratio can "
    "pass 1. Normalize with "
    "the pooled std to give the inputs unit variance over the dataset; the per-image "
    "std is what per-image standardization (or a published per-image constant) uses. ")
#: The last two columns, which are all a comparison of vector data (N, d) has to explain.
VERSUS_FIRST = (
    "'mean vs 1st' is (mean − the first dataset's mean) / the first's pooled std and "
    "'std vs 1st' is pooled std / the first's pooled std: each dataset normalized with the "
    "first one's constants, 0 and 1 when they agree.")
EXPLANATION += VERSUS_FIRST

_COLUMNS = ("mean", "std", "per_image_std", "per_image_std_ddof1", "ratio", "between",
            "mean_vs_first", "std_vs_first")
_TITLES = ("mean", "pooled std", "per-image std", "per-image ddof1", "per-image/pooled",
           "between", "mean vs 1st", "std vs 1st")


@dataclass(frozen=True)
class Compared:
    """One dataset of a comparison: its name, statistics, the between-image share per
    channel and, for the plot, every image's population std (N, C) in the reported scale."""

    name: str
    stats: DatasetStats
    per_image_std: np.ndarray | None = field(default=None, compare=False)
    between: tuple[float | None, ...] | None = None


def per_image_stds(records: list[Records], scale: float) -> np.ndarray:
    """Per-image population std (N, C) in the reported scale, from collected records."""
    return np.concatenate([np.sqrt(r.image_variance(0)) for r in records]) / scale


class BetweenShare:
    """The share of each channel's pooled variance due to differences between image means.

    By the law of total variance, with image i holding n_i of the n pixels, mean μ_i and
    variance σ_i², the pooled variance is σ² = Σ (n_i/n)·σ_i² + Σ (n_i/n)·(μ_i − μ)²;
    the share is the second term over σ². Fed each task's records (it is an
    ``on_result`` callback), it keeps exact totals: for integer images Σx, Σx² and, per
    distinct image size n_i, Σ(Σx)² as Python ints, so the share is a `Fraction` rounded
    once; for float images the exact fixed-point totals of the records. Never negative;
    None for a constant channel (σ² = 0), where no share is defined.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> share = BetweenShare()
    >>> share.add(records_from_stack(np.array([[[[0], [2]]], [[[4], [6]]]], np.uint8)))
    >>> share.add(records_from_stack(np.full((1, 1, 4, 1), 9, np.uint8)))
    >>> share.shares()  # Σ n_i·(μ_i − μ)² = 2·5² + 2·1² + 4·3² = 88 of n·σ² = 92
    (0.9565217391304348,)
    """

    def __init__(self) -> None:
        self.images = 0
        self._kind: tuple | None = None
        self._count = 0
        self._totals: list[int] = []
        self._squares: list[int] = []
        self._by_size: dict[int, list[int]] = {}
        self._between: FloatMoments | None = None

    def __call__(self, result: Any) -> None:
        if result.records is not None:
            self.add(result.records)

    def add(self, records: Records) -> None:
        """Take in a batch of records of the dataset."""
        if len(records) == 0:
            return
        if self._kind not in (None, records.signature):
            raise ValueError("records of different kinds cannot share one variance")
        self._kind, self.images = records.signature, self.images + len(records)
        self._count += int(records.pixels.sum(dtype=np.int64))
        if isinstance(records, IntegerRecords):
            self._accumulate(int64_sum(records.sums), int64_sum(records.sums_sq))
            for size, squares in _squared_sums_by_size(records):
                known = self._by_size.setdefault(size, [0] * len(squares))
                self._by_size[size] = [a + b for a, b in zip(known, squares)]
        else:
            self._accumulate([0] * records.channels, fixed_sum(records.m2s))
            means = FloatMoments.from_records(records.pixels, records.means, records.residuals,
                                              np.zeros_like(records.m2s))
            self._between = means if self._between is None else self._between.merge(means)

    def _accumulate(self, totals: list[int], squares: list[int]) -> None:
        self._totals = [a + b for a, b in zip(self._totals or [0] * len(totals), totals)]
        self._squares = [a + b for a, b in zip(self._squares or [0] * len(squares), squares)]

    def shares(self, images: int | None = None) -> tuple[float | None, ...] | None:
        """The share per channel (None where σ² = 0); None when no records were seen or
        their number is not ``images`` (the statistics came from elsewhere)."""
        if self.images == 0 or (images is not None and images != self.images):
            return None
        n = self._count
        if self._between is not None:  # float: within = Σ M2_i, between from the means
            between = [v * n for v in self._between.variance()]
            within = [Fraction(w, 1 << FIXED_BITS) for w in self._squares]
            totals = [b + w for b, w in zip(between, within)]
        else:  # integer: n·between = n·Σ_i (Σx_i)²/n_i − (Σx)², n·σ² = n·Σx² − (Σx)²
            parts = [_pairwise_sum([Fraction(a[c], size) for size, a in self._by_size.items()])
                     for c in range(len(self._totals))]
            between = [n * p - s * s for p, s in zip(parts, self._totals)]
            totals = [n * q - s * s for q, s in zip(self._squares, self._totals)]
        return tuple(float(b / t) if t > 0 else None for b, t in zip(between, totals))


def between_image_share(records: Iterable[Records]) -> tuple[float | None, ...] | None:
    """`BetweenShare` of a dataset's records, per channel (None for no records).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.records import records_from_stack
    >>> images = np.stack([np.zeros((2, 2, 1), np.uint8), np.full((2, 2, 1), 255, np.uint8)])
    >>> between_image_share([records_from_stack(images)])
    (1.0,)
    """
    share = BetweenShare()
    for part in records:
        share.add(part)
    return share.shares()


def _squared_sums_by_size(records: IntegerRecords) -> list[tuple[int, list[int]]]:
    """Per distinct pixel count, Σ (Σx_i)² per channel over the images of that size, exact."""
    n = records.pixels.astype(np.int64)
    order = np.argsort(n, kind="stable")
    sizes, starts = np.unique(n[order], return_index=True)
    sums = records.sums[order]
    if int(np.abs(sums).max(initial=0)) <= 3_037_000_499:  # its square fits int64
        squares = sums * sums  # summed as 32-bit halves, so no group total overflows
        high = np.add.reduceat(squares >> 32, starts, axis=0).tolist()
        low = np.add.reduceat(squares & 0xFFFFFFFF, starts, axis=0).tolist()
        totals = [[(h << 32) + lo for h, lo in zip(hs, ls)] for hs, ls in zip(high, low)]
    else:  # 16-bit images of more than ~46,000 pixels: Python ints
        totals = np.add.reduceat(sums.astype(object) ** 2, starts, axis=0).tolist()
    return list(zip(sizes.tolist(), totals))


def _pairwise_sum(values: list[Fraction]) -> Fraction:
    """Sum in a balanced tree: partial denominators stay small (10⁵ sizes take ~1 s)."""
    while len(values) > 1:
        values = [sum(values[i:i + 2], Fraction(0)) for i in range(0, len(values), 2)]
    return values[0] if values else Fraction(0)


def comparison_rows(entries: list[Compared]) -> list[dict[str, Any]]:
    """One dict per dataset and channel with every compared number (None if undefined).

    Examples
    --------
    >>> import numpy as np, normstats
    >>> a = normstats.compute(np.array([0, 255], np.uint8).reshape(2, 1, 1, 1))
    >>> b = normstats.compute(np.array([0, 51], np.uint8).reshape(2, 1, 1, 1))
    >>> row = comparison_rows([Compared("a", a), Compared("b", b)])[1]
    >>> row["mean"], row["std"], row["mean_vs_first"], row["std_vs_first"]
    (0.1, 0.1, -0.8, 0.2)
    """
    first = entries[0].stats if entries else None
    rows = []
    for entry in entries:
        s = entry.stats
        between = entry.between
        pairs = paired_channels(first.channels, s.channels)
        for c, channel in enumerate(s.channels):
            pis = s.per_image_std[c] if s.per_image_std is not None else None
            f = pairs[c]
            scale = first.std[f] if f is not None and first.std[f] > 0 else None
            rows.append({
                "dataset": entry.name, "channel": channel, "mean": s.mean[c], "std": s.std[c],
                "per_image_std": pis,
                "per_image_std_ddof1": (s.per_image_std_ddof1[c]
                                        if s.per_image_std_ddof1 is not None else None),
                "ratio": pis / s.std[c] if pis is not None and s.std[c] > 0 else None,
                "between": between[c] if between is not None else None,
                "mean_vs_first": (s.mean[c] - first.mean[f]) / scale if scale else None,
                "std_vs_first": s.std[c] / scale if scale else None})
    return rows


def paired_channels(first: Sequence[str], other: Sequence[str]) -> list[int | None]:
    """For each channel of ``other``, the channel of ``first`` it is compared with: the
    one of the same name when both name the same channels (in any order), else the one at
    its position when they have as many (an array's c0, c1, c2 against a folder's R, G,
    B); when the counts differ, only a channel of the same name (None for the others:
    grayscale L is not R).

    Examples
    --------
    >>> paired_channels(("R", "G", "B"), ("B", "G", "R"))
    [2, 1, 0]
    >>> paired_channels(("R", "G", "B"), ("c0", "c1", "c2"))
    [0, 1, 2]
    >>> paired_channels(("R", "G", "B"), ("L",)), paired_channels(("R",), ("R", "G", "B"))
    ([None], [0, None, None])
    """
    same_names = sorted(first) == sorted(other)
    if len(first) == len(other) and not same_names:
        return list(range(len(other)))
    index = {name: i for i, name in reversed(list(enumerate(first)))}  # the first of a name
    return [index.get(name) for name in other]


def difference_rows(entries: list[Compared]) -> list[dict[str, Any]]:
    """Each later dataset B against the first, A, per channel: A − B and A / B of the mean
    and pooled std, and what B looks like normalized with A's constants (its mean
    ``(mean_B − mean_A) / std_A`` and std ``std_B / std_A``, 0 and 1 when they agree).
    ``channel`` is A's channel and ``b_channel`` the one of B it is compared with
    (`paired_channels`); B's channels without one have no row.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> a = normstats.compute(np.array([0, 255], np.uint8).reshape(2, 1, 1, 1))
    >>> b = normstats.compute(np.array([0, 51], np.uint8).reshape(2, 1, 1, 1))
    >>> row = difference_rows([Compared("a", a), Compared("b", b)])[0]
    >>> row["mean_diff"], row["std_ratio"], row["b_mean_under_a"], row["b_std_under_a"]
    (0.4, 5.0, -0.8, 0.2)
    """
    if len(entries) < 2:
        return []
    a = entries[0].stats
    rows = []
    for entry in entries[1:]:
        b = entry.stats
        paired = [(i, j) for j, i in enumerate(paired_channels(a.channels, b.channels))
                  if i is not None]
        for i, j in sorted(paired):  # in the first dataset's channel order
            scale = a.std[i] if a.std[i] > 0 else None
            rows.append({
                "a": entries[0].name, "b": entry.name, "channel": a.channels[i],
                "b_channel": b.channels[j],
                "mean_diff": a.mean[i] - b.mean[j], "std_diff": a.std[i] - b.std[j],
                "mean_ratio": a.mean[i] / b.mean[j] if b.mean[j] else None,
                "std_ratio": a.std[i] / b.std[j] if b.std[j] else None,
                "b_mean_under_a": (b.mean[j] - a.mean[i]) / scale if scale else None,
                "b_std_under_a": b.std[j] / scale if scale else None})
    return rows


def _verdict(entries: list[Compared]) -> list[str]:
    """One sentence on the dataset farthest from the first, normalized with its constants,
    and one on each dataset whose channels cannot share the first one's constants."""
    a = entries[0].name
    first = entries[0].stats.channels
    unpaired = [f"{e.name} has {_channels(e.stats.channels)} and {a} {_channels(first)}: one "
                f"set of constants cannot serve both; {_shared(first, e.stats.channels)}"
                for e in entries[1:] if len(e.stats.channels) != len(first)]
    rows = [r for r in difference_rows(entries) if r["b_mean_under_a"] is not None]
    sentences = []
    if rows:
        worst = max(rows, key=lambda r: abs(r["b_mean_under_a"]))
        close = abs(worst["b_mean_under_a"]) < 0.1 and abs(worst["b_std_under_a"] - 1) < 0.1
        channel = worst["b_channel"] + ("" if worst["b_channel"] == worst["channel"] else
                                        f" ({a}'s {worst['channel']})")
        sentences.append(
            f"Using {a}'s constants on {worst['b']} leaves its channel {channel} at mean "
            f"{worst['b_mean_under_a']:+.3f} and std {worst['b_std_under_a']:.3f} instead of "
            "0 and 1: " + ("close enough to share one set of constants." if close else
                           "compute constants for the data the model will see."))
    sentences += unpaired
    return ["", *sentences] if sentences else []


def _channels(names: Sequence[str]) -> str:
    return f"{len(names)} channel{'s' if len(names) > 1 else ''} ({', '.join(names)})"


def _shared(first: Sequence[str], other: Sequence[str]) -> str:
    """Which channels of two datasets with different channel counts are compared."""
    shared = [name for name, i in zip(other, paired_channels(first, other)) if i is not None]
    if not shared:
        return "no channel of the same name to compare ('-')."
    return f"only channels of the same name are compared ({', '.join(shared)})."


def _cell(value: float | None, width: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-".rjust(width)
    return f"{value:>{width}.4f}"


def render_comparison(entries: list[Compared]) -> str:
    """The comparison table, the image counts, and the explanation paragraph.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.zeros((2, 2, 2, 1), np.uint8))
    >>> print(render_comparison([Compared("zeros", s)]).splitlines()[0].split())
    ['dataset', 'channel', 'mean', 'pooled', 'std', 'per-image', 'std', 'per-image', 'ddof1', \
'per-image/pooled', 'between', 'mean', 'vs', '1st', 'std', 'vs', '1st']
    """
    rows = comparison_rows(entries)
    name_w = max(7, *(len(r["dataset"]) for r in rows))
    chan_w = max(7, *(len(r["channel"]) for r in rows))
    widths = [max(8, len(t)) for t in _TITLES]
    lines = [f"{'dataset':<{name_w}}  {'channel':<{chan_w}}" +
             "".join(f"  {t:>{w}}" for t, w in zip(_TITLES, widths))]
    for r in rows:
        lines.append(f"{r['dataset']:<{name_w}}  {r['channel']:<{chan_w}}" +
                     "".join(f"  {_cell(r[k], w)}" for k, w in zip(_COLUMNS, widths)))
    lines.append("")
    lines += [f"{e.name}: {counted(e.stats)}, {e.stats.dtype}, scale {e.stats.scale:g}, "
              f"mode {e.stats.mode}" + (f", {numbered(len(e.stats.skipped), 'input')} skipped"
                                        if e.stats.skipped else "") for e in entries]
    return "\n".join(lines + _verdict(entries) + ["", explanation(entries)])


def explanation(entries: list[Compared]) -> str:
    """`EXPLANATION`; for vector data alone, which has no per-image columns, `VERSUS_FIRST`.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> explanation([Compared("x", normstats.compute(np.ones((3, 2))))]) == VERSUS_FIRST
    True
    """
    if entries and all(e.stats.kind == "vectors" for e in entries):
        return VERSUS_FIRST
    return EXPLANATION


def comparison_json(entries: list[Compared]) -> str:
    """The table rows plus each dataset's full statistics, as JSON."""
    return json.dumps({"rows": comparison_rows(entries),
                       "differences": difference_rows(entries),
                       "datasets": {e.name: e.stats.to_dict() for e in entries},
                       "explanation": explanation(entries)}, indent=2)


@dataclass(frozen=True)
class Comparison:
    """Datasets side by side: what `compare` returns.

    ``rows`` (one dict per dataset and channel, the keys of the module docstring) and
    ``differences`` (each later dataset against the first) are plain lists of dicts, ready
    for ``pandas.DataFrame(comparison.rows)``; ``str()`` is the command line's table.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> a = np.array([0, 255], np.uint8).reshape(2, 1, 1, 1)
    >>> c = normstats.compare({"a": a, "b": a // 5})
    >>> [(r["dataset"], r["std"], r["std_vs_first"]) for r in c.rows]
    [('a', 0.5, 1.0), ('b', 0.1, 0.2)]
    """

    entries: tuple[Compared, ...]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return comparison_rows(list(self.entries))

    @property
    def differences(self) -> list[dict[str, Any]]:
        return difference_rows(list(self.entries))

    def to_json(self) -> str:
        """The rows, the differences and each dataset's full statistics, as JSON."""
        return comparison_json(list(self.entries))

    def plot(self, path: str | os.PathLike) -> str:
        """Draw the comparison figure to ``path`` (`normstats.analyses.plots`)."""
        from normstats.analyses.plots import plot_comparison  # matplotlib: only when drawn

        first = self.entries[0].stats.channels
        columns = [{i: j for j, i in enumerate(paired_channels(first, e.stats.channels))
                    if i is not None} for e in self.entries]
        return plot_comparison(list(self.entries), path, columns)

    def __str__(self) -> str:
        return render_comparison(list(self.entries))


def compare(datasets: Sequence[Any] | Mapping[str, Any], *, root: str | os.PathLike | None = None,
            options: ReadOptions | None = None, workers: int | None = None,
            scheduler: Any = None, cache: str | os.PathLike | bool | None = None,
            **read: Unpack[ReadArguments]) -> Comparison:
    """Compute several datasets and compare them: pooled and per-image std, their ratio, the
    between-image share of the variance, and each one's distance from the first.

    Parameters
    ----------
    datasets : sequence or mapping
        What `normstats.compute` reads (folders, files, globs, arrays, ...), or names of
        shipped manifests (``cifar10-train``), whose files are under ``root``; a mapping
        names each dataset (default: the path, the manifest's name, or ``dataset N``).
    root : str or os.PathLike, optional
        The folder holding the files of datasets given as manifest names.
    options, **read
        How every dataset is read (`normstats.ReadOptions`), as in `normstats.compute`.
    workers, scheduler, cache
        As in `normstats.compute`.

    Returns
    -------
    Comparison
        ``rows``, ``differences``, ``to_json()``, ``plot(path)``; ``str()`` is the table.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> rng = np.random.default_rng(0)
    >>> bright = rng.integers(100, 256, (20, 4, 4, 3), dtype=np.uint8)
    >>> c = normstats.compare([bright, bright // 2, bright[::2]])
    >>> [round(r["mean_vs_first"], 2) for r in c.rows if r["channel"] == "c0"]
    [0.0, -2.0, -0.03]
    """
    options = read_options(options, dict(read))
    named = datasets.items() if isinstance(datasets, Mapping) else \
        ((None, data) for data in datasets)
    entries = tuple(_compared(data, name, index, root, options,
                              {"workers": workers, "scheduler": scheduler, "cache": cache})
                    for index, (name, data) in enumerate(named))
    if not entries:
        raise InvalidOptionError("compare needs at least one dataset")
    return Comparison(entries)


def _compared(data: Any, name: str | None, index: int, root: str | os.PathLike | None,
              options: ReadOptions, run: dict[str, Any]) -> Compared:
    """One dataset computed, with its exact between-image share and per-image stds."""
    from normstats.analyses.compute import compute

    data, options, label = _resolve(data, root, options)
    share, stds = BetweenShare(), []

    def collect(result: Any) -> None:
        share(result)
        if result.records is not None:
            stds.append(np.sqrt(result.records.image_variance(0)))

    stats = compute(data, options=options, on_result=collect, **run)
    per_image = None
    if stats.kind == "images" and sum(len(s) for s in stds) == stats.images:
        per_image = np.concatenate(stds) / stats.scale
    return Compared(name or label or f"dataset {index + 1}", stats, per_image,
                    share.shares(stats.images))


def _resolve(data: Any, root: str | os.PathLike | None,
             options: ReadOptions) -> tuple[Any, ReadOptions, str | None]:
    """What to compute for a dataset: a path as it is; a manifest name, its source under
    ``root`` with the options it is read with; and the name to show."""
    if not isinstance(data, str | os.PathLike):
        return data, options, None
    from normstats.sources.path_patterns import is_pattern

    spec = os.fspath(data)
    if os.path.exists(spec) or is_pattern(spec):  # a glob or brace range: the paths it names
        return spec, options, spec
    from normstats.analyses.manifests import load_manifest, open_manifest_source, verify_checksums

    manifest = load_manifest(spec)
    if root is None:
        raise NormstatsError(f"{spec} is a manifest name: give the folder holding its files "
                             "with root= (--root)")
    verify_checksums(manifest, os.fspath(root))
    reported = options.with_changes(channels=options.channels or manifest.source.channels,
                                    resize=None, center_crop=None)  # the source has them
    return open_manifest_source(manifest, os.fspath(root), options), reported, manifest.name
