"""Every exporter parses in its own syntax and round-trips the numbers, and every format
written out in full says what its numbers are."""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
from fractions import Fraction

import numpy as np
import pytest

import normstats
from normstats.errors import InvalidOptionError
from normstats.results.exporters import (
    COVARIANCE_FORMATS,
    FORMATS,
    constants,
    export,
    export_kwargs,
)
from normstats.results.stats import DatasetStats


@pytest.fixture(scope="module")
def stats() -> normstats.DatasetStats:
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (12, 6, 5, 3), dtype=np.uint8)
    return normstats.compute(images, channels=("R", "G", "B"))


def _call_keywords(text: str) -> dict:
    """The literal keyword arguments of the single call expression in ``text``."""
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.keywords]
    return {k.arg: ast.literal_eval(k.value) for k in calls[0].keywords}


def _assignments(text: str) -> dict:
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Import):
            continue  # each export imports what it uses, to run pasted alone
        assert isinstance(node, ast.Assign)
        out[ast.unparse(node.targets[0])] = node.value
    return out


def _tensor_arguments(text: str) -> dict:
    """``name = torch.tensor(values)`` assignments, or ``name=torch.tensor(values)`` keywords
    of the call: name → values."""
    tree = ast.parse(text)
    pairs = [(ast.unparse(n.targets[0]), n.value) for n in tree.body if isinstance(n, ast.Assign)
             and isinstance(n.value, ast.Call) and ast.unparse(n.value.func) == "torch.tensor"]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.keywords]
    pairs += [(k.arg, k.value) for call in calls for k in call.keywords]
    return {name: ast.literal_eval(value.args[0]) for name, value in pairs}


def _comment(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("#"))


def test_torchvision_parses_and_round_trips(stats):
    text = stats.to("torchvision")
    args = _call_keywords(text)
    assert args["mean"] == stats.mean and args["std"] == stats.std
    assert "'std'" in _comment(text) and "R, G, B" in _comment(text)


def test_variant_is_chosen_and_stated(stats):
    text = stats.to("torchvision", variant="per_image_std_ddof1")
    assert _call_keywords(text)["std"] == stats.per_image_std_ddof1
    assert "per_image_std_ddof1" in _comment(text)


def test_timm(stats):
    cfg = ast.literal_eval(_assignments(stats.to("timm"))["pretrained_cfg_overlay"])
    assert cfg == {"mean": stats.mean, "std": stats.std}


def test_albumentations_has_max_pixel_value(stats):
    args = _call_keywords(stats.to("albumentations"))
    assert args == {"mean": stats.mean, "std": stats.std, "max_pixel_value": 255.0}


def test_albumentations_16bit():
    s = normstats.compute(np.array([[[[0]]], [[[65535]]]], np.uint16))
    assert _call_keywords(s.to("albumentations"))["max_pixel_value"] == 65535.0


def test_keras_gets_variances(stats):
    args = _call_keywords(stats.to("keras"))
    assert args["axis"] == -1
    assert args["mean"] == list(stats.mean)
    np.testing.assert_allclose(args["variance"], np.square(stats.std), rtol=1e-15)
    assert f"keras.layers.Rescaling({1 / 255!r})" in stats.to("keras")


def test_hf_json(stats):
    cfg = json.loads(stats.to("hf"))
    assert cfg["image_mean"] == list(stats.mean) and cfg["image_std"] == list(stats.std)
    assert cfg["do_rescale"] is True and cfg["rescale_factor"] == 1 / 255
    assert cfg["image_processor_type"] == "ViTImageProcessor"
    assert not [key for key in cfg if key.startswith("_")]  # save_pretrained would keep it


def test_mmcv_raw_scale_and_to_rgb(stats):
    value = _assignments(stats.to("mmcv"))["img_norm_cfg"]
    args = {k.arg: ast.literal_eval(k.value) for k in value.keywords}
    np.testing.assert_allclose(args["mean"], np.array(stats.mean) * 255, rtol=1e-14)
    np.testing.assert_allclose(args["std"], np.array(stats.std) * 255, rtol=1e-14)
    assert args["to_rgb"] is True


