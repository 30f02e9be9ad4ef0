"""The reported scale: the dtype maximum of integer images, 1 for floats, masks and
rasters in raw units; a scale given by the user is a positive, finite number."""

from __future__ import annotations

import math

import pytest

from normstats.errors import InvalidOptionError
from normstats.maths.scale import default_scale, parse_scale


def test_the_default_scale_of_each_kind_of_data():
    assert [default_scale(d) for d in ("uint8", "uint16", "int16", "bool", "float32")] == [
        255.0, 65535.0, 32767.0, 1.0, 1.0]
    assert default_scale("uint16", raw_units=True) == default_scale("uint8", True) == 1.0


def test_a_scale_given_is_a_positive_finite_number():
    assert parse_scale(255) == 255.0 and parse_scale("0.5") == 0.5
    for wrong in ("x", None):
        with pytest.raises(InvalidOptionError) as caught:
            parse_scale(wrong)
        assert str(caught.value) == f"scale must be a number, got {wrong!r}"
    for wrong in (0, -1.0, math.inf, math.nan, "-3"):
        with pytest.raises(InvalidOptionError) as caught:
            parse_scale(wrong)
        assert str(caught.value) == f"scale must be positive and finite, got {wrong!r}"
