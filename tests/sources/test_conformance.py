"""The source conformance suite: every source gives the same answer as the same images in memory.

For each source: statistics bit-identical to an in-memory array of the same pixels,
``len(source)`` equal to the image count, picklable tasks, and identical results
whether a task holds one image or all of them.
"""

from __future__ import annotations

import importlib
import pickle
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import zarr

import normstats
from normstats.engine.pipeline import run
from normstats.results.stats import DatasetStats
from normstats.sources import open_source

fw = importlib.import_module("format_writers")

RGB = fw.images(1, 12, 32, 32, 3)
GRAY = fw.images(2, 12, 28, 28, 1)[..., 0]


def _build(kind: str, tmp: Path) -> tuple[object, np.ndarray]:
    """The data argument of each source, and the NHWC pixels it must give."""
    builders = {
        "array": lambda: (RGB, RGB),
        "npy": lambda: (np.save(tmp / "a.npy", RGB) or str(tmp / "a.npy"), RGB),
        "zarr": lambda: (_zarr(tmp / "a.zarr"), RGB),
        "folder": lambda: (str(fw.write_folder(tmp / "pngs", RGB)), RGB),
        "idx": lambda: (str(fw.write_idx(tmp / "t10k-images-idx3-ubyte", GRAY)),
                        GRAY[..., None]),
        "idx.gz": lambda: (str(fw.write_idx(tmp / "t10k-images-idx3-ubyte.gz", GRAY, True)),
                           GRAY[..., None]),
        "cifar10-bin": lambda: (str(fw.write_cifar_bin(tmp / "data_batch_1.bin", RGB)), RGB),
        "cifar100-bin": lambda: (str(fw.write_cifar_bin(tmp / "train.bin", RGB, 2)), RGB),
        "cifar-python": lambda: (str(fw.write_cifar_python(tmp / "data_batch_1", RGB)), RGB),
        "tar": lambda: (str(fw.write_tar(tmp / "shard-000000.tar", RGB)), RGB),
        "tar.gz": lambda: (str(fw.write_tar(tmp / "shard-000000.tar.gz", RGB, True)), RGB),
        "npz": lambda: (str(fw.write_npz(tmp / "d.npz", RGB)), RGB),
        "npz-compressed": lambda: (str(fw.write_npz(tmp / "d.npz", RGB, True)), RGB),
        "arrow": lambda: (str(fw.write_arrow(tmp / "data-00000-of-00001.arrow", RGB)), RGB),
        "hf-dataset": lambda: (fw.hf_dataset(RGB), RGB),
        "hf-mapped": lambda: (_hf_saved(tmp, loaded=True), RGB),
        "hf-saved": lambda: (_hf_saved(tmp, loaded=False), RGB),
    }
    return builders[kind]()


def _hf_saved(tmp: Path, loaded: bool) -> object:
    """A ``save_to_disk`` folder, or the memory-mapped dataset ``load_from_disk`` gives."""
    import datasets

    fw.hf_dataset(RGB).save_to_disk(tmp / "saved")
    return datasets.load_from_disk(tmp / "saved") if loaded else str(tmp / "saved")


def _zarr(path: Path) -> str:
    array = zarr.create_array(str(path), shape=RGB.shape, chunks=(5, 32, 32, 3), dtype="uint8")
    array[:] = RGB
    return str(path)


KINDS = ("array", "npy", "zarr", "folder", "idx", "idx.gz", "cifar10-bin", "cifar100-bin",
         "cifar-python", "tar", "tar.gz", "npz", "npz-compressed", "arrow", "hf-dataset",
         "hf-mapped", "hf-saved")


def _numbers(stats: DatasetStats) -> DatasetStats:
    """Everything but the description of where the pixels came from."""
    return replace(stats, source="", mode="", channels=())


@pytest.mark.parametrize("kind", KINDS)
def test_same_stats_as_the_array(kind: str, tmp_path: Path) -> None:
    data, pixels = _build(kind, tmp_path)
    via_source = normstats.compute(data, workers=1)
    via_array = normstats.compute(np.ascontiguousarray(pixels), workers=1)
    assert _numbers(via_source) == _numbers(via_array)
    assert via_source.images == len(pixels)


@pytest.mark.parametrize("kind", KINDS)
def test_length_pickling_and_task_size(kind: str, tmp_path: Path) -> None:
    data, pixels = _build(kind, tmp_path)
    source = open_source(data)
    assert len(source) == len(pixels)
    for task in source.tasks(task_size=5):
        assert pickle.loads(pickle.dumps(task)).size == task.size
    one = DatasetStats.from_summary(run(open_source(data), task_size=1, workers=1))
    everything = DatasetStats.from_summary(run(open_source(data), task_size=len(pixels),
                                               workers=1))
    assert one == everything
    assert sum(t.size for t in source.tasks(task_size=1)) == len(pixels)
