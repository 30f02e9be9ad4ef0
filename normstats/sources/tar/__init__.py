"""Tar shards (WebDataset layout, plain or gzip-compressed): headers, guards, the reader.

`headers` parses ustar/pax/GNU headers from bytes, `guards` refuses what a forged archive
could use to steer memory or time, `reader` lists the image members and decodes them.
"""
