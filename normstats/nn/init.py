"""Xavier and Kaiming initialization with an explicit ``numpy.random.Generator``.

Fans, gains, bounds and standard deviations are PyTorch's (``torch.nn.init``):
a dense weight has shape ``(out, in)``, a convolution ``(out, in, *kernel)``, so
``fan_in = in * prod(kernel)`` and ``fan_out = out * prod(kernel)``.
Every initializer is ``variance_scaling`` with a particular variance:

==========================  ===================================  ==========================
initializer                 variance                             what it keeps steady
==========================  ===================================  ==========================
``xavier_forward``          1 / fan_in                           forward activations
``xavier_backward``         1 / fan_out                          backward gradients
``xavier_*``                gain² · 2 / (fan_in + fan_out)        both, on average (Glorot)
``kaiming_*`` (fan_in)      gain² / fan_in (ReLU: 2 / fan_in)     activations through ReLU
==========================  ===================================  ==========================

A uniform draw on ``(-b, b)`` has variance ``b² / 3``, so ``b = sqrt(3) * std``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = [
    "calculate_gain",
    "fan_in_and_fan_out",
    "kaiming_normal",
    "kaiming_normal_std",
    "kaiming_uniform",
    "kaiming_uniform_bound",
    "variance_scaling",
    "xavier_backward",
    "xavier_forward",
    "xavier_normal",
    "xavier_normal_std",
    "xavier_uniform",
    "xavier_uniform_bound",
]

Mode = Literal["fan_in", "fan_out", "fan_avg"]
Distribution = Literal["uniform", "normal"]
_LINEAR = {
    "linear",
    "identity",
    "sigmoid",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
}


def fan_in_and_fan_out(shape: tuple[int, ...]) -> tuple[int, int]:
    """Fan-in and fan-out of a weight of ``shape``, as PyTorch computes them.

    Examples
    --------
    >>> fan_in_and_fan_out((64, 3, 7, 7))
    (147, 3136)
    >>> fan_in_and_fan_out((10, 256))
    (256, 10)
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2:
        raise InvalidOptionError(f"fans need a weight shape (out, in, *kernel), got {shape}")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """Recommended gain for ``nonlinearity`` (PyTorch's values).

    linear / conv / sigmoid: 1; tanh: 5/3; relu: sqrt(2);
    leaky_relu: sqrt(2 / (1 + a²)) with ``a = param`` (default 0.01); selu: 3/4.

    Examples
    --------
    >>> calculate_gain("relu") == 2 ** 0.5
    True
    >>> round(calculate_gain("leaky_relu", 0.2), 6)
    1.38675
    """
    if nonlinearity in _LINEAR:
        return 1.0
    gains = {"tanh": 5.0 / 3.0, "relu": math.sqrt(2.0), "selu": 0.75}
    if nonlinearity in gains:
        return gains[nonlinearity]
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, int | float):
            raise InvalidOptionError(f"leaky_relu negative slope must be a number, got {param!r}")
        return math.sqrt(2.0 / (1.0 + slope**2))
    known = sorted(_LINEAR | set(gains) | {"leaky_relu"})
    raise InvalidOptionError(f"unknown nonlinearity {nonlinearity!r}; expected one of {known}")


def _fan(shape: tuple[int, ...], mode: Mode) -> float:
    fan_in, fan_out = fan_in_and_fan_out(shape)
    fans = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}
    if mode not in fans:
        raise InvalidOptionError(f"mode must be 'fan_in', 'fan_out' or 'fan_avg', got {mode!r}")
    if fans[mode] == 0:
        raise InvalidOptionError(f"cannot initialize a weight with a zero-sized shape {shape}")
    return float(fans[mode])


