"""Fused input normalization (folding the constants into the first layer instead:
`normstats.nn.fold`).

``Normalize`` turns raw images (HWC or NHWC, any dtype; HW or NHW for one channel) into
float32 ``((x / scale) - mean) / std`` in one pass, in CHW/NCHW (default) or HWC/NHWC
layout. By default ``scale`` follows the conventions users have: integer input is divided
by its dtype maximum (255 for uint8, 65535 for uint16), float input is taken as already
in [0, 1] (what ``ToTensor`` gives); an explicit ``scale`` applies to every input.
For 8- and 16-bit input it looks each value up in a per-channel table computed once in
float64, so every output is the float64 formula rounded to float32 (0 ulp apart) and
the data is touched once: read a byte, write a float. Other dtypes go through the same
formula in float64, image by image.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = ["Normalize", "stats_vectors", "image_stats_vectors", "refuse_vector_stats",
           "stats_input_scale", "parse_channel_vector"]

Layout = Literal["chw", "hwc"]
InputLayout = Literal["hwc", "nhwc", "hw", "nhw"]
_LUT_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
#: Float input above this, under constants in [0, 1], is raw 0-255 values, not ToTensor's.
_RAW_FLOAT_ABOVE = 1.5

log = logging.getLogger("normstats.nn")


def parse_channel_vector(name: str, values: Any) -> np.ndarray:
    """Return per-channel ``values`` as a 1-D float64 array, or raise ValueError."""
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise InvalidOptionError(f"{name} must be a finite per-channel sequence, got {values!r}")
    return arr


def stats_vectors(stats: Any, variant: str = "std") -> tuple[np.ndarray, np.ndarray]:
    """``(mean, spread)`` of a ``DatasetStats``-like object as float64 vectors.

    Only duck-types on ``stats.mean`` and ``getattr(stats, variant)``; raises
    InvalidOptionError when the variant is missing or was not computed (None), and for a
    dict (`normstats.DatasetStats.from_dict` makes the object).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(mean=(0.5, 0.4), std=(0.2, 0.1), per_image_std=None)
    >>> [v.tolist() for v in stats_vectors(s)]
    [[0.5, 0.4], [0.2, 0.1]]
    """
    if isinstance(stats, Mapping):  # getattr would find no variant and say so, wrongly
        raise InvalidOptionError(
            f"stats is a {type(stats).__name__}: pass the DatasetStats it holds, "
            "normstats.DatasetStats.from_dict(stats) (a to_dict() or --json result)")
    value = getattr(stats, variant, None)
    if value is None:
        raise InvalidOptionError(
            f"stats has no variant {variant!r} (missing or not computed for this data);"
            " try 'std' or 'per_image_std'"
        )
    mean = parse_channel_vector("mean", stats.mean)
    return mean, _parse_std(value, mean.size)


def image_stats_vectors(stats: Any, variant: str = "std") -> tuple[np.ndarray, np.ndarray]:
    """`stats_vectors` for an image normalizer; statistics of vector data refused
    (`refuse_vector_stats`).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> image_stats_vectors(SimpleNamespace(mean=(1.0,), std=(2.0,), kind="vectors"))
    Traceback (most recent call last):
    ...
    normstats.errors.InvalidOptionError: these statistics are of vector data (N, d), and \
