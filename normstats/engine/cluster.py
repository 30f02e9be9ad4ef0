"""Connecting to a ``dask.distributed`` cluster: a scheduler address or file, a client,
or a throw-away local cluster; and the worker settings that matter for decoding speed.

`dask.distributed` is imported only here and only when a cluster is used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from normstats.errors import NormstatsError

__all__ = ["is_distributed", "default_client", "connect", "local_cluster", "wait_for_threads",
           "warn_about_malloc_trim", "MALLOC_TRIM", "CONNECT_TIMEOUT"]

log = logging.getLogger("normstats.engine.distributed")

#: dask's nannies set this to 65536 in their workers; glibc then stops adapting its mmap
#: threshold, every decoded image (> 128 kB) is a fresh mmap, and decoding runs at half
#: speed (measured: 3,346 vs 5,757 256² JPEGs/s on two workers). See docs/distributed.md.
MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
#: Seconds to wait for a scheduler to answer, and for a first worker to join it.
CONNECT_TIMEOUT = 20
_ADDRESS = re.compile(r"^([a-z]+://.+|[\w.-]+:\d+)$")
#: A TCP address, the only kind whose service `_what_answered` asks what it is.
_TCP_ADDRESS = re.compile(r"^(?:tcp://)?\[?([\w.:-]+?)\]?:(\d+)/?$")
#: Seconds, and bytes, to wait for and read from a service that failed Dask's handshake.
_PROBE_SECONDS, _PROBE_BYTES = 2, 48
#: A scheduler's handshake starts with its length (8 bytes, little-endian), a few hundred.
_PROBE_FRAME = 1 << 20


def _distributed() -> Any:
    """The ``distributed`` package, or a one-line error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise NormstatsError("running on a Dask cluster needs dask.distributed: "
                             "pip install 'normstats[distributed]'") from None
    return distributed


def is_distributed(scheduler: Any) -> bool:
    """True for what names a cluster: an address, a scheduler file, a client or cluster.

    Examples
    --------
    >>> is_distributed("tcp://127.0.0.1:8786"), is_distributed("processes")
    (True, False)
    """
    if isinstance(scheduler, str):
        return bool(_ADDRESS.match(scheduler)) or scheduler.endswith(".json")
    return hasattr(scheduler, "scheduler_address") or (
        hasattr(scheduler, "submit") and hasattr(scheduler, "scheduler_info"))


def default_client() -> Any:
    """The ``distributed.Client`` Dask computes on when no scheduler is named (one made
    the default, as ``Client()`` does), or None; ``distributed`` is not imported for it.

    Examples
    --------
    >>> default_client() is None
    True
    """
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        return distributed.default_client()
    except ValueError:  # no client, or none made the default
        return None


@contextlib.contextmanager
def connect(scheduler: Any) -> Iterator[Any]:
    """A client for ``scheduler``: a `distributed.Client` (used as is and left open),
    an address, a scheduler JSON file or a cluster object (connected, then closed).

    The client is never made the process's default, so later ``dask.compute`` calls of
    the caller keep their own scheduler.
    """
    Client = _distributed().Client  # noqa: N806 - the class, imported late

    if isinstance(scheduler, Client):
        yield scheduler
        return
    try:
        if isinstance(scheduler, str) and scheduler.endswith(".json"):
            client = Client(scheduler_file=scheduler, timeout=CONNECT_TIMEOUT,
                            set_as_default=False)
        else:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except Exception as error:  # noqa: BLE001 - whatever the handshake met, said in one line
        # a service that is not Dask's can send anything: garbage read as a frame length
        # makes the client allocate exabytes (MemoryError), or fail to unpack (ValueError)
        raise NormstatsError(_connect_failure(scheduler, error)) from None
    try:
        yield client
    finally:
        client.close()


def _connect_failure(scheduler: Any, error: Exception) -> str:
    """Why the client could not connect, with what the service at the address said."""
    answered = _what_answered(scheduler) if isinstance(scheduler, str) else None
    if answered is None:
        detail = str(error) or type(error).__name__
        return f"{scheduler}: cannot connect to the Dask scheduler: {detail}"
    return (f"cannot talk to a Dask scheduler at {scheduler}: the service there {answered}, "
            "which is not a Dask scheduler's handshake; check the address (a scheduler "
            "listens on port 8786 unless told otherwise)")


def _what_answered(address: str) -> str | None:
    """What a TCP service sends first, in words; None when nothing answers (refused,
    silent, or not a TCP address): then the client's own error says more.

    Examples
    --------
    >>> _what_answered("ucx://host:8786") is None
    True
    """
    match = _TCP_ADDRESS.match(address)
    if match is None:
        return None
    import socket  # only to name what answered a cluster address (a run imports it rarely)

    try:
        with socket.create_connection((match.group(1), int(match.group(2))),
                                      timeout=_PROBE_SECONDS) as connection:
            first = connection.recv(_PROBE_BYTES)
    except ConnectionResetError:
        return "reset the connection without a word"
    except OSError:  # refused, unreachable, or silent (timeout)
        return None
    if not first:
        return "closed the connection without a word"
    if len(first) >= 8 and int.from_bytes(first[:8], "little") < _PROBE_FRAME:
        return None  # the length of a Dask frame: a scheduler, failing for its own reason
    return f"sent {first!r}"


@contextlib.contextmanager
def local_cluster(workers: int, threads_per_worker: int = 1) -> Iterator[Any]:
    """A client of a throw-away cluster of ``workers`` processes on this machine.

    Examples
    --------
    >>> with local_cluster(1) as client:                       # doctest: +SKIP
    ...     normstats.compute("data/train", scheduler=client)
    """
    if workers < 1 or threads_per_worker < 1:
        raise NormstatsError("a local cluster needs at least one worker and one thread each")
    import dask

    module = _distributed()
    with dask.config.set({f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None}):
        cluster = module.LocalCluster(
            n_workers=workers, threads_per_worker=threads_per_worker, processes=True,
            host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
    with cluster, module.Client(cluster, set_as_default=False) as client:
        yield client


def wait_for_threads(client: Any) -> int:
    try:
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except TimeoutError:
        raise NormstatsError(f"no Dask worker joined the scheduler {client.scheduler.address} "
                             f"within {CONNECT_TIMEOUT} s; start workers with "
                             "'dask worker ADDRESS'") from None
    return sum(client.nthreads().values())


def _malloc_trim_setting() -> str | None:
    return os.environ.get(MALLOC_TRIM)


def warn_about_malloc_trim(client: Any) -> None:
    """Say once per run when workers run with dask's malloc setting, which slows decoding."""
    settings = set(client.run(_malloc_trim_setting).values()) - {None}
    if settings:
        log.warning("normstats: the Dask workers run with %s=%s, which slows the decoding of "
                    "images Pillow decodes; start them with it unset (docs/distributed.md)",
                    MALLOC_TRIM, ",".join(sorted(settings)))
