"""Guards shared by tests of inputs that could hang a reader or fill memory.

`finishes` runs a call in a thread so that a hang fails the test instead of the suite;
`counting_inflation` counts what every zlib decompressor inflates, so a test can bound
the memory a compressed input costs without timing anything.
"""

from __future__ import annotations

import contextlib
import os
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def finishes(run: Callable[[], Any], seconds: float = 15, fifo: Path | None = None) -> Any:
    """What ``run()`` returns or raises, from a thread: a hang fails the test (and a
    reader waiting on ``fifo`` is let go by opening it for writing)."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append(run())
        except Exception as error:  # noqa: BLE001 - the test looks at it
            outcome.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"still running after {seconds} s: a hang")
    return outcome[0]


@contextlib.contextmanager
def counting_inflation() -> Iterator[list[int]]:
    """The bytes every zlib decompressor inflates inside the block (what memory holds)."""
    counts: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args) -> None:
            self.inner = real(*args)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self.inner.decompress(data, max_length)
            counts.append(len(out))
            return out

        def __getattr__(self, name: str):
            return getattr(self.inner, name)

    zlib.decompressobj = Counting
    try:
        yield counts
    finally:
        zlib.decompressobj = real
