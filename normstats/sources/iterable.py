"""Any iterable of images: numpy arrays, PIL images, torch tensors, ``(image, label)``,
dicts, or the batches of a PyTorch ``DataLoader``.

This is how a training script computes the statistics of exactly what its own loader
produces: items stream in batches through the same per-image records and exact reduction
as files and arrays. A ``DataLoader`` is read batch by batch, each batch split into its
images (`normstats.sources.items.batch_items`). How one item becomes pixels:
`normstats.sources.items`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from normstats.errors import NormstatsError
from normstats.sources.base import TaskResult
from normstats.sources.decoding.policy import DecodedImage
from normstats.sources.folder import records_of_images
from normstats.sources.items import batch_items, item_pixels

__all__ = ["IterableSource", "item_pixels", "is_data_loader"]

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


class IterableSource:
    """Images streamed from an iterable, in batches of ``batch_size`` items."""

    kind = "images"
    scheduler = "sync"
    skipped = ()
    ignored = 0
    channel_names = None

    def __init__(self, items: Iterable[Any], layout: str | None = None,
                 batch_size: int = _BATCH, mode: str = "keep",
                 image_key: str | None = None) -> None:
        self.items = items
        self.layout = layout
        self.batch_size = max(1, int(batch_size))
        self.pil_mode = mode
        self.image_key = image_key
        self.batched = is_data_loader(items)
        self.mode = "iterable" if mode == "keep" else f"iterable, PIL images as {mode}"
        what = "DataLoader batches" if self.batched else f"iterable {type(items).__name__}"
        self.description = what

    def __len__(self) -> int:
        if self.batched:
            return len(getattr(self.items, "dataset", ()) or ())
        return len(self.items) if hasattr(self.items, "__len__") else 0

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
