"""Tasks on a local executor: results delivered as they finish, then let go."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from normstats.engine.local_run import _Gathered
from normstats.engine.progress import ProgressBar
from normstats.sources import open_source
from normstats.sources.base import TaskResult


def test_a_delivered_result_is_not_kept_by_the_run():
    """A finished future holds its task's result: the run forgets each once delivered, so
    the records of a whole run (~100 bytes an image) never pile up in the process that
    gathers them, whatever the caller keeps."""
    alive: list[weakref.ref] = []

    def on_result(result: TaskResult) -> None:
        alive.append(weakref.ref(result.records))

    tasks = open_source(np.zeros((40, 4, 4, 3), np.uint8)).tasks(4)
    with ThreadPoolExecutor(2) as pool:
        gathered = _Gathered(pool, tasks, ProgressBar(40, enabled=False, on_result=on_result))
        total = gathered.total()
        gc.collect()
        assert total.images == 40 and len(alive) == 10
        assert gathered.futures == {} and [ref for ref in alive if ref() is not None] == []
