"""The ``normstats`` command line's launcher (the click layer is `normstats_cli.commands`).

This module is what the ``normstats`` command loads first, before click: `run` starts
the walk of the folder ``normstats compute FOLDER`` names (`folder_to_walk_ahead`), then
loads the commands (`normstats_cli.commands`, the click layer, ~25 ms) and runs them.
`main` is the click group, loaded on first use, for programs and tests that call the
command line in their own process.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

__all__ = ["end_process", "folder_to_walk_ahead", "main", "run"]


def __getattr__(name: str) -> Any:
    if name == "main":  # the click group: loaded when asked for, not with the launcher
        from normstats_cli.commands import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def folder_to_walk_ahead(arguments: list[str]) -> str | None:
    """The folder ``normstats compute FOLDER ...`` names, read from the command line's
    ``arguments`` (without the program) before click loads, or None.

    Only the token right after ``compute`` is taken: no option's value can stand there.
    Whether the command walks it (a single PATH, no ``--manifest``) is the command's to
    say: a walk it does not take is stopped when it starts (`walk_ahead.walking`).

    Examples
    --------
    >>> folder_to_walk_ahead(["compute", "train/", "--cache", "c"])
    'train/'
    >>> folder_to_walk_ahead(["compute", "--cache", "c", "train/"]) is None  # the command's
    True
    """
    if len(arguments) >= 2 and arguments[0] == "compute" and arguments[1] \
            and not arguments[1].startswith("-"):
        return arguments[1]
    return None


#: New container objects between two collections of the youngest generation in a
#: ``normstats`` process (`run`); the interpreter's default is 700.
GC_YOUNG_THRESHOLD = 100_000


def run() -> None:
    """The ``normstats`` command (console script and ``python -m normstats``).

    The process ends with the command (`end_process`: the interpreter's exit without its
    teardown of every module and object), so code after ``run()`` never runs: a program
    that watches the command from inside its process registers an `atexit` handler first.
    Where the process must end the usual way, its objects are frozen first: the
    interpreter's last garbage collection at exit then skips them (~15 ms of every run on a
    folder, where the ceiling a run is measured against pays ~10 ms to exit). Library
    callers and tests call `main`, which leaves the collector and the process alone.

    numpy's BLAS runs on one thread in this process (unless ``OPENBLAS_NUM_THREADS`` is
    set): the command's parallelism is its workers, each with one BLAS thread
    (`normstats.engine.process_pool`), and OpenBLAS otherwise starts a thread per core as
    numpy loads, which spins for ~0.1 s beside the run (~50 ms of CPU taken from the walk
    or the decoding workers). It must be set before numpy loads, so here.

    A folder given to ``compute`` is walked in a forked child while this process loads
    click, numpy and normstats (`normstats.sources.walk_ahead`): the listing, a ``stat`` a
    file, no longer waits for the imports, nor they for it. The child starts before click
    loads (`folder_to_walk_ahead`), ~30 ms sooner than the command itself could start it:
    a warm re-run of 100,000 files took 0.318 s against 0.347 (medians of 15, alternated).
    A walk the command did not take is stopped when it ends.

    The collector runs every `GC_YOUNG_THRESHOLD` new container objects, not every 700:
    loading numpy and normstats makes ~10⁵ objects that all live as long as the process
    (every module's functions, classes and constants), and the default threshold had the
    collector walk them ~70 times, ~11 ms of a warm re-run's ~0.3 s. Cyclic garbage is
    still collected (after that many allocations); the decoding workers, forked from this
    process, collect on the same threshold.
    """
    import gc

    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    folder = folder_to_walk_ahead(sys.argv[1:])
    if folder is not None:
        from normstats.sources import walk_ahead

        walk_ahead.start(folder)
    try:
        from normstats_cli import commands  # inside: Ctrl-C as it loads stops the walk too

        commands.walk_ahead_allowed = True
        commands.main()
    except SystemExit as done:  # how every command ends (click's standalone mode)
        _stop_walks_ahead()
        end_process(done.code)
        raise
    finally:
        _stop_walks_ahead()
        gc.freeze()


def _stop_walks_ahead() -> None:
    """Stop the walks nobody took (``compute FOLDER --help``, an error in the options)."""
    walk_ahead = sys.modules.get("normstats.sources.walk_ahead")
    if walk_ahead is not None:
        walk_ahead.discard()


def end_process(code: object) -> None:
    """End the command's process as the interpreter would, without its teardown.

    What Python does at exit, in its order: it waits for the threads that are not daemons,
    runs the `atexit` handlers (logging's flush, multiprocessing's, a caller's own), flushes
    ``sys.stdout`` and ``sys.stderr``, and then frees every module and object one by one:
    ~8 ms of a ``normstats compute`` process after numpy and normstats loaded (1.5% of a
    run on 20,000 small PNGs), for memory the kernel takes back at once anyway. This does
    the first three and ends the process with ``os._exit(code)``.

    It returns without ending anything (and the interpreter exits the usual way) whenever
    that would not be the same: a thread that is not a daemon still runs (normstats' own
    idle task threads are stopped first, as the next run would start them), the code is not
    an exit status (a message), it is not called from the main thread, or a stream cannot
    be flushed (a closed pipe: Python's own exit reports it).

    Examples
    --------
    >>> end_process("a message, not a status")  # returns: the usual exit prints it
    """
    import threading

    task_threads = sys.modules.get("normstats.engine.task_threads")
    if task_threads is not None:  # normstats' own idle pools, kept for the next run
        task_threads.stop_idle()
    status = 0 if code is None else code
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    main_thread = threading.main_thread()
    if not isinstance(status, int) or run_exit_handlers is None or \
            threading.current_thread() is not main_thread or \
            any(t is not main_thread and not t.daemon and t.is_alive()
                for t in threading.enumerate()):
        return
    run_exit_handlers()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(status)
