"""The engine: runs sources, Dask arrays and the record cache to one `DatasetStats`.

Takes a source (a folder, arrays, packed formats, any iterable) and gives the exact
`Summary` of its per-image records: `compute` is the one library call; `pipeline` runs
source tasks on a local executor (`local_run`: this process, threads or a fork pool) or on
a `distributed` cluster; Dask arrays are reduced on their own graph (`dask_reduce`); the
record cache (`cache`, `cache_plan`, `cache_run`, entered through `source_run` only when
a cache is used) decides what is reused and
commits new records crash-safely; `progress` draws the progress bar.
"""
