"""Each export, pasted into the real framework, normalizes pixels as the constants say.

The oracle is float64 numpy: (pixel / scale - mean) / std per channel, RGB order. The
frameworks compute in float32, so agreement is to float32 precision (about 1e-6 of the
values, which lie within a few units of 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import normstats

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def images() -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.integers(0, 256, (6, 9, 7, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def stats(images) -> normstats.DatasetStats:
    return normstats.compute(images)


def expected(image: np.ndarray, stats: normstats.DatasetStats) -> np.ndarray:
    return (image.astype(np.float64) / stats.scale - np.array(stats.mean)) / np.array(stats.std)


def test_albumentations_normalize_pasted_alone(images, stats):
    namespace: dict = {}
    exec(stats.to("albumentations"), namespace)  # the export imports albumentations itself
    transform = namespace["albumentations"].Normalize(**stats.to_kwargs("albumentations"))
    pasted = eval(stats.to("albumentations").splitlines()[-1], namespace)
    for t in (transform, pasted):
        out = t(image=images[0])["image"]
        np.testing.assert_allclose(out, expected(images[0], stats), atol=2e-6)


def test_torchvision_convention_through_torch_ops(images, stats):
    """torchvision's wheel cannot be imported here; its Normalize is (x - mean) / std on a
    CHW float tensor after ToTensor's division by 255, which these torch ops spell out."""
    import torch

    kwargs = stats.to_kwargs("torchvision")
    x = torch.from_numpy(images[0]).permute(2, 0, 1).to(torch.float32) / 255
    mean = torch.tensor(kwargs["mean"], dtype=torch.float32)[:, None, None]
    std = torch.tensor(kwargs["std"], dtype=torch.float32)[:, None, None]
    out = ((x - mean) / std).permute(1, 2, 0).numpy()
    np.testing.assert_allclose(out, expected(images[0], stats), atol=2e-6)


def test_hf_fragment_loads_with_auto_image_processor_and_saves_clean(tmp_path, images, stats):
    from transformers import AutoImageProcessor

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "preprocessor_config.json").write_text(stats.to("hf"))
    processor = AutoImageProcessor.from_pretrained(tmp_path / "model")
    out = processor(images[0], return_tensors="np", do_resize=False)["pixel_values"][0]
    np.testing.assert_allclose(out.transpose(1, 2, 0), expected(images[0], stats), atol=2e-6)
    processor.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "preprocessor_config.json").read_text())
    assert [key for key in saved if key.startswith("_")] == []
    assert saved["image_mean"] == list(stats.mean) and saved["image_std"] == list(stats.std)


def test_keras_export_pasted_alone_on_the_torch_backend(images, stats):
    """Keras picks its backend at import, so the pasted code runs in a process of its own."""
    code = stats.to("keras") + textwrap.dedent(f"""
        import json, numpy as np
        x = np.array({images[:2].tolist()}, dtype="uint8")
        print(json.dumps(np.asarray(normalize(x)).tolist()))
        """)
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = np.array(json.loads(run.stdout.splitlines()[-1]))
    np.testing.assert_allclose(out, expected(images[:2], stats), atol=1e-5)


def test_mmcv_and_detectron2_conventions_in_numpy(images, stats):
    """mmcv and detectron2 are not installable here; their documented arithmetic is: raw
    pixels minus PIXEL_MEAN over PIXEL_STD, in the order the config names (mmcv converts its
    BGR loads to RGB first when to_rgb is true)."""
    bgr_image = images[0][..., ::-1].astype(np.float64)
    mmcv = stats.to_kwargs("mmcv")
    assert mmcv["to_rgb"] is True
    rgb = bgr_image[..., ::-1]
    out = (rgb - np.array(mmcv["mean"])) / np.array(mmcv["std"])
    np.testing.assert_allclose(out, expected(images[0], stats), rtol=1e-12, atol=1e-12)
    d2 = stats.to_kwargs("detectron2", bgr=True)
    assert d2["INPUT.FORMAT"] == "BGR"
    out = (bgr_image - np.array(d2["MODEL.PIXEL_MEAN"])) / np.array(d2["MODEL.PIXEL_STD"])
    np.testing.assert_allclose(out[..., ::-1], expected(images[0], stats), rtol=1e-12,
                               atol=1e-12)
