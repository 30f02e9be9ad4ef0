"""Walking a folder in a forked process while the command line loads the rest of normstats.

Before it can do anything with a folder, ``normstats compute`` imports numpy and most of
normstats (~0.1 s on one core) and lists the folder, a ``stat`` of every file (~0.03 s a
10,000 files, ~0.3 s a 100,000), one after the other, while the machine's other cores
wait. The command (`normstats_cli.run`, never a library call) starts the walk first, in
a child forked before those imports: the child walks the folder with `list_images` (the
walk of `walk_images`, which needs no numpy) and sends it back through a pipe, and
`walk_images` in the command's process finishes that walk instead of walking again. The
listing is the one the process would have made itself: the same code over the same
folder, a few milliseconds earlier.

Nothing depends on the child: if it fails, is killed, or sends nothing, the process
walks the folder itself. A walk nobody takes (a path that turns out to be a zarr store,
an error in the options) is stopped and reaped when the command ends (`walking`). Only
the walk's own modules (no numpy) load before the fork, so the child is a copy of a
small process; it never runs the parent's exit handlers (it leaves by ``os._exit``).
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from normstats.sources import walk as walk_module

__all__ = ["walking", "start", "take", "discard"]


@contextmanager
def walking(root: str | None) -> Iterator[None]:
    """Walk the folder ``root`` ahead while the block runs (None: nothing); a walk the
    block did not take is stopped and reaped when it ends, however it ends, and one
    started before for another folder (the command line's guess), when it starts."""
    discard(keep=root)
    if root is not None:
        start(root)
    try:
        yield
    finally:
        discard()


def start(root: str) -> bool:
    """Fork a child that walks the local folder ``root`` (`list_images`) and sends the
    walk back, for `walk_images` to take; whether it started (not for anything but an
    existing folder, nor without ``fork``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); (d / "a.png").write_bytes(b"x")
    1
    >>> start(str(d)), [f.path for f in take(str(d)).result().files]
    (True, ['a.png'])
    """
    key = walk_module.ahead_key(root)
    if not hasattr(os, "fork") or key in walk_module.walks_ahead or not os.path.isdir(root):
        return False
    read, write = os.pipe()
    _widen(write)
    pid = os.fork()
    if pid == 0:  # the child: walk, send, leave without the parent's exit handlers
        os.close(read)
        code = 1
        try:
            walk = walk_module.list_images(root)
            with os.fdopen(write, "wb") as pipe:
                pickle.dump(walk, pipe, protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    walk_module.walks_ahead[key] = _Child(pid, read)
    return True


#: The pipe's capacity asked for (Linux; a user may get up to 1 MiB): the walk of 100,000
#: files (6.6 MB pickled) crossed the default 64 KiB pipe in 16.6-17.3 ms, a wait for the
#: other side each 64 KiB, and a 1 MiB one in 9.7-10.6 ms (a warm re-run of those files:
#: 1.265x -> 1.240x the walk+stat process, rotated medians of 20). Sending the listing's
#: columns out of band (pickle protocol 5 buffers) instead gained nothing measurable.
PIPE_BYTES = 1 << 20


def _widen(pipe: int) -> None:
    """Ask for a `PIPE_BYTES` pipe where the system lets this process have one."""
    try:
        import fcntl

        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # not Linux, or above the user's limit
        pass


def take(root: str | os.PathLike) -> Any:
    """The walk (`list_images`) a child made of ``root``, or None when none was started for
    it or the child sent none (the caller then walks the folder itself)."""
    child = walk_module.walks_ahead.pop(walk_module.ahead_key(root), None)
    return None if child is None else child()


def discard(keep: str | None = None) -> None:
    """Stop and reap every child whose walk nobody took (but the walk of ``keep``)."""
    kept = None if keep is None else walk_module.ahead_key(keep)
    for key in [key for key in walk_module.walks_ahead if key != kept]:
        walk_module.walks_ahead.pop(key).stop()


class _Child:
    """A child walking a folder: its pid and the read end of its pipe."""

    def __init__(self, pid: int, read: int) -> None:
        self.pid, self.read = pid, read

    def __call__(self) -> Any:
        """The child's walk, once it has sent it and ended; None if it sent none."""
        walk = None
        try:
            with os.fdopen(self.read, "rb") as pipe:
                # read as it arrives, never the whole of it at once beside the walk it
                # holds; the bytes of a child of this process, pickled by the same code
                walk = pickle.load(pipe)
        except (EOFError, pickle.UnpicklingError):  # it sent nothing, or not all of it
            pass
        finally:
            _, status = os.waitpid(self.pid, 0)
        return walk if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else None

    def stop(self) -> None:
        os.close(self.read)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # pragma: no cover - it was already reaped elsewhere
            pass
        os.waitpid(self.pid, 0)
