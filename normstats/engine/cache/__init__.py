"""The per-image record cache (zarr v3): decide, read, write, verify.

`plan` decides what the cache can answer (pure, no I/O); `store` reads and writes the
groups of a cache directory; `segment` is one committed segment on disk; `groups` finds
normstats' groups; `location` says where the cache lives; `lock` is the writer's lock;
`run` runs a folder through the cache crash-safely; `verify` decodes cached files again.
See ``docs/cache.md``.
"""
