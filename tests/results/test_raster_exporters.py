"""The exports rasters are pasted as: torchgeo's mean/std tensors, kornia's Normalize (run
in kornia itself), and the (band, mean, std, p2, p98) table as JSON and CSV."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

import normstats

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def tiles() -> np.ndarray:
    rng = np.random.default_rng(29)
    tiles = rng.integers(0, 12_000, (5, 8, 9, 13)).astype(np.uint16)
    tiles[0, :3] = 0
    return tiles


@pytest.fixture(scope="module")
def stats(tiles) -> normstats.DatasetStats:
    return normstats.compute(tiles, layout="NHWC", nodata=0, scale=1, percentiles=True,
                             channels=[f"B{i:02d}" for i in range(1, 14)])


def expected(tile: np.ndarray, stats: normstats.DatasetStats) -> np.ndarray:
    """(C, H, W) float64: (x - mean) / std per band, in raw units."""
    chw = np.moveaxis(tile.astype(np.float64), -1, 0)
    return (chw - np.array(stats.mean)[:, None, None]) / np.array(stats.std)[:, None, None]


def test_torchgeo_tensors_normalize_a_tile(tiles, stats):
    namespace: dict = {}
    exec(stats.to("torchgeo"), namespace)  # the export imports torch itself
    mean, std = namespace["mean"], namespace["std"]
    assert tuple(mean.shape) == tuple(std.shape) == (13,)
    # torch.tensor of floats is float32, as in torchgeo's datamodules: our values rounded once
    assert mean.tolist() == np.float32(stats.mean).tolist()
    tile = namespace["torch"].from_numpy(np.moveaxis(tiles[1], -1, 0).astype(np.float64))
    out = (tile - mean[:, None, None]) / std[:, None, None]
    np.testing.assert_allclose(out.numpy(), expected(tiles[1], stats), rtol=1e-6, atol=1e-6)


def test_kornia_normalize_pasted_alone(tiles, stats):
    namespace: dict = {}
    exec(stats.to("kornia"), namespace)
    torch, normalize = namespace["torch"], namespace["normalize"]
    batch = torch.from_numpy(np.moveaxis(tiles[1:3], -1, 1).astype(np.float32))
    out = normalize(batch).numpy()
    for i, tile in enumerate(tiles[1:3]):
        np.testing.assert_allclose(out[i], expected(tile, stats), rtol=1e-5, atol=1e-5)


def test_the_band_table_holds_each_band_s_constants_and_clip_range(stats):
    rows = json.loads(stats.to("bands-json"))
    assert [r["band"] for r in rows] == list(stats.channels)
    assert [r["mean"] for r in rows] == list(stats.mean)
    assert [r["std"] for r in rows] == list(stats.std)
    assert [r["p2"] for r in rows] == list(stats.percentiles["p2"])
    assert [r["p98"] for r in rows] == list(stats.percentiles["p98"])
    table = list(csv.reader(io.StringIO(stats.to("bands-csv"))))
    assert table[0] == ["band", "mean", "std", "p2", "p98"]
    assert [[row[0], *map(float, row[1:])] for row in table[1:]] == \
        [[r["band"], r["mean"], r["std"], r["p2"], r["p98"]] for r in rows]


def test_the_table_leaves_the_percentiles_empty_when_they_were_not_computed(tiles):
    plain = normstats.compute(tiles, layout="NHWC", nodata=0, scale=1)
    assert {r["p2"] for r in json.loads(plain.to("bands-json"))} == {None}
    assert all(row[-2:] == ["", ""] for row in csv.reader(io.StringIO(plain.to("bands-csv")))
               if row[0] != "band")
