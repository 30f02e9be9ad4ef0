"""`Whiten`, fused: every output is the float64 formula rounded to float32 (checked in ulps
against float64 numpy), for 8- and 16-bit and float input, both layouts; the torch module
gives the same values; built from a result, it whitens the data it was computed on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normstats
from normstats.errors import InvalidOptionError
from normstats.nn import Whiten
from normstats.nn.torch import Whiten as TorchWhiten


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in float32 ulps between two float32 arrays of finite values."""
    ai, bi = a.view(np.int32).astype(np.int64), b.view(np.int32).astype(np.int64)
    ai = np.where(ai < 0, -(2**31) - ai, ai)  # order the negative floats too
    bi = np.where(bi < 0, -(2**31) - bi, bi)
    return int(np.abs(ai - bi).max())


def reference(x: np.ndarray, mean: np.ndarray, matrix: np.ndarray, scale: float) -> np.ndarray:
    return ((x.astype(np.float64) / scale - mean) @ matrix).astype(np.float32)


@pytest.mark.parametrize("dtype, scale", [("uint8", 255), ("uint16", 65535),
                                          ("float32", 1.0), ("int16", 32767)])
@pytest.mark.parametrize("layout", ["chw", "hwc"])
def test_every_output_is_the_float64_formula_rounded_once(rng, dtype, scale, layout):
    mean, matrix = rng.random(3), rng.normal(size=(3, 3)) * 5
    if dtype == "float32":
        x = rng.random((3, 40, 50, 3)).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, int(info.max) + 1, (3, 40, 50, 3)).astype(dtype)
    got = Whiten(mean, matrix, layout=layout)(x)
    expected = reference(x, mean, matrix, scale)
    if layout == "chw":
        expected = expected.transpose(0, 3, 1, 2)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert ulps(got, np.ascontiguousarray(expected)) <= 1


def test_a_single_image_and_an_out_buffer(rng):
    w = Whiten((0.5, 0.5), [[2.0, 1.0], [0.0, 4.0]], layout="hwc")
    image = rng.integers(0, 256, (9, 70, 2), dtype=np.uint8)  # 630 pixels: a partial block
    out = np.empty((9, 70, 2), np.float32)
    assert w(image, out=out) is out
    assert ulps(out, reference(image, np.array([0.5, 0.5]), np.array([[2.0, 1.0],
                                                                      [0.0, 4.0]]), 255)) <= 1
    with pytest.raises(InvalidOptionError, match="out must be float32"):
        w(image, out=np.empty((9, 70, 2), np.float64))
    with pytest.raises(InvalidOptionError, match="2 channels last"):
        w(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(InvalidOptionError, match="2×2"):
        Whiten((0.0, 0.0), np.eye(3))


def test_built_from_a_result_it_whitens_the_data(rng):
    base = rng.integers(0, 200, (50, 8, 8, 1))
    x = np.concatenate([base, base + rng.integers(0, 50, base.shape),
                        base // 2 + rng.integers(0, 100, base.shape)], axis=3).astype(np.uint8)
    stats = normstats.compute(x, covariance=True)
    y = Whiten.from_stats(stats, eps=0, layout="hwc")(x).reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(np.cov(y, rowvar=False, ddof=0), np.eye(3), atol=2e-6)
    np.testing.assert_allclose(y.mean(axis=0), 0, atol=1e-6)
    raw = normstats.compute(x, covariance=True, scale=1)  # constants in raw units
    z = Whiten.from_stats(raw, eps=0, layout="hwc")(x).reshape(-1, 3).astype(np.float64)
    np.testing.assert_allclose(z, y, atol=1e-5)


def test_the_torch_module_gives_the_same_values(rng):
    mean, matrix = rng.random(3), rng.normal(size=(3, 3))
    x = rng.integers(0, 256, (2, 6, 7, 3), dtype=np.uint8)
    array = Whiten(mean, matrix)(x)
    module = TorchWhiten(mean, matrix)
    tensor = module(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous())
    assert tensor.dtype == torch.float32
    assert ulps(tensor.numpy(), array) <= 1
    floats = module(torch.from_numpy(x).permute(0, 3, 1, 2).double() / 255)
    assert ulps(floats.float().numpy(), array) <= 1
    with pytest.raises(InvalidOptionError, match="3 channels"):
        module(torch.zeros(2, 4, 4))
