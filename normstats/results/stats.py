"""`DatasetStats`: every normalization constant of a dataset, and what it means.

Built from a `normstats.maths.summary.Summary`, it holds the per-channel mean, the pooled
std (the correct dataset constant), the averaged per-image std in both ddofs (what
many published constants really are), the root-mean-square per-image std, min and
max, all in the reported scale, together with what was computed: image and pixel
counts, dtype, scale, decode mode and the inputs that were skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from normstats.errors import EmptyDatasetError, InvalidOptionError
from normstats.maths.covariance import CoMoments, co_moments_of
from normstats.maths.exact import FIXED_BITS, scaled_quotient
from normstats.maths.records import NAN_HINT, NON_FINITE, Skipped
from normstats.maths.scale import default_scale, parse_scale
from normstats.maths.summary import Summary
from normstats.maths.variants import VARIANTS
from normstats.maths.whitening import DEFAULT_EPS, PrincipalAxes, Whitening

if TYPE_CHECKING:  # loaded where an estimate, outliers or vectors are made or read back
    from normstats.maths.vectors import VectorSummary
    from normstats.results.findings import Estimate, OutlierReport

__all__ = ["DatasetStats", "VARIANTS"]

#: The std variants a user can choose for normalization, and what each one is.

_PER_CHANNEL = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                "rms_per_image_std", "min", "max")



@dataclass(frozen=True)
class DatasetStats:
    """Per-channel normalization constants of a dataset, in every common variant.

    Per-channel fields are tuples of floats in the reported scale (pixel value / `scale`).
    Per-image fields are None for vector data, and `per_image_std_ddof1` is None when no
    image has two pixels.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> images = np.stack([np.zeros((4, 4, 1), np.uint8), np.full((4, 4, 1), 255, np.uint8)])
    >>> s = normstats.compute(images)
    >>> s.mean, s.std, s.per_image_std
    ((0.5,), (0.5,), (0.0,))
    """

    channels: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    std_ddof1: tuple[float, ...] | None
    per_image_std: tuple[float, ...] | None
    per_image_std_ddof1: tuple[float, ...] | None
    rms_per_image_std: tuple[float, ...] | None
    min: tuple[float, ...]
    max: tuple[float, ...]
    images: int
    pixels_per_channel: int
    dtype: str
    scale: float
    mode: str = "array"
    kind: str = "images"
    source: str = ""
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)
    #: Values used per channel: per feature of vector data, where NaN leaves some out, and
    #: per band of images where nodata was left out (the valid pixels each band kept); None
    #: when every value counted.
    counts: tuple[int, ...] | None = None
    #: Per band, the images without one valid pixel in it (nodata left out): they are left
    #: out of that band's per-image averages. None when no nodata was left out.
    nodata_images: tuple[int, ...] | None = None
    #: The C×C channel covariance (population, and sample: ddof 1) and correlation in the
    #: reported scale, when asked (``covariance=True``; see docs/covariance.md), None
    #: otherwise; ``correlation`` is None when a channel is constant. ``pca()`` and
    #: ``whitening()`` are computed from them.
    covariance: tuple[tuple[float, ...], ...] | None = None
    covariance_ddof1: tuple[tuple[float, ...], ...] | None = None
    correlation: tuple[tuple[float, ...], ...] | None = None
    #: Image files answered by the record cache / decoded in this run (see docs/cache.md);
    #: both 0 when no cache was used. How a result was obtained, not what it is: left
    #: out of ``==``.
    images_cached: int = field(default=0, compare=False)
    images_decoded: int = field(default=0, compare=False)
    #: Cached files decoded again to check the cache (``verify_cache``), and those of
    #: them whose cached record no longer matched the file.
    cache_checked: int = field(default=0, compare=False)
    cache_changed: tuple[str, ...] = field(default=(), compare=False)
    #: What a run found beside the constants, when asked (see `normstats.compute`): the
    #: sample's 95% half-widths (``sample=``), the exact robust range ``{"p0.5": ...,
    #: "p99.5": ...}`` (``percentiles=True``), exact statistics per immediate sub-folder
    #: (``by_folder=True``) and the unusual images (``outliers=True``); None when not asked.
    #: ``==`` compares the constants, not these.
    estimate: Estimate | None = field(default=None, compare=False)
    percentiles: dict[str, tuple[float, ...]] | None = field(default=None, compare=False)
    by_folder: dict[str, DatasetStats] | None = field(default=None, compare=False)
    outliers: OutlierReport | None = field(default=None, compare=False)
    #: The mean image (``mean_image=True``) and its per-position population std over
    #: images (``mean_image_std=True``): float64 (H, W, C) arrays in the reported scale
    #: (see ``docs/mean_image.md``); None when not asked. Left out of ``==`` and ``repr``.
    mean_image: np.ndarray | None = field(default=None, compare=False, repr=False)
    mean_image_std: np.ndarray | None = field(default=None, compare=False, repr=False)
    #: The mean and every std variant in pixel units (scale 1: [0, 255] for 8-bit images),
    #: each rounded once from the exact totals, where the reported value times the scale
    #: can be an ulp away (122.94159090909092 for 122.9415909090909): what the exports in
    #: pixel units print (`in_pixel_units`). None when the scale is 1, for vectors, and for
    #: results read from JSON written without them. Left out of ``==`` and ``repr``.
    pixel_units: dict[str, tuple[float, ...]] | None = field(default=None, compare=False,
                                                              repr=False)

    @classmethod
    def from_summary(cls, summary: Summary, *, channels: tuple[str, ...] | None = None,
                     scale: float | None = None, mode: str = "array", kind: str = "images",
                     source: str = "") -> DatasetStats:
        """Finalize exact totals into the reported constants.

        Raises
        ------
        EmptyDatasetError
            When no image could be used: there is no statistic, and never NaN.
        """
        if summary.images == 0:
            reason = "no usable image"
            if summary.skipped:
                reason += f" ({len(summary.skipped)} skipped, e.g. {summary.skipped[0].path}: " \
                          f"{summary.skipped[0].reason})"
                if summary.skipped[0].reason == NON_FINITE:
                    reason += f": {NAN_HINT}"
            raise EmptyDatasetError(reason, path=source or None)
        dtype, raw_units = summary.signature[1], summary.signature[3]
        scale = float(default_scale(dtype, raw_units) if scale is None else parse_scale(scale))
        n_channels = len(summary.signature[2])
        channels = tuple(channels) if channels else summary.signature[2]
        if len(channels) != n_channels:
            raise InvalidOptionError(f"{len(channels)} channel names given for "
                                     f"{n_channels} channels")
        counts = summary.moments.counts
        if counts is not None and 0 in counts:
            raise EmptyDatasetError(f"band {channels[counts.index(0)]} has no valid pixel in "
                                    f"any of the {summary.images:,} images (all nodata)",
                                    path=source or None)
        nodata_images = None if summary.channel_images is None else \
            tuple(summary.images - v for v in summary.channel_images)
        if kind == "vectors":  # records of rows reduced: counted per feature, as compute does
            counts, nodata_images = counts or (summary.moments.count,) * n_channels, None
        with _in_float64(scale):
            finalized = _finalize(summary, scale, kind)
            covariance = _covariance(co_moments_of(summary.moments, summary.cross), scale)
        pixel_units = None
        if scale != 1:  # the same exact terms, divided by no scale
            with _in_float64(1.0):
                unscaled = _finalize(summary, 1.0, kind)
            pixel_units = {name: unscaled[name] for name in ("mean", *VARIANTS)
                           if unscaled[name] is not None}
        return cls(channels=channels, **finalized, dtype=dtype, pixel_units=pixel_units,
                   scale=scale, mode=mode, kind=kind, source=source,
                   skipped=summary.skipped, images=summary.images,
                   pixels_per_channel=summary.moments.count, counts=counts,
                   nodata_images=nodata_images, **covariance)

    @classmethod
    def from_vectors(cls, summary: VectorSummary, *, channels: tuple[str, ...] | None = None,
                     scale: float | None = None, mode: str = "NC",
                     source: str = "") -> DatasetStats:
        """Per-feature constants of vector data; raw units by default, as scikit-learn.

        Examples
        --------
        >>> import numpy as np
        >>> from normstats.maths.vectors import summarize_vectors
        >>> s = DatasetStats.from_vectors(summarize_vectors(np.array([[1, 2], [3, 2]])))
        >>> s.mean, s.std, s.counts
        ((2.0, 2.0), (1.0, 0.0), (2, 2))
        """
        scale = 1.0 if scale is None else parse_scale(scale)
        with _in_float64(scale):
            done = summary.finalize(scale)
            covariance = _covariance(summary.co_moments, scale)
            _check_extremes(tuple(done["min"]) + tuple(done["max"]))
        names = tuple(channels) if channels else tuple(f"c{j}" for j in
                                                       range(len(summary.features)))
        if len(names) != len(summary.features):
            raise InvalidOptionError(f"{len(names)} channel names given for "
                                     f"{len(summary.features)} features")
        ddof1 = done["variance_ddof1"]
        return cls(channels=names, mean=done["mean"],
                   std=tuple(math.sqrt(v) for v in done["variance"]),
                   std_ddof1=None if None in ddof1 else tuple(math.sqrt(v) for v in ddof1),
                   per_image_std=None, per_image_std_ddof1=None, rms_per_image_std=None,
                   min=done["min"], max=done["max"], images=summary.rows,
                   pixels_per_channel=summary.rows, dtype=summary.dtype, scale=scale,
                   mode=mode, kind="vectors", source=source, skipped=summary.skipped,
                   counts=done["counts"], **covariance)

    def in_pixel_units(self, name: str = "mean") -> tuple[float, ...]:
        """The mean (``"mean"``) or the std variant ``name`` in pixel units (scale 1):
        `pixel_units`, each value rounded once from the exact totals, while it matches
        the reported values (the same scale, not replaced); else the reported values
        times the scale.

        Examples
        --------
        >>> import numpy as np, normstats
        >>> x = np.array([[[[0]], [[0]]], [[[0]], [[1]]], [[[255]], [[255]]]], np.uint8)
        >>> s = normstats.compute(x)
        >>> s.in_pixel_units("mean"), s.mean[0] * s.scale  # 511 / 6 = 85.1666...
        ((85.16666666666667,), 85.16666666666666)
        """
        values = self.mean if name == "mean" else self.variant(name)
        kept = (self.pixel_units or {}).get(name)
        if kept is not None and len(kept) == len(values) and all(
                math.isclose(k / self.scale, v, rel_tol=2**-50, abs_tol=0)
                for k, v in zip(kept, values)):
            return tuple(kept)
        return tuple(v * self.scale for v in values)

    def variant(self, name: str) -> tuple[float, ...]:
        """The std variant ``name`` (see `VARIANTS`), with a clear error if unavailable."""
        if name not in VARIANTS:
            meant = _variant_meant(name)
            raise InvalidOptionError(f"unknown std variant {name!r}; choose one of "
                                     f"{', '.join(VARIANTS)}"
                                     + (f": the report's {name!r} is {meant}" if meant else ""))
        values = getattr(self, name)
        if values is None:
            raise InvalidOptionError(f"variant {name!r} is not defined for this data "
                                     f"({self.kind}, {self.pixels_per_channel} values)")
        return values

    def interval(self, name: str) -> tuple[tuple[float, float], ...]:
        """Per-channel (low, high) 95% confidence interval of statistic ``name`` of a
        sampled result (``compute(..., sample=N)``).

        Examples
        --------
        >>> import numpy as np, normstats
        >>> data = np.random.default_rng(0).integers(0, 256, (50, 4, 4, 1), np.uint8)
        >>> low, high = normstats.compute(data, sample=20, seed=0).interval("mean")[0]
        >>> low < normstats.compute(data).mean[0] < high
        True
        """
        if self.estimate is None:
            raise InvalidOptionError("only a sampled result (sample= or precision=) has "
                                     "confidence intervals")
        if name not in self.estimate.half_width:
            raise InvalidOptionError(f"no interval for {name!r}; there are intervals for "
                                     f"{', '.join(self.estimate.half_width)}")
        values = self.mean if name == "mean" else self.variant(name)
        return tuple((v - h, v + h) for v, h in zip(values, self.estimate.half_width[name]))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` restores an equal object (floats round-trip).

        What a run found beside the constants is there too (null when not asked): the
        ``--json`` of the command line is this dict.
        """
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["skipped"] = [s.to_dict() for s in self.skipped]
        for name in ("channels", "counts", "nodata_images", "cache_changed", *_PER_CHANNEL):
            if data[name] is not None:
                data[name] = list(data[name])
        for name in ("estimate", "outliers"):
            if data[name] is not None:
                data[name] = data[name].to_dict()
        for name in _MATRICES:
            if data[name] is not None:
                data[name] = [list(row) for row in data[name]]
        if self.percentiles is not None:
            data["percentiles"] = {k: list(v) for k, v in self.percentiles.items()}
        if self.by_folder is not None:
            data["by_folder"] = {k: s.to_dict() for k, s in self.by_folder.items()}
        for name in ("mean_image", "mean_image_std"):
            if data[name] is not None:
                data[name] = data[name].tolist()
        if self.pixel_units is not None:
            data["pixel_units"] = {k: list(v) for k, v in self.pixel_units.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DatasetStats:
        """Rebuild from `to_dict` output (or the CLI's ``--json``)."""
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        for name in ("channels", "counts", "nodata_images", "cache_changed", *_PER_CHANNEL):
            if values.get(name) is not None:
                values[name] = tuple(values[name])
        values["skipped"] = tuple(Skipped.from_dict(s) for s in data.get("skipped", ()))
        for name in _MATRICES:
            if values.get(name) is not None:
                values[name] = tuple(tuple(row) for row in values[name])
        from normstats.results.findings import Estimate, OutlierReport

        for name, kind in (("estimate", Estimate), ("outliers", OutlierReport)):
            if values.get(name) is not None:
                values[name] = kind.from_dict(values[name])
        if values.get("percentiles") is not None:
            values["percentiles"] = {k: tuple(v) for k, v in values["percentiles"].items()}
        if values.get("by_folder") is not None:
            values["by_folder"] = {k: cls.from_dict(v) for k, v in values["by_folder"].items()}
        for name in ("mean_image", "mean_image_std"):
            if values.get(name) is not None:
                values[name] = np.array(values[name], dtype=np.float64)
        if values.get("pixel_units") is not None:
            values["pixel_units"] = {k: tuple(v) for k, v in values["pixel_units"].items()}
        return cls(**values)

    def to_json(self, indent: int | None = 2) -> str:
        """JSON text of `to_dict`."""
        return json.dumps(self.to_dict(), indent=indent)

    def pca(self, scale: float | None = None, ddof: int = 0) -> PrincipalAxes:
        """Eigenvalues (largest first) and eigenvectors (columns) of the channel covariance.

        Parameters
        ----------
        scale : float, optional
            Pixel values divided by this (default: the reported scale, ``self.scale``:
            [0, 1] for 8-bit images; 1 gives raw pixel units).
        ddof : {0, 1}
            The population covariance (default) or the sample one.

        Each eigenvector's component of largest magnitude is positive (eigenvectors are
        only defined up to sign; see `normstats.maths.whitening`). ``stats.to("lighting")``
        writes them as a PCA lighting transform.

        Examples
        --------
        >>> import numpy as np, normstats
        >>> x = np.array([[[[0, 0]]], [[[255, 255]]]], np.uint8)
        >>> axes = normstats.compute(x, covariance=True, layout="NHWC").pca()
        >>> axes.eigenvalues, axes.eigenvectors[0][0] > 0
        ((0.5, 0.0), True)
        """
        return PrincipalAxes.of(self._scaled_covariance(scale, ddof), self.channels,
                                self.scale if scale is None else parse_scale(scale), ddof)

    def whitening(self, eps: float = DEFAULT_EPS, kind: str = "zca",
                  scale: float | None = None, ddof: int = 0) -> Whitening:
        """The whitening transform ``(x / scale − mean) @ matrix`` of the channels.

        ``kind`` "zca" gives ``U·diag(1/√(λ + eps))·Uᵀ`` (torchvision's
        ``LinearTransformation`` and kornia's ``ZCAWhitening`` formula), "pca" the
        rotation onto the principal axes, scaled; ``eps`` (default 1e-6, kornia's) is added
        to every eigenvalue; ``scale`` and ``ddof`` as in `pca`.

        Examples
        --------
        >>> import numpy as np, normstats
        >>> x = np.array([[[[0, 0]]], [[[255, 0]]], [[[0, 255]]]], np.uint8)
        >>> w = normstats.compute(x, covariance=True, layout="NHWC").whitening(eps=0)
        >>> np.round(np.cov(w.apply(x.reshape(-1, 2) / 255), rowvar=False, ddof=0), 12).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
        """
        factor = 1.0 if scale is None else self.scale / parse_scale(scale)
        return Whitening.of([m * factor for m in self.mean],
                            self._scaled_covariance(scale, ddof), self.channels,
                            self.scale if scale is None else parse_scale(scale), eps, kind,
                            ddof)

    def _scaled_covariance(self, scale: float | None, ddof: int) -> np.ndarray:
        if ddof not in (0, 1):
            raise InvalidOptionError(f"ddof must be 0 or 1, got {ddof!r}")
        matrix = self.covariance if ddof == 0 else self.covariance_ddof1
        if matrix is None:
            raise InvalidOptionError(
                "this result has no channel covariance: compute it with covariance=True "
                "(--covariance)" if self.covariance is None else
                "the sample covariance needs more than one value per channel")
        factor = 1.0 if scale is None else self.scale / parse_scale(scale)
        return np.asarray(matrix) * (factor * factor)

    def to(self, fmt: str, variant: str = "std", bgr: bool = False) -> str:
        """The constants in framework ``fmt``'s convention (see `normstats.results.exporters`)."""
        from normstats.results.exporters import export  # exporters import this module

        return export(self, fmt, variant=variant, bgr=bgr)

    def to_kwargs(self, fmt: str, variant: str = "std", bgr: bool = False) -> dict[str, Any]:
        """The keyword arguments framework ``fmt`` takes (what `to` prints as code).

        Examples
        --------
        >>> import numpy as np, normstats
        >>> s = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
        >>> s.to_kwargs("torchvision")
        {'mean': (0.5,), 'std': (0.5,)}
        """
        from normstats.results.exporters import export_kwargs  # exporters import this module

        return export_kwargs(self, fmt, variant=variant, bgr=bgr)

    def __str__(self) -> str:
        """The command line's report: header, per-channel table, paste line, skipped files.

        ``repr`` stays the dataclass repr, which rebuilds an equal object.
        """
        from normstats.results.text_report import render_report  # it imports this module

        return render_report(self)

    @classmethod
    def from_json(cls, text: str) -> DatasetStats:
        return cls.from_dict(json.loads(text))



_MATRICES = ("covariance", "covariance_ddof1", "correlation")


def _covariance(totals: CoMoments | None, scale: float) -> dict[str, Any]:
    """The covariance fields of a result from exact co-moment totals (none: not asked)."""
    if totals is None:
        return {}
    if totals.count == 0:
        raise EmptyDatasetError("no vector has every feature finite: the covariance of "
                                "complete rows is undefined")
    return {"covariance": totals.covariance(scale),
            "covariance_ddof1": totals.covariance(scale, ddof=1) if totals.count > 1 else None,
            "correlation": totals.correlation()}


@contextmanager
def _in_float64(scale: float) -> Iterator[None]:
    """Statistics divided by a scale so small that they pass float64's largest value: a
    one-line error naming the scale, not an OverflowError (nor an infinite extreme)."""
    try:
        yield
    except OverflowError:
        raise InvalidOptionError(
            f"scale {scale:g} makes the statistics too large for float64 (divided by it, or "
            "by its square for the variance, they pass 1.8e308): choose a larger scale "
            "(--scale)") from None


def _check_extremes(values: tuple[float, ...]) -> None:
    """An extreme divided by the scale past float64 is an overflow (`_in_float64`), never
    an infinite minimum or maximum reported."""
    if any(map(math.isinf, values)):
        raise OverflowError("an extreme divided by the scale passes float64")


def _variant_meant(name: str) -> str | None:
    """The variant a name in the report's words means ("pooled std", "per-image std
    ddof1", "pooled"), or None.

    Examples
    --------
    >>> _variant_meant("pooled"), _variant_meant("per-image std ddof1"), _variant_meant("x")
    ('std', 'per_image_std_ddof1', None)
    """
    key = "_".join(name.lower().replace("-", " ").replace("_", " ").split())
    key = {"pooled": "std", "pooled_std": "std", "pooled_std_ddof1": "std_ddof1"}.get(key, key)
    return key if key in VARIANTS else None


def _finalize(summary: Summary, scale: float, kind: str) -> dict[str, Any]:
    moments, images = summary.moments, summary.images
    mean, variance = moments.finalize(scale)
    out: dict[str, Any] = {
        "mean": mean, "std": tuple(math.sqrt(v) for v in variance),
        "std_ddof1": None, "per_image_std": None, "per_image_std_ddof1": None,
        "rms_per_image_std": None,
        "min": tuple(v / scale for v in summary.minimum),
        "max": tuple(v / scale for v in summary.maximum),
    }
    _check_extremes(out["min"] + out["max"])
    if min(moments.channel_counts()) > 1:
        out["std_ddof1"] = tuple(math.sqrt(v) for v in moments.finalize(scale, ddof=1)[1])
    if kind == "images":
        # a fixed-point sum s over n images: s / (2**FIXED_BITS · n · scale)
        # per band, the images it has values in (nodata left out); every image otherwise
        channels = len(summary.std_sum)
        counted = summary.channel_images or (images,) * channels
        sampled = summary.channel_images_ddof1 or (summary.images_ddof1,) * channels
        out["per_image_std"] = tuple(scaled_quotient(s, n << FIXED_BITS, scale)
                                     for s, n in zip(summary.std_sum, counted))
        out["rms_per_image_std"] = tuple(math.sqrt(scaled_quotient(s, n << FIXED_BITS, scale, 2))
                                         for s, n in zip(summary.var_sum, counted))
        if min(sampled, default=0):
            out["per_image_std_ddof1"] = tuple(scaled_quotient(s, n << FIXED_BITS, scale)
                                               for s, n in zip(summary.std_ddof1_sum, sampled))
    return out
