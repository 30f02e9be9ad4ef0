"""GDAL's external masks: ``<image>.msk`` found next to a file, read under ``keep`` with one
band for every band or one per band, and anything else an error naming the image and its
mask file."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image
from raster_files import random_raster, write_raster, write_sidecar

from normstats.errors import RefusedInputError, UnreadableInputError
from normstats.sources.decoding.decode import decode_file
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.decoding.sidecar import read_sidecar, sidecar_stamp

KEEP = DecodePolicy("keep")


def _valid(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    valid = rng.random(shape) < 0.6
    valid[0, 0] = False
    return valid


@pytest.mark.parametrize("bits", [1, 8])
def test_a_sidecar_of_one_band_masks_every_band_and_one_of_n_each_band(tmp_path, rng, bits):
    pixels = random_raster(rng, (7, 9, 4), "uint16")
    image = write_raster(tmp_path / "t.tif", pixels, compression="deflate")
    for valid in (_valid(rng, (7, 9)), _valid(rng, (7, 9, 4))):
        write_sidecar(image, valid, bits)
        decoded = decode_file(str(image), KEEP, "t.tif", sidecars=True)
        np.testing.assert_array_equal(decoded.pixels, pixels)
        expected = ~valid if valid.ndim == 3 else ~valid[:, :, None]
        np.testing.assert_array_equal(decoded.mask, expected)


def test_a_sidecar_and_a_mask_page_both_leave_their_pixels_out(tmp_path, rng):
    pixels = random_raster(rng, (6, 5, 3), "int16")
    inside, beside = _valid(rng, (6, 5)), _valid(rng, (6, 5, 3))
    image = write_raster(tmp_path / "t.tif", pixels, valid=inside)
    write_sidecar(image, beside)
    decoded = decode_file(str(image), KEEP, "t.tif", sidecars=True)
    np.testing.assert_array_equal(decoded.mask, ~(inside[:, :, None] & beside))


def test_sidecars_are_read_only_when_asked_and_under_keep(tmp_path, rng):
    """A listing that found no sidecar does not look for one (a failed open a file); the
    colour modes feed what a loader sees, which no mask changes."""
    image = tmp_path / "g.png"
    Image.fromarray(rng.integers(0, 256, (4, 6), np.uint8)).save(image)
    write_sidecar(image, _valid(rng, (4, 6)))
    assert decode_file(str(image), KEEP, "g.png").mask is None
    assert decode_file(str(image), DecodePolicy("L"), "g.png", sidecars=True).mask is None
    masked = decode_file(str(image), KEEP, "g.png", sidecars=True)  # GDAL masks any format
    assert masked.mask.shape == (4, 6, 1) and masked.leaves_values_out


def test_a_sidecar_that_does_not_fit_is_an_error_naming_the_image_and_its_mask_file(
        tmp_path, rng):
    image = write_raster(tmp_path / "t.tif", random_raster(rng, (6, 8, 3), "uint16"))
    cases = {"t.tif: its mask file t.tif.msk is 8x5 but the image is 8x6; a mask covers its "
             "image pixel for pixel": np.ones((5, 8), bool),
             "t.tif: its mask file t.tif.msk has 2 bands for an image of 3: a mask has one "
             "band (for every band) or one band per band": np.ones((6, 8, 2), bool)}
    for message, valid in cases.items():
        write_sidecar(image, valid)
        with pytest.raises(UnreadableInputError) as raised:
            decode_file(str(image), KEEP, "t.tif", sidecars=True)
        assert str(raised.value) == message
    (tmp_path / "t.tif.msk").write_bytes(b"not a mask")
    with pytest.raises(UnreadableInputError, match="t.tif: its mask file t.tif.msk is not a "
                                                   "TIFF"):
        decode_file(str(image), KEEP, "t.tif", sidecars=True)
    good = (tmp_path / "t.tif.msk")
    write_sidecar(image, np.ones((6, 8), bool))
    good.write_bytes(good.read_bytes()[:-3])
    with pytest.raises(UnreadableInputError, match="truncated or corrupt mask file t.tif.msk"):
        decode_file(str(image), KEEP, "t.tif", sidecars=True)


def test_read_sidecar_prefers_msk_and_refuses_what_is_not_a_regular_file(tmp_path):
    path = str(tmp_path / "t.tif")
    assert read_sidecar(path, "t.tif", 100) is None
    (tmp_path / "t.tif.MSK").write_bytes(b"upper")
    assert read_sidecar(path, "t.tif", 100).name == "t.tif.MSK"
    (tmp_path / "t.tif.msk").write_bytes(b"lower")
    assert read_sidecar(path, "t.tif", 100) == ("t.tif.msk", b"lower")
    with pytest.raises(RefusedInputError, match="t.tif: its mask file t.tif.msk: file of 5 "
                                                "bytes is over the limit of 4 bytes"):
        read_sidecar(path, "t.tif", 4)
    os.remove(tmp_path / "t.tif.msk")
    os.remove(tmp_path / "t.tif.MSK")
    os.mkfifo(tmp_path / "t.tif.msk")
    with pytest.raises(RefusedInputError, match="its mask file t.tif.msk: not a regular file "
                                                r"\(a FIFO"):
        read_sidecar(path, "t.tif", 100)
    os.remove(tmp_path / "t.tif.msk")
    os.symlink(tmp_path / "nowhere", tmp_path / "t.tif.msk")  # dangling: GDAL sees none
    assert read_sidecar(path, "t.tif", 100) is None


def test_sidecar_stamp_changes_with_every_write(tmp_path):
    path = tmp_path / "t.tif.msk"
    path.write_bytes(b"a")
    stamps = {sidecar_stamp(os.stat(path))}
    path.write_bytes(b"b")  # same size: the status-change time tells
    os.utime(path, ns=(0, 0))
    stamps.add(sidecar_stamp(os.stat(path)))
    path.write_bytes(b"bb")
    stamps.add(sidecar_stamp(os.stat(path)))
    assert len(stamps) == 3 and 0 not in stamps
