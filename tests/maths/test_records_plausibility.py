"""`impossible_rows` against an exact oracle: every record of real pixels passes, and a
record changed in any field by as little as one unit fails exactly when the documented
conditions say so, including where the exact checks overflow int64."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from normstats.maths.records import (
    MAX_RECORD_PIXELS,
    FloatRecords,
    IntegerRecords,
    impossible_rows,
    records_from_stack,
)


def integer_row_possible(dtype: str, n: int, low: list[float], high: list[float],
                         sums: list[int], squares: list[int]) -> bool:
    """The conditions of `impossible_rows`' docstring, in Python ints."""
    if not 1 <= n <= MAX_RECORD_PIXELS:
        return False
    kind = np.dtype(dtype)
    lowest, highest = (0, 1) if kind == np.bool_ else (np.iinfo(kind).min, np.iinfo(kind).max)
    for lo, hi, s, q in zip(low, high, sums, squares):
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            return False
        if not (lowest <= lo and hi <= highest and lo.is_integer() and hi.is_integer()):
            return False
        lo, hi = int(lo), int(hi)
        if not (lo * n <= s <= hi * n and q % 2 == s % 2 and n * q >= s * s
                and q <= (lo + hi) * s - n * lo * hi):
            return False
    return True


def oracle(records: IntegerRecords) -> list[bool]:
    """True for each impossible row."""
    return [not integer_row_possible(records.dtype, int(n), lo, hi, s, q)
            for n, lo, hi, s, q in zip(records.pixels.tolist(), records.minimum.tolist(),
                                       records.maximum.tolist(), records.sums.tolist(),
                                       records.sums_sq.tolist())]


def real_records(rng: np.random.Generator, dtype: str, count: int) -> IntegerRecords:
    """Records of images of one dtype with every kind of content: flat, two-valued, random
    within a narrow or the full range."""
    info = (0, 1) if dtype == "bool" else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    stack = []
    for i in range(count):
        a, b = sorted(rng.integers(info[0], info[1] + 1, 2).tolist())
        if i % 4 == 0:
            image = np.full((3, 4, 2), a)
        elif i % 4 == 1:
            image = rng.choice([a, b], (3, 4, 2))
        else:
            image = rng.integers(a, b + 1, (3, 4, 2))
        stack.append(image.astype(dtype))
    return records_from_stack(np.stack(stack))


def altered(rng: np.random.Generator, records: IntegerRecords) -> IntegerRecords:
    """Each row with one field moved by a small or a large step, or made non-finite."""
    r = {name: getattr(records, name).copy() for name in records.array_fields()}
    for row in range(len(records)):
        name = rng.choice(["pixels", "minimum", "maximum", "sums", "sums_sq"])
        step = int(rng.choice([-2, -1, 1, 2, 1000, -(1 << 20)]))
        if name == "pixels":
            r["pixels"][row] += step
        else:
            c = rng.integers(0, r[name].shape[1])
            if name in ("minimum", "maximum") and rng.random() < 0.1:
                r[name][row, c] = rng.choice([np.nan, np.inf, 0.5 + r[name][row, c]])
            else:
                r[name][row, c] += step
    return replace(records, **r)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "int8", "bool"])
def test_integer_records_against_the_oracle(rng, dtype):
    records = real_records(rng, dtype, 60)
    assert not impossible_rows(records).any()
    for _ in range(5):
        changed = altered(rng, records)
        expected = oracle(changed)
        assert impossible_rows(changed).tolist() == expected
        assert 0 < sum(expected) < len(changed)  # both verdicts were asked for


@pytest.mark.parametrize("n", [0, -1, MAX_RECORD_PIXELS + 1])
def test_a_pixel_count_no_image_has_is_impossible(n):
    records = records_from_stack(np.zeros((2, 1, 1, 1), np.uint8))
    pixels = records.pixels.copy()
    pixels[1] = n
    assert impossible_rows(replace(records, pixels=pixels)).tolist() == [False, True]


