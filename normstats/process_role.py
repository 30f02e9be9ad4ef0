"""Whether this process is normstats' own (the command line) or a library caller's.

A library call must leave its caller's process as it found it; the command line's
process belongs to normstats, which may then take shortcuts that would change a caller's
state (see `normstats.maths.fused`). Importing this module costs nothing, so the command
line sets it before any heavy import.
"""

from __future__ import annotations

__all__ = ["OWN_PROCESS"]

#: True in the ``normstats`` command's process, False in a library caller's.
OWN_PROCESS = False
