"""Every reference layer against PyTorch on CPU: forward, backward, running statistics.

Tolerances: 1e-10 (float64) and 1e-5 (float32), relative to the largest magnitude of
the PyTorch result (an elementwise relative check is meaningless at exact zeros).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch  # in the test extra: fail, never skip

from normstats.errors import NormstatsError
from normstats.nn import BatchNorm, GroupNorm, InstanceNorm, LayerNorm, Normalize

RTOL = {np.float32: 1e-5, np.float64: 1e-10}
TORCH_DTYPE = {np.float32: torch.float32, np.float64: torch.float64}


def assert_close(actual: np.ndarray, expected: Any, dtype: type) -> None:
    expected = expected.detach().numpy() if hasattr(expected, "detach") else expected
    expected = np.asarray(expected)
    assert np.asarray(actual).shape == expected.shape
    scale = max(float(np.abs(expected).max()), 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * scale)


@dataclass
class Case:
    name: str
    shape: tuple[int, ...]
    ours: Callable[[type], Any]
    theirs: Callable[[], Any]


def _bn_torch(ndim: int) -> Any:
    return {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d,
            5: torch.nn.BatchNorm3d}[ndim]


def _in_torch(ndim: int) -> Any:
    return {3: torch.nn.InstanceNorm1d, 4: torch.nn.InstanceNorm2d,
            5: torch.nn.InstanceNorm3d}[ndim]


CASES = [
    Case("bn-NC", (16, 4), lambda d: BatchNorm(4, dtype=d), lambda: _bn_torch(2)(4)),
    Case("bn-NCL", (4, 3, 5), lambda d: BatchNorm(3, eps=1e-3, momentum=0.3, dtype=d),
         lambda: _bn_torch(3)(3, eps=1e-3, momentum=0.3)),
    Case("bn-NCHW", (3, 4, 5, 6), lambda d: BatchNorm(4, dtype=d), lambda: _bn_torch(4)(4)),
    Case("bn-NCDHW", (2, 3, 2, 3, 4), lambda d: BatchNorm(3, dtype=d), lambda: _bn_torch(5)(3)),
    Case("bn-cumulative", (3, 4, 5, 6), lambda d: BatchNorm(4, momentum=None, dtype=d),
         lambda: _bn_torch(4)(4, momentum=None)),
    Case("bn-no-affine", (8, 4, 3), lambda d: BatchNorm(4, affine=False, dtype=d),
         lambda: _bn_torch(3)(4, affine=False)),
    Case("bn-untracked", (8, 4, 3), lambda d: BatchNorm(4, track_running_stats=False, dtype=d),
         lambda: _bn_torch(3)(4, track_running_stats=False)),
    Case("ln-last", (4, 6), lambda d: LayerNorm(6, dtype=d), lambda: torch.nn.LayerNorm(6)),
    Case("ln-CHW", (3, 4, 5, 6), lambda d: LayerNorm((4, 5, 6), eps=1e-6, dtype=d),
         lambda: torch.nn.LayerNorm((4, 5, 6), eps=1e-6)),
    Case("ln-no-affine", (3, 5, 6), lambda d: LayerNorm((5, 6), affine=False, dtype=d),
         lambda: torch.nn.LayerNorm((5, 6), elementwise_affine=False)),
    Case("in-NCL", (4, 3, 7), lambda d: InstanceNorm(3, dtype=d), lambda: _in_torch(3)(3)),
    Case("in-NCHW-tracked", (3, 4, 5, 6),
         lambda d: InstanceNorm(4, momentum=0.2, affine=True, track_running_stats=True, dtype=d),
         lambda: _in_torch(4)(4, momentum=0.2, affine=True, track_running_stats=True)),
    Case("in-NCDHW-affine", (2, 3, 2, 3, 4), lambda d: InstanceNorm(3, affine=True, dtype=d),
         lambda: _in_torch(5)(3, affine=True)),
    Case("gn-2", (3, 6, 4, 4), lambda d: GroupNorm(2, 6, dtype=d),
         lambda: torch.nn.GroupNorm(2, 6)),
    Case("gn-1", (3, 6, 5), lambda d: GroupNorm(1, 6, eps=1e-3, dtype=d),
         lambda: torch.nn.GroupNorm(1, 6, eps=1e-3)),
    Case("gn-C-no-affine", (3, 6, 4, 4), lambda d: GroupNorm(6, 6, affine=False, dtype=d),
         lambda: torch.nn.GroupNorm(6, 6, affine=False)),
    # Groups of 3: with 2 values per group the output is +-1 whatever the input and the
    # gradient is pure rounding noise, which no float32 comparison can pin down.
    Case("gn-NC", (5, 6), lambda d: GroupNorm(2, 6, dtype=d), lambda: torch.nn.GroupNorm(2, 6)),
]


def make_pair(case: Case, dtype: type, rng: np.random.Generator) -> tuple[Any, Any]:
    ours, theirs = case.ours(dtype), case.theirs().to(TORCH_DTYPE[dtype])
    if ours.weight is not None:  # non-trivial gamma and beta, shared by both
        ours.weight = rng.uniform(0.5, 2.0, ours.weight.shape).astype(dtype)
        ours.bias = rng.normal(0.0, 1.0, ours.bias.shape).astype(dtype)
        with torch.no_grad():
            theirs.weight.copy_(torch.from_numpy(ours.weight))
            theirs.bias.copy_(torch.from_numpy(ours.bias))
    return ours, theirs


def step(ours: Any, theirs: Any, x: np.ndarray, dy: np.ndarray, dtype: type) -> None:
    """One forward + backward on both; compare outputs and every gradient."""
    xt = torch.from_numpy(x).requires_grad_(True)
    yt = theirs(xt)
    yt.backward(torch.from_numpy(dy))
    assert_close(ours(x), yt, dtype)
    dx, dw, db = ours.backward(dy)
    assert_close(dx, xt.grad, dtype)
    if ours.weight is None:
        assert dw is None and db is None
    else:
        assert_close(dw, theirs.weight.grad, dtype)
        assert_close(db, theirs.bias.grad, dtype)
        theirs.weight.grad, theirs.bias.grad = None, None


def compare_running(ours: Any, theirs: Any, dtype: type) -> None:
    if getattr(theirs, "running_mean", None) is None:
        assert getattr(ours, "running_mean", None) is None
        return
    assert_close(ours.running_mean, theirs.running_mean, dtype)
    assert_close(ours.running_var, theirs.running_var, dtype)
    if isinstance(ours, BatchNorm):  # torch's InstanceNorm never counts its batches
        assert ours.num_batches_tracked == int(theirs.num_batches_tracked)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_layer_matches_torch_train_then_eval(case: Case, dtype: type) -> None:
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    ours, theirs = make_pair(case, dtype, rng)
    for _ in range(4):  # running statistics after several steps
        x = (3.0 + 2.0 * rng.standard_normal(case.shape)).astype(dtype)
        step(ours, theirs, x, rng.standard_normal(case.shape).astype(dtype), dtype)
        compare_running(ours, theirs, dtype)
    ours.eval(), theirs.eval()
    x = (3.0 + 2.0 * rng.standard_normal(case.shape)).astype(dtype)
    step(ours, theirs, x, rng.standard_normal(case.shape).astype(dtype), dtype)
    compare_running(ours, theirs, dtype)


def test_train_eval_switch_returns_the_layer() -> None:
    bn = BatchNorm(2)
    assert bn.eval() is bn and not bn.training
    assert bn.train() is bn and bn.training


STATS = SimpleNamespace(
    channels=("R", "G", "B"), mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616),
    per_image_std=(0.2022, 0.1993, 0.2009), scale=255.0,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_from_stats_eval_matches_torch_with_those_buffers(dtype: type) -> None:
    rng = np.random.default_rng(7)
    ours = BatchNorm.from_stats(STATS, "per_image_std", dtype=dtype).eval()
    theirs = torch.nn.BatchNorm2d(3).to(TORCH_DTYPE[dtype]).eval()
    with torch.no_grad():
        theirs.running_mean.copy_(torch.tensor(STATS.mean, dtype=torch.float64))
        theirs.running_var.copy_(torch.tensor(STATS.per_image_std, dtype=torch.float64) ** 2)
    x = (rng.integers(0, 256, (2, 3, 4, 5)) / 255.0).astype(dtype)
    step(ours, theirs, x, rng.standard_normal(x.shape).astype(dtype), dtype)
    ours.train(), theirs.train()  # then it trains on from the dataset constants
    step(ours, theirs, x, rng.standard_normal(x.shape).astype(dtype), dtype)
    compare_running(ours, theirs, dtype)


def test_from_stats_without_eps_is_the_input_normalization() -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, (2, 4, 5, 3), dtype=np.uint8)
    bn = BatchNorm.from_stats(STATS, eps=0.0, dtype=np.float64).eval()
    via_bn = bn(raw.transpose(0, 3, 1, 2) / 255.0)
    np.testing.assert_allclose(via_bn, Normalize.from_stats(STATS)(raw), rtol=1e-6, atol=1e-6)


def test_from_stats_rejects_mismatched_vectors() -> None:
    bad = SimpleNamespace(mean=(0.5, 0.5), std=(0.2,), scale=255.0)
    with pytest.raises(NormstatsError, match="mean has 2 channels but std has 1"):
        BatchNorm.from_stats(bad)
    with pytest.raises(NormstatsError, match="not computed"):
        BatchNorm.from_stats(SimpleNamespace(mean=(0.5,), std=(0.2,), per_image_std=None),
                             "per_image_std")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_keras_constructor_is_pytorch_momentum_reversed_with_biased_running_var(
    dtype: type,
) -> None:
    rng = np.random.default_rng(11)
    ours = BatchNorm.keras(3, momentum=0.9, dtype=dtype)  # Keras' moving-average weight
    theirs = torch.nn.BatchNorm2d(3, eps=1e-3, momentum=0.1).to(TORCH_DTYPE[dtype])
    x = rng.normal(2.0, 3.0, (4, 5, 6, 3)).astype(dtype)  # channels last, as in Keras
    y = ours(x)
    assert_close(y, theirs(torch.from_numpy(x).permute(0, 3, 1, 2)).permute(0, 2, 3, 1), dtype)
    batch_var = x.reshape(-1, 3).astype(np.float64).var(axis=0)  # biased, as Keras 3
    assert_close(ours.running_var, 0.9 * 1.0 + 0.1 * batch_var, dtype)
    assert_close(ours.running_mean, 0.1 * x.reshape(-1, 3).astype(np.float64).mean(axis=0),
                 dtype)


def test_keras_center_and_scale_switch_the_parameters_separately() -> None:
    bn = BatchNorm.keras(2, center=False)
    assert bn.bias is None and bn.weight is not None
    bn(np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32))
    _, dw, db = bn.backward(np.ones((3, 2), np.float32))
    assert db is None and dw.shape == (2,)


@pytest.mark.parametrize(
    ("make", "x", "match"),
    [
        (lambda: BatchNorm(3), np.zeros((4, 2), np.float32), "expected 3 channels"),
        (lambda: BatchNorm(3), np.zeros(3, np.float32), "at least 2 dimensions"),
        (lambda: BatchNorm(3), np.zeros((1, 3), np.float32), "more than one value"),
        (lambda: InstanceNorm(3), np.zeros((2, 3), np.float32), "expected 3 channels"),
        (lambda: LayerNorm((4, 5)), np.zeros((2, 5, 4), np.float32), "normalized_shape"),
        (lambda: GroupNorm(2, 4), np.zeros((2, 6, 3), np.float32), "GroupNorm expects"),
    ],
)
def test_bad_shapes_are_clear_errors(make: Any, x: np.ndarray, match: str) -> None:
    with pytest.raises(NormstatsError, match=match):
        make()(x)


def test_dtype_mismatch_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="does not match the layer dtype float32"):
        BatchNorm(2)(np.zeros((3, 2)))
    with pytest.raises(TypeError, match="float32 or float64"):
        LayerNorm(2, dtype=np.int32)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: BatchNorm(0), "num_features"),
        (lambda: BatchNorm(2, momentum=1.5), "momentum"),
        (lambda: BatchNorm(2, eps=-1.0), "eps"),
        (lambda: GroupNorm(4, 6), "multiple of"),
        (lambda: LayerNorm(()), "normalized_shape"),
        (lambda: BatchNorm.keras(2, momentum=2.0), "Keras momentum"),
    ],
)
def test_bad_constructor_arguments(make: Any, match: str) -> None:
    with pytest.raises(NormstatsError, match=match):
        make()


def test_backward_needs_a_forward_and_a_matching_gradient() -> None:
    ln = LayerNorm(3)
    with pytest.raises(RuntimeError, match="forward"):
        ln.backward(np.zeros((2, 3), np.float32))
    ln(np.ones((2, 3), np.float32))
    with pytest.raises(NormstatsError, match="dy has shape"):
        ln.backward(np.zeros((3, 3), np.float32))
