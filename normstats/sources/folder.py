"""A folder of image files: walked once, decoded file by file in tasks.

The walk (`normstats.sources.walk`) lists the files once; tasks of a few hundred files
then decode them in order, each image reduced to its record as soon as it is decoded.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from normstats.errors import NormstatsError, SkipKind, UnreadableInputError, input_error
from normstats.maths import fused
from normstats.maths.masked import MaskedRows, masked_records
from normstats.maths.records import Records, Skipped, concat_records, records_from_stack
from normstats.maths.uint8_rows import Uint8Rows
from normstats.sources.base import Task, TaskResult, default_task_size, split_evenly
from normstats.sources.decoding.decode import (
    DecodedImage,
    DecodePolicy,
    OutputBuffer,
    channel_names_for,
    decode_bytes,
    decode_file,
    fast_pixels,
    read_image_bytes,
)
from normstats.sources.decoding.file_read import read_plain_files
from normstats.sources.file_list import FileEntry, FileList
from normstats.sources.walk import WalkResult, walk_images

__all__ = ["FolderSource", "FolderTask", "ListedTask", "ListedFiles", "records_of_images",
           "reduce_as_decoded", "file_task_ranges", "DecodingTask", "read_in_batches",
           "PixelTap"]

#: Images with fewer values are stacked so one vectorised call serves many of them
#: (a numpy call costs ~14 µs); bigger ones are reduced in place, saving the copy.
_STACK_BELOW_VALUES = 64 * 64 * 3

#: At most this many files per task. A task costs ~1 ms to send, summarise and merge,
#: under 2% of 1,024 decodes of 32×32 PNGs (at 256 a task, a folder of 20,000 of them
#: ran 8% slower); a worker keeps only the task's records, ~100 bytes an image.
_TASK_FILES = 1024

_UINT8 = np.dtype(np.uint8)  # compared by identity: ``dtype == np.uint8`` costs ~0.5 µs

#: Compressed bytes per task: ~200 files of 256² JPEG, ~1,500 of 32² PNG.
_TASK_BYTES = 4 << 20



class ListedTask:
    """What the tasks of listed files share: ``files`` kept as a `FileList`, and its size.

    Subclasses are frozen dataclasses with a ``files`` field that may be given as any
    sequence of `FileEntry`; a `FileList` (cloud)pickles as four buffers in microseconds
    where a tuple of entries took ~2 ms a task of 256 files (tasks travel to worker
    processes by pickle).
    """

    files: FileList

    def __post_init__(self) -> None:
        object.__setattr__(self, "files", FileList.of(self.files))

    @property
    def size(self) -> int:
        return len(self.files)

    def head(self, count: int) -> ListedTask:
        """The task of this task's first ``count`` files."""
        return dataclasses.replace(self, files=self.files[:count])


#: What sees each image of a task as it is decoded, before the next one is (the mean
#: image, the histogram): ``tap(key, pixels, image)``, ``image`` the `DecodedImage` around
#: the pixels, or None for pixels the fast decoders gave (no nodata, no mask).
PixelTap = Callable[[str, np.ndarray, "DecodedImage | None"], None]


def _tapped(images: Iterator[tuple[str, DecodedImage]], tap: PixelTap | None
            ) -> Iterator[tuple[str, DecodedImage]]:
    """``images``, each handed to ``tap`` first (a decode may reuse its buffer next)."""
    if tap is None:
        return images
    return _tapping(images, tap)


def _tapping(images: Iterator[tuple[str, DecodedImage]], tap: PixelTap
             ) -> Iterator[tuple[str, DecodedImage]]:
    for key, image in images:
        tap(key, image.pixels, image)
        yield key, image


class DecodingTask:
    """What tasks that decode images one at a time share: ``run`` and ``decode_all`` from
    their ``decoded(skipped, scratch)`` generator and their ``size``."""

    size: int

    def decoded(self, skipped: list[Skipped],
                scratch: OutputBuffer | None = None) -> Iterator[tuple[str, DecodedImage]]:
        raise NotImplementedError

    def run(self, tap: PixelTap | None = None) -> TaskResult:
        """The task's records; with ``tap``, every image is handed to it as it is decoded."""
        skipped: list[Skipped] = []
        records = reduce_as_decoded(
            lambda scratch: _tapped(self.decoded(skipped, scratch), tap), self.size)
        return TaskResult(records, tuple(skipped))

    def decode_all(self) -> tuple[list[tuple[str, DecodedImage]], tuple[Skipped, ...]]:
        """Decode every image: (key, image) pairs, and what was skipped with its reason."""
        skipped: list[Skipped] = []
        return list(self.decoded(skipped)), tuple(skipped)