def test_detectron2_states_order(stats):
    values = {k: ast.literal_eval(v) for k, v in _assignments(stats.to("detectron2", bgr=True))
              .items()}
    assert values["cfg.INPUT.FORMAT"] == "BGR"
    np.testing.assert_allclose(values["cfg.MODEL.PIXEL_MEAN"],
                               np.array(stats.mean[::-1]) * 255, rtol=1e-14)


def test_mmcv_and_detectron2_turn_no_order_where_there_is_none():
    """to_rgb=True on one channel made mmcv's BGR-to-RGB conversion (OpenCV's cvtColor)
    turn it into three, and INPUT.FORMAT 'RGB' made detectron2 read grayscale images as
    colour; four bands have no format of detectron2's at all."""
    rng = np.random.default_rng(3)
    gray = normstats.compute(rng.integers(0, 256, (4, 5, 5, 1), dtype=np.uint8), channels="L")
    bands = normstats.compute(rng.integers(0, 256, (4, 5, 5, 4), dtype=np.uint8))
    assert gray.to_kwargs("mmcv")["to_rgb"] is bands.to_kwargs("mmcv")["to_rgb"] is False
    assert "to_rgb=False because a single channel has no BGR order to turn" in gray.to("mmcv")
    assert "to_rgb=False because 4 channels have no BGR order to turn" in bands.to("mmcv")
    assert gray.to_kwargs("detectron2") == {
        "INPUT.FORMAT": "L", "MODEL.PIXEL_MEAN": [m * 255 for m in gray.mean],
        "MODEL.PIXEL_STD": [s * 255 for s in gray.std]}
    assert "INPUT.FORMAT" not in bands.to_kwargs("detectron2")
    assert "INPUT.FORMAT" not in bands.to("detectron2")
    assert "these are 4 channels, which its readers (BGR, RGB, L) do not make: read them " \
        "with a DatasetMapper of your own" in bands.to("detectron2")


def test_the_whole_result_as_json_is_to_json_not_an_export(stats):
    """One JSON schema: `DatasetStats.to_json` (``--json``); there is no "json" export."""
    assert "json" not in FORMATS
    with pytest.raises(InvalidOptionError, match="unknown export format 'json'"):
        stats.to("json")
    assert json.loads(stats.to_json())["mean"] == list(stats.mean)


@pytest.mark.parametrize("fmt", ["torchvision", "timm", "albumentations", "keras"])
def test_bgr_reverses(stats, fmt):
    rgb, bgr = stats.to(fmt), stats.to(fmt, bgr=True)
    assert "B, G, R" in _comment(bgr)
    if fmt == "timm":
        get = lambda t: ast.literal_eval(_assignments(t)["pretrained_cfg_overlay"])  # noqa: E731
    else:
        get = _call_keywords
    a, b = get(rgb), get(bgr)
    assert list(b["mean"]) == list(a["mean"])[::-1]


def test_bgr_hf_format(stats):
    assert json.loads(stats.to("hf", bgr=True))["image_std"] == list(stats.std[::-1])
    mmcv = _assignments(stats.to("mmcv", bgr=True))["img_norm_cfg"]
    assert {k.arg: ast.literal_eval(k.value) for k in mmcv.keywords}["to_rgb"] is False


def test_every_code_format_names_the_variant(stats):
    """JSON has no comments: the hf fragment's variant is said on stderr by the command line
    (tests/cli/test_outputs.py)."""
    # hf and the band tables are JSON or CSV, without comments; the covariance ones have no std
    for fmt in set(FORMATS) - {"hf", "bands-json", "bands-csv", *COVARIANCE_FORMATS}:
        assert "rms_per_image_std" in stats.to(fmt, variant="rms_per_image_std")


def test_errors(stats):
    with pytest.raises(InvalidOptionError, match="unknown export format"):
        export(stats, "caffe")
    gray = normstats.compute(np.zeros((2, 2, 2, 1), np.uint8))
    with pytest.raises(InvalidOptionError, match="three channels"):
        gray.to("torchvision", bgr=True)
    with pytest.raises(InvalidOptionError, match="unknown std variant"):
        stats.to("keras", variant="mad")


def test_single_channel_tuple_is_a_tuple():
    s = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
    assert _call_keywords(s.to("torchvision")) == {"mean": (0.5,), "std": (0.5,)}


