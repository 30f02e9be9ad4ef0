"""LayerNorm and GroupNorm: reference layers that normalize each sample by itself.

No running statistics, so training and evaluation compute the same thing; the shared
parameter and backward machinery is :class:`normstats.nn.layers.NormLayer`, the arithmetic
:mod:`normstats.nn.functional`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn.layers import NormLayer

__all__ = ["GroupNorm", "LayerNorm"]


class LayerNorm(NormLayer):
    """Layer normalization over the trailing ``normalized_shape`` axes, per sample.

    No running statistics: training and evaluation are the same. With ``affine`` the
    weight and bias have shape ``normalized_shape`` (elementwise, as in PyTorch).

    Examples
    --------
    >>> ln = LayerNorm(2, eps=0.0, dtype=np.float64)
    >>> ln(np.array([[1.0, 3.0], [0.0, -4.0]])).tolist()
    [[-1.0, 1.0], [1.0, -1.0]]
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        affine: bool = True,
        *,
        bias: bool = True,
        dtype: Any = np.float32,
    ) -> None:
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        if not shape or min(shape) < 1:
            raise InvalidOptionError(
                f"normalized_shape must be positive sizes, got {normalized_shape}"
            )
        super().__init__(math.prod(shape), shape, affine, eps, dtype)
        self.normalized_shape = shape
        if not bias:
            self.bias = None  # torch's LayerNorm(bias=False): a weight and no bias

    def __repr__(self) -> str:
        return (f"LayerNorm({self.normalized_shape}, eps={self.eps}, "
                f"affine={self.weight is not None}, bias={self.bias is not None})")

    def _reduction_view(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        k = len(self.normalized_shape)
        if x.shape[x.ndim - k :] != self.normalized_shape or x.ndim < k:
            raise InvalidOptionError(
                f"input shape {x.shape} does not end with normalized_shape {self.normalized_shape}"
            )
        return x, tuple(range(x.ndim - k, x.ndim))

    def _param_shape(self, ndim: int) -> tuple[int, ...]:
        return self.normalized_shape


class GroupNorm(NormLayer):
    """Group normalization: per sample, over groups of ``num_channels // num_groups``.

    Input (N, C, *spatial); it is viewed as (N, G, C/G * spatial) and normalized over
    the last axis, then scaled per channel. ``num_groups=1`` is a LayerNorm over
    (C, *spatial) with per-channel parameters; ``num_groups=C`` is an InstanceNorm.

    Examples
    --------
    >>> gn = GroupNorm(1, 2, eps=0.0, dtype=np.float64)
    >>> gn(np.array([[[1.0], [3.0]]])).ravel().tolist()
    [-1.0, 1.0]
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        dtype: Any = np.float32,
    ) -> None:
        if num_groups < 1 or num_channels % num_groups:
            raise InvalidOptionError(
                f"num_channels ({num_channels}) must be a positive multiple of"
                f" num_groups ({num_groups})"
            )
        super().__init__(num_channels, (num_channels,), affine, eps, dtype)
        self.num_groups = num_groups

    def __repr__(self) -> str:
        return (f"GroupNorm({self.num_groups}, {self._channels}, eps={self.eps}, "
                f"affine={self.weight is not None})")

    def _reduction_view(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        if x.ndim < 2 or x.shape[1] != self._channels:
            raise InvalidOptionError(
                f"GroupNorm expects (N, {self._channels}, *spatial), got {x.shape}"
            )
        return x.reshape(x.shape[0], self.num_groups, -1), (2,)

    def _param_shape(self, ndim: int) -> tuple[int, ...]:
        return (1, self._channels) + (1,) * (ndim - 2)
