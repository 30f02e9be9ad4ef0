"""Fused input normalization and folding the constants into the first layer.

``Normalize`` turns raw images (HWC or NHWC, any dtype) into float32
``((x / scale) - mean) / std`` in one pass, in CHW/NCHW (default) or HWC/NHWC layout.
For 8- and 16-bit input it looks each value up in a per-channel table computed once in
float64, so every output is the float64 formula rounded to float32 (0 ulp apart) and
the data is touched once: read a byte, write a float. Other dtypes go through the same
formula in float64, image by image.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = ["Normalize", "fold_into_first_layer", "stats_vectors"]

Layout = Literal["chw", "hwc"]
_LUT_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))


def parse_channel_vector(name: str, values: Any) -> np.ndarray:
    """Return per-channel ``values`` as a 1-D float64 array, or raise ValueError."""
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
        raise InvalidOptionError(f"{name} must be a finite per-channel sequence, got {values!r}")
    return arr


def stats_vectors(stats: Any, variant: str = "std") -> tuple[np.ndarray, np.ndarray]:
    """``(mean, spread)`` of a ``DatasetStats``-like object as float64 vectors.

    Only duck-types on ``stats.mean`` and ``getattr(stats, variant)``; raises
    InvalidOptionError when the variant is missing or was not computed (None).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(mean=(0.5, 0.4), std=(0.2, 0.1), per_image_std=None)
    >>> [v.tolist() for v in stats_vectors(s)]
    [[0.5, 0.4], [0.2, 0.1]]
    """
    value = getattr(stats, variant, None)
    if value is None:
        raise InvalidOptionError(
            f"stats has no variant {variant!r} (missing or not computed for this data);"
            " try 'std' or 'per_image_std'"
        )
    mean = parse_channel_vector("mean", stats.mean)
    return mean, _parse_std(value, mean.size)


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
    scale : float
        Maps raw values to that scale: 255 for 8-bit, 65535 for 16-bit, 1 for float.
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
        self, mean: Any, std: Any, scale: float = 255.0, *, layout: Layout = "chw", threads: int = 1
    ) -> None:
        self.mean = parse_channel_vector("mean", mean)
        self.std = _parse_std(std, self.mean.size)
        if not scale > 0 or not np.isfinite(scale):
            raise InvalidOptionError(f"scale must be positive and finite, got {scale}")
        if layout not in ("chw", "hwc"):
            raise InvalidOptionError(f"layout must be 'chw' or 'hwc', got {layout!r}")
        if threads < 1:
            raise InvalidOptionError(f"threads must be at least 1, got {threads}")
        self.scale = float(scale)
        self.layout: Layout = layout
        self.threads = int(threads)
        self._luts: dict[np.dtype, np.ndarray] = {}

    @classmethod
    def from_stats(
        cls, stats: Any, variant: str = "std", *, layout: Layout = "chw", threads: int = 1
    ) -> Normalize:
        """Build from any object with ``mean``, ``scale`` and the ``variant`` attribute.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616),
        ...                     per_image_std=(0.2023, 0.1994, 0.2010), scale=255.0)
        >>> Normalize.from_stats(s, "per_image_std").std.tolist()
        [0.2023, 0.1994, 0.201]
        """
        mean, std = stats_vectors(stats, variant)
        return cls(mean, std, stats.scale, layout=layout, threads=threads)

    @property
    def channels(self) -> int:
        """Number of channels C."""
        return self.mean.size

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
            table = (values[None, :] / self.scale - self.mean[:, None]) / self.std[:, None]
            self._luts[dtype] = table.astype(np.float32)
        return self._luts[dtype]

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Normalize an HWC image or an NHWC batch; ``out`` is an optional float32 target."""
        x = np.asarray(x)
        batch = self._check_input(x)[None] if x.ndim == 3 else self._check_input(x)
        shape = _output_shape(batch.shape, self.layout)[4 - x.ndim :]
        if out is None:
            out = np.empty(shape, np.float32)
        elif out.dtype != np.float32 or out.shape != shape:
            raise InvalidOptionError(
                f"out must be float32 of shape {shape}, got {out.dtype} {out.shape}"
            )
        self._run(batch, out if x.ndim == 4 else out[None])
        return out

    def _check_input(self, x: np.ndarray) -> np.ndarray:
        if x.ndim not in (3, 4) or x.shape[-1] != self.channels:
            raise InvalidOptionError(
                f"expected HWC or NHWC input with {self.channels} channels last,"
                f" got shape {x.shape}"
            )
        if x.dtype.kind not in "uif":
            raise TypeError(f"expected integer or float pixels, got dtype {x.dtype}")
        return x

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
        for c in range(self.channels):
            plane = image[..., c].astype(np.float64) / self.scale
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
        x = (np.moveaxis(y, channel_axis, -1) * self.std + self.mean) * self.scale
        dtype = np.dtype(dtype)
        if dtype.kind in "ui":
            info = np.iinfo(dtype)
            x = np.clip(np.rint(x), info.min, info.max)
        return x.astype(dtype)

    def __repr__(self) -> str:
        return (
            f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()},"
            f" scale={self.scale}, layout={self.layout!r})"
        )


