"""Map-style datasets: anything with ``__len__`` and ``__getitem__``, read by index in tasks.

This is what torchvision's ``ImageFolder``, ``CIFAR10`` and ``MNIST``, ``Subset`` and
``ConcatDataset``, and most user datasets are. Items are read by index in parallel tasks,
like ``DataLoader`` workers read them: in worker processes when the dataset pickles
(cloudpickle, as Dask ships it), in threads otherwise; the report says which.

An item is an image (PIL image, numpy array, torch tensor), an ``(image, label, ...)``
tuple, or a dict holding the image under ``image_key`` (found by name when not given:
``image``, ``img``, ``pixel_values``, ``pixels``, ``x``, ``input``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from normstats.errors import InvalidOptionError, NormstatsError, numbered
from normstats.maths.records import Skipped
from normstats.sources.base import TaskResult, default_task_size, split_evenly
from normstats.sources.decoding.policy import DecodedImage
from normstats.sources.folder import records_of_images
from normstats.sources.items import item_pixels

__all__ = ["MappedSource", "MappedTask", "Shipped", "is_map_style"]

#: Items a task reads: enough that scheduling is a few per cent of decoding 256² images.
_TASK_ITEMS = 256


def is_map_style(data: Any) -> bool:
    """True for an object read by index: ``__len__`` and ``__getitem__``, not a mapping,
    string or array.

    Examples
    --------
    >>> is_map_style([1, 2]), is_map_style("ab"), is_map_style({"a": 1})
    (True, False, False)
    """
    if isinstance(data, str | bytes | bytearray | Mapping):
        return False
    if all(hasattr(data, name) for name in ("shape", "dtype")):
        return False  # arrays have their own, vectorised source
    return hasattr(data, "__len__") and hasattr(data, "__getitem__")


class Shipped:
    """The dataset as tasks carry it: pickled once per source, unpickled once per worker.

    Every task of a source shares one bytes payload, so shipping N tasks costs N memory
    copies rather than N pickling passes over a dataset of many paths.

    Examples
    --------
    >>> import pickle
    >>> pickle.loads(pickle.dumps(Shipped([1, 2], pickle.dumps([1, 2])))).dataset
    [1, 2]
    """

    _loaded: dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self, dataset: Any, payload: bytes | None) -> None:
        self.dataset = dataset
        self.payload = payload
        self.token = "" if payload is None else hashlib.sha1(payload).hexdigest()

    def __reduce__(self) -> tuple:
        if self.payload is None:
            raise NormstatsError("this dataset does not pickle; it is read with threads")
        return (_unship, (self.token, self.payload))


def _unship(token: str, payload: bytes) -> Shipped:
    import cloudpickle

    with Shipped._lock:
        if token not in Shipped._loaded:
            Shipped._loaded = {token: cloudpickle.loads(payload)}  # keep only the latest
        dataset = Shipped._loaded[token]
    shipped = Shipped(dataset, None)
    shipped.token, shipped.payload = token, payload
    return shipped


@dataclass(frozen=True, eq=False)
class MappedTask:
    """Items ``start`` to ``stop`` of a map-style dataset."""

    shipped: Shipped
    start: int
    stop: int
    mode: str
    layout: str | None
    image_key: str | None
    fail_fast: bool

    @property
    def size(self) -> int:
        return self.stop - self.start

    def head(self, count: int) -> MappedTask:
        """The same task cut to its first ``count`` items (to probe shapes cheaply)."""
        return dataclasses.replace(self, stop=min(self.stop, self.start + count))

    def decode_all(self) -> tuple[list[tuple[str, DecodedImage]], tuple[Skipped, ...]]:
        """Every item's pixels as (key, image) pairs, and the items skipped with a reason."""
        decoded, skipped = [], []
        for index in range(self.start, self.stop):
            try:
                item = self.shipped.dataset[index]
                decoded.append((str(index), item_pixels(item, self.layout, self.mode,
                                                        self.image_key)))
            except NormstatsError as error:
                # how to read the items (layout, image_key) is the caller's to say, once for
                # all of them: never a reason to leave some items out
                if self.fail_fast or isinstance(error, InvalidOptionError):
                    raise type(error)(error.reason, path=f"item {index}") from None
                skipped.append(Skipped(f"item {index}", error.reason, error.kind))
            except Exception as error:  # noqa: BLE001 - the user's __getitem__ failed
                reason = f"reading the item failed: {type(error).__name__}: {error}"
                if self.fail_fast:
                    raise NormstatsError(reason, path=f"item {index}") from None
                skipped.append(Skipped(f"item {index}", " ".join(reason.split())))
        return decoded, tuple(skipped)

    def run(self) -> TaskResult:
        decoded, skipped = self.decode_all()
        return TaskResult(records_of_images(decoded) if decoded else None, skipped)


class MappedSource:
    """A map-style dataset cut into tasks of consecutive indices.

    Examples
    --------
    >>> import numpy as np
    >>> source = MappedSource([np.zeros((4, 4, 3), np.uint8)] * 10)
    >>> len(source), [t.size for t in source.tasks(4)]
    (10, [4, 4, 2])
    """

    kind = "images"
    channel_names = None
    skipped: tuple[Skipped, ...] = ()
    ignored = 0

    def __init__(self, dataset: Any, *, mode: str = "RGB", layout: str | None = None,
                 image_key: str | None = None, fail_fast: bool = False) -> None:
        self.count = len(dataset)
        self.pil_mode, self.layout, self.image_key = mode, layout, image_key
        # what the report says: the mode converts PIL items only, arrays are read as they are
        self.mode = "map-style" if mode == "keep" else f"map-style, PIL images as {mode}"
        self.fail_fast = fail_fast
        payload, why = _pickled(dataset)
        self.shipped = Shipped(dataset, payload)
        # Threads share the dataset as it is; processes need it to pickle, as DataLoader
        # workers under spawn do. Decoding holds the GIL for small images, so processes win.
        self.scheduler = "processes" if payload is not None else "threads"
        how = ("read in worker processes" if payload is not None else
               f"read with threads: the dataset does not pickle ({why})")
        self.description = f"map-style dataset {type(dataset).__name__} " \
                           f"({numbered(self.count, 'item')}, {how})"

    def __len__(self) -> int:
        return self.count

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[MappedTask]:
        size = task_size or default_task_size(self.count, workers, _TASK_ITEMS)
        return [MappedTask(self.shipped, start, stop, self.pil_mode, self.layout,
                           self.image_key, self.fail_fast)
                for start, stop in split_evenly(self.count, size)]


@functools.lru_cache(maxsize=1)
def _cloudpickle() -> Any:
    import cloudpickle

    return cloudpickle


def _pickled(dataset: Any) -> tuple[bytes | None, str]:
    """The dataset's pickle, or None and the reason it does not pickle."""
    try:
        return _cloudpickle().dumps(dataset), ""
    except Exception as error:  # noqa: BLE001 - any reason means "use threads"
        return None, " ".join(f"{type(error).__name__}: {error}".split())[:120]