this normalizes images: standardize rows with (x - np.asarray(stats.mean)) / \
np.asarray(stats.std) (scikit-learn's StandardScaler with the printed constants), or start \
a BatchNorm1d with normstats.nn.BatchNorm.from_stats(stats)
    """
    refuse_vector_stats(stats, "normalizes", "standardize rows with (x - np.asarray("
                        "stats.mean)) / np.asarray(stats.std) (scikit-learn's StandardScaler "
                        "with the printed constants), or start a BatchNorm1d with "
                        "normstats.nn.BatchNorm.from_stats(stats)")
    return stats_vectors(stats, variant)


def refuse_vector_stats(stats: Any, does: str, instead: str) -> None:
    """Refuse statistics of vector data (N, d) given to a transform of images, which would
    take their features for channels; ``instead`` says what does the job for rows.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> refuse_vector_stats(SimpleNamespace(kind="images"), "whitens", "-") is None
    True
    """
    if getattr(stats, "kind", "images") == "vectors":
        raise InvalidOptionError(f"these statistics are of vector data (N, d), and this "
                                 f"{does} images: {instead}")


def _parse_std(std: Any, channels: int) -> np.ndarray:
    std = parse_channel_vector("std", std)
    if std.size != channels:
        raise InvalidOptionError(f"mean has {channels} channels but std has {std.size}")
    if np.any(std <= 0):
        raise InvalidOptionError(f"std must be positive, got {std.tolist()}")
    return std


class Normalize:
    """Per-channel ``((x / scale) - mean) / std`` to float32, fused into one pass.

    Parameters
    ----------
    mean, std : sequence of float
        Per-channel constants in the reported scale (``[0, 1]`` for integer images).
    scale : float, optional
        Maps raw values to that scale. Default: each input's own convention, the dtype
        maximum for integers (255, 65535) and 1 for floats (already in [0, 1]). Give it to
        override, e.g. ``scale=255`` for float pixels in [0, 255].
    layout : {"chw", "hwc"}
        Output layout: channels first (PyTorch) or kept channels last.
    threads : int
        Images are split across this many threads (the work releases the GIL).

    Examples
    --------
    >>> norm = Normalize(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.5))
    >>> x = np.array([[[0, 255, 51]]], dtype=np.uint8)  # one pixel, HWC
    >>> y = norm(x)
    >>> y.shape, y.dtype.name
    ((3, 1, 1), 'float32')
    >>> y.ravel().tolist()
    [-2.0, 2.0, -0.6000000238418579]
    >>> norm.inverse(y, dtype=np.uint8).tolist()
    [[[0, 255, 51]]]
    """

    def __init__(
        self, mean: Any, std: Any, scale: float | None = None, *, layout: Layout = "chw",
        threads: int = 1, variant: str | None = None, channel_names: tuple[str, ...] | None = None
    ) -> None:
        self.mean = parse_channel_vector("mean", mean)
        self.std = _parse_std(std, self.mean.size)
        if scale is not None and (not scale > 0 or not np.isfinite(scale)):
            raise InvalidOptionError(f"scale must be positive and finite, got {scale}")
        layout = _lower(layout)  # choices forgive case, as everywhere in normstats
        if layout not in ("chw", "hwc"):
            raise InvalidOptionError(f"layout must be 'chw' or 'hwc', got {layout!r}")
        if threads < 1:
            raise InvalidOptionError(f"threads must be at least 1, got {threads}")
        self.scale = None if scale is None else float(scale)
        self.variant = variant
        self.channel_names = None if channel_names is None else tuple(channel_names)
        if self.channel_names is not None and len(self.channel_names) != self.mean.size:
            raise InvalidOptionError(f"{len(self.channel_names)} channel names for "
                                     f"{self.mean.size} channels")
        self.layout: Layout = layout
        self.threads = int(threads)
        self._luts: dict[np.dtype, np.ndarray] = {}
        self._raw_floats_said = False
        self._wide_integers_said = False

    @classmethod
    def from_stats(
        cls, stats: Any, variant: str = "std", *, layout: Layout = "chw", threads: int = 1
    ) -> Normalize:
        """Build from any object with ``mean``, ``scale`` and the ``variant`` attribute.

        The variant and the channel order (``stats.channels``) are kept and shown in the
        ``repr``. Constants reported in [0, 1] (the default for integer images) normalize
        each input by its own convention; constants in another scale (``--scale 1`` on
        8-bit data: raw [0, 255] units) apply that scale to every input.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616),
        ...                     per_image_std=(0.2023, 0.1994, 0.2010), scale=255.0)
        >>> Normalize.from_stats(s, "per_image_std").std.tolist()
        [0.2023, 0.1994, 0.201]
        """
        mean, std = image_stats_vectors(stats, variant)
        return cls(mean, std, stats_input_scale(stats), layout=layout, threads=threads,
                   variant=variant, channel_names=getattr(stats, "channels", None))

    @property
    def channels(self) -> int:
        """Number of channels C."""
        return self.mean.size

    def scale_for(self, dtype: Any) -> float:
        """The divisor input of ``dtype`` gets: ``scale`` if given, else its convention.

        Examples
        --------
        >>> n = Normalize((0.5,), (0.5,))
        >>> n.scale_for(np.uint8), n.scale_for(np.uint16), n.scale_for(np.float32)
        (255.0, 65535.0, 1.0)
        """
        if self.scale is not None:
            return self.scale
        dtype = np.dtype(dtype)
        return float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0

    def lut(self, dtype: Any = np.uint8) -> np.ndarray:
        """The (C, 2**bits) float32 table used for 8- or 16-bit input.

        Examples
        --------
        >>> Normalize((0.0,), (1.0,)).lut()[0, [0, 255]].tolist()
        [0.0, 1.0]
        """
        dtype = np.dtype(dtype)
        if dtype not in _LUT_DTYPES:
            raise TypeError(f"tables exist for uint8 and uint16 input, not {dtype}")
        if dtype not in self._luts:
            values = np.arange(np.iinfo(dtype).max + 1, dtype=np.float64)
            scale = self.scale_for(dtype)
            table = (values[None, :] / scale - self.mean[:, None]) / self.std[:, None]
            self._luts[dtype] = table.astype(np.float32)
        return self._luts[dtype]

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None, *,
                 input_layout: InputLayout | None = None) -> np.ndarray:
        """Normalize an HWC image or an NHWC batch (one channel: also HW or NHW).

        ``out`` is an optional float32 target. A one-channel 3-d input whose last axis is 1
        could be one (H, W, 1) image or (N, H, 1) images: say which with ``input_layout``
        ("hwc" or "nhw", in any case); it is never guessed.
        """
        x = np.asarray(x)
        x, single = self._as_nhwc(x, input_layout)
        batch = self._check_input(x)
        self._say_raw_floats(batch)
        self._say_narrow_wide_integers(batch)
        shape = _output_shape(batch.shape, self.layout)[1:] if single else \
            _output_shape(batch.shape, self.layout)
        if out is None:
            out = np.empty(shape, np.float32)
        elif out.dtype != np.float32 or out.shape != shape:
            raise InvalidOptionError(
                f"out must be float32 of shape {shape}, got {out.dtype} {out.shape}"
            )
        self._run(batch, out[None] if single else out)
        return out

    def _as_nhwc(self, x: np.ndarray, input_layout: str | None) -> tuple[np.ndarray, bool]:
        """The input as NHWC, and whether it was a single image."""
        layout = _lower(input_layout) if input_layout is not None else self._guess_layout(x)
        expected = {"hwc": 3, "nhwc": 4, "hw": 2, "nhw": 3}
        if layout not in expected:
            raise InvalidOptionError(f"input_layout must be one of {', '.join(expected)}, "
                                     f"got {layout!r}")
        if x.ndim != expected[layout]:
            raise InvalidOptionError(f"input_layout {layout!r} needs a {expected[layout]}-d "
                                     f"input, got shape {x.shape}")
        if layout in ("hw", "nhw"):
            if self.channels != 1:
                raise InvalidOptionError(f"{layout.upper()} input has one channel but this "
                                         f"Normalize has {self.channels}")
            x = x[..., None]
        return (x[None], True) if layout in ("hwc", "hw") else (x, False)

    def _guess_layout(self, x: np.ndarray) -> str:
        if self.channels == 1:
            if x.ndim == 2:
                return "hw"
            if x.ndim == 3 and x.shape[-1] == 1:
                raise InvalidOptionError(
                    f"a one-channel input of shape {x.shape} is one (H, W, 1) image or "
                    f"{x.shape[0]} images (N, H, W) with W=1; say which with "
                    "input_layout='hwc' or 'nhw'")
            if x.ndim == 3:
                return "nhw"
        if x.ndim not in (3, 4):
            raise InvalidOptionError(f"expected HWC or NHWC input with {self.channels} "
                                     f"channels last, got shape {x.shape}")
        return "hwc" if x.ndim == 3 else "nhwc"

    def _check_input(self, x: np.ndarray) -> np.ndarray:
        if x.ndim not in (3, 4) or x.shape[-1] != self.channels:
            first = x.ndim in (3, 4) and x.shape[-3] == self.channels
            raise InvalidOptionError(
                f"expected HWC or NHWC input with {self.channels} channels last,"
                f" got shape {x.shape}" + (
                    ": channels first? Move them last (x.transpose(0, 2, 3, 1) for NCHW), or "
                    "normalize (..., C, H, W) tensors with normstats.nn.torch.Normalize"
                    if first else "")
            )
        if x.dtype.kind not in "uif":
            raise TypeError(f"expected integer or float pixels, got dtype {x.dtype}")
        return x

    def _say_raw_floats(self, batch: np.ndarray) -> None:
        """Say once when float input holds values far above 1 under constants in [0, 1]:
        float pixels are taken as already divided (ToTensor's [0, 1]), so raw 0-255 floats
        (``x.astype(np.float32)``) would come out ~255 times too large without a word."""
        if self._raw_floats_said or batch.dtype.kind != "f" or self.scale is not None or \
                not batch.size or self.mean.max() > 1:
            return
        top = float(np.max(batch))
        if top > _RAW_FLOAT_ABOVE:
            self._raw_floats_said = True
            log.warning("normstats: float pixels up to %g given to Normalize of constants in "
                        "[0, 1]: float input is taken as already divided (as ToTensor gives "
                        "it), and these look like raw 0-255 values; divide them first, or "
                        "build the Normalize with scale=255", top)

    def _say_narrow_wide_integers(self, batch: np.ndarray) -> None:
        """Say once when 32- or 64-bit integer input holds 8- or 16-bit values: integers are
        divided by their dtype's maximum (as torchvision's ``convert_image_dtype`` does), so
        pixels 0-255 held as int64 (``torch.tensor`` of a list, ``np.array(image,
        dtype=int)``) would all normalize to about -mean/std without a word."""
        if self._wide_integers_said or batch.dtype.kind not in "iu" or \
                batch.dtype.itemsize < 4 or self.scale is not None or not batch.size:
            return
        top = int(np.max(batch))
        if top <= np.iinfo(np.uint16).max:
            self._wide_integers_said = True
            log.warning("normstats: %s pixels up to %d given to Normalize: integer input is "
                        "divided by its dtype's maximum (%g), so these all normalize to "
                        "about -mean/std; convert them to the type of their values first "
                        "(x.astype(np.uint8) for 0-255), or build the Normalize with "
                        "scale=255", batch.dtype, top, float(np.iinfo(batch.dtype).max))

    def _run(self, batch: np.ndarray, out: np.ndarray) -> None:
        one = self._one_lut if batch.dtype in _LUT_DTYPES else self._one_float
        if self.threads == 1 or batch.shape[0] == 1:
            for i in range(batch.shape[0]):
                one(batch[i], out[i])
            return
        with ThreadPoolExecutor(self.threads) as pool:
            list(pool.map(lambda i: one(batch[i], out[i]), range(batch.shape[0])))

    def _plane(self, out: np.ndarray, c: int) -> np.ndarray:
        return out[c] if self.layout == "chw" else out[..., c]

    def _one_lut(self, image: np.ndarray, out: np.ndarray) -> None:
        lut = self.lut(image.dtype)
        for c in range(self.channels):
            # mode="clip" skips the bounds-check buffer; indices cannot leave the table.
            np.take(lut[c], image[..., c], out=self._plane(out, c), mode="clip")

    def _one_float(self, image: np.ndarray, out: np.ndarray) -> None:
        scale = self.scale_for(image.dtype)
        for c in range(self.channels):
            plane = image[..., c].astype(np.float64) / scale
            self._plane(out, c)[...] = (plane - self.mean[c]) / self.std[c]

    def inverse(self, y: np.ndarray, dtype: Any = np.float32) -> np.ndarray:
        """Undo the normalization for visualization: raw-scale HWC / NHWC of ``dtype``.

        Integer ``dtype`` rounds to nearest and clips to its range, so uint8 input
        round-trips exactly.

        Examples
        --------
        >>> norm = Normalize((0.5,), (0.5,), scale=1.0, layout="hwc")
        >>> norm.inverse(np.array([[[-1.0], [1.0]]])).ravel().tolist()
        [0.0, 1.0]
        """
        y = np.asarray(y, dtype=np.float64)
        channel_axis = -3 if self.layout == "chw" else -1
        if y.ndim not in (3, 4) or y.shape[channel_axis] != self.channels:
            raise InvalidOptionError(
                f"expected {self.layout.upper()} input with {self.channels}"
                f" channels, got shape {y.shape}"
            )
        dtype = np.dtype(dtype)
        x = (np.moveaxis(y, channel_axis, -1) * self.std + self.mean) * self.scale_for(dtype)
        if dtype.kind in "ui":
            info = np.iinfo(dtype)
            x = np.clip(np.rint(x), info.min, info.max)
        return x.astype(dtype)

    def __repr__(self) -> str:
        extra = "" if self.variant is None else f", variant={self.variant!r}"
        if self.channel_names is not None:
            extra += f", channels={self.channel_names!r}"
        scale = "by dtype" if self.scale is None else self.scale
        return (
            f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()},"
            f" scale={scale}, layout={self.layout!r}{extra})"
        )


def stats_input_scale(stats: Any) -> float | None:
    """The ``scale`` a normalizer built from ``stats`` needs: None (each input by its own
    convention) when the constants are in [0, 1] for integer data or raw units for floats;
    the stats' scale otherwise (constants in another unit apply to every input).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> stats_input_scale(SimpleNamespace(scale=255.0, dtype="uint8")) is None
    True
    >>> stats_input_scale(SimpleNamespace(scale=1.0, dtype="uint8"))
    1.0
    """
    scale = float(getattr(stats, "scale", 1.0))
    dtype = getattr(stats, "dtype", None)
    if dtype is None:
        return None if scale in (1.0, 255.0) else scale
    kind = np.dtype(dtype)
    natural = float(np.iinfo(kind).max) if kind.kind in "ui" else 1.0
    return None if scale == natural else scale


def _output_shape(nhwc: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    n, h, w, c = nhwc
    return (n, c, h, w) if layout == "chw" else (n, h, w, c)


def _lower(choice: Any) -> Any:
    """A choice in lower case whatever the case it was typed in (others pass, to be refused).

    Examples
    --------
    >>> _lower("HWC"), _lower(3)
    ('hwc', 3)
    """
    return choice.lower() if isinstance(choice, str) else choice
