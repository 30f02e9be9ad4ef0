"""The process's task threads: started by the first run on threads, then kept for the next.

Starting a pool's threads cost every run ~0.2 ms on an idle machine and milliseconds on a
busy one (`ThreadPoolExecutor.submit` waits until each new thread has been scheduled): as
much as reducing 30 MB of an array in memory, more than a small run's work. So runs on
threads share one pool per worker count, kept as numpy's BLAS keeps its threads; several
runs at once (from threads of the caller) queue their tasks on it.

Forking: a forked child forgets its parent's pools (their threads are not in it), and the
local process pool stops them first when no run is using them (`stop_idle`), so that its
workers are forked from a process without threads of normstats'.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

__all__ = ["task_threads", "stop_idle"]

_pools: dict[int, ThreadPoolExecutor] = {}
_lock = threading.Lock()
_runs = 0  # runs using the pools now


@contextlib.contextmanager
def task_threads(workers: int) -> Iterator[ThreadPoolExecutor]:
    """The kept pool of ``workers`` task threads, for the length of one run.

    Examples
    --------
    >>> with task_threads(2) as pool:
    ...     list(pool.map(abs, [-1, 2]))
    [1, 2]
    >>> with task_threads(2) as again:
    ...     again is pool
    True
    """
    global _runs
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            pool = _pools[workers] = ThreadPoolExecutor(workers,
                                                        thread_name_prefix="normstats-task")
        _runs += 1
    try:
        yield pool
    finally:
        with _lock:
            _runs -= 1


def stop_idle() -> None:
    """Stop the kept task threads, unless a run is using them (before forking workers).

    Examples
    --------
    >>> with task_threads(2) as pool:
    ...     stop_idle()  # in use: kept
    >>> stop_idle()
    >>> with task_threads(2) as fresh:
    ...     fresh is pool
    False
    """
    with _lock:
        if _runs:
            return
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=True)  # idle threads: they exit at once


def _forget_after_fork() -> None:
    """In a forked child: the parent's pools have no threads here, and a thread of the
    parent may have held the lock as it forked."""
    global _lock, _runs
    _pools.clear()
    _lock = threading.Lock()
    _runs = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
