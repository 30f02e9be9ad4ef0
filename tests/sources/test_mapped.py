"""Map-style datasets, DataLoaders and dict items: what a PyTorch user holds goes in.

torchvision does not install beside the CPU torch build here, so the datasets below are
written in the shape of torchvision's ``ImageFolder`` (``samples`` of (path, class), a PIL
loader that converts to RGB) and ``CIFAR10`` (a uint8 (N, 32, 32, 3) array, items
``(PIL image, target)``); ``Subset``, ``ConcatDataset`` and ``DataLoader`` are torch's own.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import random_images
from oracle import assert_matches_oracle, numbers
from PIL import Image
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset

import normstats


class FolderDataset(Dataset):
    """torchvision's ImageFolder in miniature: classes from sub-folders, PIL RGB loader."""

    def __init__(self, root: Path, transform=None) -> None:
        classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.samples = [(str(path), classes.index(path.parent.name))
                        for path in sorted(root.rglob("*.png"))]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        with open(path, "rb") as handle:
            image = Image.open(handle).convert("RGB")
        return (self.transform(image) if self.transform else image), target


class CifarShaped(Dataset):
    def __init__(self, data: np.ndarray) -> None:
        self.data, self.targets = data, list(range(len(data)))

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int):
        return Image.fromarray(self.data[index]), self.targets[index]


def to_tensor(image: Image.Image) -> torch.Tensor:
    """torchvision's ToTensor: CHW float32 in [0, 1]."""
    return torch.from_numpy(np.array(image)).permute(2, 0, 1).float().div(255)


@pytest.fixture
def cifar(rng) -> np.ndarray:
    return np.stack(random_images(rng, 40, sizes=((32, 32),)))


def test_image_folder_shaped_dataset_equals_the_folder_and_the_oracle(png_folder):
    root, images = png_folder
    dataset = FolderDataset(root)
    stats = normstats.compute(dataset, workers=2)
    assert "map-style dataset FolderDataset (24 items, read in worker processes)" in \
        stats.source
    assert numbers(stats) == numbers(normstats.compute(root, workers=1, cache=False))
    order = [int(Path(p).stem) for p, _ in dataset.samples]
    assert_matches_oracle(stats, [images[i] for i in order], scale=255)


def test_cifar_shaped_dataset_subset_and_concat(cifar):
    reference = normstats.compute(cifar, channels=("R", "G", "B"))
    dataset = CifarShaped(cifar)
    assert numbers(normstats.compute(dataset, task_size=7)) == numbers(reference)
    halves = ConcatDataset([Subset(dataset, range(0, 25)), Subset(dataset, range(25, 40))])
    assert numbers(normstats.compute(halves, workers=2)) == numbers(reference)
    odd = normstats.compute(Subset(dataset, range(1, 40, 2)))
    assert numbers(odd) == numbers(normstats.compute(cifar[1::2], channels=("R", "G", "B")))


def test_a_dataset_that_does_not_pickle_is_read_with_threads_and_says_so(cifar):
    dataset = CifarShaped(cifar)
    dataset.lock = threading.Lock()
    stats = normstats.compute(dataset, workers=2)
    assert "read with threads: the dataset does not pickle" in stats.source
    assert numbers(stats) == numbers(normstats.compute(cifar, channels=("R", "G", "B")))


def test_processes_threads_and_one_worker_give_the_same_bits(cifar):
    dataset = CifarShaped(cifar)
    runs = [numbers(normstats.compute(dataset, workers=w, scheduler=s, task_size=t))
            for w, s, t in ((1, None, None), (2, "processes", 3), (2, "threads", 11))]
    assert runs[0] == runs[1] == runs[2]


def test_dict_items_find_the_image_or_take_the_named_key(cifar):
    as_dicts = [{"image": Image.fromarray(x), "label": 0} for x in cifar]
    reference = numbers(normstats.compute(cifar, channels=("R", "G", "B")))
    assert numbers(normstats.compute(as_dicts)) == reference
    renamed = [{"photo": x, "label": 0} for x in cifar]
    assert numbers(normstats.compute(renamed, image_key="photo", channels=("R", "G", "B"))) \
        == reference
    with pytest.raises(normstats.NormstatsError, match=r"item \d+: cannot tell which key.*"
                                                        "photo, label.*image_key="):
        normstats.compute(renamed, on_error="fail", workers=1)


