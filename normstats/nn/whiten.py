"""Fused channel whitening: raw images in, whitened float32 out, in one pass.

``Whiten`` computes ``(x / scale − mean) @ matrix`` over the channels of every pixel of an
HWC image or NHWC batch, to float32 in CHW/NCHW (default) or HWC/NHWC layout: the
transform of `normstats.DatasetStats.whitening` (ZCA by default), and the formula of
torchvision's ``LinearTransformation`` applied per pixel. ``scale`` follows the
conventions of `normstats.nn.Normalize`: integer input is divided by its dtype maximum,
float input is taken as already in the reported scale.

For 8- and 16-bit input, output channel j is Σ_c T_c[x_c, j] with T_c[v, j] =
(v / scale − mean_c)·matrix[c, j] computed once per value in float64: each pixel's output
is C float64 look-ups added and rounded once to float32, the float64 formula to within an
ulp of float32. Pixels go through in blocks that stay in cache, so the data is read once
and written once. Other dtypes take the formula in float64, block by block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn.normalize import (
    Layout,
    _lower,
    _output_shape,
    parse_channel_vector,
    refuse_vector_stats,
    stats_input_scale,
)

__all__ = ["Whiten"]

_TABLE_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16))
_BLOCK_PIXELS = 8192  # a block's float64 sums stay in L1/L2


class Whiten:
    """Per-pixel ``(x / scale − mean) @ matrix`` to float32, fused into one pass.

    Parameters
    ----------
    mean : sequence of float
        Per-channel mean in the reported scale (``Whitening.mean``).
    matrix : (C, C) array-like
        ``matrix[i][j]`` multiplies input channel i into output channel j
        (``Whitening.matrix``; ZCA's is symmetric).
    scale : float, optional
        Maps raw values to that scale; default: the dtype maximum for integers, 1 for
        floats (as `normstats.nn.Normalize`).
    layout : {"chw", "hwc"}
        Output layout: channels first (PyTorch) or kept channels last.

    Examples
    --------
    >>> w = Whiten(mean=(0.5, 0.5), matrix=[[2.0, 0.0], [0.0, 4.0]])
    >>> w(np.array([[[255, 0]]], np.uint8)).ravel().tolist()  # one pixel, HWC -> CHW
    [1.0, -2.0]
    """

    def __init__(self, mean: Any, matrix: Any, scale: float | None = None, *,
                 layout: Layout = "chw", channel_names: tuple[str, ...] | None = None) -> None:
        self.mean = parse_channel_vector("mean", mean)
        self.matrix = np.asarray(matrix, dtype=np.float64)
        c = self.mean.size
        if self.matrix.shape != (c, c) or not np.isfinite(self.matrix).all():
            raise InvalidOptionError(f"matrix must be a finite {c}×{c} array for {c} channels, "
                                     f"got shape {self.matrix.shape}")
        if scale is not None and (not scale > 0 or not np.isfinite(scale)):
            raise InvalidOptionError(f"scale must be positive and finite, got {scale}")
        layout = _lower(layout)
        if layout not in ("chw", "hwc"):
            raise InvalidOptionError(f"layout must be 'chw' or 'hwc', got {layout!r}")
        self.scale = None if scale is None else float(scale)
        self.layout: Layout = layout
        self.channel_names = None if channel_names is None else tuple(channel_names)
        self._tables: dict[np.dtype, np.ndarray] = {}

    @classmethod
    def from_stats(cls, stats: Any, eps: float | None = None, kind: str = "zca", *,
                   layout: Layout = "chw") -> Whiten:
        """The whitening of a `normstats.DatasetStats` computed with ``covariance=True``.

        Examples
        --------
        >>> import normstats
        >>> x = np.array([[[[0, 0]]], [[[255, 0]]], [[[0, 255]]]], np.uint8)
        >>> stats = normstats.compute(x, covariance=True, layout="NHWC")
        >>> w = Whiten.from_stats(stats, eps=0, layout="hwc")
        >>> y = w(x.reshape(3, 1, 2)).reshape(3, 2).astype(np.float64)
        >>> np.round(np.cov(y, rowvar=False, ddof=0), 6).tolist()
        [[1.0, -0.0], [-0.0, 1.0]]
        """
        refuse_vector_stats(stats, "whitens", "whiten rows with stats.whitening().apply(rows) "
                            "(or the zca export's FeatureWhitening)")
        whitening = stats.whitening(kind=kind) if eps is None else \
            stats.whitening(eps, kind=kind)
        return cls(whitening.mean, whitening.matrix, stats_input_scale(stats), layout=layout,
                   channel_names=getattr(stats, "channels", None))

    @property
    def channels(self) -> int:
        return self.mean.size

    def scale_for(self, dtype: Any) -> float:
        """The divisor input of ``dtype`` gets: ``scale`` if given, else its convention."""
        if self.scale is not None:
            return self.scale
        dtype = np.dtype(dtype)
        return float(np.iinfo(dtype).max) if dtype.kind in "ui" else 1.0

    def tables(self, dtype: Any = np.uint8) -> np.ndarray:
        """The (C, C, 2**bits) float64 tables of 8- or 16-bit input: ``tables[j, c, v]`` is
        the share of input channel c at value v in output channel j.

        Examples
        --------
        >>> Whiten((0.0, 0.0), [[1.0, 2.0], [0.0, 1.0]]).tables()[1, 0, 255]
        np.float64(2.0)
        """
        dtype = np.dtype(dtype)
        if dtype not in _TABLE_DTYPES:
            raise TypeError(f"tables exist for uint8 and uint16 input, not {dtype}")
        if dtype not in self._tables:
            values = np.arange(np.iinfo(dtype).max + 1, dtype=np.float64) / self.scale_for(dtype)
            centred = values[None, :] - self.mean[:, None]  # (C, levels)
            self._tables[dtype] = np.ascontiguousarray(
                self.matrix.T[:, :, None] * centred[None, :, :])
        return self._tables[dtype]

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Whiten an HWC image or an NHWC batch, channels last; ``out`` an optional float32
        target of the output shape."""
        x = np.asarray(x)
        if x.ndim not in (3, 4) or x.shape[-1] != self.channels:
            raise InvalidOptionError(f"expected HWC or NHWC input with {self.channels} "
                                     f"channels last, got shape {x.shape}")
        if x.dtype.kind not in "uif":
            raise TypeError(f"expected integer or float pixels, got dtype {x.dtype}")
        batch = x[None] if x.ndim == 3 else x
        shape = _output_shape(batch.shape, self.layout)
        shape = shape[1:] if x.ndim == 3 else shape
        if out is None:
            out = np.empty(shape, np.float32)
        elif out.dtype != np.float32 or out.shape != shape:
            raise InvalidOptionError(f"out must be float32 of shape {shape}, got {out.dtype} "
                                     f"{out.shape}")
        target = out[None] if x.ndim == 3 else out
        for image, result in zip(batch, target):
            self._one(image, result)
        return out

    def _one(self, image: np.ndarray, out: np.ndarray) -> None:
        c = self.channels
        pixels = image.reshape(-1, c)
        flat = out.reshape(c, -1) if self.layout == "chw" else out.reshape(-1, c).T
        tables = self.tables(image.dtype) if image.dtype in _TABLE_DTYPES else None
        total, share = np.empty(_BLOCK_PIXELS), np.empty(_BLOCK_PIXELS)
        for start in range(0, len(pixels), _BLOCK_PIXELS):
            block = pixels[start:start + _BLOCK_PIXELS]
            stop = start + len(block)
            if tables is None:
                values = block.astype(np.float64) / self.scale_for(image.dtype)
                flat[:, start:stop] = ((values - self.mean) @ self.matrix).T
                continue
            size = len(block)
            for j in range(c):  # output j: C look-ups added in float64, rounded once
                # mode="clip" skips the bounds-check buffer; indices cannot leave a table
                np.take(tables[j, 0], block[:, 0], out=total[:size], mode="clip")
                for channel in range(1, c):
                    np.take(tables[j, channel], block[:, channel], out=share[:size],
                            mode="clip")
                    total[:size] += share[:size]
                flat[j, start:stop] = total[:size]

    def __repr__(self) -> str:
        scale = "by dtype" if self.scale is None else self.scale
        names = "" if self.channel_names is None else f", channels={self.channel_names!r}"
        return (f"Whiten(mean={self.mean.tolist()}, matrix={self.matrix.tolist()}, "
                f"scale={scale}, layout={self.layout!r}{names})")
