"""``--scheduler``: the same option, with the same meaning, on every command that computes.

Three ways to run ``normstats compute``, chosen by options that never change meaning (each
is the argument of `normstats.compute` of the same name, which checks how they combine):

- default: the local scheduler of the core engine; ``--workers N`` sizes its pool;
- ``--scheduler ADDRESS`` (``tcp://host:8786`` or a scheduler JSON file): an existing
  cluster, whose workers decide the parallelism (``--workers`` is refused there);
- ``--local-cluster [--workers N] [--threads-per-worker T]``: a throw-away
  ``distributed.LocalCluster`` of N worker processes (for trying the cluster path,
  and its dashboard, on one machine; the local default is faster on one machine).
"""

from __future__ import annotations

import os

import click

__all__ = ["scheduler_option", "LOCAL_SCHEDULERS"]

LOCAL_SCHEDULERS = ("sync", "threads", "processes")


def _parse_scheduler(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return value
    if value.lower() in LOCAL_SCHEDULERS:
        return value.lower()
    from normstats.engine.cluster import is_distributed  # an address: not for the default

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
