"""Running a source: straight through the pipeline, or through the record cache.

Only a folder (local or behind a URL) with a cache asked for goes through the cache
(`normstats.engine.cache.run`, imported then): a run without one loads none of the cache's
modules.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from normstats.engine.cache.location import resolve_cache_dir
from normstats.engine.pipeline import RunOutcome, run
from normstats.sources.folder import FolderSource
from normstats.sources.remote import RemoteFolderSource, is_url

if TYPE_CHECKING:  # the cache's modules load only for a cached run
    from normstats.engine.cache.run import EarlyOpening

log = logging.getLogger("normstats.engine.cache")

__all__ = ["RunOutcome", "run_source"]


def run_source(source: Any, *, cache: str | os.PathLike | bool | None = None,
               early: EarlyOpening | None = None, **options: Any) -> RunOutcome:
    """Run ``source`` through the pipeline, through the cache when it is a folder (on disk
    or behind a URL).

    ``options`` are those of `normstats.engine.pipeline.run` (and ``verify_cache`` of
    `normstats.engine.cache.run.run_cached`); ``early``, the cache group
    `normstats.engine.cache.run.opening_early` opened while the folder was walked. Sources
    other than folders are never cached (arrays are already records away from their
    statistics); for shards and Parquet files behind a URL, a cache asked for is said not
    to apply (one line on stderr).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> run_source(open_source(np.zeros((3, 2, 2, 1), np.uint8)), cache=False).summary.images
    3
    """
    cache_dir = resolve_cache_dir(cache)
    if cache_dir is not None and not isinstance(source, FolderSource | RemoteFolderSource):
        if is_url(getattr(source, "description", "")):  # re-reading costs a transfer: say so
            log.warning("normstats: %s: the record cache keeps folders of image files; these "
                        "are read again on every run", source.description)
        cache_dir = None
    if cache_dir is None:
        if early is not None:  # a group no run takes: its thread ends before a pool forks
            early.close()
        options.pop("verify_cache", None)  # nothing cached, nothing to verify
        return RunOutcome(run(source, **options))
    from normstats.engine.cache.run import run_cached

    return run_cached(source, cache_dir, early=early, **options)
