"""One exception family for everything normstats reports to its users.

Every error carries the context a user needs to act on it (a file path, a shape,
a dtype) and renders as a single line, so a command-line failure reads
``normstats: error: <path>: <reason>``.

What kind of failure an error is (about the input's content, refused by a limit, or the
moment's: `SkipKind`) is its type, never its wording: the reason is for people, and
programs (the record cache among them) decide by the type or by ``Skipped.kind``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

__all__ = [
    "NormstatsError",
    "EmptyDatasetError",
    "IncompatibleImagesError",
    "UnreadableInputError",
    "RefusedInputError",
    "TransientInputError",
    "AccessError",
    "InvalidOptionError",
    "SkipKind",
    "Skipped",
    "input_error",
    "numbered",
    "OUT_OF_MEMORY_REASON",
]

OUT_OF_MEMORY_REASON = ("out of memory while decoding (the machine's limit, not the file's "
                        "fault: the file is tried again on the next run)")


class SkipKind(enum.StrEnum):
    """Why an input was left out, for programs; the reason beside it is for people.

    The kind travels with the input as a field (`normstats.Skipped.kind`) or as the type of
    the error raised (`UnreadableInputError` and its subclasses), never inside the wording,
    so a reason may say anything without changing what is done with the input.

    Attributes
    ----------
    UNREADABLE
        Its own bytes or values cannot be used: damaged, not an image, a mode that cannot be
        pooled, a value that is not finite. The verdict holds while the input is unchanged,
        so the record cache keeps it.
    REFUSED
        normstats will not read it: not a regular file (a FIFO, a device), over
        ``--max-file-bytes`` or ``--max-pixels``, a link out of the dataset. Also a verdict
        on the unchanged input, kept by the cache; a raised limit reads it.
    TRANSIENT
        The moment, not the input: permission denied, the file vanished, a read error, out
        of memory, the caller's own Pillow limit, a crashed worker. Never cached: the next
        run tries it again.
    DUPLICATE
        Another name (a link, a path given twice) of an input already read: read once, not
        an error, and never a reason to stop with ``on_error="fail"``.
    ACCESS
        A store listed it but would not serve it: access denied (HTTP 403), credentials
        refused, the store unreachable. Not a verdict on the input, never cached, and never
        skipped quietly: the run reads the rest, then fails naming how many and one of them
        (a permission problem is not a bad image).

    Examples
    --------
    >>> SkipKind("transient") is SkipKind.TRANSIENT, str(SkipKind.DUPLICATE)
    (True, 'duplicate')
    """

    UNREADABLE = "unreadable"
    REFUSED = "refused"
    TRANSIENT = "transient"
    DUPLICATE = "duplicate"
    ACCESS = "access"


@dataclass(frozen=True)
class Skipped:
    """An input that could not be used, why, and what kind of failure that is.

    ``path`` names the input (``a/1.jpg``, ``shard.tar:member``, ``array[3]``); ``reason``
    says why, for people; ``kind`` (a `SkipKind`) is what programs decide by: the input's
    content, a refusal, the moment (transient), or a second name of an input already read.

    Examples
    --------
    >>> Skipped("train/cat/1.jpg", "truncated JPEG").to_dict()
    {'path': 'train/cat/1.jpg', 'reason': 'truncated JPEG', 'kind': 'unreadable'}
    >>> Skipped.from_dict({"path": "a.png", "reason": "permission denied",
    ...                    "kind": "transient"}).kind
    <SkipKind.TRANSIENT: 'transient'>
    """

    path: str
    reason: str
    kind: SkipKind = SkipKind.UNREADABLE

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "kind": self.kind.value}

    @classmethod
    def from_dict(cls, data: dict[str, str]) -> Skipped:
        # reports written before kinds existed have none: their skips were read as content
        return cls(str(data["path"]), str(data["reason"]),
                   SkipKind(data.get("kind", SkipKind.UNREADABLE)))


class NormstatsError(ValueError):
    """Base class of every error normstats raises on purpose.

    Parameters
    ----------
    reason : str
        What went wrong, in plain words (and what to do, where there is something to do).
    path : str, optional
        The file or folder the error is about.

    Examples
    --------
    >>> str(NormstatsError("not an image", path="a/b.jpg"))
    'a/b.jpg: not an image'
    """

    #: How an input this error names is counted when it is skipped rather than fatal.
    kind: ClassVar[SkipKind] = SkipKind.UNREADABLE

    def __init__(self, reason: str, path: str | None = None) -> None:
        self.reason = " ".join(str(reason).split())  # errors are one line, always
        self.path = path
        super().__init__(self.reason if path is None else f"{path}: {self.reason}")


class EmptyDatasetError(NormstatsError):
    """No image could be used, so there is no statistic to report (never NaN)."""


class IncompatibleImagesError(NormstatsError):
    """Images that cannot share one set of per-channel statistics (channels, bit depth)."""


class UnreadableInputError(NormstatsError):
    """One input (file, array slice) could not be decoded; it is skipped or, on request, fatal.

    The class says the `SkipKind` (``error.kind``): this one is about the input's content;
    `RefusedInputError` and `TransientInputError` are the other kinds.
    """


class RefusedInputError(UnreadableInputError):
    """An input normstats will not read: not a regular file, over a limit, out of the dataset.

    Examples
    --------
    >>> RefusedInputError("not a regular file (a FIFO (named pipe))", "p.png").kind
    <SkipKind.REFUSED: 'refused'>
    """

    kind = SkipKind.REFUSED


class TransientInputError(UnreadableInputError):
    """An input that could not be read now for a reason outside it (permissions, a race, memory).

    The record cache never keeps it as the input's verdict: the next run tries again.

    Examples
    --------
    >>> TransientInputError("permission denied", "a.png").kind
    <SkipKind.TRANSIENT: 'transient'>
    """

    kind = SkipKind.TRANSIENT


class AccessError(UnreadableInputError):
    """An input its store listed but would not serve (access denied, credentials refused,
    the store unreachable): the run fails, after reading the rest, naming how many.

    Examples
    --------
    >>> AccessError("access denied by the store", "s3://bucket/a.png").kind
    <SkipKind.ACCESS: 'access'>
    """

    kind = SkipKind.ACCESS


_ERROR_OF_KIND: dict[SkipKind, type[UnreadableInputError]] = {
    SkipKind.REFUSED: RefusedInputError, SkipKind.TRANSIENT: TransientInputError,
    SkipKind.ACCESS: AccessError}


def input_error(kind: SkipKind, reason: str, path: str | None = None) -> UnreadableInputError:
    """The error of the type that says ``kind``: how a skipped input stops a run when skips
    are fatal (``on_error="fail"``), or when a verdict read back from the cache is raised.

    Examples
    --------
    >>> error = input_error(SkipKind.TRANSIENT, "permission denied", "a.png")
    >>> type(error).__name__, str(error)
    ('TransientInputError', 'a.png: permission denied')
    """
    return _ERROR_OF_KIND.get(SkipKind(kind), UnreadableInputError)(reason, path)


class InvalidOptionError(NormstatsError):
    """An option or argument that normstats cannot honour (unknown layout, bad scale, ...)."""


def numbered(count: int, unit: str) -> str:
    """``count`` and ``unit``, plural unless one: how every message and report counts.

    Examples
    --------
    >>> numbered(1, "vector"), numbered(1234, "image")
    ('1 vector', '1,234 images')
    """
    return f"{count:,} {unit}{'' if count == 1 else 's'}"
