"""Iterables of images or of batches: lists, generators, torch DataLoaders (collating or
not, over map-style or iterable datasets) and webdataset pipelines, each read as it means
its items; exact against Python-int sums of the pixels."""

import io
import json

import numpy as np
import pytest
import torch  # in the test extra: fail, never skip
import webdataset as wds
from conftest import random_images
from oracle import integer_mean_std, numbers
from PIL import Image
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

import normstats
from normstats.sources.iterable import item_pixels, yields_batches


def test_pil_images_numpy_arrays_and_generators_agree(rng):
    images = random_images(rng, 10, sizes=((5, 6),))
    reference = numbers(normstats.compute(np.stack(images), channels=("R", "G", "B")))
    pil = [Image.fromarray(img) for img in images]
    assert numbers(normstats.compute(pil)) == reference
    assert numbers(normstats.compute((img for img in images), channels=("R", "G", "B"))) == \
        reference


def test_float_tensors_from_to_tensor_are_chw(rng):
    images = random_images(rng, 6, sizes=((5, 6),))
    tensors = [(torch.from_numpy(img).permute(2, 0, 1).float() / 255, 0) for img in images]
    stats = normstats.compute(tensors)
    expected = normstats.compute(np.stack(images))
    assert stats.scale == 1.0
    np.testing.assert_allclose(stats.mean, expected.mean, rtol=1e-6)
    np.testing.assert_allclose(stats.std, expected.std, rtol=1e-5)


def test_item_layout_rule():
    assert item_pixels(np.zeros((3, 10, 12))).pixels.shape == (10, 12, 3)
    assert item_pixels(np.zeros((10, 12, 3))).pixels.shape == (10, 12, 3)
    assert item_pixels(np.zeros((10, 12))).pixels.shape == (10, 12, 1)
    assert item_pixels(np.zeros((3, 10, 3)), layout="CHW").pixels.shape == (10, 3, 3)
    with pytest.raises(normstats.InvalidOptionError):
        item_pixels(np.zeros((2, 2, 2, 2)))



@pytest.fixture
def stack(rng) -> np.ndarray:
    """20 RGB images, uint8 (N, H, W, C)."""
    return rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)


def _nchw(stack: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(stack.transpose(0, 3, 1, 2)))


def _check_exact(stats, stack: np.ndarray) -> None:
    assert stats.images == len(stack) and stats.channels == ("c0", "c1", "c2")
    assert (list(stats.mean), list(stats.std)) == integer_mean_std(list(stack), 255)


class _Stream(IterableDataset):
    """An IterableDataset without __len__, as streaming datasets are."""

    def __init__(self, images: torch.Tensor) -> None:
        self.images = images

    def __iter__(self):
        yield from ((image, 0) for image in self.images)


@pytest.fixture
def shard(tmp_path, stack) -> str:
    """The 20 images as lossless PNGs in one webdataset tar shard."""
    path = str(tmp_path / "shard-000000.tar")
    with wds.TarWriter(path) as sink:
        for i, image in enumerate(stack):
            png = io.BytesIO()
            Image.fromarray(image).save(png, format="png")
            sink.write({"__key__": f"{i:06d}", "png": png.getvalue(), "cls": b"%d" % (i % 2)})
    return path


def _pipeline(shard: str) -> wds.WebDataset:
    return wds.WebDataset(shard, shardshuffle=False).decode("rgb8").to_tuple("png", "cls")


def test_a_data_loader_without_batch_size_yields_items_not_batches(stack):
    """Before: 60 one-channel images (each (3, H, W) item split as a batch), exit status 0."""
    loader = DataLoader(TensorDataset(_nchw(stack)), batch_size=None)
    assert not yields_batches(loader)
    _check_exact(normstats.compute(loader), stack)
    labelled = DataLoader(TensorDataset(_nchw(stack), torch.arange(20)), batch_size=None)
    _check_exact(normstats.compute(labelled), stack)
    batches = DataLoader(TensorDataset(_nchw(stack)), batch_size=4)
    assert yields_batches(batches)
    _check_exact(normstats.compute(batches), stack)


def test_a_data_loader_over_an_iterable_dataset_has_no_length_and_is_read(stack, capsys):
    """Before: TypeError: object of type '_Stream' has no len()."""
    loader = DataLoader(_Stream(_nchw(stack)), batch_size=4)
    _check_exact(normstats.compute(loader, progress=True), stack)
    assert "20 images" in capsys.readouterr().err  # a bar without a total
    _check_exact(normstats.compute(DataLoader(_Stream(_nchw(stack)), batch_size=None)), stack)


