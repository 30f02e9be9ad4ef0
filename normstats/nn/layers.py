"""The shared base of the reference normalization layers: parameters + ``__call__`` + an
analytic ``backward``.

The layers with running statistics (BatchNorm, InstanceNorm) live in
:mod:`normstats.nn.running_norms`; LayerNorm and GroupNorm, which normalize each sample by
itself, in :mod:`normstats.nn.sample_norms`. All four differ only in which axes they reduce
over, which shape their parameters broadcast to and whether they keep running statistics;
the arithmetic is :mod:`normstats.nn.functional`.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn import functional as F

__all__ = ["NormLayer", "parse_dtype", "parse_momentum"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def parse_dtype(dtype: Any) -> np.dtype:
    """Return ``dtype`` as float32 or float64, or raise TypeError.

    Examples
    --------
    >>> parse_dtype("float64").name
    'float64'
    """
    parsed = np.dtype(dtype)
    if parsed not in _FLOATS:
        raise TypeError(f"layers compute in float32 or float64, not {parsed}")
    return parsed


def parse_momentum(momentum: float | None) -> float | None:
    """Return a momentum in [0, 1] (or None), or raise InvalidOptionError (a ValueError).

    Examples
    --------
    >>> parse_momentum(0.1), parse_momentum(None)
    (0.1, None)
    """
    if momentum is not None and not 0.0 <= momentum <= 1.0:
        raise InvalidOptionError(f"momentum must be in [0, 1] or None, got {momentum}")
    return momentum


class NormLayer:
    """Shared machinery: parameters, modes, the cached forward and the backward."""

    def __init__(
        self, channels: int, param_size: tuple[int, ...], affine: bool, eps: float, dtype: Any
    ) -> None:
        if eps < 0:
            raise InvalidOptionError(f"eps must be non-negative, got {eps}")
        self.eps = float(eps)
        self.dtype = parse_dtype(dtype)
        self.weight = np.ones(param_size, self.dtype) if affine else None
        self.bias = np.zeros(param_size, self.dtype) if affine else None
        self.training = True
        self._channels = channels
        self._cache: tuple[np.ndarray, tuple[int, ...], tuple[int, ...], F.NormCache] | None
        self._cache = None

    def train(self, mode: bool = True) -> Self:
        """Switch to training mode (batch statistics; running ones are updated)."""
        self.training = mode
        return self

    def eval(self) -> Self:
        """Switch to evaluation mode (running statistics when they are tracked)."""
        return self.train(False)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Normalize ``x`` and remember what :meth:`backward` needs."""
        x = self._check_input(x)
        xr, axes = self._reduction_view(x)
        mean, var = self._fixed_stats(x.ndim)
        xhat_r, cache = F.normalize(xr, axes, self.eps, mean, var)
        if cache.batch_stats and self.training:
            self._update_running(cache, xr.shape)
        pshape = self._param_shape(x.ndim)
        self._cache = (x.shape, xr.shape, pshape, cache)
        return F.affine(
            xhat_r.reshape(x.shape),
            self._bcast(self.weight, pshape),
            self._bcast(self.bias, pshape),
        )

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Gradients ``(dx, dweight, dbias)`` of the last call for upstream gradient ``dy``.

        ``dweight`` and ``dbias`` are None for a layer without that parameter.
        """
        if self._cache is None:
            raise RuntimeError("backward() needs a forward call first")
        shape, rshape, pshape, cache = self._cache
        dy = np.asarray(dy, dtype=self.dtype)
        if dy.shape != shape:
            raise InvalidOptionError(f"dy has shape {dy.shape}, the last input had {shape}")
        xhat = cache.xhat.reshape(shape)
        dxhat, dw, db = F.affine_backward(dy, xhat, self._bcast(self.weight, pshape), pshape)
        dx = F.normalize_backward(dxhat.reshape(rshape), cache).reshape(shape)
        dweight = None if self.weight is None else dw.reshape(self.weight.shape)
        dbias = None if self.bias is None else db.reshape(self.bias.shape)
        return dx, dweight, dbias

    def _check_input(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        if x.dtype != self.dtype:
            raise TypeError(
                f"input dtype {x.dtype} does not match the layer dtype {self.dtype};"
                f" cast the input or build the layer with dtype={x.dtype}"
            )
        return x

    @staticmethod
    def _bcast(p: np.ndarray | None, pshape: tuple[int, ...]) -> np.ndarray | None:
        return None if p is None else p.reshape(pshape)

    def _fixed_stats(self, ndim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        return None, None

    def _update_running(self, cache: F.NormCache, rshape: tuple[int, ...]) -> None:
        return None

    def _reduction_view(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        raise NotImplementedError

    def _param_shape(self, ndim: int) -> tuple[int, ...]:
        raise NotImplementedError
