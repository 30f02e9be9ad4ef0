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


def test_a_patch_covariance_s_dict_and_whitening_say_what_they_hold():
    from normstats.analyses.patches import PatchCovariance
    from normstats.maths.whitening import Whitening

    x = np.array([[[[0], [4]], [[2], [8]]], [[[1], [3]], [[5], [7]]]], np.uint8)
    found = patch_covariance(x, 1, scale=1, channels=("Y",))
    assert (found.size, found.channels, found.patches, found.scale) == (1, ("Y",), 8, 1.0)
    values = [0, 4, 2, 8, 1, 3, 5, 7]
    assert found.mean.tolist() == [3.75]
    assert found.covariance.tolist() == [[float(np.var(values))]]
    assert found.covariance_ddof1.tolist() == [[float(np.var(values, ddof=1))]]
    assert found.to_dict() == {"size": 1, "channels": ["Y"], "names": ["Y[0,0]"],
                               "patches": 8, "scale": 1.0, "mean": [3.75],
                               "covariance": found.covariance.tolist(),
                               "covariance_ddof1": found.covariance_ddof1.tolist()}
    single = PatchCovariance(1, ("Y",), 1, 1.0, np.array([2.0]), np.array([[0.0]]), None)
    assert single.to_dict()["covariance_ddof1"] is None
    assert found.whitening(eps=0) == Whitening.of(found.mean, found.covariance, ("Y[0,0]",),
                                                  1.0, 0, "zca", 0)
    sample = found.whitening(eps=0, ddof=1)
    assert sample == Whitening.of(found.mean, found.covariance_ddof1, ("Y[0,0]",), 1.0, 0,
                                  "zca", 1)
    assert sample.ddof == 1 and sample.matrix != found.whitening(eps=0).matrix
    assert found.whitening(kind="pca").kind == "pca"


def test_what_a_patch_covariance_is_computed_with():
    from normstats.sources.options import ReadOptions

    x = np.arange(2 * 4 * 4 * 1, dtype=np.uint8).reshape(2, 4, 4, 1)
    assert patch_covariance(x).size == 3 and patch_covariance(x).patches == 2 * 2 * 2
    halved = patch_covariance(x, 1, scale=2)
    assert halved.scale == 2.0 and halved.mean.tolist() == [np.arange(32).mean() / 2]
    given = patch_covariance(x, 1, options=ReadOptions(scale=4.0, channels=("Y",)))
    assert (given.scale, given.channels) == (4.0, ("Y",))
    assert given.mean.tolist() == [np.arange(32).mean() / 4]
    one = patch_covariance(x[:1], 4)  # one patch: no sample covariance
    assert one.patches == 1 and one.covariance_ddof1 is None
    two = patch_covariance(x, 4)
    assert two.patches == 2 and two.covariance_ddof1 is not None
    with pytest.raises(IncompatibleImagesError) as caught:
        patch_covariance(x, 1, channels=("A", "B"))
    assert str(caught.value) == "2 channel names for 1 channels"
    with pytest.raises(IncompatibleImagesError) as caught:
        patch_covariance(x.astype(np.float32), 1)
    assert str(caught.value) == ("the patch covariance is exact for integer images, not "
                                 "float32")


def test_the_scheduler_workers_and_task_size_given_reach_the_dask_run(monkeypatch):
    import normstats.engine.dask.images as dask_images
    import normstats.engine.dask.lazy as lazy

    seen = {}
    images, run_graph = dask_images.images, lazy.run_graph

    def recorded_images(data, **kwargs):
        seen["images"] = {k: kwargs[k] for k in ("task_size", "workers")}
        return images(data, **kwargs)

    def recorded_run(graph, scheduler, workers):
        seen["run"] = (scheduler, workers)
        return run_graph(graph, scheduler, workers)
    monkeypatch.setattr(dask_images, "images", recorded_images)
    monkeypatch.setattr(lazy, "run_graph", recorded_run)
    x = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3, 1)
    found = patch_covariance(x, 2, scheduler="sync", workers=1, task_size=1)
    assert seen == {"images": {"task_size": 1, "workers": 1}, "run": ("sync", 1)}
    assert found.patches == 8


def test_the_read_options_reach_the_images_read(pixels, tmp_path):
    """The layout of an array and the mode and transforms of a folder decide which pixels
    the patches are cut from."""
    expected = patch_covariance(pixels, 2, scheduler="sync")
    nchw = patch_covariance(np.moveaxis(pixels, -1, 1), 2, layout="NCHW", scheduler="sync")
    assert np.array_equal(nchw.covariance, expected.covariance) and nchw.patches == 24 * 9 * 8
    for i, image in enumerate(pixels[:4]):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
    gray = np.stack([np.asarray(Image.open(tmp_path / f"{i}.png").convert("L"))
                     for i in range(4)])[..., None]
    as_l = patch_covariance(tmp_path, 2, mode="L", scheduler="sync")
    assert as_l.channels == ("L",)
    assert np.array_equal(as_l.covariance, patch_covariance(gray, 2, channels=("L",),
                                                            scheduler="sync").covariance)
    assert patch_covariance(tmp_path, 2, center_crop=5, scheduler="sync").patches == 4 * 4 * 4
