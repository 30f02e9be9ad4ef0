"""The engine: runs sources, Dask arrays and the record cache to one `DatasetStats`.

Takes a source (a folder, arrays, packed formats, any iterable) and gives the exact
`Summary` of its per-image records: `compute` (`compute_stats`) is the exact run behind
`normstats.compute`; `pipeline` runs
source tasks on a local executor (`local_run`: this process, threads kept from run to run
(`task_threads`) or a fork pool) or on
a `distributed` cluster; Dask arrays are reduced on their own graph (the `dask` package:
the steps of one `dask.array.reduction`, that reduction as a lazy Dask object, readers as
Dask arrays that carry their provenance); the record cache (the `cache` package, entered
through `source_run` only when a cache is used) decides what is reused and commits new
records crash-safely; `progress` draws the progress bar.
"""
