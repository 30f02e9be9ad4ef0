"""Test-only ``dask worker --preload``: decoding a file named ``POISON*`` kills the worker.

Loaded only by the test cluster of ``tests/distributed_cluster.py`` (and inert unless
``NORMSTATS_TEST_POISON=1`` is set in the worker's environment), it stands in for a
decoder that segfaults or an image that exhausts the worker's memory. Being a preload,
it is installed again in every worker process the nanny restarts, so the file crashes
its worker every time. Nothing in the package refers to it.
"""

from __future__ import annotations

import os

from normstats.sources import folder, remote
from normstats.sources.decoding import decode

_real_decode_bytes = decode.decode_bytes


def _poisoned_decode_bytes(data: bytes, name: str, policy: decode.DecodePolicy, *rest):
    if os.path.basename(name).startswith("POISON"):
        os._exit(13)  # no exception, no cleanup: the process is simply gone
    return _real_decode_bytes(data, name, policy, *rest)


def dask_setup(worker) -> None:  # noqa: ANN001 - the preload protocol of distributed
    if os.environ.get("NORMSTATS_TEST_POISON") == "1":
        decode.decode_bytes = _poisoned_decode_bytes  # used by decode_file (local folders)
        remote.decode_bytes = _poisoned_decode_bytes  # used by fsspec folders
        # folder tasks decode every file through decode_file, as other decoding tasks do
        folder.FolderTask.run = folder.DecodingTask.run
