"""`patch_covariance` of a dataset: a folder and the array of its pixels agree bit for bit
whatever the chunking and scheduler, numpy's float64 cov of the materialised patches
agrees to rounding, and the ZCA of the patches whitens them."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

from normstats.analyses.patches import patch_covariance
from normstats.errors import IncompatibleImagesError


@pytest.fixture
def pixels(rng) -> np.ndarray:
    base = rng.integers(0, 200, (24, 10, 9, 1))
    return np.concatenate([base, base + rng.integers(0, 40, base.shape),
                           rng.integers(0, 256, base.shape)], axis=3).astype(np.uint8)


def test_a_folder_and_its_array_agree_for_any_chunking(pixels, tmp_path):
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(tmp_path / f"{i:02d}.png")
    expected = patch_covariance(pixels, 3, task_size=24, scheduler="sync")
    for data, task_size, scheduler in ((tmp_path, 5, "processes"), (pixels, 1, "threads"),
                                       (pixels, 7, "sync")):
        found = patch_covariance(data, 3, task_size=task_size, scheduler=scheduler, workers=2)
        assert np.array_equal(found.covariance, expected.covariance)
        assert np.array_equal(found.mean, expected.mean) and found.patches == 24 * 8 * 7
    assert patch_covariance(tmp_path, 2).names[:5] == ("R[0,0]", "R[0,1]", "R[1,0]", "R[1,1]",
                                                       "G[0,0]")


def test_numpy_cov_of_the_materialised_patches_agrees(pixels):
    found = patch_covariance(pixels, 2)
    p = sliding_window_view(pixels, (2, 2), axis=(1, 2)).reshape(-1, 12) / 255
    np.testing.assert_allclose(found.covariance, np.cov(p, rowvar=False, ddof=0), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(found.covariance_ddof1, np.cov(p, rowvar=False), rtol=1e-12,
                               atol=1e-15)
    whitened = found.whitening(eps=0).apply(p)
    np.testing.assert_allclose(np.cov(whitened, rowvar=False, ddof=0), np.eye(12), atol=1e-9)
    assert found.to_dict()["names"][0] == "c0[0,0]"


def test_float_images_are_refused(rng):
    with pytest.raises(IncompatibleImagesError, match="integer images"):
        patch_covariance(rng.random((3, 5, 5, 3)), 2)
