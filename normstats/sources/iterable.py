"""Any iterable of images: numpy arrays, PIL images, torch tensors, or ``(image, label)``.

This is how a training script computes the statistics of exactly what its own loader
produces: ``normstats.compute(dataset)`` on a PyTorch ``Dataset`` streams its items in
batches through the same per-image records and exact reduction as files and arrays.

Each item's layout: PIL images are HWC; torch tensors are CHW (torchvision's
``ToTensor``); numpy arrays are HW, HWC when the last axis has 1, 3 or 4 entries, else
CHW when the first does. ``layout="HWC"`` or ``"CHW"`` overrides for every item.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.maths.records import default_channel_names
from normstats.sources.base import TaskResult
from normstats.sources.decoding.decode import DecodedImage
from normstats.sources.folder import records_of_images

__all__ = ["IterableSource", "item_pixels"]

_BATCH = 256


def item_pixels(item: Any, layout: str | None = None) -> DecodedImage:
    """The (H, W, C) pixels of one dataset item and their channel names.

    Examples
    --------
    >>> import numpy as np
    >>> item_pixels((np.zeros((3, 8, 9), np.float32), 7)).pixels.shape
    (8, 9, 3)
    """
    if isinstance(item, tuple | list):
        item = item[0]
    names = None
    if hasattr(item, "getbands") and hasattr(item, "mode"):  # a PIL image
        names = tuple(item.getbands()) if item.mode in ("L", "LA", "RGB", "RGBA") else None
        pixels, layout = np.asarray(item), layout or "HWC"
    elif type(item).__module__.startswith("torch"):
        pixels, layout = item.detach().cpu().numpy(), layout or "CHW"
    else:
        pixels = np.asarray(item)
    pixels = _to_hwc(pixels, layout)
    if not names or len(names) != pixels.shape[2]:
        names = default_channel_names(pixels.shape[2])
    return DecodedImage(pixels, names)


def _to_hwc(pixels: np.ndarray, layout: str | None) -> np.ndarray:
    if pixels.ndim == 2:
        return pixels[:, :, None]
    if pixels.ndim != 3:
        raise InvalidOptionError(f"an image item must be 2-d or 3-d, got shape {pixels.shape}")
    if layout is None:
        layout = "HWC" if pixels.shape[-1] in (1, 3, 4) or pixels.shape[0] not in (1, 3, 4) \
            else "CHW"
    if layout not in ("HWC", "CHW"):
        raise InvalidOptionError(f"layout for image items must be HWC or CHW, got {layout!r}")
    return pixels if layout == "HWC" else pixels.transpose(1, 2, 0)


class IterableSource:
    """Images streamed from an iterable, in batches of ``batch_size`` items."""

    kind = "images"
    scheduler = "sync"
    mode = "iterable"
    skipped = ()
    ignored = 0
    channel_names = None

    def __init__(self, items: Iterable[Any], layout: str | None = None,
                 batch_size: int = _BATCH) -> None:
        self.items = items
        self.layout = layout
        self.batch_size = max(1, int(batch_size))
        self.description = f"iterable {type(items).__name__}"

    def __len__(self) -> int:
        return len(self.items) if hasattr(self.items, "__len__") else 0

    def results(self) -> Iterator[TaskResult]:
        """Per-image records of consecutive batches, computed as items arrive."""
        batch: list[tuple[str, DecodedImage]] = []
        for index, item in enumerate(self.items):
            batch.append((str(index), item_pixels(item, self.layout)))
            if len(batch) == self.batch_size:
                yield TaskResult(records_of_images(batch))
                batch = []
        if batch:
            yield TaskResult(records_of_images(batch))


