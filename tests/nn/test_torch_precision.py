"""What normstats.nn.torch.Normalize gives, value by value: the float64 formula
``(x / scale - mean) / std`` with numpy, rounded once to the module's dtype.

The rounding oracle scales by powers of two and rounds half to even with ``numpy.rint``,
all exact, so it is independent of any float64 -> float16 / bfloat16 conversion (torch's
and ml_dtypes' go through float32 and round twice).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normstats.nn.torch import Normalize

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
#: significand bits and smallest normal exponent (numpy.frexp's) of each float type
FORMATS = {torch.float16: (11, -13), torch.bfloat16: (8, -125), torch.float32: (24, -125)}
DTYPES = [pytest.param(d, id=str(d).removeprefix("torch."))
          for d in (torch.float32, torch.float16, torch.bfloat16, torch.float64)]
PIXELS = [pytest.param(torch.uint8, 255.0, id="uint8"),
          pytest.param(torch.uint16, 65535.0, id="uint16")]


def round_once(y: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Float64 ``y`` rounded to nearest, ties to even, in ``dtype`` (as float64 values)."""
    if dtype == torch.float64:
        return y
    digits, min_exponent = FORMATS[dtype]
    exponent = np.maximum(np.frexp(y)[1], min_exponent)  # subnormals: one fixed step
    return np.ldexp(np.rint(np.ldexp(y, digits - exponent)), exponent - digits)


def formula(x: torch.Tensor, scale: float, mean=MEAN, std=STD) -> np.ndarray:
    """The float64 reference for channels-first ``x``."""
    values = x.to(torch.float64).numpy() if x.dtype != torch.uint16 else \
        x.to(torch.int32).numpy().astype(np.float64)
    shape = (-1, 1, 1)
    return (values / scale - np.reshape(mean, shape)) / np.reshape(std, shape)


def every_value(dtype: torch.dtype) -> torch.Tensor:
    """Each 8- or 16-bit value once in each of three channels, (3, H, 256)."""
    top = 255 if dtype == torch.uint8 else 65535
    values = torch.arange(top + 1, dtype=torch.int32).view(-1, 256)
    return torch.stack([values, values.flip(0), values.roll(7, 0)]).to(dtype)


def float_pixels() -> torch.Tensor:
    """Float64 pixels in [0, 1]: enough that float32 lands on float16 and bfloat16 ties."""
    return torch.rand(2, 3, 256, 256, dtype=torch.float64,
                      generator=torch.Generator().manual_seed(3))


def as_float64(y: torch.Tensor) -> np.ndarray:
    return y.to(torch.float64).numpy()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pixels, scale", PIXELS)
def test_every_8_and_16_bit_value_is_the_formula_rounded_once(pixels, scale, dtype) -> None:
    x = every_value(pixels)
    out = Normalize(MEAN, STD).to(dtype)(x)
    assert out.dtype == dtype
    expected = round_once(formula(x, scale), dtype)
    assert np.array_equal(as_float64(out), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_float_pixels_are_the_formula_rounded_once(dtype) -> None:
    x = float_pixels()
    out = Normalize(MEAN, STD).to(dtype)(x)
    assert out.dtype == dtype
    assert np.array_equal(as_float64(out), round_once(formula(x, 1.0), dtype))


@pytest.mark.parametrize("dtype", DTYPES[1:3])
def test_the_data_above_holds_values_torch_would_round_twice(dtype) -> None:
    """Without this, the two tests above could not tell one rounding from two."""
    for y in (formula(every_value(torch.uint16), 65535.0), formula(float_pixels(), 1.0)):
        twice = as_float64(torch.from_numpy(y).to(dtype))
        assert np.count_nonzero(twice != round_once(y, dtype)) > 0


def test_a_float16_module_keeps_float64_constants_and_gives_float16() -> None:
    """.half() changes what comes out, not the constants: 0.16527 stays 0.16527 (float16
    would hold 0.16528), and uint8 input gives float16, each value rounded once."""
    module = Normalize((0.16527,), (0.2,)).half()
    assert module.mean.dtype == torch.float64 and module.mean.item() == 0.16527
    x = every_value(torch.uint8)[:1]
    out = module(x)
    assert out.dtype == torch.float16
    assert np.array_equal(as_float64(out), round_once(formula(x, 255.0, (0.16527,), (0.2,)),
                                                      torch.float16))
    # float16 constants (what .half() used to leave) move values: the test sees that
    rounded_first = formula(x, 255.0, (float(np.float16(0.16527)),), (float(np.float16(0.2)),))
    assert not np.array_equal(round_once(rounded_first, torch.float16), as_float64(out))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_input_dtype_gives_the_modules_dtype(dtype) -> None:
    module = Normalize(MEAN, STD).to(dtype)
    for pixels in (torch.uint8, torch.uint16, torch.int16, torch.float16, torch.float32,
                   torch.float64):
        assert module(torch.zeros(3, 2, 2, dtype=pixels)).dtype == dtype


def test_back_to_float32_gives_the_float32_tables_again() -> None:
    fresh = Normalize(MEAN, STD)
    again = Normalize(MEAN, STD).half().bfloat16().float()
    assert again.lut16.dtype == torch.float32
    assert torch.equal(again.lut8, fresh.lut8) and torch.equal(again.lut16, fresh.lut16)


@pytest.mark.parametrize("pixels, scale", PIXELS)
def test_channels_last_and_permuted_inputs_give_the_same_values(pixels, scale) -> None:
    x = every_value(pixels)[None]  # (1, 3, H, 256)
    module = Normalize(MEAN, STD)
    expected = round_once(formula(x, scale), torch.float32)
    channels_last = x.contiguous(memory_format=torch.channels_last)
    out = module(channels_last)
    assert out.is_contiguous(memory_format=torch.channels_last)  # a following conv keeps it
    assert np.array_equal(as_float64(out), expected)
    hwc = x[0].permute(1, 2, 0).contiguous()  # what a decoder gives: (H, W, C)
    assert np.array_equal(as_float64(module(hwc.permute(2, 0, 1))), expected[0])


def test_an_explicit_scale_applies_to_uint8_and_uint16_tables() -> None:
    module = Normalize((100.0,), (50.0,), scale=1.0)
    for pixels in (torch.uint8, torch.uint16):
        x = every_value(pixels)[:1]
        assert np.array_equal(as_float64(module(x)),
                              round_once(formula(x, 1.0, (100.0,), (50.0,)), torch.float32))