def test_webdataset_pipelines_batched_or_not_and_behind_a_web_loader(shard, stack):
    """Before: .batched(16) and WebLoader(batch_size=None) were refused ("pass the
    DataLoader itself"); now batching is read off the pipeline's stages."""
    pipelines = {
        "items": _pipeline(shard),
        "batched": _pipeline(shard).batched(16),
        "web loader of batches": wds.WebLoader(_pipeline(shard).batched(16), batch_size=None),
        "web loader that collates": wds.WebLoader(_pipeline(shard), batch_size=4),
        "unbatched again": _pipeline(shard).batched(16).unbatched(),
        "rebatched loader": wds.WebLoader(_pipeline(shard).batched(16), batch_size=None)
        .unbatched().batched(6),
        "data pipeline": wds.DataPipeline(wds.SimpleShardList(shard), wds.tarfile_to_samples(),
                                          wds.decode("rgb8"), wds.to_tuple("png"),
                                          wds.batched(7)),
        "torch hwc items": wds.WebDataset(shard, shardshuffle=False).decode("rgb8")
        .to_tuple("png").map_tuple(torch.from_numpy),
    }
    expect = {"items": False, "batched": True, "web loader of batches": True,
              "web loader that collates": True, "unbatched again": False,
              "rebatched loader": True, "data pipeline": True, "torch hwc items": False}
    assert {name: yields_batches(p) for name, p in pipelines.items()} == expect
    for pipeline in pipelines.values():
        _check_exact(normstats.compute(pipeline), stack)


def test_batched_true_reads_any_iterable_of_batches(stack):
    def nhwc_arrays():
        yield from (stack[i:i + 6] for i in range(0, 20, 6))

    def nchw_tensors_with_labels():
        yield from ((_nchw(stack)[i:i + 8], torch.zeros(8)) for i in range(0, 20, 8))

    with pytest.raises(normstats.InvalidOptionError,
                       match=r"item 0: an item of shape \(6, 32, 32, 3\) is a batch of images"
                             ".*pass batched=True"):
        normstats.compute(nhwc_arrays())
    _check_exact(normstats.compute(nhwc_arrays(), batched=True), stack)
    _check_exact(normstats.compute(nchw_tensors_with_labels(), batched=True), stack)
    _check_exact(normstats.compute([stack[:10], stack[10:]], batched=True), stack)
    with pytest.raises(normstats.InvalidOptionError, match="batched=True is for iterables"):
        normstats.compute(stack, batched=True)


def test_batched_false_overrides_detection(stack):
    loader = DataLoader(TensorDataset(_nchw(stack)), batch_size=4)
    with pytest.raises(normstats.InvalidOptionError, match=r"\(4, 3, 32, 32\) is a batch"):
        normstats.compute(loader, batched=False)


def test_the_same_pixels_give_bit_identical_statistics_however_they_come(shard, stack):
    """A numpy array, torch tensors (HWC and CHW), DataLoaders with and without batches and
    webdataset pipelines: one result, to the last bit (where they came from apart)."""
    def result(data) -> dict:
        fields = json.loads(normstats.compute(data).to_json())
        return {k: v for k, v in fields.items() if k not in ("source", "mode")}

    reference = result(stack)
    tensors = _nchw(stack)
    for data in ([torch.from_numpy(image) for image in stack], list(tensors),
                 DataLoader(TensorDataset(tensors), batch_size=None),
                 DataLoader(TensorDataset(tensors), batch_size=4),
                 DataLoader(_Stream(tensors), batch_size=3), _pipeline(shard),
                 wds.WebLoader(_pipeline(shard).batched(16), batch_size=None)):
        assert result(data) == reference


def test_a_stacked_tensor_is_read_as_the_array_it_holds(stack):
    """A (N, C, H, W) tensor was iterated image by image, 6x slower than its numpy array
    (50,000 CIFAR-sized images: 2.1 s against 0.33 s) and reported as "iterable Tensor,
    PIL images as RGB". It is now read as its array: the same bits, NCHW, and batched=True,
    which would iterate it, is refused as for an array."""
    tensors = _nchw(stack)
    stats = normstats.compute(tensors)
    assert numbers(stats) == numbers(normstats.compute(stack))
    assert stats.mode == "NCHW" and stats.source.startswith(f"array {tuple(tensors.shape)}")
    assert numbers(normstats.compute(tensors.to(torch.bfloat16))) == \
        numbers(normstats.compute(tensors.to(torch.bfloat16).float().numpy(), layout="NCHW"))
    with pytest.raises(normstats.InvalidOptionError, match="a Tensor is read as it is"):
        normstats.compute(tensors, batched=True)
