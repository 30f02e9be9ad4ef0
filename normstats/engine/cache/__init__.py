"""The per-image record cache (zarr v3): decide, read, write, verify.

`plan` decides what the cache can answer (pure, no I/O); `store` reads and writes the
groups of a cache directory; `segment` is one committed segment on disk; `zarr_chunks`
writes and reads its arrays' files (zarr v3, without importing zarr); `listed_segment`
writes a segment of listed files' records one array at a time; `writer` commits a run's
records as they arrive; `groups` finds normstats' groups; `location` says where the cache
lives; `lock` is the writer's lock; `run` runs a folder through the cache crash-safely;
`verify` decodes cached files again.
See ``docs/cache.md``.
"""
