"""Command-line options that put ``normstats compute`` on a ``dask.distributed`` cluster.

Three ways to run, chosen by options that never change meaning:

- default: the local scheduler of the core engine; ``--workers N`` sizes its pool;
- ``--scheduler ADDRESS`` (``tcp://host:8786`` or a scheduler JSON file): an existing
  cluster, whose workers decide the parallelism (``--workers`` is refused there);
- ``--local-cluster [--workers N] [--threads-per-worker T]``: a throw-away
  ``distributed.LocalCluster`` of N worker processes (for trying the cluster path,
  and its dashboard, on one machine; the local default is faster on one machine).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import click

__all__ = ["scheduler_option", "cluster_options", "LOCAL_SCHEDULERS"]

LOCAL_SCHEDULERS = ("sync", "threads", "processes")


def _parse_scheduler(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from normstats.engine.cluster import is_distributed

    if value is None:
        return value
    if value.lower() in LOCAL_SCHEDULERS:
        return value.lower()
    if value.endswith(".json") and not os.path.exists(value):
        raise click.BadParameter(f"scheduler file {value} does not exist")
    if is_distributed(value):
        return value
    raise click.BadParameter(f"{value!r} is none of {', '.join(LOCAL_SCHEDULERS)}, a scheduler "
                             "address (tcp://host:8786) or a scheduler file (.json)")


scheduler_option = click.option(
    "--scheduler", default=None, metavar="NAME|ADDRESS", callback=_parse_scheduler,
    help="Local Dask scheduler: sync, threads or processes (default: processes for folders, "
         "threads for arrays); or a running dask.distributed scheduler: tcp://host:8786 or a "
         "scheduler file (.json). See docs/distributed.md.")


def cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--local-cluster`` and ``--threads-per-worker``; run the command on that cluster."""
    @click.option("--local-cluster", is_flag=True,
                  help="Start a dask.distributed cluster of --workers processes on this "
                       "machine for the run (default: the faster local scheduler).")
    @click.option("--threads-per-worker", type=click.IntRange(min=1), default=None,
                  help="Threads per worker process of --local-cluster (default 1).")
    @functools.wraps(command)
    def wrapper(*args: Any, local_cluster: bool, threads_per_worker: int | None,
                **options: Any) -> Any:
        _check_combination(local_cluster, threads_per_worker, options)
        if not local_cluster:
            return command(*args, **options)
        from normstats.engine.cluster import local_cluster as start
        from normstats.engine.pipeline import default_workers

        workers = options.pop("workers", None) or default_workers()
        with start(workers, threads_per_worker or 1) as client:
            return command(*args, scheduler=client, workers=None,
                           **{k: v for k, v in options.items() if k != "scheduler"})
    return wrapper


def _check_combination(local_cluster: bool, threads: int | None, options: dict) -> None:
    scheduler = options.get("scheduler")
    remote = scheduler is not None and scheduler not in LOCAL_SCHEDULERS
    if threads is not None and not local_cluster:
        raise click.UsageError("--threads-per-worker needs --local-cluster")
    if local_cluster and scheduler is not None:
        raise click.UsageError("--local-cluster starts its own scheduler; drop --scheduler")
    if remote and options.get("workers") is not None:
        raise click.UsageError("--workers sizes a local pool or --local-cluster; with "
                               "--scheduler ADDRESS the cluster's workers decide")
