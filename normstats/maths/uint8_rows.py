"""Per-image records of 8-bit images, reduced as a task decodes them one at a time.

A reader decodes file after file; `Uint8Rows` keeps only each image's numbers (pixel
count, and per channel Σx, Σx², min and max; the channel cross sums too when the run asks
for the covariance) in preallocated rows, filled by the compiled kernels
(`normstats.maths.fused`, `normstats.maths.covariance`). It is also the buffer the
decoders write into (`take`):

- a small image (up to `BATCH_IMAGE_BYTES`) is decoded into the next slot of one arena
  and waits there; the waiting images are reduced together, one kernel call per run of
  images of one size, when the arena is full or the records are asked for. For a 32×32
  image a call of its own cost about as much as reducing it (~1 µs of Python);
- a larger image is decoded into one reused buffer and reduced at once, while its pixels
  are still in cache (no page faults from fresh memory for every image either).
"""

from __future__ import annotations

import numpy as np

from normstats.maths import fused
from normstats.maths.covariance import integer_cross_sums
from normstats.maths.placement import decode_buffer
from normstats.maths.records import IntegerRecords, wants_cross_sums

__all__ = ["Uint8Rows", "BATCH_IMAGE_BYTES", "ARENA_BYTES"]

#: Images of at most this many bytes wait in the arena and are reduced in batches.
BATCH_IMAGE_BYTES = 16 << 10
#: The arena of waiting images: ~340 images of 32×32×3, and small enough to stay in cache.
ARENA_BYTES = 1 << 20


class Uint8Rows:
    """Per-image records of uint8 images added one at a time, any sizes, no stacking.

    Decoders may write each image into ``take(nbytes)``; an image added from the last
    small slot handed out is reduced later with its neighbours, any other at once. Needs
    the compiled kernel (`normstats.maths.fused.available()`).

    Examples
    --------
    >>> import numpy as np
    >>> rows = Uint8Rows(capacity=2)
    >>> rows.add("a", np.zeros((2, 2, 1), np.uint8), ("L",))
    >>> slot = rows.take(3).reshape(3, 1, 1); slot[:] = 1  # a decoder writes the image
    >>> rows.add("b", slot, ("L",))
    >>> [(r.pixels.tolist(), r.sums.tolist()) for r in rows.records()]
    [([4, 3], [[0], [3]])]
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self.cross = wants_cross_sums()  # the channel cross sums too, when the run asks
        self._groups: dict[tuple[str, ...], _Uint8Group] = {}
        self._arena = np.empty(0, np.uint8)  # allocated at the first small image
        self._large = np.empty(0, np.uint8)
        self._used = 0
        self._last: tuple[int, int] | None = None  # (offset, bytes) of the last small slot
        self._waiting: list[tuple[_Uint8Group, int, int, int]] = []  # group, row, offset, n

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 buffer of ``nbytes`` for the next image to be decoded.

        A small image's slot stays its own until the image is reduced; a large image's
        buffer is the next large image's too.
        """
        self._last = None
        if nbytes > BATCH_IMAGE_BYTES:
            if self._large.size < nbytes:  # placed where decoders write fastest
                self._large = decode_buffer(nbytes)
            return self._large[:nbytes]
        if not self._arena.size:
            self._arena = np.empty(ARENA_BYTES, np.uint8)
        if self._used + nbytes > ARENA_BYTES:
            self._reduce_waiting()  # before any waiting image's bytes are handed out again
        offset, self._used = self._used, self._used + nbytes
        self._last = (offset, nbytes)
        return self._arena[offset:offset + nbytes]

    def add(self, key: str, pixels: np.ndarray, channel_names: tuple[str, ...]) -> None:
        """Keep one (H, W, C) uint8 image's numbers: reduced now, or with its neighbours
        when it lies in the last slot `take` handed out."""
        group = self._groups.get(channel_names)
        if group is None:
            group = self._groups[channel_names] = _Uint8Group(self.capacity, pixels.shape[2],
                                                              self.cross)
        row = group.append(key, pixels)
        if self._in_last_slot(pixels):
            offset, nbytes = self._last  # type: ignore[misc]
            self._waiting.append((group, row, offset, nbytes))
        else:
            fused.uint8_moments_into(pixels, row, *group.outputs)
            group.add_cross(row, pixels[None])
        self._last = None

    def _in_last_slot(self, pixels: np.ndarray) -> bool:
        # A decoder takes one slot an image and returns it (reshaped) or a new array (a
        # conversion, a fallback decoder): a contiguous view of the arena of the slot's
        # size is the slot itself.
        return (self._last is not None and pixels.base is self._arena
                and pixels.size == self._last[1] and pixels.flags.c_contiguous)

    def _reduce_waiting(self) -> None:
        """One kernel call per run of waiting images of one group and size, side by side
        in the arena and in consecutive rows."""
        waiting, start = self._waiting, 0
        while start < len(waiting):
            group, row, offset, nbytes = waiting[start]
            stop = start + 1
            while stop < len(waiting) and waiting[stop] == (group, row + stop - start,
                                                           offset + (stop - start) * nbytes,
                                                           nbytes):
                stop += 1
            count = stop - start
            block = self._arena[offset:offset + count * nbytes].reshape(count, nbytes)
            fused.uint8_moments_rows(block, row, *group.outputs)
            group.add_cross(row, block.reshape(count, -1, 1, group.channels))
            start = stop
        waiting.clear()
        self._used = 0

    def records(self) -> list[IntegerRecords]:
        """One `IntegerRecords` per channel layout, rows in the order they were added."""
        self._reduce_waiting()
        return [group.records(names) for names, group in self._groups.items()]


class _Uint8Group:
    """Preallocated rows of one channel layout, filled by the compiled kernel in place."""

    def __init__(self, capacity: int, channels: int, cross: bool = False) -> None:
        self.keys: list[str] = []
        self.channels = channels
        self.pixels = np.zeros(capacity, dtype=np.int64)
        self.outputs = fused.outputs(capacity, channels)
        pairs = channels * (channels - 1) // 2
        self.cross = np.zeros((capacity, pairs), np.int64) if cross else None

    def add_cross(self, row: int, images: np.ndarray) -> None:
        """The cross sums of (count, H, W, C) images into rows ``row`` onwards, if kept."""
        if self.cross is not None:
            self.cross[row:row + len(images)] = integer_cross_sums(images)

    def append(self, key: str, pixels: np.ndarray) -> int:
        """Give the image a row (its numbers follow) and return the row."""
        row = len(self.keys)
        self.pixels[row] = pixels.shape[0] * pixels.shape[1]
        self.keys.append(key)
        return row

    def records(self, names: tuple[str, ...]) -> IntegerRecords:
        n = len(self.keys)
        sums, squares, lows, highs = (array[:n] for array in self.outputs)
        return IntegerRecords(dtype="uint8", channel_names=names, keys=tuple(self.keys),
                              pixels=self.pixels[:n], sums=sums, sums_sq=squares,
                              minimum=lows.astype(np.float64), maximum=highs.astype(np.float64),
                              cross_sums=None if self.cross is None else self.cross[:n])
