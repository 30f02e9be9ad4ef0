"""The decode policy's defaults."""

from __future__ import annotations

import subprocess
import sys

from normstats.sources.decoding.policy import DEFAULT_MAX_PIXELS, DecodePolicy


def test_the_default_pixel_limit_is_pillows_as_it_ships():
    """Written out so that loading the policy never loads Pillow's image module: it must
    stay Pillow's own default (asked of a fresh interpreter, whose Pillow nobody changed)."""
    shipped = subprocess.run(
        [sys.executable, "-c", "from PIL import Image; print(Image.MAX_IMAGE_PIXELS)"],
        capture_output=True, text=True, check=True).stdout.strip()
    assert DEFAULT_MAX_PIXELS == int(shipped)
    assert DecodePolicy().max_pixels == DEFAULT_MAX_PIXELS
