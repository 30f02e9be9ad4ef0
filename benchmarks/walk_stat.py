"""The walk+stat floor as a whole process: list a tree and ``stat`` every file, nothing else.

    python benchmarks/walk_stat.py FOLDER [--import numpy,click]

Any tool that keys a cache on each file's size and modification time must at least list
the tree and stat every file; this process does only that, as cheaply as Python can (each
folder opened once, its entries' kinds from the listing, every file stat'ed relative to
the open folder, links followed), and prints the number of files. Only the standard
library is imported, unless ``--import`` names modules to import first: with
``numpy,click`` it is the least a command-line tool built on numpy and click does (a
warm re-run must add the records it reads, which takes numpy). A warm normstats re-run
is measured against both.
"""

from __future__ import annotations

import os
import sys


def walk_and_stat(root: str) -> int:
    """The number of files under ``root`` (folder links followed), each stat'ed once."""
    count, pending = 0, [root]
    while pending:
        folder = pending.pop()
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with os.scandir(descriptor) as entries:
                for entry in entries:
                    if entry.is_dir():
                        pending.append(os.path.join(folder, entry.name))
                    else:
                        os.stat(entry.name, dir_fd=descriptor)
                        count += 1
        finally:
            os.close(descriptor)
    return count


if __name__ == "__main__":
    if sys.argv[2:3] == ["--import"]:
        for module in sys.argv[3].split(","):
            __import__(module)
    print(walk_and_stat(sys.argv[1]))
