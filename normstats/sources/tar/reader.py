"""WebDataset-style tar shards (``.tar``, ``.tar.gz``), read in place without extracting.

A shard is a tar of samples: members sharing a key (the member path up to the first
dot of its file name) form one sample, e.g. ``000017.jpg`` and ``000017.cls``. Each
sample contributes its image member (the one with extension ``image_ext`` when given,
else its one member with an image extension: a sample holding several, an image and its
mask, is an error asking for ``image_ext``), decoded with the folder source's decoder and
policy. Nothing is written to disk and only regular files are read.

Shards are listed once when the source opens: a plain ``.tar`` by seeking from header
to header, a ``.tar.gz`` as a stream. A shard cut inside a member, a plain shard
without its end-of-archive blocks, and a shard whose sample count disagrees with an
index (a wids-style ``{"shardlist": [{"url": ..., "nsamples": ...}]}`` JSON, or a
manifest) are errors naming the shard: a shard cut at a member boundary otherwise
reads as a valid, smaller shard. Link members named like images are never followed:
they are named in ``skipped`` as the folder walk names links; a shard that is not a
regular file (a FIFO named ``x.tar``) is skipped unread; an index's shards stay inside
its folder.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass

from normstats.errors import NormstatsError, RefusedInputError, SkipKind, UnreadableInputError
from normstats.maths.records import Skipped
from normstats.sources.archives import is_gzip
from normstats.sources.base import Task, default_task_size, split_evenly
from normstats.sources.confined import outside_reason
from normstats.sources.decoding.decode import (
    IMAGE_EXTENSIONS,
    DecodedImage,
    DecodePolicy,
    OutputBuffer,
    channel_names_for,
    decode_bytes,
)
from normstats.sources.decoding.file_read import open_regular, too_large_reason
from normstats.sources.folder import DecodingTask
from normstats.sources.tar.guards import checked_members, open_tar
from normstats.sources.tar.headers import list_members

__all__ = ["TarSource", "TarTask", "Member", "scan_shard", "read_shard_index"]

_TASK_BYTES = 4 << 20


@dataclass(frozen=True)
class Member:
    """An image member of a shard: sample key, member name, data offset and size (in a
    compressed shard the offset names which copy of a name stored twice is meant)."""

    key: str
    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class Shard:
    """The image members of one shard, its sample count, and what was left out."""

    path: str
    compressed: bool
    members: tuple[Member, ...]
    samples: int
    skipped: tuple[Skipped, ...]
    ignored: int


def _split_key(name: str) -> tuple[str, str]:
    folder, base = os.path.split(name)
    stem, _, ext = base.partition(".")
    return os.path.join(folder, stem), ext.lower()


def scan_shard(path: str, expected: int | None = None, image_ext: str | None = None) -> Shard:
    """List the samples of one shard and check it is complete.

    Examples
    --------
    >>> import io, tarfile, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "shard-000.tar")
    >>> with tarfile.open(p, "w") as tar:
    ...     for name in ("a.jpg", "a.cls"):
    ...         info = tarfile.TarInfo(name); info.size = 1
    ...         tar.addfile(info, io.BytesIO(b"x"))
    >>> shard = scan_shard(p, expected=1)
    >>> [m.name for m in shard.members], shard.samples, shard.ignored
    (['a.jpg'], 1, 1)
    """
    try:
        compressed = is_gzip(path)  # by content: the name may say otherwise
        every, end = list_members(path, compressed)
    except OSError as error:  # missing or not permitted (a FIFO is refused without one)
        raise NormstatsError(f"cannot read the shard ({error.strerror or error})",
                             path=path) from None
    # tar's rule for a name stored twice: the last copy wins (extracting gives that one)
    last = {info.name: info for info in every if info.isfile()}
    infos = [info for info in every if info.isfile() and last[info.name] is info]
    samples: dict[str, list[tarfile.TarInfo]] = {}
    for info in infos:
        samples.setdefault(_split_key(info.name)[0], []).append(info)
    links = [info for info in every
             if (info.islnk() or info.issym()) and _is_image(info.name, image_ext)]
    skipped = [_link_skipped(path, info, last, image_ext) for info in links]
    linked = {_split_key(info.name)[0] for info in links}
    members = []
    for key, group in samples.items():
        chosen = _image_of(group, image_ext, path, key)
        if chosen is None:
            if key not in linked:  # a link stood for its image: named already
                skipped.append(Skipped(f"{path}:{key}", _no_image_reason(group, image_ext)))
            continue
        # offset_data: where to seek in a plain tar; which copy to take in a stream
        members.append(Member(key, chosen.name, chosen.offset_data, chosen.size))
    if expected is not None and expected != len(samples):
        raise NormstatsError(f"holds {len(samples)} samples but its index says {expected}: "
                             "the shard is truncated (cut at a member boundary) or not the "
                             "indexed one", path=path)
    if end is not None:
        _check_end_blocks(path, end)
    return Shard(path, compressed, tuple(members), len(samples), tuple(skipped),
                 len(infos) - len(members))


def _no_image_reason(group: list[tarfile.TarInfo], image_ext: str | None) -> str:
    """Why a sample is skipped: no image member, or none of the asked extension (with the
    extensions it holds, to pick from)."""
    if image_ext is None:
        return "sample has no image member"
    held = ", ".join(sorted({_split_key(info.name)[1] for info in group}))
    return f"sample has no {image_ext.lower()} member (--image-key; it holds {held})"


def _image_of(group: list[tarfile.TarInfo], image_ext: str | None, path: str,
              key: str) -> tarfile.TarInfo | None:
    """The image member of a sample. Without ``image_ext``, a sample holding several (an
    image and its segmentation mask, ``jpg`` and ``seg.png``) is an error: which one tar
    order puts first says nothing of which one the user means."""
    images = [info for info in group if _is_image(info.name, image_ext)]
    if len(images) > 1:
        held = ", ".join(_split_key(info.name)[1] for info in images)
        raise NormstatsError(f"sample {key} holds several images ({held}); choose one with "
                             f"--image-key (image_key=), e.g. --image-key "
                             f"{_split_key(images[0].name)[1]}", path=path)
    return images[0] if images else None


def _is_image(name: str, image_ext: str | None) -> bool:
    ext = _split_key(name)[1]
    if image_ext is not None:
        return ext == image_ext.lower()
    return "." + ext.rsplit(".", 1)[-1] in IMAGE_EXTENSIONS


def _link_skipped(path: str, info: tarfile.TarInfo, files: dict, image_ext: str | None
                  ) -> Skipped:
    """A hard or symbolic link member, never followed: named as the folder walk names a
    second link to a file it lists (or a link it does not follow)."""
    kind = "hard" if info.islnk() else "symbolic"
    target = info.linkname if info.islnk() else \
        posixpath.normpath(posixpath.join(posixpath.dirname(info.name), info.linkname))
    if target in files and _is_image(target, image_ext):
        return Skipped(f"{path}:{info.name}",
                       f"same file as {path}:{target} (a {kind} link); counted once",
                       SkipKind.DUPLICATE)
    return Skipped(f"{path}:{info.name}", f"a {kind} link to {info.linkname!r}, which is "
                                          "not an image file of the shard; not followed",
                   SkipKind.REFUSED)


def _check_end_blocks(path: str, end: int) -> None:
    """A plain tar ends with two zero blocks; a shard cut between members does not."""
    with open_regular(path) as handle:
        handle.seek(end)
        tail = handle.read(1024)
    if len(tail) < 1024 or any(tail):
        raise NormstatsError("ends without the end-of-archive blocks: the shard was cut "
                             "(at a member boundary?)", path=path)


def read_shard_index(path: str) -> dict[str, int]:
    """Shard paths and sample counts from a wids-style JSON index, kept inside its folder.

    Examples
    --------
    >>> import tempfile, os, json
    >>> d = tempfile.mkdtemp(); p = os.path.join(d, "index.json")
    >>> _ = open(p, "w").write(json.dumps({"shardlist": [{"url": "a.tar", "nsamples": 3}]}))
    >>> [(os.path.basename(k), v) for k, v in read_shard_index(p).items()]
    [('a.tar', 3)]
    """
    try:
        with open_regular(path) as handle:
            entries = json.load(handle)["shardlist"]
        listed = [(str(e["url"]), int(e["nsamples"])) for e in entries]
    except NormstatsError:
        raise  # not a regular file: its own reason
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise NormstatsError(f"not a shard index ({{'shardlist': [{{'url', 'nsamples'}}]}}): "
                             f"{error}", path=path) from None
    folder = os.path.dirname(os.path.abspath(path))
    counts = {}
    for number, (url, count) in enumerate(listed):
        reason = outside_reason(folder, url)
        if reason is not None:
            raise NormstatsError(f"shardlist entry {number} ({url!r}) is outside the index's "
                                 f"folder: {reason}; only shards inside it are read",
                                 path=path)
        counts[os.path.normpath(os.path.join(folder, url))] = count
    return counts


@dataclass(frozen=True)
class TarTask(DecodingTask):
    """Decode some image members of one shard and return their records."""

    path: str
    compressed: bool
    members: tuple[Member, ...]
    policy: DecodePolicy
    fail_fast: bool = False

    @property
    def size(self) -> int:
        return len(self.members)

    def decoded(self, skipped: list[Skipped],
                scratch: OutputBuffer | None = None) -> Iterator[tuple[str, DecodedImage]]:
        """Decode member after member, yielding (key, image); the rest go to ``skipped``.

        With ``scratch``, each image is valid only until the next one is decoded.
        """
        for member, data in self._contents():
            key = f"{os.path.basename(self.path)}/{member.name}"
            try:
                if data is None:  # over the byte limit: never read (a 6 GiB member of a
                    # 28 MB .tar.gz would otherwise be inflated into memory)
                    raise RefusedInputError(too_large_reason(member.size, self.limit), key)
                image = decode_bytes(data, key, self.policy, scratch)
            except UnreadableInputError as error:
                if self.fail_fast:
                    raise
                skipped.append(Skipped(f"{self.path}:{member.name}", error.reason, error.kind))
                continue
            yield key, image

    def head(self, count: int) -> TarTask:
        """The task of this task's first ``count`` members."""
        return dataclasses.replace(self, members=self.members[:count])

    @property
    def limit(self) -> int:
        return self.policy.file_byte_limit

    def _contents(self) -> Iterator[tuple[Member, bytes | None]]:
        """Each member and its bytes (None for a member over the byte limit)."""
        limit = self.limit
        if not self.compressed:
            with open_regular(self.path) as handle:
                for member in self.members:
                    handle.seek(member.offset)
                    yield member, handle.read(member.size) if member.size <= limit else None
            return
        wanted = {m.name: m for m in self.members}
        with open_regular(self.path) as handle, \
                open_tar(handle, self.path, compressed=True) as tar:
            size = os.fstat(handle.fileno()).st_size
            for info in checked_members(tar, size, self.path, compressed=True):
                member = wanted.get(info.name)
                if member is not None and info.isfile() and info.offset_data == member.offset:
                    yield member, tar.extractfile(info).read() if info.size <= limit else None


