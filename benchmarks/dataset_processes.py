"""One map-style-dataset peer as a whole process, as its user runs it.

    python benchmarks/dataset_processes.py KIND FOLDER

KIND is ``data-loader`` (the careful user's ``DataLoader(num_workers=2)`` loop, uint8
batches, float64 sums), ``forum`` (the forum recipe iterating a user's ``Dataset``),
``image-folder`` (``normstats.compute`` of an ImageFolder-shaped dataset) or
``user-dataset`` (``normstats.compute`` of a user's ``Dataset`` with PIL items). The
dataset lists FOLDER's ``*.jpg`` files, sorted; the process prints the per-channel mean.
Start-up, imports (torch's among them) and the exit count, as they do for the user.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

KINDS = ("data-loader", "forum", "image-folder", "user-dataset")


def main() -> None:
    kind, folder = sys.argv[1], Path(sys.argv[2])
    if kind not in KINDS:
        raise SystemExit(f"KIND is one of {', '.join(KINDS)}, not {kind!r}")
    from bench_datasets import (
        ImageFolder,
        UserDataset,
        data_loader_float64,
        forum_recipe_on_dataset,
    )

    files = sorted(folder.glob("*.jpg"))
    if kind == "data-loader":
        mean = data_loader_float64(files)[0]
    elif kind == "forum":
        mean = forum_recipe_on_dataset(UserDataset(files))[0]
    else:
        import normstats

        dataset = ImageFolder(files) if kind == "image-folder" else UserDataset(files)
        mean = normstats.compute(dataset).mean
    print(" ".join(f"{value:.6f}" for value in mean))


if __name__ == "__main__":
    main()
