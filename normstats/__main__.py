"""``python -m normstats``: the same command line as ``normstats``."""

from normstats_cli import run

if __name__ == "__main__":
    run()
