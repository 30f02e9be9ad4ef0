"""Where users meet torch.nn: the options, ranks, unbatched inputs and reprs torch has.

Each case runs the real ``torch.nn`` layer beside ours (forward and backward in float64,
tolerance 1e-10 relative to the largest value) or checks that both refuse the same input.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normstats.errors import NormstatsError
from normstats.nn import BatchNorm, GroupNorm, InstanceNorm, LayerNorm


def close(ours: np.ndarray, theirs: torch.Tensor) -> None:
    expected = theirs.detach().numpy()
    assert ours.shape == expected.shape
    np.testing.assert_allclose(ours, expected, rtol=1e-10,
                               atol=1e-10 * max(1.0, float(np.abs(expected).max())))


def forward_backward(ours, theirs, x: np.ndarray, rng: np.random.Generator) -> None:
    dy = rng.normal(size=x.shape)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(dy))
    close(ours(x), ty)
    dx, dw, db = ours.backward(dy)
    close(dx, tx.grad)
    if theirs.weight is not None:
        close(dw, theirs.weight.grad)
    assert (db is None) == (getattr(theirs, "bias", None) is None)


def test_layer_norm_without_bias(rng):
    ours = LayerNorm((4, 5), bias=False, dtype=np.float64)
    theirs = torch.nn.LayerNorm((4, 5), bias=False, dtype=torch.float64)
    ours.weight = rng.normal(size=(4, 5))
    theirs.weight.data = torch.tensor(ours.weight)
    assert ours.bias is None and theirs.bias is None
    forward_backward(ours, theirs, rng.normal(size=(3, 4, 5)), rng)


@pytest.mark.parametrize("spatial, shape", [(1, (3, 7)), (2, (3, 4, 5)), (None, (3, 7))])
def test_instance_norm_on_one_unbatched_sample(rng, spatial, shape):
    ours = InstanceNorm(3, affine=True, spatial_dims=spatial, dtype=np.float64)
    cls = {1: torch.nn.InstanceNorm1d, 2: torch.nn.InstanceNorm2d, None: torch.nn.InstanceNorm1d}
    theirs = cls[spatial](3, affine=True, dtype=torch.float64)
    forward_backward(ours, theirs, rng.normal(size=shape), rng)


@pytest.mark.parametrize("spatial, torch_cls", [(1, torch.nn.InstanceNorm1d),
                                                (2, torch.nn.InstanceNorm2d)])
def test_instance_norm_ranks_are_refused_with_torchs_message(spatial, torch_cls):
    for shape in [(5,), (2, 3, 4, 5, 6)]:
        with pytest.raises(ValueError) as theirs:
            torch_cls(3)(torch.zeros(shape))
        with pytest.raises(NormstatsError) as ours:
            InstanceNorm(3, spatial_dims=spatial)(np.zeros(shape, np.float32))
        assert str(theirs.value) == ours.value.reason


@pytest.mark.parametrize("spatial, torch_cls", [(1, torch.nn.BatchNorm1d),
                                                (2, torch.nn.BatchNorm2d),
                                                (3, torch.nn.BatchNorm3d)])
def test_batch_norm_ranks_as_torchs_1d_2d_3d(rng, spatial, torch_cls):
    for rank in range(2, 6):
        shape = (4, 3) + (3,) * (rank - 2)
        x = rng.normal(size=shape)
        try:
            expected = torch_cls(3, dtype=torch.float64)(torch.tensor(x))
        except ValueError as error:
            with pytest.raises(NormstatsError) as ours:
                BatchNorm(3, spatial_dims=spatial, dtype=np.float64)(x)
            assert ours.value.reason == str(error)
            continue
        close(BatchNorm(3, spatial_dims=spatial, dtype=np.float64)(x), expected)


def test_batch_norm_eps_zero_is_refused_in_training_like_torch_and_never_nan():
    x = np.zeros((2, 3, 4), np.float32)  # a constant channel: 0 / sqrt(0 + 0)
    with pytest.raises(ValueError, match="eps must be positive during training"):
        torch.nn.BatchNorm1d(3, eps=0)(torch.zeros(2, 3, 4))
    with pytest.raises(NormstatsError, match="eps must be positive during training"):
        BatchNorm(3, eps=0.0)(x)
    evaluated = BatchNorm(3, eps=0.0).eval()(x + 1)  # running var 1: fine, as in torch
    assert not np.isnan(evaluated).any()


@pytest.mark.parametrize("momentum", [0.1, None])
def test_instance_norm_running_stats_and_batch_count_as_torch(rng, momentum):
    ours = InstanceNorm(3, momentum=momentum, track_running_stats=True, dtype=np.float64)
    theirs = torch.nn.InstanceNorm2d(3, momentum=momentum, track_running_stats=True,
                                     dtype=torch.float64)
    for offset in (5.0, -5.0):
        x = rng.normal(offset, 1.0, size=(2, 3, 4, 4))
        close(ours(x), theirs(torch.tensor(x)))
    close(ours.running_mean, theirs.running_mean)
    close(ours.running_var, theirs.running_var)
    assert ours.num_batches_tracked == int(theirs.num_batches_tracked) == 0


def test_reprs_read_like_torchs():
    assert repr(BatchNorm(64)) == \
        "BatchNorm(64, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    assert repr(InstanceNorm(3)) == \
        "InstanceNorm(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)"
    assert repr(LayerNorm(8, bias=False)) == "LayerNorm((8,), eps=1e-05, affine=True, bias=False)"
    assert repr(GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True)"
