"""``python -m normstats``: the same command line as ``normstats``."""

from normstats_cli import main

if __name__ == "__main__":
    main()
