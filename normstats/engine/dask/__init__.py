"""Dask arrays in and out: readers as Dask arrays, and the exact reduction as Dask's own.

`reduce` holds the chunk, combine and aggregate steps of one `dask.array.reduction`;
`lazy` builds that reduction as a lazy Dask object (`normstats.reduce_lazy`); `images`
gives any source as a Dask array that carries its provenance; `records` gives per-image
records as Dask arrays that any subset of can be reduced exactly.
"""
