"""Pool workers die with their run on every platform: the watchdog used where the kernel
offers no parent-death signal (macOS, BSDs), exercised here on Linux too."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

_SCRIPT = """
import os, threading, time
from normstats.engine.process_pool import _exit_when_orphaned
parent = os.getpid()  # taken before the fork, as the pool passes it to its workers
child = os.fork()
if child == 0:
    threading.Thread(target=_exit_when_orphaned, args=(parent, 0.05), daemon=True).start()
    time.sleep(60)  # a worker busy decoding: only the watchdog can end it early
    os._exit(0)
print(child, flush=True)
os._exit(0)  # the run dies without a word to its worker
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited; only its entry is left


def test_the_orphan_watchdog_ends_a_worker_whose_run_died():
    run = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    worker = int(run.stdout.strip())
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker)