class TarSource:
    """Image samples of one or more WebDataset tar shards.

    Parameters
    ----------
    paths : sequence of str
        Shard files (``.tar``, ``.tar.gz``, ``.tgz``).
    policy : DecodePolicy, optional
        How member bytes become pixels (default RGB, as torchvision's loader).
    counts : dict, optional
        Expected samples per shard path (from an index or manifest).
    image_ext : str, optional
        The member extension holding the image when a sample has several (``"jpg"``).

    Examples
    --------
    >>> import io, tarfile, tempfile, os
    >>> from PIL import Image
    >>> p = os.path.join(tempfile.mkdtemp(), "shard.tar"); buf = io.BytesIO()
    >>> Image.new("RGB", (2, 2)).save(buf, "PNG")
    >>> with tarfile.open(p, "w") as tar:
    ...     info = tarfile.TarInfo("0001.png"); info.size = len(buf.getvalue())
    ...     tar.addfile(info, io.BytesIO(buf.getvalue()))
    >>> len(TarSource([p]))
    1
    """

    kind = "images"
    scheduler = "processes"

    def __init__(self, paths: list[str] | tuple[str, ...], policy: DecodePolicy | None = None,
                 fail_fast: bool = False, counts: dict[str, int] | None = None,
                 image_ext: str | None = None) -> None:
        self.policy = policy or DecodePolicy()
        self.fail_fast = fail_fast
        counts = {os.path.abspath(k): v for k, v in (counts or {}).items()}
        shards, skipped = [], []
        for path in paths:
            try:
                shards.append(scan_shard(path, counts.get(os.path.abspath(path)), image_ext))
            except UnreadableInputError as error:  # a FIFO or device named like a shard:
                if fail_fast:                      # skipped unread, as in a folder
                    raise
                skipped.append(Skipped(path, error.reason, error.kind))
        self.shards = tuple(shards)
        self.mode = self.policy.mode
        self.channel_names = None if self.mode == "keep" else channel_names_for(self.mode, 0)
        self.description = paths[0] if len(paths) == 1 else f"{len(paths)} tar shards"
        self.skipped = tuple(skipped) + tuple(s for shard in shards for s in shard.skipped)
        self.ignored = sum(shard.ignored for shard in self.shards)

    def __len__(self) -> int:
        return sum(len(shard.members) for shard in self.shards)

    def tasks(self, task_size: int | None = None, workers: int = 1) -> list[Task]:
        tasks: list[Task] = []
        for shard in self.shards:
            size = task_size or self._default_size(shard, workers)
            # the absolute path: a cluster's worker resolves a relative one in its folder
            tasks += [TarTask(os.path.abspath(shard.path), shard.compressed,
                              shard.members[a:b], self.policy, self.fail_fast)
                      for a, b in split_evenly(len(shard.members), size)]
        return tasks

    def _default_size(self, shard: Shard, workers: int) -> int:
        if shard.compressed:  # each task re-reads the stream: one task a shard
            return max(1, len(shard.members))
        mean = max(1, sum(m.size for m in shard.members) // max(1, len(shard.members)))
        return default_task_size(len(shard.members), workers, max(16, _TASK_BYTES // mean))
