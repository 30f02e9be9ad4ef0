"""The normalization core: exact small cases, stability, and backward vs finite differences.

Finite differences are central, in float64, on every layer built on the core (step 1e-6,
tolerance 1e-6 relative to the largest gradient: the truncation error is O(h^2) and the
rounding error O(eps / h), both far below that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from normstats.errors import NormstatsError
from normstats.nn import BatchNorm, GroupNorm, InstanceNorm, LayerNorm
from normstats.nn import functional as F

H = 1e-6


def numeric_grad(f: Callable[[], float], a: np.ndarray) -> np.ndarray:
    """Central differences of the scalar ``f()`` with respect to ``a`` (perturbed in place)."""
    grad = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        saved = a[i]
        a[i] = saved + H
        up = f()
        a[i] = saved - H
        down = f()
        a[i] = saved
        grad[i] = (up - down) / (2 * H)
    return grad


def assert_grad(analytic: np.ndarray, numeric: np.ndarray) -> None:
    scale = float(np.abs(numeric).max())
    assert scale > 1e-3  # a gradient of zero would make the comparison vacuous
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-6 * scale)


LAYERS: list[tuple[str, Callable[[], Any], tuple[int, ...]]] = [
    ("batchnorm-train", lambda: BatchNorm(3, dtype=np.float64), (4, 3, 2)),
    ("batchnorm-eval", lambda: _eval_bn(), (4, 3, 2)),
    ("layernorm", lambda: LayerNorm((3, 2), dtype=np.float64), (2, 3, 2)),
    ("instancenorm", lambda: InstanceNorm(2, affine=True, dtype=np.float64), (2, 2, 4)),
    ("groupnorm", lambda: GroupNorm(2, 4, dtype=np.float64), (2, 4, 3)),
]


def _eval_bn() -> BatchNorm:
    bn = BatchNorm(3, dtype=np.float64)
    bn.running_mean, bn.running_var = np.array([0.5, -1.0, 2.0]), np.array([0.3, 2.0, 1.5])
    return bn.eval()


@pytest.mark.parametrize(("name", "make", "shape"), LAYERS, ids=[n for n, _, _ in LAYERS])
def test_backward_matches_central_differences(name: str, make: Any, shape: tuple) -> None:
    rng = np.random.default_rng(len(name))
    layer = make()
    if layer.weight is not None:
        layer.weight = rng.uniform(0.5, 2.0, layer.weight.shape)
        layer.bias = rng.normal(size=layer.bias.shape)
    x = rng.normal(1.0, 2.0, shape)
    upstream = rng.normal(size=shape)  # loss = sum(upstream * y): a generic direction

    def loss() -> float:
        return float(np.sum(upstream * layer(x)))

    loss()
    dx, dweight, dbias = layer.backward(upstream)
    assert_grad(dx, numeric_grad(loss, x))
    if layer.weight is not None:
        assert_grad(dweight, numeric_grad(loss, layer.weight))
        assert_grad(dbias, numeric_grad(loss, layer.bias))


def test_moments_are_biased_mean_and_variance() -> None:
    x = np.random.default_rng(0).normal(size=(5, 4, 3))
    mean, var = F.moments(x, (0, 2))
    assert mean.shape == var.shape == (1, 4, 1)
    np.testing.assert_allclose(var.ravel(), x.transpose(1, 0, 2).reshape(4, -1).var(axis=1))


def test_moments_survive_a_large_common_offset() -> None:
    # The dask test case: [1, 2, 3] * 10 + 1e8 has variance exactly 2/3.
    x = np.array([1.0, 2.0, 3.0] * 10) + 1e8
    _, var = F.moments(x, (0,))
    assert var.item() == pytest.approx(2.0 / 3.0, rel=1e-12)


def test_normalize_gives_zero_mean_unit_variance_and_constant_input_zero() -> None:
    x = np.random.default_rng(1).normal(5.0, 3.0, size=(100, 3))
    xhat, _ = F.normalize(x, (0,), eps=0.0)
    np.testing.assert_allclose(xhat.mean(axis=0), 0.0, atol=1e-14)
    np.testing.assert_allclose(xhat.var(axis=0), 1.0, rtol=1e-12)
    const, _ = F.normalize(np.full((4, 2), 7.0), (0,), eps=1e-5)
    assert np.all(const == 0.0)


def test_normalize_with_given_statistics_uses_them() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    xhat, cache = F.normalize(x, (0,), 0.0, mean=np.array([1.0, 0.0]), var=np.array([4.0, 1.0]))
    assert xhat.tolist() == [[0.0, 2.0], [1.0, 4.0]]
    assert not cache.batch_stats
    assert F.normalize_backward(np.ones_like(x), cache).tolist() == [[0.5, 1.0], [0.5, 1.0]]


def test_affine_backward_sums_over_broadcast_axes() -> None:
    rng = np.random.default_rng(2)
    dy, xhat, w = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 1))
    dxhat, dw, db = F.affine_backward(dy, xhat, w, (3, 1))
    np.testing.assert_allclose(dxhat, dy * w)
    np.testing.assert_allclose(dw, (dy * xhat).sum(axis=(0, 2))[:, None])
    np.testing.assert_allclose(db, dy.sum(axis=(0, 2))[:, None])


@pytest.mark.parametrize("axes", [(), (3,), (-4,)])
def test_bad_axes_are_rejected(axes: tuple[int, ...]) -> None:
    with pytest.raises(NormstatsError, match="reduction axes"):
        F.moments(np.zeros((2, 3, 4)), axes)


def test_mean_without_var_is_rejected() -> None:
    with pytest.raises(NormstatsError, match="both mean and var"):
        F.normalize(np.zeros((2, 2)), (0,), 1e-5, mean=np.zeros(2))
