"""Crash safety and concurrency of the record cache, with real processes.

A child process computes a folder through the cache and SIGKILLs itself at a chosen
point: before a completion marker, in the middle of a segment's arrays, during the
compaction, or at a random moment. The next run must give the bits of an
uninterrupted run and must not decode again any file of a committed segment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import normstats
from normstats.engine.cache.store import DatasetCache
from normstats.sources.decoding.policy import DecodePolicy
from normstats_cli import main

CHILD = textwrap.dedent("""
    import os, shutil, signal, sys, time
    import normstats, normstats.engine.cache.store as store, normstats.engine.cache.run as cache_run
    import normstats.engine.cache.listed_segment as listed_segment
    from normstats.sources import folder

    root, cache, point, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    cache_run.FLUSH_SECONDS = 0.0      # commit after every task
    cache_run.LOCK_WAIT_SECONDS = float(os.environ.get("LOCK_WAIT", "60"))
    calls = {"n": 0}

    def die_on(module, name, counted=lambda *args: True):
        original = getattr(module, name)
        def wrapper(*args, **kwargs):
            calls["n"] += counted(*args)
            if calls["n"] == count and counted(*args):
                os.kill(os.getpid(), signal.SIGKILL)
            return original(*args, **kwargs)
        setattr(module, name, wrapper)

    if point == "marker":       # data of segment `count` written, its marker not
        die_on(store, "write_json_atomic", lambda path, data: path.parent.name == "markers")
    elif point == "array":      # in the middle of one segment's arrays
        die_on(listed_segment, "write_array")
    elif point == "compact":    # new segment committed, old ones not yet removed
        die_on(store.DatasetCache, "remove_all_but")
    elif point == "rmtree":     # old markers removed, old data half deleted
        def half(self, keep):
            for path in self.markers_dir.iterdir():
                if path.name != keep + ".json":
                    path.unlink()
            old = [p for p in self.segments_dir.iterdir() if p.is_dir() and p.name != keep]
            shutil.rmtree(old[0])
            os.kill(os.getpid(), signal.SIGKILL)
        store.DatasetCache.remove_all_but = half
    slow = float(os.environ.get("SLOW_TASK", "0"))
    gate = os.environ.get("GATE")              # tasks wait until this file exists
    block_after = int(os.environ.get("BLOCK_AFTER", "0"))  # later tasks never finish
    if slow or gate or block_after:
        original_run = folder.FolderTask.run
        def run(self):
            calls["n"] += 1
            while gate and not os.path.exists(gate):
                time.sleep(0.01)
            if block_after and calls["n"] > block_after:
                time.sleep(3600)               # until the test kills this run
            time.sleep(slow)
            return original_run(self)
        folder.FolderTask.run = run
    stats = normstats.compute(root, cache=cache, workers=1, task_size=3)
    print(stats.images_cached, stats.images_decoded, flush=True)
""")


def make_folder(root: Path, count: int) -> Path:
    for i in range(count):
        rng = np.random.default_rng(i)
        path = root / f"d{i % 2}" / f"{i:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)).save(path)
    return root


def child(tmp_path: Path, folder: Path, cache: Path, point: str = "none", count: int = 0,
          slow: float = 0.0, lock_wait: float = 60.0, gate: Path | None = None,
          block_after: int = 0) -> subprocess.Popen:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "SLOW_TASK": str(slow), "LOCK_WAIT": str(lock_wait),
           "GATE": str(gate or ""), "BLOCK_AFTER": str(block_after)}
    return subprocess.Popen([sys.executable, str(script), str(folder), str(cache), point,
                             str(count)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def committed_paths(folder: Path, cache: Path) -> set[str]:
    store = DatasetCache.open(cache, str(folder), DecodePolicy())
    segments, _ = store.load()
    return {p for s in segments for p in s.index.paths}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, normstats.DatasetStats]:
    folder = make_folder(tmp_path_factory.mktemp("crash") / "data", 24)
    return folder, normstats.compute(folder, cache=False, workers=1)


@pytest.mark.parametrize("point, count", [("marker", 1), ("marker", 4), ("array", 12),
                                          ("compact", 1), ("rmtree", 1)])
def test_sigkill_at_a_chosen_point_then_rerun(tmp_path, dataset, point, count):
    folder, reference = dataset
    cache = tmp_path / "cache"
    process = child(tmp_path, folder, cache, point, count)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    kept = committed_paths(folder, cache)
    stats = normstats.compute(folder, cache=cache, workers=1)
    assert stats == reference
    assert stats.images_cached == len(kept) and stats.images_decoded == 24 - len(kept)
    if point != "marker" or count > 1:
        assert kept  # something was committed before the kill, and it was reused
    assert normstats.compute(folder, cache=cache, workers=1).images_decoded == 0


def test_sigkill_at_a_random_moment_then_rerun(tmp_path, dataset):
    """Killed at any moment after three committed segments; the tasks after the sixth
    never finish, so the kill always lands mid-run, whatever the machine's speed."""
    folder, reference = dataset
    cache = tmp_path / "cache"
    process = child(tmp_path, folder, cache, slow=0.05, block_after=6)
    assert wait_for(lambda: len(list(cache.glob("*/markers/*.json"))) >= 3, 60)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    kept = committed_paths(folder, cache)
    assert 9 <= len(kept) <= 18
    stats = normstats.compute(folder, cache=cache, workers=1)
    assert stats == reference and stats.images_decoded == 24 - len(kept)


def lock_holder_pid(folder: Path, cache: Path) -> str:
    return DatasetCache.open(cache, str(folder), DecodePolicy()).holder()


