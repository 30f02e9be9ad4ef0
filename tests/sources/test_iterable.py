import numpy as np
import pytest
from conftest import random_images
from oracle import numbers
from PIL import Image

import normstats
from normstats.sources.iterable import item_pixels


def test_pil_images_numpy_arrays_and_generators_agree(rng):
    images = random_images(rng, 10, sizes=((5, 6),))
    reference = numbers(normstats.compute(np.stack(images), channels=("R", "G", "B")))
    pil = [Image.fromarray(img) for img in images]
    assert numbers(normstats.compute(pil)) == reference
    assert numbers(normstats.compute((img for img in images), channels=("R", "G", "B"))) == \
        reference


def test_torch_tensors_are_chw(rng):
    import torch  # in the test extra: fail, never skip
    images = random_images(rng, 6, sizes=((5, 6),))
    tensors = [(torch.from_numpy(img).permute(2, 0, 1).float() / 255, 0) for img in images]
    stats = normstats.compute(tensors)
    expected = normstats.compute(np.stack(images))
    assert stats.scale == 1.0
    np.testing.assert_allclose(stats.mean, expected.mean, rtol=1e-6)
    np.testing.assert_allclose(stats.std, expected.std, rtol=1e-5)


def test_item_layout_rule():
    assert item_pixels(np.zeros((3, 10, 12))).pixels.shape == (10, 12, 3)
    assert item_pixels(np.zeros((10, 12, 3))).pixels.shape == (10, 12, 3)
    assert item_pixels(np.zeros((10, 12))).pixels.shape == (10, 12, 1)
    assert item_pixels(np.zeros((3, 10, 3)), layout="CHW").pixels.shape == (10, 3, 3)
    with pytest.raises(normstats.InvalidOptionError):
        item_pixels(np.zeros((2, 2, 2, 2)))