STATS = DatasetStats(
    channels=("R", "G", "B"), mean=(0.5, 0.25, 0.125), std=(0.25, 0.5, 0.0625), std_ddof1=None,
    per_image_std=(0.2, 0.1, 0.05), per_image_std_ddof1=None, rms_per_image_std=None,
    min=(0.0, 0.0, 0.0), max=(1.0, 1.0, 1.0), images=2, pixels_per_channel=8, dtype="uint8",
    scale=255.0, source="/data")
RAW = dataclasses.replace(STATS, scale=1.0, source="")
POOLED = ("# normstats: /data; std variant 'std' (pooled std over all pixels of the dataset "
          "(population, ddof 0)); channel order R, G, B; ")
PER_IMAGE_BGR = ("# normstats: dataset; std variant 'per_image_std' (mean over images of each "
                 "image's own std (ddof 0)); channel order B, G, R; ")


@pytest.mark.parametrize("fmt, text", [
    ("torchvision", POOLED + "values for pixels divided by 255\nimport torchvision\n"
     "torchvision.transforms.Normalize(mean=(0.5, 0.25, 0.125), std=(0.25, 0.5, 0.0625))"),
    ("timm", POOLED + "values for pixels divided by 255\n"
     "pretrained_cfg_overlay = {'mean': (0.5, 0.25, 0.125), 'std': (0.25, 0.5, 0.0625)}"),
    ("albumentations", POOLED + "mean/std for pixels divided by max_pixel_value=255.0\n"
     "import albumentations\nalbumentations.Normalize(mean=(0.5, 0.25, 0.125), "
     "std=(0.25, 0.5, 0.0625), max_pixel_value=255.0)"),
    ("keras", POOLED + "values for pixels divided by 255; Keras wants the variance (std "
     "squared)\nimport keras\nnormalize = keras.Sequential([keras.layers.Rescaling("
     "0.00392156862745098), keras.layers.Normalization(axis=-1, mean=[0.5, 0.25, 0.125], "
     "variance=[0.0625, 0.25, 0.00390625])])"),
    ("mmcv", POOLED + "raw pixel units (x255); to_rgb=True because mmcv loads BGR\n"
     "img_norm_cfg = dict(mean=[127.5, 63.75, 31.875], std=[63.75, 127.5, 15.9375], "
     "to_rgb=True)"),
    ("detectron2", POOLED + "raw pixel units (x255); detectron2 defaults to BGR, this is RGB\n"
     "cfg.INPUT.FORMAT = 'RGB'\ncfg.MODEL.PIXEL_MEAN = [127.5, 63.75, 31.875]\n"
     "cfg.MODEL.PIXEL_STD = [63.75, 127.5, 15.9375]"),
])
def test_each_format_in_full(fmt, text):
    assert export(STATS, fmt) == text
    assert STATS.to(fmt) == text


def test_hf_in_full():
    assert export(STATS, "hf") == json.dumps({
        "image_processor_type": "ViTImageProcessor", "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": True,
        "image_mean": [0.5, 0.25, 0.125], "image_std": [0.25, 0.5, 0.0625]}, indent=2)


@pytest.mark.parametrize("fmt, text", [
    ("torchvision", PER_IMAGE_BGR + "raw pixel values\nimport torchvision\n"
     "torchvision.transforms.Normalize(mean=(0.125, 0.25, 0.5), std=(0.05, 0.1, 0.2))"),
    ("keras", PER_IMAGE_BGR + "raw pixel values; Keras wants the variance (std squared)\n"
     "import keras\nnormalize = keras.layers.Normalization(axis=-1, mean=[0.125, 0.25, 0.5], "
     "variance=[0.0025000000000000005, 0.010000000000000002, 0.04000000000000001])"),
    ("mmcv", PER_IMAGE_BGR + "raw pixel units (x1); to_rgb=False because mmcv loads BGR\n"
     "img_norm_cfg = dict(mean=[0.125, 0.25, 0.5], std=[0.05, 0.1, 0.2], to_rgb=False)"),
    ("detectron2", PER_IMAGE_BGR + "raw pixel units (x1); detectron2 defaults to BGR, this is "
     "BGR\ncfg.INPUT.FORMAT = 'BGR'\ncfg.MODEL.PIXEL_MEAN = [0.125, 0.25, 0.5]\n"
     "cfg.MODEL.PIXEL_STD = [0.05, 0.1, 0.2]"),
])
def test_raw_data_a_variant_and_bgr_in_full(fmt, text):
    assert export(RAW, fmt, variant="per_image_std", bgr=True) == text


