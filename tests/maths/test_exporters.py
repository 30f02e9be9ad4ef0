"""Every exporter parses in its own syntax and round-trips the numbers."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

import normstats
from normstats.errors import InvalidOptionError
from normstats.maths.exporters import FORMATS, export


@pytest.fixture(scope="module")
def stats() -> normstats.DatasetStats:
    rng = np.random.default_rng(7)
    images = rng.integers(0, 256, (12, 6, 5, 3), dtype=np.uint8)
    return normstats.compute(images, channels=("R", "G", "B"))


def _call_keywords(text: str) -> dict:
    """The literal keyword arguments of the single call expression in ``text``."""
    tree = ast.parse(text)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return {k.arg: ast.literal_eval(k.value) for k in calls[0].keywords}


def _assignments(text: str) -> dict:
    out = {}
    for node in ast.parse(text).body:
        assert isinstance(node, ast.Assign)
        out[ast.unparse(node.targets[0])] = node.value
    return out


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
    assert "Rescaling(1 / 255)" in stats.to("keras")


def test_hf_json(stats):
    cfg = json.loads(stats.to("hf"))
    assert cfg["image_mean"] == list(stats.mean) and cfg["image_std"] == list(stats.std)
    assert cfg["do_rescale"] is True and cfg["rescale_factor"] == 1 / 255
    assert cfg["_normstats"]["variant"] == "std"


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


def test_json(stats):
    data = json.loads(stats.to("json"))
    assert data["mean"] == list(stats.mean) and data["std"] == list(stats.std)
    assert data["channels"] == ["R", "G", "B"] and data["scale"] == 255.0


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


def test_bgr_json_formats(stats):
    for fmt, key in (("hf", "image_std"), ("json", "std")):
        assert json.loads(stats.to(fmt, bgr=True))[key] == list(stats.std[::-1])
    mmcv = _assignments(stats.to("mmcv", bgr=True))["img_norm_cfg"]
    assert {k.arg: ast.literal_eval(k.value) for k in mmcv.keywords}["to_rgb"] is False


def test_every_format_names_the_variant(stats):
    for fmt in FORMATS:
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
