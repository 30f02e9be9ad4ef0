"""Normalization layers that keep running statistics: BatchNorm and InstanceNorm.

Conventions follow PyTorch (see ``docs/nn.md``): ``momentum=0.1`` means
``running = 0.9 * running + 0.1 * batch``, the running variance takes the unbiased
``n / (n - 1)`` batch variance while the normalization uses the biased one, and
``momentum=None`` is the cumulative average ``running_k = running_{k-1} + (batch_k -
running_{k-1}) / k`` over the ``k`` batches seen.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn import functional as F
from normstats.nn.layers import NormLayer, parse_momentum
from normstats.nn.normalize import stats_vectors

__all__ = ["BatchNorm", "InstanceNorm"]


class _RunningStats(NormLayer):
    """Per-channel running mean and variance with PyTorch's momentum convention."""

    def __init__(
        self,
        num_features: int,
        affine: bool,
        eps: float,
        dtype: Any,
        momentum: float | None,
        track_running_stats: bool,
        axis: int,
        unbiased_running_var: bool,
        ranks: tuple[int, ...] | None = None,
    ) -> None:
        if num_features < 1:
            raise InvalidOptionError(f"num_features must be positive, got {num_features}")
        super().__init__(num_features, (num_features,), affine, eps, dtype)
        self.momentum = parse_momentum(momentum)
        self.track_running_stats = track_running_stats
        self.axis = axis
        self.unbiased_running_var = unbiased_running_var
        self.running_mean = np.zeros(num_features, self.dtype) if track_running_stats else None
        self.running_var = np.ones(num_features, self.dtype) if track_running_stats else None
        self.num_batches_tracked = 0
        self.ranks = ranks  # input ranks accepted, as torch's 1d/2d/3d classes; None: any

    def _check_rank(self, x: np.ndarray) -> None:
        if self.ranks is not None and x.ndim not in self.ranks:
            expected = " or ".join(f"{r}D" for r in self.ranks)
            raise InvalidOptionError(f"expected {expected} input (got {x.ndim}D input)")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self._channels}, eps={self.eps}, "
                f"momentum={self.momentum}, affine={self.weight is not None}, "
                f"track_running_stats={self.track_running_stats})")

    def _channel_axis(self, ndim: int) -> int:
        return self.axis % ndim

    def _param_shape(self, ndim: int) -> tuple[int, ...]:
        shape = [1] * ndim
        shape[self._channel_axis(ndim)] = self._channels
        return tuple(shape)

    def _check_channels(self, x: np.ndarray, min_ndim: int) -> None:
        if x.ndim < min_ndim:
            raise InvalidOptionError(
                f"{type(self).__name__} expects at least {min_ndim} dimensions, got shape {x.shape}"
            )
        if not -x.ndim <= self.axis < x.ndim:
            raise InvalidOptionError(
                f"channel axis {self.axis} is out of range for shape {x.shape}"
            )
        if x.shape[self.axis] != self._channels:
            raise InvalidOptionError(
                f"expected {self._channels} channels on axis {self.axis}, got shape {x.shape}"
            )

    def _fixed_stats(self, ndim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        if self.training or not self.track_running_stats:
            return None, None
        pshape = self._param_shape(ndim)
        return self.running_mean.reshape(pshape), self.running_var.reshape(pshape)

    def _blend(self, running: np.ndarray, batch: np.ndarray) -> np.ndarray:
        # momentum=None: factor 1/t turns the update into the running arithmetic mean.
        if self.momentum is None:
            factor = 1.0 / self.num_batches_tracked
        else:
            factor = self.momentum
        return ((1.0 - factor) * running + factor * batch).astype(self.dtype)

    def _running_input_var(self, biased_var: np.ndarray, n: int) -> np.ndarray:
        # Bessel's correction for the n values behind each variance.
        return biased_var * (n / (n - 1)) if self.unbiased_running_var else biased_var

    def _record(self, batch_mean: np.ndarray, batch_var: np.ndarray) -> None:
        if not self.track_running_stats:
            return
        self.num_batches_tracked += 1
        self.running_mean = self._blend(self.running_mean, batch_mean)
        self.running_var = self._blend(self.running_var, batch_var)


class BatchNorm(_RunningStats):
    """Batch normalization over (N, C) or (N, C, *spatial) inputs: ``(x - mean) / sqrt(var +
    eps) * weight + bias`` with per-channel batch statistics in training, running ones in eval.

    Parameters
    ----------
    num_features : int
        Number of channels C.
    eps : float
        Added to the variance inside the square root.
    momentum : float or None
        PyTorch convention: ``running = (1 - momentum) * running + momentum * batch``;
        0.1 keeps 0.9 of the running value. None gives the cumulative average.
    affine : bool
        Learnable per-channel ``weight`` (gamma, starts at 1) and ``bias`` (beta, 0).
    track_running_stats : bool
        Keep running statistics and use them in evaluation mode.
    axis : int
        The channel axis (1 as in PyTorch; -1 for channels-last as in Keras).
    unbiased_running_var : bool
        Feed the unbiased ``n / (n - 1)`` batch variance into the running variance
        (PyTorch); False feeds the biased one (Keras 3).
    spatial_dims : int, optional
        1, 2 or 3: accept only the input ranks of torch's ``BatchNorm1d`` ((N, C) or
        (N, C, L)), ``BatchNorm2d`` or ``BatchNorm3d``, with torch's message otherwise.
        None accepts any rank from 2. ``eps`` must be positive in training, as in torch.
    dtype : numpy dtype
        float32 (the default, as PyTorch) or float64.

    Examples
    --------
    >>> bn = BatchNorm(2, dtype=np.float64)
    >>> x = np.array([[0.0, 10.0], [2.0, 30.0]])
    >>> np.round(bn(x), 4).tolist()
    [[-1.0, -1.0], [1.0, 1.0]]
    >>> bn
    BatchNorm(2, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)
    >>> bn.running_mean.tolist()  # 0.9 * 0 + 0.1 * batch mean
    [0.1, 2.0]
    >>> bn.running_var.tolist()  # 0.9 * 1 + 0.1 * unbiased batch variance
    [1.1, 20.9]
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        axis: int = 1,
        unbiased_running_var: bool = True,
        spatial_dims: int | None = None,
        dtype: Any = np.float32,
    ) -> None:
        # torch's BatchNorm1d takes (N, C) or (N, C, L); 2d (N, C, H, W); 3d (N, C, D, H, W)
        ranks = None if spatial_dims is None else \
            ((2, 3) if spatial_dims == 1 else (spatial_dims + 2,))
        super().__init__(
            num_features,
            affine,
            eps,
            dtype,
            momentum,
            track_running_stats,
            axis,
            unbiased_running_var,
            ranks,
        )

    @classmethod
    def from_stats(
        cls,
        stats: Any,
        variant: str = "std",
        *,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        axis: int = 1,
        dtype: Any = np.float32,
    ) -> BatchNorm:
        """An input BatchNorm whose running statistics start at the dataset constants.

        ``running_mean = stats.mean`` and ``running_var = getattr(stats, variant) ** 2``,
        in the reported scale of ``stats`` (``[0, 1]`` for 8- and 16-bit images): feed it
        inputs already divided by ``stats.scale``. In evaluation mode it then computes
        ``(x - mean) / sqrt(std**2 + eps)`` from step one instead of starting at 0 and 1.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.5, 0.25), std=(0.5, 0.125), scale=255.0)
        >>> bn = BatchNorm.from_stats(s, eps=0.0, dtype=np.float64).eval()
        >>> bn(np.array([[1.0, 0.5]])).tolist()
        [[1.0, 2.0]]
        """
        mean, std = stats_vectors(stats, variant)
        layer = cls(mean.size, eps, momentum, affine, True, axis=axis, dtype=dtype)
        layer.running_mean = mean.astype(layer.dtype)
        layer.running_var = (std * std).astype(layer.dtype)
        return layer

    @classmethod
    def keras(
        cls,
        num_features: int,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        *,
        axis: int = -1,
        center: bool = True,
        scale: bool = True,
        dtype: Any = np.float32,
    ) -> BatchNorm:
        """Keras ``BatchNormalization`` conventions, for porting Keras models.

        Keras' momentum weights the *old* value
        (``moving = momentum * moving + (1 - momentum) * batch``), so Keras 0.99 is
        PyTorch 0.01; its default epsilon is 1e-3, its channel axis is last, and
        (Keras 3) the moving variance takes the biased batch variance.

        Examples
        --------
        >>> bn = BatchNorm.keras(3)
        >>> bn.momentum, bn.eps, bn.axis, bn.unbiased_running_var
        (0.01, 0.001, -1, False)
        """
        if not 0.0 <= momentum <= 1.0:
            raise InvalidOptionError(f"Keras momentum must be in [0, 1], got {momentum}")
        layer = cls(
            num_features,
            epsilon,
            round(1.0 - momentum, 12),
            True,
            True,
            axis=axis,
            unbiased_running_var=False,
            dtype=dtype,
        )
        layer.weight = layer.weight if scale else None
        layer.bias = layer.bias if center else None
        return layer

    def _reduction_view(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        self._check_rank(x)
        self._check_channels(x, 2)
        if self.training and self.eps <= 0:
            raise InvalidOptionError(f"batch_norm eps must be positive during training, but "
                                     f"got {self.eps:g} (a constant channel would divide by 0)")
        channel = self._channel_axis(x.ndim)
        if self.training and x.size // self._channels < 2:
            raise InvalidOptionError(
                f"BatchNorm in training needs more than one value per channel, got shape {x.shape}"
            )
        return x, tuple(a for a in range(x.ndim) if a != channel)

    def _update_running(self, cache: F.NormCache, rshape: tuple[int, ...]) -> None:
        n = math.prod(rshape) // self._channels
        self._record(cache.mean.ravel(), self._running_input_var(cache.var.ravel(), n))


class InstanceNorm(_RunningStats):
    """Instance normalization: per sample and channel, over the spatial axes.

    Input (N, C, *spatial) with at least one spatial axis, or one unbatched sample
    (C, *spatial): a 2-d input is (C, L); with ``spatial_dims`` (1, 2 or 3, as torch's
    InstanceNorm1d/2d/3d) the ranks are checked as torch does. PyTorch defaults:
    ``affine=False`` and ``track_running_stats=False``; with tracking, the running
    statistics are updated with the batch average of the per-instance mean and
    unbiased variance, and used in evaluation mode. As in torch, ``momentum=None`` leaves
    them unchanged and ``num_batches_tracked`` stays 0.

    Examples
    --------
    >>> inorm = InstanceNorm(1, eps=0.0, dtype=np.float64)
    >>> inorm(np.array([[[1.0, 3.0]], [[10.0, 30.0]]])).tolist()
    [[[-1.0, 1.0]], [[-1.0, 1.0]]]
    """

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        *,
        spatial_dims: int | None = None,
        dtype: Any = np.float32,
    ) -> None:
        ranks = None if spatial_dims is None else (spatial_dims + 1, spatial_dims + 2)
        super().__init__(num_features, affine, eps, dtype, momentum, track_running_stats, 1,
                         True, ranks)
        self.spatial_dims = spatial_dims

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Normalize (N, C, *spatial) or one unbatched (C, *spatial) sample, as torch does."""
        x = np.asarray(x)
        self._check_rank(x)
        unbatched = x.ndim == 2 if self.spatial_dims is None else x.ndim == self.spatial_dims + 1
        self._unbatched = unbatched
        return super().__call__(x[None])[0] if unbatched else super().__call__(x)

    def backward(self, dy: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        if getattr(self, "_unbatched", False):
            dx, dw, db = super().backward(np.asarray(dy)[None])
            return dx[0], dw, db
        return super().backward(dy)

    def _reduction_view(self, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
        self._check_channels(x, 3)
        if self.training and math.prod(x.shape[2:]) < 2:
            raise InvalidOptionError(
                f"InstanceNorm in training needs more than one spatial value, got shape {x.shape}"
            )
        return x, tuple(range(2, x.ndim))

    def _update_running(self, cache: F.NormCache, rshape: tuple[int, ...]) -> None:
        # As torch: momentum=None leaves the running statistics where they are, and
        # InstanceNorm never counts num_batches_tracked.
        if not self.track_running_stats or self.momentum is None:
            return
        n = math.prod(rshape[2:])
        mean = cache.mean.reshape(rshape[:2]).mean(axis=0)
        var = self._running_input_var(cache.var.reshape(rshape[:2]), n).mean(axis=0)
        self.running_mean = self._blend(self.running_mean, mean)
        self.running_var = self._blend(self.running_var, var)
