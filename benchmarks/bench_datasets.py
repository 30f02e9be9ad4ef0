"""Map-style datasets against the loops PyTorch users write, on 10,000 JPEGs 256².

    python benchmarks/bench_datasets.py [--quick]

Peers, all on the same files: the forum recipe iterating the dataset (PIL items, torch float
sums, one process); the careful user's loop, a ``DataLoader(num_workers=2)`` of uint8
tensors with float64 sums; and normstats on the folder, on a user's own ``Dataset`` (PIL
loader in ``__getitem__``, read item by item in 2 worker processes) and on a dataset shaped
like torchvision's ``ImageFolder`` without transforms (read as its files). torchvision does
not install beside the CPU torch build used here, so that class is written out below with
torchvision's ``DatasetFolder`` interface (``samples``, ``loader``, ``transform``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent))

import normstats  # noqa: E402


def pil_loader(path: str) -> Image.Image:
    with open(path, "rb") as handle:
        return Image.open(handle).convert("RGB")


class UserDataset:
    """What most users write: a list of files, a PIL loader, ``(image, label)`` items."""

    def __init__(self, files: list[Path]) -> None:
        self.samples = [(str(path), 0) for path in files]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple:
        path, target = self.samples[index]
        return pil_loader(path), target


class DatasetFolder(UserDataset):
    """torchvision's ``DatasetFolder`` interface: ``loader`` and ``transform`` attributes."""

    def __init__(self, files: list[Path], transform=None) -> None:
        super().__init__(files)
        self.loader, self.transform = pil_loader, transform

    def __getitem__(self, index: int) -> tuple:
        path, target = self.samples[index]
        image = self.loader(path)
        return (self.transform(image) if self.transform else image), target


class ImageFolder(DatasetFolder):
    pass


for _shaped in (DatasetFolder, ImageFolder, pil_loader):
    _shaped.__module__ = "torchvision.datasets.folder"


class _TensorItems:
    """A map-style dataset of uint8 CHW tensors, as ``PILToTensor`` gives them."""

    def __init__(self, files: list[Path]) -> None:
        self.files = [str(f) for f in files]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        import torch

        return torch.from_numpy(np.array(pil_loader(self.files[index]))).permute(2, 0, 1)


def forum_recipe_on_dataset(dataset: UserDataset) -> tuple:
    """The forum loop over a dataset's items: torch float in [0, 1], sums in one process."""
    import torch

    torch.set_num_threads(1)
    total = torch.zeros(3, dtype=torch.float64)
    total_sq = torch.zeros(3, dtype=torch.float64)
    count = 0
    for index in range(len(dataset)):
        image, _ = dataset[index]
        t = torch.from_numpy(np.array(image)).float().div(255)
        total += t.sum(dim=(0, 1)).double()
        total_sq += (t * t).sum(dim=(0, 1)).double()
        count += t.shape[0] * t.shape[1]
    mean = total / count
    return mean.numpy(), (total_sq / count - mean**2).sqrt().numpy(), None


def data_loader_float64(files: list[Path]) -> tuple:
    """The careful user's loop: DataLoader(num_workers=2) of uint8 batches, float64 sums."""
    import torch
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    loader = DataLoader(_TensorItems(files), batch_size=64, num_workers=2)
    total = torch.zeros(3, dtype=torch.float64)
    total_sq = torch.zeros(3, dtype=torch.float64)
    count = 0
    for batch in loader:
        x = batch.to(torch.float64).div_(255)
        total += x.sum(dim=(0, 2, 3))
        total_sq += (x * x).sum(dim=(0, 2, 3))
        count += x.shape[0] * x.shape[2] * x.shape[3]
    mean = total / count
    return mean.numpy(), (total_sq / count - mean**2).sqrt().numpy(), None