def variance_scaling(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    scale: float = 1.0,
    mode: Mode = "fan_in",
    distribution: Distribution = "normal",
    dtype: Any = np.float32,
) -> np.ndarray:
    """Draw a weight with variance ``scale / fan`` (the general form of every initializer).

    Parameters
    ----------
    shape : tuple of int
        ``(out, in)`` or ``(out, in, *kernel)``.
    rng : numpy.random.Generator
        The source of randomness (same seed, same weights).
    scale : float
        Variance numerator (``gain ** 2``).
    mode : {"fan_in", "fan_out", "fan_avg"}
        Which fan divides ``scale``; ``fan_avg`` is ``(fan_in + fan_out) / 2``.
    distribution : {"normal", "uniform"}
        Zero-mean normal, or uniform on ``(-b, b)`` with ``b = sqrt(3 * variance)``.
    dtype : numpy dtype
        Of the returned array (the draw itself is float64).

    Examples
    --------
    >>> w = variance_scaling((256, 128), np.random.default_rng(0), 2.0, distribution="uniform")
    >>> bool(abs(w).max() <= (3 * 2.0 / 128) ** 0.5)
    True
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    std = math.sqrt(scale / _fan(shape, mode))
    if distribution == "normal":
        return rng.normal(0.0, std, size=shape).astype(dtype)
    if distribution == "uniform":
        bound = math.sqrt(3.0) * std
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    raise InvalidOptionError(f"distribution must be 'normal' or 'uniform', got {distribution!r}")


def xavier_uniform_bound(shape: tuple[int, ...], gain: float = 1.0) -> float:
    """``gain * sqrt(6 / (fan_in + fan_out))``.

    Examples
    --------
    >>> xavier_uniform_bound((100, 200)) == (6 / 300) ** 0.5
    True
    """
    fan_in, fan_out = fan_in_and_fan_out(shape)
    return gain * math.sqrt(6.0 / float(fan_in + fan_out))


def xavier_normal_std(shape: tuple[int, ...], gain: float = 1.0) -> float:
    """``gain * sqrt(2 / (fan_in + fan_out))``.

    Examples
    --------
    >>> xavier_normal_std((100, 200)) == (2 / 300) ** 0.5
    True
    """
    fan_in, fan_out = fan_in_and_fan_out(shape)
    return gain * math.sqrt(2.0 / float(fan_in + fan_out))


def kaiming_normal_std(
    shape: tuple[int, ...], a: float = 0.0, mode: Mode = "fan_in", nonlinearity: str = "leaky_relu"
) -> float:
    """``calculate_gain(nonlinearity, a) / sqrt(fan)``.

    Examples
    --------
    >>> kaiming_normal_std((10, 50), nonlinearity="relu") == (2 / 50) ** 0.5
    True
    """
    return _kaiming_gain(a, mode, nonlinearity) / math.sqrt(_fan(shape, mode))


def _kaiming_gain(a: float, mode: Mode, nonlinearity: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise InvalidOptionError(
            f"Kaiming initialization takes mode 'fan_in' or 'fan_out', got {mode!r}"
        )
    return calculate_gain(nonlinearity, a)


def kaiming_uniform_bound(
    shape: tuple[int, ...], a: float = 0.0, mode: Mode = "fan_in", nonlinearity: str = "leaky_relu"
) -> float:
    """``sqrt(3) * kaiming_normal_std(...)``.

    Examples
    --------
    >>> round(kaiming_uniform_bound((10, 50), nonlinearity="relu") ** 2, 12) == 6 / 50
    True
    """
    return math.sqrt(3.0) * kaiming_normal_std(shape, a, mode, nonlinearity)


def xavier_uniform(
    shape: tuple[int, ...], rng: np.random.Generator, gain: float = 1.0, dtype: Any = np.float32
) -> np.ndarray:
    """Uniform on ``(-b, b)``, ``b = gain * sqrt(6 / (fan_in + fan_out))``.

    Examples
    --------
    >>> w = xavier_uniform((64, 32), np.random.default_rng(0))
    >>> w.shape, w.dtype.name
    ((64, 32), 'float32')
    """
    return variance_scaling(shape, rng, gain * gain, "fan_avg", "uniform", dtype)


def xavier_normal(
    shape: tuple[int, ...], rng: np.random.Generator, gain: float = 1.0, dtype: Any = np.float32
) -> np.ndarray:
    """Normal with std ``gain * sqrt(2 / (fan_in + fan_out))``.

    Examples
    --------
    >>> xavier_normal((64, 32, 3, 3), np.random.default_rng(0)).shape
    (64, 32, 3, 3)
    """
    return variance_scaling(shape, rng, gain * gain, "fan_avg", "normal", dtype)


def kaiming_uniform(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    a: float = 0.0,
    mode: Mode = "fan_in",
    nonlinearity: str = "leaky_relu",
    dtype: Any = np.float32,
) -> np.ndarray:
    """Uniform on ``(-b, b)``, ``b = sqrt(3) * gain / sqrt(fan)``; PyTorch's defaults.

    Examples
    --------
    >>> w = kaiming_uniform((64, 32), np.random.default_rng(0), nonlinearity="relu")
    >>> bool(abs(w).max() <= (6 / 32) ** 0.5)
    True
    """
    gain = _kaiming_gain(a, mode, nonlinearity)
    return variance_scaling(shape, rng, gain * gain, mode, "uniform", dtype)


def kaiming_normal(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    a: float = 0.0,
    mode: Mode = "fan_in",
    nonlinearity: str = "leaky_relu",
    dtype: Any = np.float32,
) -> np.ndarray:
    """Normal with std ``gain / sqrt(fan)``; PyTorch's defaults.

    Examples
    --------
    >>> kaiming_normal((64, 32), np.random.default_rng(0), mode="fan_out").shape
    (64, 32)
    """
    gain = _kaiming_gain(a, mode, nonlinearity)
    return variance_scaling(shape, rng, gain * gain, mode, "normal", dtype)


def xavier_forward(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    distribution: Distribution = "normal",
    dtype: Any = np.float32,
) -> np.ndarray:
    """Variance ``1 / fan_in``: keeps forward activations steady.

    Also known as LeCun initialization.

    Examples
    --------
    >>> w = xavier_forward((512, 2000), np.random.default_rng(0), dtype=np.float64)
    >>> round(float(w.var() * 2000), 1)
    1.0
    """
    return variance_scaling(shape, rng, 1.0, "fan_in", distribution, dtype)


def xavier_backward(
    shape: tuple[int, ...],
    rng: np.random.Generator,
    distribution: Distribution = "normal",
    dtype: Any = np.float32,
) -> np.ndarray:
    """Variance ``1 / fan_out``: keeps backward gradients steady.

    Examples
    --------
    >>> w = xavier_backward((2000, 512), np.random.default_rng(0), dtype=np.float64)
    >>> round(float(w.var() * 2000), 1)
    1.0
    """
    return variance_scaling(shape, rng, 1.0, "fan_out", distribution, dtype)