@dataclass(frozen=True)
class FolderTask(DecodingTask, ListedTask):
    """Decode a run of files and return their per-image records."""

    root: str
    files: FileList
    policy: DecodePolicy
    fail_fast: bool = False
    #: The listing found mask sidecars (``.msk``) and keyed their images on them: look for
    #: one beside each file (`normstats.sources.decoding.sidecar`).
    sidecars: bool = False

    def decoded(self, skipped: list[Skipped],
                scratch: OutputBuffer | None = None) -> Iterator[tuple[str, DecodedImage]]:
        """Decode file after file, yielding (key, image); unreadable files go to ``skipped``.

        With ``scratch``, each image is valid only until the next one is decoded. Every
        image is yielded: callers that look at each one (the mean image, percentiles)
        see them all.
        """
        return self._decoded(skipped, scratch, None)

    def run(self, tap: PixelTap | None = None) -> TaskResult:
        """The task's records: as `DecodingTask.run`, except that a file the fast decoders
        take goes from its bytes straight into the records (`fast_pixels`), with no image
        tuple made or yielded for it: ~10 µs less a file, a tenth of a 32×32 PNG's time.
        Every file is read once, the files of the task a few dozen at a time
        (`read_in_batches`); the others are decoded from the same bytes as `decoded`
        decodes them, and every file of a policy that resizes, crops or leaves nodata out
        takes `decoded`'s path. ``tap`` sees every image on either path: the mean image
        of 32×32 PNGs tapped from `decoded` (a read and an image tuple a file) cost ~11 µs
        an image, ~3.5 µs here."""
        skipped: list[Skipped] = []
        plain = self.policy.keeps_pixels_as_decoded and not self.sidecars
        records = reduce_as_decoded(
            lambda rows: _tapped(self._decoded(skipped, rows, rows if plain else None, tap),
                                 tap), self.size)
        return TaskResult(records, tuple(skipped))

    def _decoded(self, skipped: list[Skipped], scratch: OutputBuffer | None,
                 records: Uint8Rows | None, tap: PixelTap | None = None
                 ) -> Iterator[tuple[str, DecodedImage]]:
        """`decoded`, adding the images of plain files to ``records`` (and handing them to
        ``tap``) instead of yielding them, where ``records`` is given."""
        prefix, policy, sidecars = os.path.join(self.root, ""), self.policy, self.sidecars
        if records is None:
            for path, size in self.files.paths_and_sizes():
                try:
                    image = decode_file(prefix + path, policy, path, scratch, size_hint=size,
                                        sidecars=sidecars)
                except UnreadableInputError as error:
                    self._skip(skipped, path, error)
                    continue
                yield path, image
            return
        for batch in read_in_batches(prefix, self.files, policy):
            for path, data in batch:
                if isinstance(data, UnreadableInputError):
                    self._skip(skipped, path, data)
                    continue
                try:
                    pixels = fast_pixels(data, policy, records)
                    if pixels is not None:
                        records.add(path, pixels, channel_names_for(policy.mode,
                                                                    pixels.shape[2]))
                        if tap is not None:
                            tap(path, pixels, None)
                        continue
                    image = decode_bytes(data, path, policy, scratch, fast=False)
                except UnreadableInputError as error:
                    self._skip(skipped, path, error)
                    continue
                yield path, image

    def _skip(self, skipped: list[Skipped], path: str, error: UnreadableInputError) -> None:
        """Note an unreadable file in ``skipped``, or raise its error under ``fail_fast``."""
        if self.fail_fast:
            raise error
        skipped.append(Skipped(path, error.reason, error.kind))


#: Files read back to back before the first of them is decoded, at most this many and
#: this many bytes by the listing's sizes: each read's system calls leave the caches and
#: branch predictors cold for the Python that follows, which alternating read and decode
#: paid on every file (~12 µs of a 32×32 PNG's ~97 on a 2-core EPYC; the decode-only
#: loop, with little Python between its reads, lost nothing to it).
_READ_BATCH_FILES = 64
_READ_BATCH_BYTES = 1 << 20


