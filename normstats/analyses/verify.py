"""Published constants against computed ones: PASS/FAIL, and which variant a number really is.

For each reference of a manifest, every published number is compared with the
variant it claims (PASS when all are within the reference's tolerance) and with
every computed variant of its channel, naming the closest. That is how the CIFAR-10
std 0.2023 is shown to be the averaged per-image sample std, not the pooled 0.2470.
"""

from __future__ import annotations

from dataclasses import dataclass

from normstats.analyses.manifests import Manifest, Reference
from normstats.errors import numbered
from normstats.maths.scale import default_scale
from normstats.results.stats import DatasetStats
from normstats.results.text_report import render_skipped

__all__ = ["NumberCheck", "ReferenceCheck", "Verification", "check_reference", "verify_stats",
           "render_verification", "MATCHABLE"]

#: The computed quantities a published number is matched against.
MATCHABLE = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
             "rms_per_image_std")


@dataclass(frozen=True)
class NumberCheck:
    """One published number: the variant it claims, and the variant it is closest to."""

    claimed: str
    channel: str
    published: float
    computed: float
    passed: bool
    best: str
    best_value: float

    @property
    def diff(self) -> float:
        return self.published - self.computed

    @property
    def best_diff(self) -> float:
        return self.published - self.best_value


@dataclass(frozen=True)
class ReferenceCheck:
    """The verdict on one reference: its numbers, or why they could not be compared."""

    reference: Reference
    numbers: tuple[NumberCheck, ...]
    problem: str = ""

    @property
    def passed(self) -> bool:
        return not self.problem and all(n.passed for n in self.numbers)


@dataclass(frozen=True)
class Verification:
    """Everything `normstats verify` reports for one manifest."""

    manifest: Manifest
    stats: DatasetStats
    checks: tuple[ReferenceCheck, ...]
    count_problem: str = ""
    checksums: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """The verdict: checksums (checked before), the image count and every reference
        that decides; informational references are shown but never fail a copy."""
        return not self.count_problem and all(c.passed for c in self.deciding)

    @property
    def deciding(self) -> tuple[ReferenceCheck, ...]:
        return tuple(c for c in self.checks if c.reference.decides)


def _in_reference_units(stats: DatasetStats, reference: Reference) -> float:
    """Factor taking a reported value to the reference's units ([0, 1] or [0, 255] ...)."""
    return stats.scale / default_scale(stats.dtype) * reference.scale


def check_reference(stats: DatasetStats, reference: Reference) -> ReferenceCheck:
    """Compare every number of ``reference`` with ``stats``.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> stats = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
    >>> ref = Reference("toy", "here", {"mean": (0.5,), "std": (0.0,)})
    >>> check = check_reference(stats, ref)
    >>> check.passed, [(n.claimed, n.passed, n.best) for n in check.numbers]
    (False, [('mean', True, 'mean'), ('std', False, 'per_image_std')])
    """
    factor = _in_reference_units(stats, reference)
    numbers = []
    for claimed, values in reference.values.items():
        if len(values) != len(stats.channels):
            return ReferenceCheck(reference, (), f"{claimed} has {len(values)} values for "
                                                 f"{numbered(len(stats.channels), 'channel')}")
        computed = getattr(stats, claimed)
        if computed is None:
            return ReferenceCheck(reference, (), f"{claimed} is not defined for this data")
        for index, published in enumerate(values):
            value = computed[index] * factor
            best, best_value = _closest(stats, index, factor, published, claimed)
            numbers.append(NumberCheck(claimed, stats.channels[index], published, value,
                                       abs(published - value) <= reference.tolerance,
                                       best, best_value))
    return ReferenceCheck(reference, tuple(numbers))


def _closest(stats: DatasetStats, index: int, factor: float, published: float,
             claimed: str) -> tuple[str, float]:
    candidates = [(name, getattr(stats, name)[index] * factor)
                  for name in dict.fromkeys((claimed, *MATCHABLE))
                  if getattr(stats, name) is not None]
    # the claimed variant wins ties (std and std_ddof1 agree to ~1e-8 on real datasets)
    return min(candidates, key=lambda c: (abs(published - c[1]), c[0] != claimed))


def verify_stats(stats: DatasetStats, manifest: Manifest,
                 checksums: tuple[str, ...] = ()) -> Verification:
    """Check every reference of ``manifest`` and its expected image count against ``stats``."""
    expected = manifest.source.images
    problem = ""
    if expected is not None and expected != stats.images:
        problem = (f"the manifest expects {expected:,} images; {stats.images:,} were "
                   f"computed ({len(stats.skipped)} skipped)")
    checks = tuple(check_reference(stats, r) for r in manifest.references)
    return Verification(manifest, stats, checks, problem, checksums)


def render_verification(result: Verification) -> str:
    """The plain-text report of `normstats verify`."""
    stats, manifest = result.stats, result.manifest
    lines = [f"verify {manifest.name} ({manifest.dataset} {manifest.split}): {stats.source}",
             f"  {stats.images:,} images, channels {', '.join(stats.channels)}, {stats.dtype}, "
             f"mode {stats.mode}"]
    matched = [line for line in result.checksums if line.endswith(" ok")]
    if matched:
        lines.append(f"  checksums: {numbered(len(matched), 'file')} "
                     f"{'matches' if len(matched) == 1 else 'match'}")
    lines += [f"  {line}" for line in result.checksums if not line.endswith(" ok")]
    lines.append(f"  images: {result.count_problem}  FAIL" if result.count_problem
                 else "  images: count as expected" if manifest.source.images else "")
    lines += [f"  {line}" for line in render_skipped(stats)]
    for check in result.checks:
        lines += [""] + _render_check(check)
    verdict = "PASS" if result.passed else "FAIL"
    deciding = result.deciding
    failed = sum(not c.passed for c in deciding)
    passing = len(deciding) - failed
    summary = (f"{passing} of {numbered(len(deciding), 'reference')} of this split "
               f"{'passes' if passing == 1 else 'pass'}"
               if deciding else "no published constants of this split to compare; checksums "
                                "and the image count decide" if all(
                   line.endswith(" ok") for line in result.checksums)
               else "no published constants of this split to compare; the image count decides "
                    "(see the checksum line above)")
    informational = len(result.checks) - len(deciding)
    if informational:
        summary += f"; {numbered(informational, 'informational reference')} shown, not deciding"
    lines += ["", f"{verdict}: {summary}"]
    return "\n".join(line for line in lines if line is not None)


def _render_check(check: ReferenceCheck) -> list[str]:
    ref = check.reference
    verdict = ("PASS" if check.passed else "FAIL") if ref.decides else \
        ("info (matches)" if check.passed else "info (differs)")
    head = [f"{verdict}  {ref.label}  (scale {ref.scale:g}, tolerance {ref.tolerance:g})",
            f"      source: {ref.source}"]
    if ref.note:
        head.append(f"      note: {ref.note}")
    if check.problem:
        return head + [f"      cannot compare: {check.problem}"]
    rows = [f"      {'claims':<20} {'ch':<3} {'published':>11} {'computed':>11} "
            f"{'diff':>10}       best match (diff)"]
    for n in check.numbers:
        mark = "ok  " if n.passed else "FAIL"
        rows.append(f"      {n.claimed:<20} {n.channel:<3} {n.published:>11.8g} "
                    f"{n.computed:>11.8g} {n.diff:>+10.2e} {mark}  {n.best} "
                    f"{n.best_value:.8g} ({n.best_diff:+.2e})")
    return head + rows