def has_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (it is polling for that lock)."""
    with contextlib.suppress(OSError):
        target = os.path.realpath(path)
        return any(os.readlink(fd) == target for fd in Path(f"/proc/{pid}/fd").iterdir())
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("lock_wait", [60.0, 0.1])
def test_two_concurrent_runs_both_finish_and_the_cache_stays_consistent(tmp_path, dataset,
                                                                        lock_wait):
    """A long wait: the second run waits and reuses all; a short one: it goes read-only.

    The first run holds the lock until the test opens its gate, which it does once the
    second run is waiting for the lock (long wait) or has finished (short wait)."""
    folder, reference = dataset
    cache = tmp_path / "cache"
    gate = tmp_path / "gate"
    first = child(tmp_path, folder, cache, gate=gate, lock_wait=lock_wait)
    assert wait_for(lambda: lock_holder_pid(folder, cache) == str(first.pid), 60)
    second = child(tmp_path, folder, cache, lock_wait=lock_wait)
    lock = DatasetCache.open(cache, str(folder), DecodePolicy()).path / "lock"
    if lock_wait < 1:
        second.wait(120)
    else:
        assert wait_for(lambda: has_open(second.pid, lock), 60)
    gate.touch()
    runs = [first, second]
    outputs = [p.communicate(timeout=120) for p in runs]
    assert [p.returncode for p in runs] == [0, 0], outputs
    counts = [tuple(map(int, out.split())) for out, _ in outputs]
    assert counts[0] == (0, 24)
    if lock_wait < 1:
        assert counts[1] == (0, 24)  # nothing was committed yet: decoded, not written
        assert "reusing its committed records but not writing" in outputs[1][1]
    else:
        assert counts[1] == (24, 0)  # the waiting run decoded nothing
    stats = normstats.compute(folder, cache=cache, workers=1)
    assert stats == reference and stats.images_cached == 24 and stats.images_decoded == 0
    store = DatasetCache.open(cache, str(folder), DecodePolicy())
    segments, junk = store.load()
    assert len(segments) == 1 and junk == 0


POOL_CHILD = textwrap.dedent("""
    import sys, time
    import normstats
    from normstats.sources import folder

    original_run = folder.FolderTask.run
    def run(self):
        time.sleep(0.5)  # slow tasks: the run is surely in the middle when it is killed
        return original_run(self)
    folder.FolderTask.run = run
    normstats.compute(sys.argv[1], cache=sys.argv[2], workers=2, scheduler="processes",
                      task_size=2)
""")


def process_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of the process group ``pgid``, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited while listed
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("kill", [signal.SIGKILL, signal.SIGTERM])
def test_killing_the_parent_of_the_process_pool_leaves_no_worker_and_no_lock(
        tmp_path, dataset, kill):
    """A SIGKILL, or a SIGTERM as soon as the pool exists, to the run's main process:
    its forked workers die with it, the cache lock is free, and the next run writes the
    cache and gives the bits of an uninterrupted run."""
    folder, reference = dataset
    cache = tmp_path / "cache"
    script = tmp_path / "pool_child.py"
    script.write_text(POOL_CHILD)
    # its own session: the run and its workers form the process group of the run's pid
    process = subprocess.Popen([sys.executable, str(script), str(folder), str(cache)],
                               start_new_session=True)
    try:
        assert wait_for(lambda: len(process_group(process.pid)) >= 3, 120), "no pool started"
        process.send_signal(kill)
        process.wait(30)
        assert wait_for(lambda: not process_group(process.pid), 10), process_group(process.pid)
    finally:
        for pid in process_group(process.pid):  # never leave one behind, even on failure
            os.kill(pid, signal.SIGKILL)
    store = DatasetCache.open(cache, str(folder), DecodePolicy())
    assert store.try_lock(0.0)
    store.unlock()
    kept = committed_paths(folder, cache)
    stats = normstats.compute(folder, cache=cache, workers=1)
    assert stats == reference and stats.images_decoded == 24 - len(kept)
    assert normstats.compute(folder, cache=cache, workers=1).images_cached == 24
    result = CliRunner().invoke(main, ["cache", "clear", str(folder), "--cache", str(cache)])
    assert result.exit_code == 0 and "cleared 1 dataset " in result.output, result.output


def test_a_lock_held_by_a_forked_child_dies_with_its_holder(tmp_path):
    """A fork copies the lock's descriptor; the child closes its copy at once, so a
    child that outlives the lock's holder cannot keep the cache locked."""
    store = DatasetCache.open(tmp_path / "cache", str(tmp_path), DecodePolicy())
    assert store.try_lock(0.0)
    child_pid = os.fork()
    if child_pid == 0:  # the child: lock free once the parent lets go, while it lives on
        os._exit(0 if wait_for(lambda: _free(store), 10) else 1)
    store.unlock()
    _, status = os.waitpid(child_pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _free(store: DatasetCache) -> bool:
    other = DatasetCache(store.path, store.identity)
    if not other.try_lock(0.0):
        return False
    other.unlock()
    return True


def test_cache_clear_refusing_a_cache_in_use_exits_1(tmp_path, dataset):
    folder, _ = dataset
    cache = tmp_path / "cache"
    normstats.compute(folder, cache=cache, workers=1)
    store = DatasetCache.open(cache, str(folder), DecodePolicy())
    assert store.try_lock(0.0)  # a run writing it
    try:
        result = CliRunner().invoke(main, ["cache", "clear", str(folder), "--cache",
                                           str(cache)])
    finally:
        store.unlock()
    assert result.exit_code == 1
    assert f"in use by pid {os.getpid()}; not cleared" in result.stderr
    assert committed_paths(folder, cache)  # nothing removed
