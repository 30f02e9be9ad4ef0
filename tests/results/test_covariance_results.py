"""The covariance in a result: through JSON and back, as principal axes and whitening in
any scale, and exported as a PCA lighting transform and a ZCA whitening that run pasted
alone (with torch) and do what they say."""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest
import torch

import normstats
from normstats.results.stats import DatasetStats


@pytest.fixture(scope="module")
def stats() -> DatasetStats:
    rng = np.random.default_rng(11)
    base = rng.integers(0, 200, (40, 6, 5, 1))
    pixels = np.concatenate([base, base + rng.integers(0, 50, base.shape),
                             base // 2 + rng.integers(0, 90, base.shape)], axis=3)
    return normstats.compute(pixels.astype(np.uint8), covariance=True, channels="R,G,B")


def test_the_matrices_round_trip_through_json(stats):
    again = DatasetStats.from_json(stats.to_json())
    assert again == stats and again.covariance == stats.covariance
    assert isinstance(again.correlation[0], tuple)
    data = json.loads(stats.to_json())
    assert len(data["covariance"]) == 3 and data["covariance_ddof1"][0][0] > \
        data["covariance"][0][0]


def test_pca_in_any_scale(stats):
    unit, raw = stats.pca(), stats.pca(scale=1)
    np.testing.assert_allclose(raw.eigenvalues, np.array(unit.eigenvalues) * 255**2,
                               rtol=1e-13)
    np.testing.assert_allclose(raw.eigenvectors, unit.eigenvectors, atol=1e-12)
    assert (unit.scale, raw.scale, unit.channels) == (255.0, 1.0, ("R", "G", "B"))
    sample = stats.pca(ddof=1)
    assert sample.eigenvalues[0] > unit.eigenvalues[0] and sample.ddof == 1
    with pytest.raises(normstats.InvalidOptionError, match="ddof"):
        stats.pca(ddof=2)


def test_whitening_in_raw_units_whitens_raw_pixels(stats):
    rng = np.random.default_rng(11)
    base = rng.integers(0, 200, (40, 6, 5, 1))
    pixels = np.concatenate([base, base + rng.integers(0, 50, base.shape),
                             base // 2 + rng.integers(0, 90, base.shape)], axis=3)
    raw = stats.whitening(eps=0, scale=1)
    whitened = raw.apply(pixels.reshape(-1, 3))
    np.testing.assert_allclose(np.cov(whitened, rowvar=False, ddof=0), np.eye(3), atol=1e-9)
    unit = stats.whitening(eps=0)
    np.testing.assert_allclose(unit.apply(pixels.reshape(-1, 3) / 255), whitened, atol=1e-9)


def test_the_zca_export_of_vectors_whitens_rows(rng):
    """The zca export of vector data (N, d) wrote the images' ChannelWhitening, which moves
    axis -3 of a (C, H, W) tensor: on rows it raised IndexError. It now whitens rows over
    their last axis, in their dtype, and words its header for features."""
    rows = rng.normal(size=(200, 3)) @ np.array([[2.0, 0.5, 0.0], [0.0, 1.0, 0.3],
                                                  [0.0, 0.0, 0.7]])
    stats = normstats.compute(rows, covariance=True)
    text = stats.to("zca")
    assert text.startswith("# normstats: array (200, 3) float64; feature order c0, c1, c2; "
                           "raw values; ZCA of the population feature covariance")
    scope: dict = {}
    exec(text, scope)  # noqa: S102 - the export must run pasted alone
    whitened = scope["whiten"](torch.tensor(rows)).numpy()
    np.testing.assert_allclose(whitened, stats.whitening().apply(rows), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.cov(whitened, rowvar=False, ddof=0), np.eye(3), atol=1e-5)
    assert scope["whiten"](torch.tensor(rows[0], dtype=torch.float32)).shape == (3,)
    assert "std of each feature over its rows" in normstats.compute(rows).to("keras")


def test_the_lighting_export_runs_and_shifts_by_eigvec_times_alpha_eigval(stats):
    text = stats.to("lighting")
    assert "eigval: eigenvalues" in text and "channel order R, G, B" in text
    scope: dict = {}
    exec(text, scope)  # noqa: S102 - the export must run pasted alone
    lighting = scope["lighting"]
    axes = stats.pca()
    np.testing.assert_array_equal(lighting.eigval.numpy(), np.float32(axes.eigenvalues))
    image = torch.rand(3, 4, 5)
    torch.manual_seed(0)
    shifted = lighting(image)
    torch.manual_seed(0)
    alpha = torch.randn(3) * 0.1
    expected = torch.tensor(axes.eigenvectors) @ (alpha * torch.tensor(axes.eigenvalues))
    torch.testing.assert_close(shifted - image, expected.view(3, 1, 1).expand(3, 4, 5))


def test_the_zca_export_runs_and_whitens(stats):
    text = stats.to("zca")
    scope: dict = {}
    exec(text, scope)  # noqa: S102
    kwargs = stats.to_kwargs("zca")
    assert kwargs["eps"] == 1e-6 and kwargs["mean_vector"] == stats.mean
    np.testing.assert_allclose(kwargs["transformation_matrix"],
                               stats.whitening().matrix, rtol=0, atol=0)
    image = torch.rand(3, 4, 5, dtype=torch.float64)
    expected = stats.whitening().apply(image.permute(1, 2, 0).numpy())
    got = scope["whiten"](image.float()).permute(1, 2, 0).double().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)
    assert ast.parse(text)


def test_bgr_reverses_the_covariance_too(stats):
    rgb, bgr = stats.to_kwargs("zca")["transformation_matrix"], \
        stats.to_kwargs("zca", bgr=True)["transformation_matrix"]
    np.testing.assert_allclose(np.array(bgr), np.array(rgb)[::-1, ::-1], atol=1e-12)


def test_covariance_exports_need_the_covariance():
    plain = normstats.compute(np.zeros((2, 4, 4, 3), np.uint8))
    for fmt in ("lighting", "zca"):
        with pytest.raises(normstats.InvalidOptionError, match="--covariance"):
            plain.to(fmt)