def _output_shape(nhwc: tuple[int, ...], layout: Layout) -> tuple[int, ...]:
    n, h, w, c = nhwc
    return (n, c, h, w) if layout == "chw" else (n, h, w, c)


def fold_into_first_layer(
    weight: np.ndarray, bias: np.ndarray | None, mean: Any, std: Any, scale: float = 255.0
) -> tuple[np.ndarray, np.ndarray]:
    """Weight and bias that act on raw-scale input as the layer acts on normalized input.

    With ``x_norm = (x / scale - mean) / std`` per input channel ``c``:
    ``W'[:, c] = W[:, c] / (scale * std_c)`` and
    ``b' = b - sum_c,k W[:, c, k] * mean_c / std_c`` (computed in float64).

    Parameters
    ----------
    weight : numpy.ndarray
        Dense ``(out, in)`` (``mean``/``std`` per input feature) or convolution
        ``(out, in, *kernel)`` (``mean``/``std`` per input channel).
    bias : numpy.ndarray or None
        ``(out,)``; None is treated as zeros.
    mean, std, scale
        As for :class:`Normalize`.

    Returns
    -------
    weight, bias : numpy.ndarray
        In the dtype of ``weight``.

    Notes
    -----
    Exact for dense layers and unpadded ("valid") convolutions. With zero padding it
    differs at the borders: the original layer pads the *normalized* input with 0
    (a raw value of ``mean * scale``), the folded one pads the *raw* input with 0 (a
    normalized value of ``-mean / std``). Pad with ``mean * scale`` per channel, or
    keep an explicit normalization, when borders matter.

    Examples
    --------
    >>> w, b = fold_into_first_layer(np.array([[2.0, 1.0]]), None, (0.5, 0.0), (0.5, 1.0), 1.0)
    >>> w.tolist(), b.tolist()
    ([[4.0, 1.0]], [-2.0])
    """
    w = np.asarray(weight)
    if w.ndim < 2:
        raise InvalidOptionError(
            f"weight must be (out, in) or (out, in, *kernel), got shape {w.shape}"
        )
    mean = parse_channel_vector("mean", mean)
    std = _parse_std(std, mean.size)
    if mean.size != w.shape[1]:
        raise InvalidOptionError(f"weight has {w.shape[1]} inputs but mean/std have {mean.size}")
    b = np.zeros(w.shape[0]) if bias is None else np.asarray(bias, dtype=np.float64)
    if b.shape != (w.shape[0],):
        raise InvalidOptionError(f"bias must have shape ({w.shape[0]},), got {b.shape}")
    per_input = (slice(None),) + (None,) * (w.ndim - 2)
    w64 = w.astype(np.float64)
    folded_w = w64 / (scale * std)[per_input]
    folded_b = b - (w64 * (mean / std)[per_input]).reshape(w.shape[0], -1).sum(axis=1)
    return folded_w.astype(w.dtype), folded_b.astype(w.dtype)
