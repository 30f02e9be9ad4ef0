"""The record cache's writer lock: an ``flock`` that no dead process can keep.

The kernel releases an ``flock`` when the last descriptor of its open file closes, which
happens however its holder dies (even by SIGKILL), so a killed run never leaves a stale
lock. The one way a lock could outlive its run is a copy of the descriptor in a forked
child (the decoding pool): every forked child closes its copies at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from normstats.sources.decoding.file_read import read_whole_file

__all__ = ["take_lock", "release_lock", "lock_holder"]

#: Descriptors of the writer locks this process holds.
_HELD: set[int] = set()


def take_lock(path: Path, wait: float) -> int | None:
    """Lock ``path`` exclusively, polling for up to ``wait`` seconds; its descriptor or None.

    Examples
    --------
    >>> import tempfile
    >>> fd = take_lock(Path(tempfile.mkdtemp()) / "lock", 0.0)
    >>> fd is not None
    True
    >>> release_lock(fd)
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())  # for messages naming the holder
    _HELD.add(fd)
    return fd


def release_lock(fd: int) -> None:
    """Release a lock `take_lock` took (in a forked child its copy is already closed)."""
    if fd in _HELD:
        _HELD.discard(fd)
        os.close(fd)  # closing releases the flock


def lock_holder(path: Path) -> str:
    """The process id the current holder of ``path`` wrote, for messages; "?" if unknown.

    Read only from a regular file, and only its first bytes: a lock file replaced by a
    FIFO or a link to ``/dev/zero`` must not hang or exhaust a run that is only naming it.
    """
    with contextlib.suppress(OSError, UnicodeDecodeError):
        return read_whole_file(os.fspath(path), limit=64).decode().strip() or "?"
    return "?"


def _forget_inherited_locks() -> None:
    # The child's copy shares the parent's open file: closing it leaves the parent's lock
    # held, and a child that outlived its parent could otherwise keep the lock forever.
    for fd in _HELD:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)