def read_in_batches(prefix: str, files: FileList, policy: DecodePolicy
                    ) -> Iterator[list[tuple[str, bytes | UnreadableInputError]]]:
    """The files' bytes in order, a few dozen files at a time, each with its path: plain
    files read by `read_plain_files`, any other by `read_image_bytes`, and an unreadable
    file's place holding its error, for the caller to report in order.

    Examples
    --------
    >>> import tempfile, os
    >>> from normstats.sources.file_list import FileList, FileEntry
    >>> root = tempfile.mkdtemp(); _ = open(os.path.join(root, "a.png"), "wb").write(b"x")
    >>> files = FileList.of([FileEntry("a.png", 1, 0), FileEntry("gone.png", 1, 0)])
    >>> [(path, type(data).__name__) for batch in read_in_batches(root + "/", files,
    ...  DecodePolicy()) for path, data in batch]
    [('a.png', 'bytes'), ('gone.png', 'TransientInputError')]
    """
    limit, paths, sizes, held = policy.file_byte_limit, [], [], 0
    for path, size in files.paths_and_sizes():
        paths.append(path)
        sizes.append(size)
        held += size
        if len(paths) == _READ_BATCH_FILES or held >= _READ_BATCH_BYTES:
            yield _read_batch(prefix, paths, sizes, policy, limit)
            paths, sizes, held = [], [], 0
    if paths:
        yield _read_batch(prefix, paths, sizes, policy, limit)


def _read_batch(prefix: str, paths: list[str], sizes: list[int], policy: DecodePolicy,
                limit: int) -> list[tuple[str, bytes | UnreadableInputError]]:
    batch: list[tuple[str, bytes | UnreadableInputError]] = []
    for path, size, data in zip(paths, sizes,
                                read_plain_files([prefix + path for path in paths], limit)):
        if data is None:
            try:
                data = read_image_bytes(prefix + path, path, policy, size)
            except UnreadableInputError as error:
                batch.append((path, error))
                continue
        batch.append((path, data))
    return batch


def reduce_as_decoded(decode: Callable[[OutputBuffer | None], Iterator[tuple[str, DecodedImage]]],
                      capacity: int) -> Records | None:
    """The records of the images ``decode(scratch)`` yields, reduced as they come.

    8-bit images are decoded into buffers the records hand out (`Uint8Rows.take`) and
    reduced there, small ones in batches, large ones at once while their pixels are still
    in cache; only their numbers are kept. Images with nodata to leave out and rasters are
    reduced as they come, band by band (`MaskedRows`). The rest are reduced together at the
    end. Only with the compiled kernel do decodes write into those buffers (``scratch``):
    an image is then valid only until the next one is decoded.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources.decoding.decode import DecodedImage
    >>> img = DecodedImage(np.full((2, 2, 1), 3, np.uint8), ("L",))
    >>> reduce_as_decoded(lambda scratch: iter([("a", img), ("b", img)]), 2).keys
    ('a', 'b')
    """
    rows = Uint8Rows(capacity) if fused.available() else None
    masked = MaskedRows(capacity)
    others = []
    for key, image in decode(rows):  # the rows hand the decoders their buffers
        if image.leaves_values_out:
            masked.add(key, image.pixels, image.channel_names, image.nodata, image.raw_units,
                       image.mask)
        elif rows is not None and image.pixels.dtype is _UINT8:
            rows.add(key, image.pixels, image.channel_names)
        else:
            others.append((key, image))
    parts = ([] if rows is None else rows.records()) + masked.records() + \
        ([records_of_images(others)] if others else [])
    return concat_records(parts) if parts else None


def records_of_images(decoded: list[tuple[str, DecodedImage]]) -> Records | None:
    """Records of decoded images: one vectorised call per group of equal shape and kind.

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources.decoding.decode import DecodedImage
    >>> img = DecodedImage(np.zeros((2, 2, 1), np.uint8), ("L",))
    >>> len(records_of_images([("a", img), ("b", img)]))
    2
    """
    groups: dict[tuple, list[tuple[str, DecodedImage]]] = {}
    for index, (key, image) in enumerate(decoded):
        signature = (image.pixels.shape, image.pixels.dtype.str, image.channel_names,
                     image.nodata, image.raster, image.mask is not None)
        if image.pixels.size >= _STACK_BELOW_VALUES:
            signature += (index,)  # big images: one call each, no copy into a stack
        groups.setdefault(signature, []).append((key, image))
    parts = [_group_records(group) for group in groups.values()]
    return concat_records(parts) if parts else None


