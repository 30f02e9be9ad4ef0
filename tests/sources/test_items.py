"""One item to pixels: arrays and torch tensors by one shape rule, never by their type."""

from pathlib import Path

import numpy as np
import pytest
import torch  # in the test extra: fail, never skip

import normstats
from normstats.sources.items import image_layout, item_pixels


def test_the_channel_axis_is_the_end_with_1_3_or_4_entries():
    assert [image_layout(s) for s in ((32, 32, 3), (3, 32, 32), (28, 28, 1), (1, 28, 28),
                                      (9, 7, 4), (4, 9, 7), (1, 5, 1))] == \
        ["HWC", "CHW", "HWC", "CHW", "HWC", "CHW", "HWC"]


@pytest.mark.parametrize(("shape", "why"), [((3, 32, 3), "both its first and its last"),
                                            ((4, 4, 3), "both its first and its last"),
                                            ((13, 64, 64), "neither its first nor its last"),
                                            ((64, 64, 13), "neither its first nor its last")])
def test_an_ambiguous_shape_is_refused_and_layout_decides(shape, why):
    pixels = (np.arange(np.prod(shape)) % 1000).astype(np.int16).reshape(shape)
    for item in (pixels, torch.from_numpy(pixels)):
        with pytest.raises(normstats.InvalidOptionError,
                           match=rf"shape \({shape[0]}, {shape[1]}, {shape[2]}\): {why}.*"
                                 "layout='HWC' or 'CHW'"):
            item_pixels(item)
        np.testing.assert_array_equal(item_pixels(item, layout="HWC").pixels, pixels)
        np.testing.assert_array_equal(item_pixels(item, layout="CHW").pixels,
                                      pixels.transpose(1, 2, 0))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.int16])
def test_a_tensor_is_read_by_its_shape_as_the_same_array_is(rng, dtype):
    """webdataset's rgb8 and collated loaders give HWC tensors, ToTensor and read_image CHW:
    each is read as the numpy array of the same shape is."""
    hwc = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
    for pixels in (hwc, np.ascontiguousarray(hwc.transpose(2, 0, 1))):
        tensor = torch.from_numpy(pixels).to(dtype)
        got = item_pixels(tensor).pixels
        assert got.shape == (6, 5, 3) and got.dtype == tensor.numpy().dtype
        np.testing.assert_array_equal(got, item_pixels(tensor.numpy()).pixels)
        np.testing.assert_array_equal(got, hwc)


def test_hwc_uint8_tensors_give_the_statistics_of_their_pixels(rng):
    """Before: 20 images of 32 'channels' (HWC taken as CHW), exit status 0."""
    from oracle import integer_mean_std

    stack = rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)
    stats = normstats.compute([torch.from_numpy(image) for image in stack])
    assert stats.images == 20 and stats.channels == ("c0", "c1", "c2")
    assert (list(stats.mean), list(stats.std)) == integer_mean_std(list(stack), 255)


def test_bfloat16_tensors_are_read_exactly_as_float32():
    values = torch.tensor([[0.5, 1.0, 3.0], [0.25, -2.0, 8.0]], dtype=torch.bfloat16)
    got = item_pixels(values)
    assert got.pixels.dtype == np.float32 and got.pixels.shape == (2, 3, 1)
    assert got.pixels[:, :, 0].tolist() == [[0.5, 1.0, 3.0], [0.25, -2.0, 8.0]]


@pytest.mark.parametrize("tensor", [torch.zeros(4, 4, 3).to_sparse(),
                                    torch.empty(4, 4, 3, device="meta"),
                                    torch.zeros(4, 4, 3).to(torch.float8_e4m3fn)])
def test_a_tensor_numpy_cannot_hold_is_a_one_line_error(tensor):
    with pytest.raises(normstats.UnreadableInputError,
                       match=f"^a {tensor.dtype} tensor is not an image \\(.+\\)$"):
        item_pixels(tensor)
    # and through compute: named in the skipped list, never a traceback
    with pytest.raises(normstats.EmptyDatasetError, match="is not an image"):
        normstats.compute([tensor])


@pytest.mark.parametrize("item", ["train/cat.png", b"train/cat.png",
                                  Path("train/cat.png"),
                                  {"image": "train/cat.png", "label": 0}])
def test_a_path_as_an_item_is_refused_pointing_at_a_list_of_paths(item):
    with pytest.raises(normstats.InvalidOptionError,
                       match=r"^a (str|bytes|PosixPath) \(.*cat\.png.*\) is not an image: .*"
                             r"compute\(sorted\(paths\)\)$"):
        item_pixels(item)


def test_a_mode_that_contradicts_an_array_item_stops_the_run(rng):
    """mode="L" converts PIL items; an RGB array or tensor item used to be read as stored
    without a word, as if converted. It stops the run naming the item; PIL items convert,
    and items that already hold the mode's channels read."""
    from PIL import Image

    pixels = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(4)]
    for items in (pixels, [torch.from_numpy(p).permute(2, 0, 1) for p in pixels],
                  [(p, 0) for p in pixels]):
        with pytest.raises(normstats.InvalidOptionError, match=r"^item \d+: mode L converts PIL "
                           r"images; this item is a 3-channel (ndarray|Tensor), read as "
                           r"stored: convert it in the dataset, or leave mode out$"):
            normstats.compute(items, mode="L")
    gray = normstats.compute([Image.fromarray(p) for p in pixels], mode="L")
    assert gray.channels == ("L",) and gray.images == 4
    assert normstats.compute([p[..., 0] for p in pixels], mode="L").images == 4
    kept, plain = normstats.compute(pixels, mode="keep"), normstats.compute(pixels)
    assert (kept.mean, kept.std) == (plain.mean, plain.std)
