"""Folding dataset constants into a network's first layer instead of normalizing inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn.normalize import _parse_std, parse_channel_vector

__all__ = ["fold_into_first_layer"]


def fold_into_first_layer(
    weight: np.ndarray, bias: np.ndarray | None, mean: Any, std: Any, scale: float = 255.0
) -> tuple[np.ndarray, np.ndarray]:
    """Weight and bias that act on raw-scale input as the layer acts on normalized input.

    With ``x_norm = (x / scale - mean) / std`` per input channel ``c``:
    ``W'[:, c] = W[:, c] / (scale * std_c)`` and
    ``b' = b - sum_c,k W[:, c, k] * mean_c / std_c`` (computed in float64).

    Parameters
    ----------
    weight : numpy.ndarray or torch.Tensor
        Dense ``(out, in)`` (``mean``/``std`` per input feature) or convolution
        ``(out, in, *kernel)`` (``mean``/``std`` per input channel). A PyTorch layer's
        ``weight`` is taken as it is (a parameter that requires grad, on any device): its
        values are copied to numpy, the layer is left unchanged.
    bias : numpy.ndarray, torch.Tensor or None
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
    w = _values(weight)
    if w.ndim < 2:
        raise InvalidOptionError(
            f"weight must be (out, in) or (out, in, *kernel), got shape {w.shape}"
        )
    mean = parse_channel_vector("mean", mean)
    std = _parse_std(std, mean.size)
    if mean.size != w.shape[1]:
        raise InvalidOptionError(f"weight has {w.shape[1]} inputs but mean/std have {mean.size}")
    b = np.zeros(w.shape[0]) if bias is None else _values(bias).astype(np.float64)
    if b.shape != (w.shape[0],):
        raise InvalidOptionError(f"bias must have shape ({w.shape[0]},), got {b.shape}")
    per_input = (slice(None),) + (None,) * (w.ndim - 2)
    w64 = w.astype(np.float64)
    folded_w = w64 / (scale * std)[per_input]
    folded_b = b - (w64 * (mean / std)[per_input]).reshape(w.shape[0], -1).sum(axis=1)
    return folded_w.astype(w.dtype), folded_b.astype(w.dtype)


def _values(array: Any) -> np.ndarray:
    """A weight or bias as a numpy array; a torch tensor's values copied out of autograd
    and off its device first (``numpy()`` refuses a tensor that requires grad)."""
    if type(array).__module__.startswith("torch") and hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return np.asarray(array)