def _group_records(group: list[tuple[str, DecodedImage]]) -> Records:
    """Records of images of one shape and kind: band by band where nodata is left out."""
    keys, first = tuple(k for k, _ in group), group[0][1]
    if first.leaves_values_out:
        return masked_records(_stack(group), nodata=first.nodata, mask=_stacked_masks(group),
                              keys=keys, channel_names=first.channel_names,
                              raw_units=first.raw_units)
    return records_from_stack(_stack(group), keys=keys, channel_names=first.channel_names)


def _stacked_masks(group: list[tuple[str, DecodedImage]]) -> np.ndarray | None:
    """(N, H, W, C) of a group's masks (one band masks every band), or None: a group's
    images all have a mask or none has (`records_of_images` groups them so)."""
    if group[0][1].mask is None:
        return None
    return np.stack([np.broadcast_to(image.mask, image.pixels.shape) for _, image in group])


def _stack(group: list[tuple[str, DecodedImage]]) -> np.ndarray:
    """(N, H, W, C) of a group; a single image is a view, not a copy."""
    if len(group) == 1:
        return group[0][1].pixels[None]
    return np.stack([image.pixels for _, image in group])


class ListedFiles:
    """What every source of listed image files shares: the walk, the policy, the tasks.

    Subclasses list the files (`adopt`) and say how a task reads a run of them (`task`).
    """

    kind = "images"
    scheduler = "processes"

    def adopt(self, root: str, policy: DecodePolicy, fail_fast: bool, walk: WalkResult) -> None:
        """Take the listing ``walk`` of ``root`` to be decoded under ``policy``."""
        self.root, self.policy, self.fail_fast, self.walk = root, policy, fail_fast, walk
        self.description = root
        self.mode = policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.skipped = walk.skipped
        self.ignored = walk.ignored
        if fail_fast:  # what the listing could not use stops the run too, like a bad file
            unusable = next((s for s in walk.skipped if s.kind is not SkipKind.DUPLICATE),
                            None)
            if unusable is not None:
                raise input_error(unusable.kind, unusable.reason, unusable.path)

    def task(self, files: FileList) -> Task:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self.walk.files)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        files = self.walk.files
        return [self.task(files[a:b]) for a, b in file_task_ranges(files, task_size, workers)]


class FolderSource(ListedFiles):
    """Every image file under a folder, decoded under one `DecodePolicy`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> d = pathlib.Path(tempfile.mkdtemp()); Image.new("RGB", (4, 4)).save(d / "a.png")
    >>> source = FolderSource(d)
    >>> len(source), source.channel_names
    (1, ('R', 'G', 'B'))
    """

    def __init__(self, root: str | os.PathLike, policy: DecodePolicy | None = None,
                 fail_fast: bool = False, confine_to: str | os.PathLike | None = None) -> None:
        if not os.path.isdir(str(root)):
            raise NormstatsError("not a folder", path=str(root))
        # Tasks carry the absolute root: a dask.distributed worker runs in its own folder,
        # where a relative one would name other files, or none. Reports keep the user's.
        self.adopt(os.path.abspath(root), policy or DecodePolicy(), fail_fast,
                   walk_images(root, confine_to))
        self.description = str(root)

    def task(self, files: FileList) -> Task:
        return FolderTask(self.root, files, self.policy, self.fail_fast,
                          sidecars=self.walk.sidecars > 0)


def file_task_ranges(files: Sequence[FileEntry], task_size: int | None,
                     workers: int) -> list[tuple[int, int]]:
    """Consecutive runs of files for tasks: ``task_size`` each, or ~4 MB of files.

    Examples
    --------
    >>> files = FileList.of(FileEntry(str(i), 1 << 20, 0) for i in range(100))
    >>> file_task_ranges(files, None, workers=2)[:2]
    [(0, 5), (5, 10)]
    """
    if task_size is None:
        total = int(FileList.of(files).sizes.sum())
        mean_bytes = max(1, total // max(1, len(files)))
        preferred = min(_TASK_FILES, max(16, _TASK_BYTES // mean_bytes))
        task_size = default_task_size(len(files), workers, preferred)
    return split_evenly(len(files), task_size)
