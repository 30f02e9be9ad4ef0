"""The decode policy: its defaults, its modes, limits and nodata values, and the channel
names of what it decodes."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from normstats.errors import InvalidOptionError
from normstats.sources.decoding.policy import DEFAULT_MAX_PIXELS, DecodePolicy


def test_the_default_pixel_limit_is_pillows_as_it_ships():
    """Written out so that loading the policy never loads Pillow's image module: it must
    stay Pillow's own default (asked of a fresh interpreter, whose Pillow nobody changed)."""
    shipped = subprocess.run(
        [sys.executable, "-c", "from PIL import Image; print(Image.MAX_IMAGE_PIXELS)"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert DEFAULT_MAX_PIXELS == int(shipped)
    assert DecodePolicy().max_pixels == DEFAULT_MAX_PIXELS


def test_a_policy_of_a_mode_and_limits():
    from normstats.sources.decoding.policy import policy_of

    assert policy_of() == DecodePolicy("RGB", DEFAULT_MAX_PIXELS)
    assert policy_of() == DecodePolicy()
    given = policy_of("l", 100, max_file_bytes=5)
    assert (given.mode, given.max_pixels, given.max_file_bytes) == ("L", 100, 5)
    assert given.file_byte_limit == 5


def test_modes_and_nodata_values_are_parsed_with_one_line_errors():
    from normstats.sources.decoding.policy import parse_mode, parse_nodata

    with pytest.raises(InvalidOptionError) as raised:
        parse_mode("CMYK")
    assert str(raised.value) == "unknown mode 'CMYK'; choose one of RGB, L, RGBA, keep"
    for wrong, message in ((True, "nodata must be a number, got True"),
                           ("x", "nodata must be a number, got 'x'"),
                           ([1], "nodata must be a number, got [1]"),
                           ("-inf", "nodata must be finite or nan, got '-inf'")):
        with pytest.raises(InvalidOptionError) as raised:
            parse_nodata(wrong)
        assert str(raised.value) == message
    assert math.isnan(parse_nodata("nan"))
    policy = DecodePolicy("keep", nodata="-9999")
    assert policy.nodata == -9999.0 and policy.describe() == "keep, nodata -9999"


def test_native_channel_names_under_keep():
    from normstats.sources.decoding.policy import channel_names_for

    assert [channel_names_for("keep", c) for c in (1, 2, 3, 4)] == [
        ("L",), ("L", "A"), ("R", "G", "B"), ("R", "G", "B", "A")]
    assert channel_names_for("RGBA", 4) == ("R", "G", "B", "A")
