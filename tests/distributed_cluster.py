"""A real dask.distributed cluster for tests: one scheduler and two workers on 127.0.0.1.

Each is a separate ``python -m dask ...`` process started the way a user would start
them by hand (see docs/distributed.md); the scheduler writes its address to a scheduler
file. Workers are single-threaded, each behind a nanny that restarts it when it dies,
and carry the test-only poison preload. ``allowed-failures`` is 1, so a task whose
worker dies twice ends in ``KilledWorker`` quickly. Workers read the dask config file
that docs/distributed.md recommends (``MALLOC_TRIM_THRESHOLD_`` unset). Everything is
torn down even when a test or the start-up fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

POISON_PRELOAD = Path(__file__).resolve().parent / "distributed_poison.py"
START_TIMEOUT = 60.0


@dataclass
class TestCluster:
    """Where the test cluster is and how to reach its processes."""

    address: str
    scheduler_file: Path
    processes: list[subprocess.Popen]
    logs: Path


#: The dask config file docs/distributed.md recommends for workers that decode images.
WORKER_CONFIG = """\
distributed:
  nanny:
    pre-spawn-environ:
      MALLOC_TRIM_THRESHOLD_: null
"""


def _environment(folder: Path) -> dict[str, str]:
    config = folder / "dask-config"
    config.mkdir(exist_ok=True)
    (config / "normstats.yaml").write_text(WORKER_CONFIG)
    env = dict(os.environ)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    env.update({"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1",
                "NORMSTATS_TEST_POISON": "1", "DASK_CONFIG": str(config)})
    return env


def _start(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=out,
                                stderr=subprocess.STDOUT, env=_environment(log.parent),
                                start_new_session=True)


def _wait_for_address(scheduler_file: Path, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dask scheduler exited with status {process.returncode}")
        with contextlib.suppress(OSError, ValueError):
            return json.loads(scheduler_file.read_text())["address"]
        time.sleep(0.1)
    raise RuntimeError("dask scheduler did not write its scheduler file in time")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group (nanny and worker), SIGKILL what is left after 10 s."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@contextlib.contextmanager
def running_cluster(folder: Path, workers: int = 2) -> Iterator[TestCluster]:
    """Start a scheduler and ``workers`` single-threaded workers; stop them at exit."""
    scheduler_file = folder / "scheduler.json"
    processes: list[subprocess.Popen] = []
    try:
        processes.append(_start(["scheduler", "--host", "127.0.0.1", "--port", "0",
                                 "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                folder / "scheduler.log"))
        address = _wait_for_address(scheduler_file, processes[0])
        for index in range(workers):
            processes.append(_start(
                ["worker", "--scheduler-file", str(scheduler_file), "--host", "127.0.0.1",
                 "--nthreads", "1", "--nworkers", "1", "--no-dashboard", "--death-timeout",
                 "60", "--name", f"w{index}", "--preload", str(POISON_PRELOAD)],
                folder / f"worker{index}.log"))
        yield TestCluster(address, scheduler_file, processes, folder)
    finally:
        for process in reversed(processes):
            _stop(process)
