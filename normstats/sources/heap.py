"""Handing the C heap's free memory back to the operating system.

Once a process has freed a large block, glibc raises its thresholds so that later large
blocks come from the heap too, and freed heap memory then stays resident (it is kept
for reuse). A folder walk frees a few hundred bytes a file of such temporaries (path strings, sort
keys, index arrays); left resident, they would count in the parent's memory and in every
decoding worker forked after it. ``malloc_trim`` returns them; it takes ~1 ms.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # ctypes loads here, on the first release (~3 ms): not in the child that walks a
    # folder for the command (`normstats.sources.walk_ahead`), which never releases
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim  # glibc only: not on musl, macOS or Windows
    except (OSError, AttributeError, TypeError):
        return None


def release_free_memory() -> bool:
    """Return the C heap's free pages to the OS; False where the C library cannot.

    Examples
    --------
    glibc has ``malloc_trim``; other C libraries (musl, macOS, Windows) do not:

    >>> import platform
    >>> release_free_memory() == (platform.libc_ver()[0] == "glibc")
    True
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
