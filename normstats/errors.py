"""One exception family for everything normstats reports to its users.

Every error carries the context a user needs to act on it (a file path, a shape,
a dtype) and renders as a single line, so a command-line failure reads
``normstats: error: <path>: <reason>``.
"""

from __future__ import annotations

__all__ = [
    "NormstatsError",
    "EmptyDatasetError",
    "IncompatibleImagesError",
    "UnreadableInputError",
    "InvalidOptionError",
    "OUT_OF_MEMORY_REASON",
    "TRANSIENT_REASONS",
    "is_transient_reason",
]

OUT_OF_MEMORY_REASON = ("out of memory while decoding (the machine's limit, not the file's "
                        "fault: the file is tried again on the next run)")

# Skip reasons that say nothing about a file's bytes: the machine, the permissions or a race
# caused them, so the record cache never keeps them as the file's verdict.
TRANSIENT_REASONS = ("permission denied", "file disappeared", "cannot read file",
                     "cannot stat file", "is a directory", "out of memory",
                     # a worker crash may be the machine's fault (out of memory): retry
                     "crashed its worker")


def is_transient_reason(reason: str) -> bool:
    """Whether a skip reason comes from the circumstances rather than the file's bytes.

    Examples
    --------
    >>> is_transient_reason(OUT_OF_MEMORY_REASON), is_transient_reason("zero-byte file")
    (True, False)
    """
    return reason.startswith(TRANSIENT_REASONS)


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

    def __init__(self, reason: str, path: str | None = None) -> None:
        self.reason = " ".join(str(reason).split())  # errors are one line, always
        self.path = path
        super().__init__(self.reason if path is None else f"{path}: {self.reason}")


class EmptyDatasetError(NormstatsError):
    """No image could be used, so there is no statistic to report (never NaN)."""


class IncompatibleImagesError(NormstatsError):
    """Images that cannot share one set of per-channel statistics (channels, bit depth)."""


class UnreadableInputError(NormstatsError):
    """One input (file, array slice) could not be decoded; it is skipped or, on request, fatal."""


class InvalidOptionError(NormstatsError):
    """An option or argument that normstats cannot honour (unknown layout, bad scale, ...)."""
