"""The engine: runs sources through Dask and the record cache to one `DatasetStats`.

Takes a source (a folder, arrays, packed formats, any iterable) and gives the exact
`Summary` of its per-image records: `compute` is the one library call; `pipeline` maps
source tasks onto a Dask graph (threads or a fork pool locally, `distributed` for a
cluster); the record cache (`cache`, `cache_plan`, `cache_run`) decides what is reused and
commits new records crash-safely; `progress` draws the progress bar.
"""
