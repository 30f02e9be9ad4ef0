"""Initializers: PyTorch's fans, gains, bounds and stds; the variance of real draws."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from normstats.errors import NormstatsError
from normstats.nn import init

SHAPES = [(10, 20), (64, 3, 7, 7), (32, 16, 3), (8, 4, 3, 3, 3), (5, 1)]
NONLINEARITIES = [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                  ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]
Z999 = 3.2905  # two-sided 99.9% quantile of the standard normal


@pytest.fixture(scope="module")
def torch() -> Any:
    import torch  # in the test extra: fail, never skip
    return torch


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_match_torch(torch: Any, shape: tuple[int, ...]) -> None:
    expected = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init.fan_in_and_fan_out(shape) == expected


@pytest.mark.parametrize(("name", "param"), NONLINEARITIES)
def test_gains_match_torch(torch: Any, name: str, param: float | None) -> None:
    assert init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


def torch_scale(torch: Any, fill: Callable[..., Any], shape: tuple[int, ...],
                kind: str) -> float:
    """The bound or std PyTorch's initializer used, recovered from its own generator.

    ``uniform_(-b, b)`` and ``normal_(0, s)`` are affine in the same underlying draws as
    ``uniform_(-1, 1)`` and ``normal_(0, 1)`` from an identically seeded generator, so
    the elementwise ratio is ``b`` (or ``s``) up to a few ulps where the reference draw
    is not close to zero.
    """
    weights = torch.empty(shape, dtype=torch.float64)
    fill(weights, generator=torch.Generator().manual_seed(5))
    unit = torch.empty(shape, dtype=torch.float64)
    if kind == "uniform":
        unit.uniform_(-1.0, 1.0, generator=torch.Generator().manual_seed(5))
    else:
        unit.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(5))
    keep = unit.abs() > 0.5
    return float(torch.median(weights[keep] / unit[keep]))


KAIMING = [("fan_in", "relu", 0.0), ("fan_out", "relu", 0.0), ("fan_in", "leaky_relu", 0.2),
           ("fan_out", "tanh", 0.0), ("fan_in", "leaky_relu", 0.0)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("gain", [1.0, math.sqrt(2.0)])
def test_xavier_bound_and_std_match_torch(torch: Any, shape: tuple, gain: float) -> None:
    def uniform(w: Any, generator: Any) -> Any:
        return torch.nn.init.xavier_uniform_(w, gain=gain, generator=generator)

    def normal(w: Any, generator: Any) -> Any:
        return torch.nn.init.xavier_normal_(w, gain=gain, generator=generator)

    big = (max(shape[0], 40),) + shape[1:]  # enough draws for a stable median ratio
    ratio_u = torch_scale(torch, uniform, big, "uniform")
    ratio_n = torch_scale(torch, normal, big, "normal")
    assert init.xavier_uniform_bound(big, gain) == pytest.approx(ratio_u, rel=1e-12)
    assert init.xavier_normal_std(big, gain) == pytest.approx(ratio_n, rel=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("mode", "nonlinearity", "a"), KAIMING)
def test_kaiming_bound_and_std_match_torch(torch: Any, shape: tuple, mode: str,
                                           nonlinearity: str, a: float) -> None:
    def uniform(w: Any, generator: Any) -> Any:
        return torch.nn.init.kaiming_uniform_(w, a, mode, nonlinearity, generator)

    def normal(w: Any, generator: Any) -> Any:
        return torch.nn.init.kaiming_normal_(w, a, mode, nonlinearity, generator)

    big = (max(shape[0], 40),) + shape[1:]
    bound = init.kaiming_uniform_bound(big, a, mode, nonlinearity)
    std = init.kaiming_normal_std(big, a, mode, nonlinearity)
    assert bound == pytest.approx(torch_scale(torch, uniform, big, "uniform"), rel=1e-12)
    assert std == pytest.approx(torch_scale(torch, normal, big, "normal"), rel=1e-12)


def test_formulas_against_the_published_variances() -> None:
    # eqs. 1.31, 1.32, 1.40, 1.41 and 1.46 written out for a 3x3 conv, 16 -> 32 channels.
    shape = (32, 16, 3, 3)
    n_in, n_out = 16 * 9, 32 * 9
    assert init.xavier_uniform_bound(shape) == pytest.approx(math.sqrt(6 / (n_in + n_out)))
    assert init.xavier_normal_std(shape) ** 2 == pytest.approx(2 / (n_in + n_out))
    assert init.kaiming_uniform_bound(shape, nonlinearity="relu") == pytest.approx(
        math.sqrt(6 / n_in))
    assert init.kaiming_normal_std(shape, nonlinearity="relu") ** 2 == pytest.approx(2 / n_in)


SHAPE = (400, 50, 5)  # 100,000 draws, fan_in 250, fan_out 2000
FAN_IN, FAN_OUT = 250, 2000
DRAWS = [
    ("xavier_uniform", lambda r: init.xavier_uniform(SHAPE, r, dtype=np.float64),
     2 / (FAN_IN + FAN_OUT), -1.2),
    ("xavier_normal", lambda r: init.xavier_normal(SHAPE, r, gain=2.0, dtype=np.float64),
     4 * 2 / (FAN_IN + FAN_OUT), 0.0),
    ("kaiming_uniform", lambda r: init.kaiming_uniform(SHAPE, r, nonlinearity="relu",
                                                       dtype=np.float64), 2 / FAN_IN, -1.2),
    ("kaiming_normal_fan_out", lambda r: init.kaiming_normal(
        SHAPE, r, mode="fan_out", nonlinearity="relu", dtype=np.float64), 2 / FAN_OUT, 0.0),
    ("xavier_forward", lambda r: init.xavier_forward(SHAPE, r, dtype=np.float64),
     1 / FAN_IN, 0.0),
    ("xavier_backward_uniform", lambda r: init.xavier_backward(
        SHAPE, r, distribution="uniform", dtype=np.float64), 1 / FAN_OUT, -1.2),
]


@pytest.mark.parametrize(("name", "draw", "variance", "excess_kurtosis"), DRAWS,
                         ids=[d[0] for d in DRAWS])
def test_sample_variance_within_its_999_interval(name: str, draw: Any, variance: float,
                                                 excess_kurtosis: float) -> None:
    w = draw(np.random.default_rng(2024))
    n = w.size
    # Var(S^2) = sigma^4 (2 / (n - 1) + kappa / n), kappa the excess kurtosis.
    half_width = Z999 * variance * math.sqrt(2 / (n - 1) + excess_kurtosis / n)
    assert abs(w.var(ddof=1) - variance) < half_width
    assert abs(w.mean()) < Z999 * math.sqrt(variance / n)


def test_uniform_draws_stay_inside_the_bound() -> None:
    w = init.kaiming_uniform((64, 32), np.random.default_rng(0), dtype=np.float64)
    bound = init.kaiming_uniform_bound((64, 32))
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.99 * bound


@pytest.mark.parametrize("fn", [init.xavier_uniform, init.xavier_normal, init.kaiming_uniform,
                                init.kaiming_normal, init.xavier_forward, init.xavier_backward])
def test_same_seed_same_weights(fn: Any) -> None:
    a = fn((16, 8, 3, 3), np.random.default_rng(42))
    b = fn((16, 8, 3, 3), np.random.default_rng(42))
    c = fn((16, 8, 3, 3), np.random.default_rng(43))
    assert a.dtype == np.float32
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: init.calculate_gain("swish"), "unknown nonlinearity 'swish'"),
        (lambda: init.calculate_gain("leaky_relu", "big"), "negative slope"),
        (lambda: init.fan_in_and_fan_out((10,)), "weight shape"),
        (lambda: init.kaiming_normal_std((4, 4), mode="fan_avg"), "Kaiming"),
        (lambda: init.kaiming_uniform((4, 0), np.random.default_rng()), "zero-sized"),
        (lambda: init.variance_scaling((4, 4), np.random.default_rng(), mode="avg"), "mode"),
        (lambda: init.variance_scaling((4, 4), np.random.default_rng(), distribution="t"),
         "distribution"),
    ],
)
def test_bad_arguments_are_clear_errors(call: Any, match: str) -> None:
    with pytest.raises(NormstatsError, match=match):
        call()


def test_rng_must_be_a_generator() -> None:
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        init.xavier_uniform((4, 4), 42)  # type: ignore[arg-type]