def test_pil_images_honour_mode_in_a_list_mixing_l_and_rgb(rng):
    images = random_images(rng, 6, sizes=((9, 7),))
    mixed = [Image.fromarray(x).convert("L") if i % 2 else Image.fromarray(x)
             for i, x in enumerate(images)]
    expected = np.stack([np.asarray(im.convert("RGB")) for im in mixed])
    stats = normstats.compute(mixed, mode="RGB")
    assert stats.channels == ("R", "G", "B")
    assert numbers(stats) == numbers(normstats.compute(expected, channels=("R", "G", "B")))
    grey = normstats.compute(mixed, mode="L")
    assert grey.channels == ("L",)


def test_the_report_says_the_mode_converts_pil_items_not_arrays(rng):
    """A list of one-channel arrays was reported as "mode RGB" beside its channel L: the
    mode converts PIL items only, and the report now says so, as an iterable's does."""
    grey = [x[..., 0] for x in random_images(rng, 3, sizes=((9, 7),))]
    stats = normstats.compute(grey)
    assert stats.channels == ("L",) and stats.mode == "map-style, PIL images as RGB"
    assert "mode RGB" not in str(stats)
    assert normstats.compute(grey, mode="keep").mode == "map-style"


def test_a_data_loader_is_read_as_batches_of_to_tensor_floats(cifar):
    dataset = CifarShaped(cifar)
    dataset_as_tensors = [(to_tensor(image), target) for image, target in dataset]
    loader = DataLoader(dataset_as_tensors, batch_size=16)
    stats = normstats.compute(loader)
    assert stats.images == 40 and stats.scale == 1.0 and stats.source == "DataLoader batches"
    floats = np.stack([t.permute(1, 2, 0).numpy() for t, _ in dataset_as_tensors])
    assert numbers(stats) == numbers(normstats.compute(floats))
    exact = normstats.compute(cifar)
    np.testing.assert_allclose(stats.mean, exact.mean, rtol=1e-6)  # ToTensor's [0, 1] units


def test_a_list_of_batches_is_a_clear_error_unless_batched_says_so():
    batches = [np.zeros((4, 3, 8, 8), np.uint8)] * 2
    with pytest.raises(normstats.NormstatsError, match="is a batch of images.*batched=True"):
        normstats.compute(batches, on_error="fail")
    assert normstats.compute(batches, batched=True).images == 8


def test_a_failing_item_is_skipped_with_its_reason_or_fatal(cifar):
    class Flaky(CifarShaped):
        def __getitem__(self, index):
            if index == 3:
                raise OSError("disk went away")
            return super().__getitem__(index)

    stats = normstats.compute(Flaky(cifar), workers=2)
    assert [(s.path, s.reason) for s in stats.skipped] == \
        [("item 3", "reading the item failed: OSError: disk went away")]
    keep = np.delete(cifar, 3, axis=0)
    assert {**numbers(stats), "skipped": ()} == \
        numbers(normstats.compute(keep, channels=("R", "G", "B")))
    with pytest.raises(normstats.NormstatsError, match="item 3: reading the item failed"):
        normstats.compute(Flaky(cifar), on_error="fail", workers=1)


def test_a_16_bit_pil_image_is_never_clipped_under_rgb():
    image = Image.fromarray(np.full((4, 4), 60000, np.uint16))
    with pytest.raises(normstats.NormstatsError, match="clip it to 8 bits"):
        normstats.compute([image], mode="RGB", on_error="fail")
    assert normstats.compute([image], mode="keep").max == (60000 / 65535,)


def pil_loader(path: str) -> Image.Image:
    with open(path, "rb") as handle:
        return Image.open(handle).convert("RGB")


class DatasetFolder(Dataset):
    """torchvision's DatasetFolder as far as normstats looks at it: samples, loader, transform,
    and __getitem__ = transform(loader(path))."""

    def __init__(self, root: Path, loader=pil_loader, transform=None) -> None:
        self.samples = [(str(p), 0) for p in sorted(root.rglob("*")) if p.is_file()]
        self.loader, self.transform, self.target_transform = loader, transform, None

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        image = self.loader(path)
        return (self.transform(image) if self.transform else image), target


