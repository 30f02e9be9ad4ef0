"""Shared fixtures: small generated image datasets written in a temporary folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def random_images(rng: np.random.Generator, count: int, dtype=np.uint8,
                  channels: int = 3, sizes=((5, 7), (8, 8), (3, 2))) -> list[np.ndarray]:
    """Images of several sizes with per-image brightness, like photos of different scenes."""
    high = np.iinfo(dtype).max
    out = []
    for i in range(count):
        h, w = sizes[i % len(sizes)]
        centre = rng.integers(0, high + 1)
        spread = rng.integers(1, high // 4 + 2)
        pixels = rng.integers(max(0, centre - spread), min(high, centre + spread) + 1,
                              size=(h, w, channels))
        out.append(pixels.astype(dtype))
    return out


@pytest.fixture(autouse=True)
def user_cache_in_a_temporary_folder(tmp_path_factory, monkeypatch) -> Path:
    """The user's default record cache, for every test: a fresh temporary folder.

    The CLI caches by default in $XDG_CACHE_HOME/normstats (or ~/.cache/normstats); no
    test may write there. $NORMSTATS_CACHE is unset, so library calls stay uncached
    unless a test asks (it would turn the cache on for ``compute(cache=None)``).
    """
    home = tmp_path_factory.mktemp("user-cache")
    monkeypatch.delenv("NORMSTATS_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home / "normstats"


@pytest.fixture(autouse=True, scope="session")
def no_test_ends_the_test_runner():
    """`normstats_cli.run` ends its process when the command is done
    (`normstats_cli.end_process`): called inside the test runner, it would end the whole
    run with the command's status, 0 for tests that never ran. Tests call `main` (or run
    the command in a process of its own); here the exit handlers `end_process` runs before
    it ends anything refuse instead, so a call of `run` in this process fails. (The
    interpreter's own exit calls the handlers without this attribute.)"""
    import atexit

    def refuse() -> None:
        raise AssertionError("normstats_cli.run() would end the test runner: call main()")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(atexit, "_run_exitfuncs", refuse)
        yield


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261121)


@pytest.fixture
def png_folder(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, list[np.ndarray]]:
    """A folder of 24 lossless RGB PNGs in two class sub-folders, and their pixels."""
    images = random_images(rng, 24)
    for i, pixels in enumerate(images):
        folder = tmp_path / "data" / ("cat" if i % 2 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(folder / f"{i:03d}.png")
    return tmp_path / "data", images
