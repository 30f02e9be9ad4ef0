"""Make the three-dataset comparison of README.md and docs/compare.md, offline:

    python docs/compare_example.py [FOLDER]    # prints the table, writes docs/compare.png

The datasets are the demo dataset (``normstats demo``: 120 synthetic photos, each with its
own colour cast, and one broken file) and two variants of it written beside it: the same
scenes at night (a third of the light, more sensor noise) and the same photos through a
strong brightness/contrast jitter, as a training pipeline's augmentation would make them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

import normstats
from normstats_cli.demo import write_demo_dataset

FIGURE = Path(__file__).resolve().parent / "compare.png"


def variant(source: Path, target: Path, change) -> Path:
    """Every readable image of ``source`` through ``change``, as PNG under ``target``."""
    rng = np.random.default_rng(1)
    for path in sorted(source.rglob("*")):
        if path.suffix not in (".png", ".jpg") or path.name == "broken.jpg":
            continue
        pixels = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)
        out = target / path.relative_to(source).with_suffix(".png")
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(np.rint(change(pixels, rng)), 0, 255).astype(np.uint8)).save(out)
    return target


def night(pixels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return pixels / 3 + rng.normal(0, 6, pixels.shape)


def jitter(pixels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    brightness, contrast = rng.uniform(0.6, 1.4), rng.uniform(0.6, 1.4)
    mean = pixels.mean()
    return (mean + (pixels - mean) * contrast) * brightness


def main(folder: Path) -> None:
    day = write_demo_dataset(folder / "day")
    datasets = {"day": day, "night": variant(day, folder / "night", night),
                "day + jitter": variant(day, folder / "jitter", jitter)}
    comparison = normstats.compare(datasets, cache=False)
    print(comparison)
    comparison.plot(FIGURE)
    print(f"\nfigure written to {FIGURE}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as scratch:
            main(Path(scratch))