def test_hf_of_raw_data_does_not_rescale():
    fragment = json.loads(export(RAW, "hf", variant="per_image_std", bgr=True))
    assert (fragment["do_rescale"], fragment["rescale_factor"], fragment["image_std"]) == \
        (False, 1.0, [0.05, 0.1, 0.2])


def test_constants_keep_the_source_and_refuse_bgr_without_three_channels():
    c = constants(STATS)
    assert (c.source, c.scale, c.variant, c.bgr, c.channels) == \
        ("/data", 255.0, "std", False, ("R", "G", "B"))
    # a result made by hand keeps no pixel units: one correctly rounded product each
    made = dataclasses.replace(STATS, mean=(0.0006850000000000001, 1 / 3, 0.5))
    assert made.pixel_units is None
    assert made.in_pixel_units("mean") == (0.17467500000000002, 85.0, 127.5)
    two = dataclasses.replace(STATS, channels=("a", "b"), mean=(0.5, 0.5), std=(0.1, 0.1))
    with pytest.raises(InvalidOptionError) as raised:
        constants(two, bgr=True)
    assert str(raised.value) == "--bgr needs three channels, these data have 2 (a, b)"
    with pytest.raises(InvalidOptionError) as raised:
        export(STATS, "onnx")
    assert str(raised.value) == ("unknown export format 'onnx'; choose one of torchvision, "
                                 "timm, albumentations, keras, hf, mmcv, detectron2, lighting, "
                                 "zca, torchgeo, kornia, bands-json, bands-csv")


@pytest.mark.parametrize("fmt", FORMATS)
def test_kwargs_are_the_arguments_the_code_passes(fmt):
    """`to_kwargs` and `to` come from one dict: the code's literal arguments are the dict."""
    stats = dataclasses.replace(STATS, covariance=((4.0, 1.0, 0.0), (1.0, 2.0, 0.5),
                                                   (0.0, 0.5, 1.0)))
    kwargs = stats.to_kwargs(fmt)
    assert kwargs == export_kwargs(stats, fmt)
    text = stats.to(fmt)
    if fmt == "hf":
        assert json.loads(text) == kwargs
    elif fmt == "timm":
        assert ast.literal_eval(_assignments(text)["pretrained_cfg_overlay"]) == kwargs
    elif fmt == "detectron2":
        assert {k.removeprefix("cfg."): ast.literal_eval(v)
                for k, v in _assignments(text).items()} == kwargs
    elif fmt == "mmcv":
        value = _assignments(text)["img_norm_cfg"]
        assert {k.arg: ast.literal_eval(k.value) for k in value.keywords} == kwargs
    elif fmt in ("torchgeo", "kornia"):  # torch.tensor([...]) of each
        calls = _tensor_arguments(text)
        assert calls == {k: list(v) for k, v in kwargs.items()}
    elif fmt == "bands-json":
        assert json.loads(text) == kwargs["bands"]
    elif fmt == "bands-csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [{k: v if k == "band" else (float(v) if v else None) for k, v in row.items()}
                for row in rows] == kwargs["bands"]
    else:
        assert _call_keywords(text) == kwargs


def test_kwargs_refuse_what_the_code_refuses():
    with pytest.raises(InvalidOptionError, match="unknown export format 'caffe'"):
        STATS.to_kwargs("caffe")
    assert STATS.to_kwargs("mmcv", bgr=True) == {
        "mean": [31.875, 63.75, 127.5], "std": [15.9375, 127.5, 63.75], "to_rgb": False}