def huge(n: int, low: int, high: int, count_high: int, dq: int = 0, ds: int = 0,
         dtype: str = "uint16") -> IntegerRecords:
    """One channel of ``n`` pixels, ``count_high`` at ``high`` and the rest at ``low``,
    its Σx and Σx² moved by ``ds`` and ``dq``: records no real image would fit in memory
    for, where n·Σx² and (Σx)² pass int64."""
    s = (n - count_high) * low + count_high * high + ds
    q = (n - count_high) * low * low + count_high * high * high + dq
    return IntegerRecords(dtype=dtype, channel_names=("L",), keys=(),
                          pixels=np.array([n], np.int64),
                          minimum=np.array([[float(low)]]), maximum=np.array([[float(high)]]),
                          sums=np.array([[s]], np.int64), sums_sq=np.array([[q]], np.int64))


@pytest.mark.parametrize("n, low, high, count_high, dtype", [
    (2**31, 65535, 65535, 0, "uint16"),      # constant: both bounds hold with equality
    (2**31 - 7, 0, 65535, 2**30, "uint16"),  # two-valued: the upper bound holds with equality
    (2**31 - 7, 1, 65534, 12345, "uint16"),
    (2**27, 300, 60000, 2**26 + 1, "uint16"),
    (2**20, 3, 65535, 99, "uint16"),         # Σ|a·b| under 2⁶¹: decided in int64
    (2**35, 0, 1, 2**34, "bool"),            # bool masks past 2³¹ pixels
])
def test_huge_records_are_decided_exactly(n, low, high, count_high, dtype):
    exact = huge(n, low, high, count_high, dtype=dtype)
    assert impossible_rows(exact).tolist() == [False]
    for dq, ds in ((2, 0), (-2, 0), (1, 1), (-1, -1), (2, 2), (0, 2), (4, 0), (-4, 0),
                   (2**20, 0), (-(2**20), 0)):
        moved = huge(n, low, high, count_high, dq, ds, dtype)
        expected = oracle(moved)
        assert impossible_rows(moved).tolist() == expected, (dq, ds)


def test_many_rows_are_decided_each_on_its_own():
    rows = [huge(2**31, 65535, 65535, 0, dq) for dq in (0, 2, -2, 0)]
    rows += [huge(2**20, 3, 65535, 99, dq) for dq in (0, 2)]
    merged = replace(rows[0], **{name: np.concatenate([getattr(r, name) for r in rows])
                                 for name in rows[0].array_fields()})
    assert impossible_rows(merged).tolist() == [False, True, True, False, False, True]


def float_records(means, m2s, low, high, n=4, residuals=0.0) -> FloatRecords:
    column = np.array(means, np.float64)[:, None]
    return FloatRecords(dtype="float64", channel_names=("L",), keys=(),
                        pixels=np.full(len(means), n, np.int64),
                        minimum=np.full_like(column, low), maximum=np.full_like(column, high),
                        means=column, residuals=np.full_like(column, residuals),
                        m2s=np.array(m2s, np.float64)[:, None])


def test_float_records_of_real_images_pass_rounding_included(rng):
    stacks = [rng.normal(1e8, 1, (7, 5, 6, 3)), np.full((3, 2, 2, 2), 0.1),
              rng.uniform(-1e300, 1e300, (4, 3, 3, 1)) * 2.0**-600,
              np.array([0.1, 0.1, 0.1, 0.2]).reshape(1, 2, 2, 1), np.zeros((2, 1, 1, 1))]
    for stack in stacks:
        assert not impossible_rows(records_from_stack(stack)).any()


def test_float_records_outside_their_bounds_are_impossible():
    # 4 pixels in [0, 2]: the mean lies in [0, 2], M2 ≤ 4·(2 − mean)·(mean − 0) (Bhatia–Davis)
    records = float_records(means=[1.0, 1.0, 2.5, -0.5, 1.0, 1.0, 0.0, np.nan, 1.0],
                            m2s=[4.0, 4.1, 0.0, 0.0, -0.1, np.inf, 0.0, 0.0, 0.0],
                            low=0.0, high=2.0)
    assert impossible_rows(records).tolist() == [False, True, True, True, True, True, False,
                                                 True, False]
    assert impossible_rows(float_records([1.0], [0.0], 0.0, 2.0, residuals=np.nan)).tolist() \
        == [True]
    assert impossible_rows(float_records([1.0], [0.0], 2.0, 0.0)).tolist() == [True]
    assert impossible_rows(float_records([1.0], [0.0], 0.0, np.inf)).tolist() == [True]
