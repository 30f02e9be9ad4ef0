"""What every fuzz target of tests/fuzz shares: its budget and its saved regression inputs.

A target is a hypothesis test over the bytes a parser of untrusted input reads (a pickle
stream, a tar header, an IDX or npy header, a manifest). The suite runs each for a short,
derandomized budget (the same cases every run); a longer search is the documented command
in docs/testing.md::

    NORMSTATS_FUZZ_EXAMPLES=20000 NORMSTATS_FUZZ_RANDOM=1 python -m pytest tests/fuzz

An input that once crashed, hung or misled a parser is saved as a file under
``tests/fuzz/regressions/<target>/`` and replayed by `regression_inputs` on every run.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

__all__ = ["fuzz_settings", "regression_inputs", "REGRESSIONS"]

REGRESSIONS = Path(__file__).parent / "regressions"


def fuzz_settings(examples: int = 300) -> settings:
    """Hypothesis settings of a fuzz target: ``examples`` cases in the suite (derandomized),
    ``$NORMSTATS_FUZZ_EXAMPLES`` of them (random unless told otherwise) for a long search.
    """
    long_run = os.environ.get("NORMSTATS_FUZZ_EXAMPLES")
    return settings(
        max_examples=int(long_run) if long_run else examples,
        derandomize=not os.environ.get("NORMSTATS_FUZZ_RANDOM"),
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.filter_too_much],
    )


def regression_inputs(target: str) -> list[Path]:
    """The saved inputs of ``target`` (files under ``regressions/<target>/``), sorted."""
    folder = REGRESSIONS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
