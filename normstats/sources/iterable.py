"""Any iterable of images: numpy arrays, PIL images, torch tensors, ``(image, label)``,
dicts, or batches of them.

This is how a training script computes the statistics of exactly what its own loader
produces: items stream in batches through the same per-image records and exact reduction
as files and arrays. An iterable that yields batches is read batch by batch, each batch
split into its images (`normstats.sources.items.batch_items`): a PyTorch ``DataLoader``
that collates (``batch_size`` not None, or a ``batch_sampler``), a webdataset pipeline
ending in ``.batched(n)`` (also behind a ``WebLoader`` or ``DataLoader`` with
``batch_size=None``), or any iterable when ``batched=True`` says so (`yields_batches`).
How one item becomes pixels: `normstats.sources.items`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from normstats.errors import NormstatsError
from normstats.sources.base import TaskResult
from normstats.sources.decoding.policy import DecodedImage
from normstats.sources.folder import records_of_images
from normstats.sources.items import batch_items, item_pixels

__all__ = ["IterableSource", "item_pixels", "is_data_loader", "yields_batches"]

_BATCH = 256


def is_data_loader(data: Any) -> bool:
    """True for a PyTorch ``DataLoader`` (told by its type, without importing torch).

    Examples
    --------
    >>> is_data_loader([1, 2])
    False
    """
    return any(cls.__name__ == "DataLoader" and cls.__module__.startswith("torch.utils.data")
               for cls in type(data).__mro__)


def yields_batches(data: Any) -> bool:
    """Whether iterating ``data`` gives batches of images rather than images: a
    ``DataLoader`` that collates, or a webdataset pipeline whose last batching stage is
    ``.batched(n)`` (not undone by ``.unbatched()``). Other iterables are taken to yield
    images; ``batched=True`` says otherwise.

    Examples
    --------
    >>> yields_batches([1, 2])
    False
    """
    if is_data_loader(data):  # batch_size=None leaves batch_sampler None: items, as they are
        return data.batch_sampler is not None or yields_batches(data.dataset)
    stages = getattr(data, "pipeline", None)
    if not type(data).__module__.startswith("webdataset") or not isinstance(stages, list):
        return False
    batched = False
    for stage in stages:  # a pipeline is a source, then filters, in order
        name = getattr(getattr(stage, "f", None), "__name__", "")
        if name in ("_batched", "_unbatched"):
            batched = name == "_batched"
        elif is_data_loader(stage) or type(stage).__module__.startswith("webdataset"):
            batched = yields_batches(stage)
    return batched


class IterableSource:
    """Images streamed from an iterable, in batches of ``batch_size`` items.

    ``batched`` says whether the iterable yields batches of images (None: `yields_batches`
    decides).
    """

    kind = "images"
    scheduler = "sync"
    skipped = ()
    ignored = 0
    channel_names = None

    def __init__(self, items: Iterable[Any], layout: str | None = None,
                 batch_size: int = _BATCH, mode: str = "keep",
                 image_key: str | None = None, batched: bool | None = None) -> None:
        self.items = items
        self.layout = layout
        self.batch_size = max(1, int(batch_size))
        self.pil_mode = mode
        self.image_key = image_key
        self.batched = yields_batches(items) if batched is None else batched
        self.mode = "iterable" if mode == "keep" else f"iterable, PIL images as {mode}"
        kind = "DataLoader" if is_data_loader(items) else f"iterable {type(items).__name__}"
        self.description = f"{kind} batches" if self.batched else kind

    def __len__(self) -> int:
        """The images to expect when known (a progress bar's total), else 0."""
        if self.batched and not is_data_loader(self.items):
            return 0  # batches of a size unknown ahead
        sized = getattr(self.items, "dataset", self.items) if self.batched else self.items
        try:
            return len(sized)
        except Exception:  # noqa: BLE001 - no len(): IterableDataset, generators, pipelines
            return 0

    def _images(self) -> Iterator[Any]:
        if not self.batched:
            yield from self.items
            return
        for batch in self.items:
            yield from batch_items(batch, self.image_key)

    def results(self) -> Iterator[TaskResult]:
        """Per-image records of consecutive batches, computed as items arrive."""
        batch: list[tuple[str, DecodedImage]] = []
        for index, item in enumerate(self._images()):
            try:
                batch.append((str(index), item_pixels(item, self.layout, self.pil_mode,
                                                      self.image_key)))
            except NormstatsError as error:
                raise type(error)(error.reason, path=f"item {index}") from None
            if len(batch) == self.batch_size:
                yield TaskResult(records_of_images(batch))
                batch = []
        if batch:
            yield TaskResult(records_of_images(batch))
