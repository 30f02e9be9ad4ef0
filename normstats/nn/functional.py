"""The one normalization core: forward and backward over given reduction axes.

Every reference layer in :mod:`normstats.nn.layers` is a reshape around the four
functions here. ``normalize`` standardizes over ``axes`` (with batch statistics or
with given ones), ``affine`` applies a broadcast scale and shift, and the two
``*_backward`` functions are their analytic derivatives. Statistics use the biased
(population) variance, as every framework does inside the normalization itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = [
    "NormCache",
    "affine",
    "affine_backward",
    "moments",
    "normalize",
    "normalize_backward",
]


@dataclass(frozen=True)
class NormCache:
    """What ``normalize_backward`` needs from the forward pass.

    Attributes
    ----------
    xhat : numpy.ndarray
        The normalized values, same shape as the input.
    inv_std : numpy.ndarray
        ``1 / sqrt(var + eps)`` with the reduced axes kept (size 1).
    axes : tuple of int
        The reduction axes (non-negative).
    batch_stats : bool
        True when mean and variance were computed from the input itself, so the
        gradient flows through them; False when they were given (evaluation mode).
    mean, var : numpy.ndarray
        The statistics used (biased variance), reduced axes kept; layers read them to
        update running statistics.
    """

    xhat: np.ndarray
    inv_std: np.ndarray
    axes: tuple[int, ...]
    batch_stats: bool
    mean: np.ndarray
    var: np.ndarray


def parse_axes(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    """Return ``axes`` as sorted non-negative ints, or raise ValueError.

    Examples
    --------
    >>> parse_axes(4, (0, -2, -1))
    (0, 2, 3)
    """
    parsed = sorted({a + ndim if a < 0 else a for a in axes})
    if not parsed or parsed[0] < 0 or parsed[-1] >= ndim:
        raise InvalidOptionError(
            f"reduction axes {axes} are invalid for an input with {ndim} dimensions"
        )
    return tuple(parsed)


def moments(x: np.ndarray, axes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and biased (population) variance over ``axes``, reduced axes kept.

    Two-pass (mean first, then the mean of squared deviations), so a large common
    offset does not cancel catastrophically.

    Examples
    --------
    >>> m, v = moments(np.array([[1.0, 3.0], [5.0, 7.0]]), (0,))
    >>> m.tolist(), v.tolist()
    ([[3.0, 5.0]], [[4.0, 4.0]])
    """
    axes = parse_axes(x.ndim, axes)
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=axes, keepdims=True)
    return mean, var


def normalize(
    x: np.ndarray,
    axes: tuple[int, ...],
    eps: float,
    mean: np.ndarray | None = None,
    var: np.ndarray | None = None,
) -> tuple[np.ndarray, NormCache]:
    """Standardize ``x`` over ``axes``: ``(x - mean) / sqrt(var + eps)``.

    Parameters
    ----------
    x : numpy.ndarray
        Floating-point input; the computation stays in its dtype.
    axes : tuple of int
        Axes to reduce over when the statistics come from ``x``.
    eps : float
        Added to the variance for numerical safety.
    mean, var : numpy.ndarray, optional
        Fixed statistics broadcastable to ``x`` (evaluation with running
        statistics). Give both or neither.

    Returns
    -------
    xhat : numpy.ndarray
    cache : NormCache

    Examples
    --------
    >>> xhat, _ = normalize(np.array([[1.0], [3.0]]), (0,), eps=0.0)
    >>> xhat.ravel().tolist()
    [-1.0, 1.0]
    """
    if (mean is None) != (var is None):
        raise InvalidOptionError("give both mean and var, or neither")
    axes = parse_axes(x.ndim, axes)
    batch_stats = mean is None
    if batch_stats:
        mean, var = moments(x, axes)
    inv_std = 1.0 / np.sqrt(var + x.dtype.type(eps))
    xhat = (x - mean) * inv_std
    cache = NormCache(xhat, inv_std.astype(x.dtype, copy=False), axes, batch_stats, mean, var)
    return xhat, cache


def normalize_backward(dxhat: np.ndarray, cache: NormCache) -> np.ndarray:
    """Gradient of ``normalize`` with respect to its input.

    With batch statistics the mean and variance depend on every element, which gives
    ``dx = inv_std * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))`` (means over
    the reduction axes); with fixed statistics it is just ``dxhat * inv_std``.

    Examples
    --------
    >>> x = np.array([[1.0], [2.0], [4.0]])
    >>> xhat, cache = normalize(x, (0,), eps=1e-5)
    >>> bool(abs(normalize_backward(np.ones_like(x), cache)).max() < 1e-12)  # shift-invariant
    True
    """
    if not cache.batch_stats:
        return dxhat * cache.inv_std
    mean_d = dxhat.mean(axis=cache.axes, keepdims=True)
    mean_dx = np.mean(dxhat * cache.xhat, axis=cache.axes, keepdims=True)
    return cache.inv_std * (dxhat - mean_d - cache.xhat * mean_dx)


def affine(xhat: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """Scale and shift ``xhat`` by ``weight`` and ``bias`` (each broadcastable, or None).

    Examples
    --------
    >>> affine(np.array([[1.0, -1.0]]), np.array([2.0, 3.0]), np.array([0.5, 0.5])).tolist()
    [[2.5, -2.5]]
    """
    y = xhat if weight is None else xhat * weight
    return y if bias is None else y + bias


def affine_backward(
    dy: np.ndarray,
    xhat: np.ndarray,
    weight: np.ndarray | None,
    param_shape: tuple[int, ...],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of ``affine``: ``(dxhat, dweight, dbias)``.

    ``param_shape`` is the broadcast shape the parameters had in the forward pass
    (for example ``(1, C, 1, 1)``); parameter gradients come back in that shape,
    summed over every axis where it is 1.

    Examples
    --------
    >>> dxhat, dw, db = affine_backward(np.ones((2, 1)), np.array([[1.0], [2.0]]), None, (1,))
    >>> dw.tolist(), db.tolist()
    ([3.0], [2.0])
    """
    dxhat = dy if weight is None else dy * weight
    dweight = _sum_to_shape(dy * xhat, param_shape)
    dbias = _sum_to_shape(dy, param_shape)
    return dxhat, dweight, dbias


def _sum_to_shape(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    # Undo numpy broadcasting: leading axes the parameter lacks, then its size-1 axes.
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape)