def test_a_constant_channel_is_named_where_its_std_0_would_be_divided_by(tmp_path):
    """Opaque RGBA images have an alpha channel of std 0: the paste line and every export
    divided by it without a word (torchvision refuses it when called, others give NaN).
    The numbers stay what they are; a line under the paste line and one under each
    export's header say which channel and what to do."""
    from PIL import Image

    rng = np.random.default_rng(9)
    for i in range(3):
        rgb = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
        Image.fromarray(np.dstack([rgb, np.full((4, 4), 255, np.uint8)])).save(
            tmp_path / f"{i}.png")
    stats = normstats.compute(tmp_path, mode="RGBA", cache=False)
    assert stats.std[3] == 0.0 and stats.channels[3] == "A"
    note = "channel A is constant (std 0), which Normalize divides by: drop it, or give it std 1"
    assert f"({note})" in str(stats).split("\n")
    for fmt in ("torchvision", "timm", "albumentations", "keras", "mmcv", "detectron2",
                "torchgeo", "kornia"):
        assert stats.to(fmt).split("\n")[1] == f"# {note}", fmt
    assert "# channel" not in normstats.compute(tmp_path, cache=False).to("torchvision")


def test_vectors_are_exported_only_where_their_features_are_normalized():
    """Vectors (N, d) were exported as a torchvision Normalize, an mmcv config with
    to_rgb=True, a detectron2 INPUT.FORMAT 'RGB': image channels they are not. Those formats
    are refused naming the ones that apply; keras, zca and the band tables still export."""
    vectors = normstats.compute(np.arange(12, dtype=np.float64).reshape(4, 3) ** 2,
                                covariance=True)
    for fmt in FORMATS:
        if fmt in ("keras", "zca", "bands-json", "bands-csv"):
            assert export(vectors, fmt)
            continue
        with pytest.raises(InvalidOptionError, match=rf"^the {fmt} export normalizes the "
                                                     r"channels of images, and these are "
                                                     r"vectors \(N, d\) of 3 features"):
            export(vectors, fmt)
        with pytest.raises(InvalidOptionError):
            vectors.to(fmt)


def test_pixel_unit_exports_are_rounded_once_from_the_exact_totals():
    """mmcv and detectron2 take the constants in pixel units: each is the exact mean (or
    std variant) rounded once, as `--scale 1` reports it, where the reported value times
    255 is an ulp away; kept through JSON, in BGR order too, and dropped (value times the
    scale) once the reported values are replaced."""
    # channel R: 0, 0, 0, 1, 255, 255, whose mean 511 / 6 = 85.1666... is 85.16666666666667
    # where 255 times the reported mean gives 85.16666666666666
    images = [np.array([[[0, 10, 20], [0, 30, 40], [0, 50, 60]]], np.uint8),
              np.array([[[1, 70, 80], [255, 90, 100], [255, 110, 120]]], np.uint8)]
    stats = normstats.compute(images, layout="HWC", workers=1)
    total = [sum(int(v) for i in images for v in i[..., c].ravel()) for c in range(3)]
    count = sum(i.shape[0] * i.shape[1] for i in images)
    exact_mean = tuple(float(Fraction(t, count)) for t in total)
    assert stats.in_pixel_units("mean") == exact_mean
    assert any(m * 255 != e for m, e in zip(stats.mean, exact_mean))  # the case it fixes
    unscaled = normstats.compute(images, layout="HWC", scale=1, workers=1)
    for variant in ("std", "per_image_std", "per_image_std_ddof1", "rms_per_image_std"):
        assert stats.in_pixel_units(variant) == unscaled.variant(variant), variant
    mmcv = stats.to_kwargs("mmcv", variant="per_image_std")
    assert (tuple(mmcv["mean"]), tuple(mmcv["std"])) == (unscaled.mean, unscaled.per_image_std)
    detectron2 = normstats.DatasetStats.from_json(stats.to_json()).to_kwargs("detectron2",
                                                                             bgr=True)
    assert tuple(detectron2["MODEL.PIXEL_MEAN"]) == unscaled.mean[::-1]
    assert tuple(detectron2["MODEL.PIXEL_STD"]) == unscaled.std[::-1]
    moved = dataclasses.replace(stats, mean=tuple(m + 0.01 for m in stats.mean))
    assert moved.in_pixel_units("mean") == tuple(m * 255 for m in moved.mean)
    assert normstats.compute(images[0][None], scale=1).pixel_units is None  # nothing to keep