class ImageFolder(DatasetFolder):
    pass


# What torchvision's own classes and loader report as their home.
for _torchvision_object in (DatasetFolder, ImageFolder, pil_loader):
    _torchvision_object.__module__ = "torchvision.datasets.folder"


@pytest.fixture
def photo_folder(tmp_path, rng) -> Path:
    for i, pixels in enumerate(random_images(rng, 30, sizes=((40, 48), (33, 21)))):
        folder = tmp_path / "photos" / f"class_{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        image = Image.fromarray(pixels)
        image.save(folder / f"{i:03d}.jpg", quality=85) if i % 2 else \
            image.convert("L").save(folder / f"{i:03d}.png")
    return tmp_path / "photos"


def test_a_plain_image_folder_is_read_as_its_files_with_the_same_pixels(photo_folder):
    fast = normstats.compute(ImageFolder(photo_folder), workers=2)
    assert "its files decoded directly" in fast.source
    item_by_item = normstats.compute(ImageFolder(photo_folder, transform=lambda im: im),
                                     workers=2)
    assert "items, read in worker processes)" in item_by_item.source
    assert numbers(fast) == numbers(item_by_item)
    assert numbers(fast) == numbers(normstats.compute(photo_folder, cache=False))


def test_an_image_folder_that_overrides_getitem_or_its_loader_is_read_by_item(photo_folder):
    class Cropped(ImageFolder):
        def __getitem__(self, index):
            image, target = super().__getitem__(index)
            return image.crop((0, 0, 8, 8)), target

    def my_loader(path):
        return pil_loader(path).rotate(90)

    for dataset in (Cropped(photo_folder), ImageFolder(photo_folder, loader=my_loader)):
        stats = normstats.compute(dataset, workers=1)
        assert "decoded directly" not in stats.source
    assert normstats.compute(Cropped(photo_folder)).pixels_per_channel == 30 * 64
    assert "decoded directly" not in normstats.compute(ImageFolder(photo_folder),
                                                       mode="L").source


def test_an_item_whose_layout_the_shape_cannot_tell_stops_the_run(rng):
    """How to read items is the caller's to say: never a reason to leave some out."""
    items = [rng.integers(0, 256, (8, 6, 3), dtype=np.uint8) for _ in range(5)]
    items.append(rng.integers(0, 256, (3, 2, 3), dtype=np.uint8))
    with pytest.raises(normstats.InvalidOptionError,
                       match=r"item 5: cannot tell the channel axis.*layout='HWC' or 'CHW'"):
        normstats.compute(items, workers=2)
    stats = normstats.compute(items, layout="HWC", workers=2)
    assert stats.images == 6 and stats.skipped == ()


def test_images_given_as_nested_lists_are_read_whole_never_as_their_first_row(rng):
    """A list item was taken as an (image, label) pair, so an image given as nested Python
    lists of floats was read as its first row, an 8x3 grey image, without a word. Lists of
    numbers are the image: a list of them is read as the array numpy makes of it (images of
    several sizes one by one), as (image, label) tuples; lists of integers have no pixel
    type and are refused, naming the conversion."""
    images = [rng.random((6, 8, 3)) for _ in range(4)]
    expected = numbers(normstats.compute(np.stack(images)))
    assert numbers(normstats.compute([x.tolist() for x in images])) == expected
    assert numbers(normstats.compute([(x.tolist(), 7) for x in images])) == expected
    assert numbers(normstats.compute(iter([{"image": x.tolist()} for x in images]))) == expected
    assert numbers(normstats.compute([[x, 7] for x in images])) == expected  # [image, label]
    sizes = [images[0], images[1][:5]]
    assert normstats.compute([x.tolist() for x in sizes]).pixels_per_channel == 48 + 40
    integers = [rng.integers(0, 256, (6, 8, 3)).tolist() for _ in range(2)]
    for data in (integers, [(x, 1) for x in integers]):
        with pytest.raises(normstats.InvalidOptionError, match="lists of integers have no "
                                                               "pixel type"):
            normstats.compute(data)