def bench_datasets(quick: bool) -> dict:
    """The section: every peer and normstats on the same 10,000 (quick: 1,000) JPEGs."""
    from synthetic import make_jpeg_folder
    from timing import difference, goal, measure_alternated, peer_table

    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    root = files[0].parent
    candidates = {
        IMAGE_FOLDER: lambda: normstats.compute(ImageFolder(files)),
        USER_DATASET: lambda: normstats.compute(UserDataset(files)),
        FOLDER: lambda: normstats.compute(root, cache=False),
        "DataLoader(num_workers=2) + float64": lambda: data_loader_float64(files),
        FORUM: lambda: forum_recipe_on_dataset(UserDataset(files)),
    }
    exact = normstats.compute(root, cache=False)
    rows, med = [], {}
    timings = measure_alternated(list(candidates.values()), 3)
    for name, (median, low, high, result) in zip(candidates, timings):
        med[name] = median
        rows.append((name, median, low, high, difference(result, exact)))
    values = {"images": count, "forum_vs_image_folder": med[FORUM] / med[IMAGE_FOLDER],
              "forum_vs_user_dataset": med[FORUM] / med[USER_DATASET],
              "image_folder_vs_folder": med[IMAGE_FOLDER] / med[FOLDER] - 1,
              "user_dataset_vs_folder": med[USER_DATASET] / med[FOLDER] - 1,
              "data_loader_vs_image_folder":
                  med["DataLoader(num_workers=2) + float64"] / med[IMAGE_FOLDER]}
    processes = _whole_processes(root, 1 if quick else 3)
    values["process_data_loader_vs_image_folder"] = \
        processes["medians"][PROCESS_DATA_LOADER] / processes["medians"][PROCESS_IMAGE_FOLDER]
    values["process_forum_vs_image_folder"] = \
        processes["medians"][PROCESS_FORUM] / processes["medians"][PROCESS_IMAGE_FOLDER]
    values["process_rounds"] = processes["rounds"]
    goals = [goal(f"compute(ds) of an ImageFolder-shaped dataset, {count:,} JPEGs 256²: ≥ 3× "
                  "the forum recipe", values["forum_vs_image_folder"], ">=", 3, "{:.1f}×"),
             goal("same: within 25% of compute(folder)", values["image_folder_vs_folder"],
                  "<=", 0.25, "{:+.1%}")]
    return {"title": f"map-style datasets over {count:,} photo-like JPEGs 256×256",
            "tables": {"main": peer_table(rows, count, IMAGE_FOLDER),
                       "processes": processes["table"]},
            "values": values, "goals": goals}


def _whole_processes(root: Path, rounds: int) -> dict:
    """The same peers as fresh processes (`dataset_processes.py`), alternated round by
    round, beside ``normstats compute FOLDER``: what each user waits for, imports included."""
    import statistics
    import subprocess
    import time

    here = Path(__file__).resolve().parent
    script = [sys.executable, str(here / "dataset_processes.py")]
    commands = {
        PROCESS_IMAGE_FOLDER: [*script, "image-folder", str(root)],
        "process: normstats.compute(user Dataset)": [*script, "user-dataset", str(root)],
        "process: normstats compute FOLDER --no-cache":
            [str(Path(sys.executable).with_name("normstats")), "compute", str(root),
             "--no-cache"],
        PROCESS_DATA_LOADER: [*script, "data-loader", str(root)],
        PROCESS_FORUM: [*script, "forum", str(root)],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    base = medians[PROCESS_IMAGE_FOLDER]
    rows = [[name, medians[name], [min(values), max(values)], medians[name] / base]
            for name, values in times.items()]
    table = {"columns": [["whole process", ""], ["median s", "{:.3f}"],
                         ["min–max s", "{:.3f}"], ["× normstats.compute(ImageFolder)",
                                                   "{:.1f}×"]], "rows": rows}
    return {"medians": medians, "table": table, "rounds": rounds}


PROCESS_IMAGE_FOLDER = "process: normstats.compute(ImageFolder-shaped dataset)"
PROCESS_DATA_LOADER = "process: DataLoader(num_workers=2) + float64"
PROCESS_FORUM = "process: forum recipe over the dataset"
IMAGE_FOLDER = "normstats, ImageFolder-shaped dataset"
USER_DATASET = "normstats, user Dataset (PIL items)"
FOLDER = "normstats, the folder"
FORUM = "forum recipe over the dataset"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    print(bench_datasets(parser.parse_args().quick))
