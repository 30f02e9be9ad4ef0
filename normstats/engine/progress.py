"""A progress bar on stderr for long computations, driven by the finished tasks.

It draws only when asked or when stderr is a terminal, so logs and pipes stay clean.
Runs call `advance` as their tasks finish.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["ProgressBar", "TASK_PREFIX"]

#: Keys of the tasks that read images; the bar counts these.
TASK_PREFIX = "normstats-read"


class ProgressBar:
    """Count finished image tasks and draw ``[####----] 40% 2,000/5,000 images``.

    Parameters
    ----------
    total : int
        Number of images expected (0 when unknown).
    enabled : bool, optional
        Draw even when stderr is not a terminal (None: only on a terminal).
    on_result : callable, optional
        Called with each finished task's result in the client process (the cache
        writes records here).
    """

    def __init__(self, total: int, enabled: bool | None = None, stream: TextIO | None = None,
                 on_result: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.total = total
        self.done = 0
        self.on_result = on_result
        self.started = time.perf_counter()
        self._last_draw = 0.0

    def advance(self, images: int) -> None:
        """Record ``images`` more finished images and redraw at most ten times a second."""
        self.done += images
        now = time.perf_counter()
        if self.enabled and (now - self._last_draw > 0.1 or self.done >= self.total):
            self._last_draw = now
            self.stream.write("\r" + self.render(now - self.started))
            self.stream.flush()

    def render(self, elapsed: float) -> str:
        """The bar's text for ``elapsed`` seconds into the run."""
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total:
            fraction = min(1.0, self.done / self.total)
            bar = "#" * int(30 * fraction) + "-" * (30 - int(30 * fraction))
            return (f"[{bar}] {fraction:4.0%} {self.done:,}/{self.total:,} images "
                    f"{rate:,.0f}/s {elapsed:.1f}s")
        return f"{self.done:,} images {rate:,.0f}/s {elapsed:.1f}s"

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
