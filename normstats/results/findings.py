"""What a run finds beside the constants, when asked: a sample's intervals, unusual images.

`DatasetStats` carries them (``stats.estimate``, ``stats.outliers``) so a result says how
it was obtained and what stood out, and its JSON (`DatasetStats.to_json`) holds them too.
Plain values: the estimators are `normstats.analyses.sampling`, the outlier rules
`normstats.analyses.record_reports`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Estimate", "Outlier", "OutlierReport"]


@dataclass(frozen=True)
class Estimate:
    """How a result was sampled, and the 95% half-widths of its statistics.

    Attributes
    ----------
    half_width : dict
        Per statistic (``mean``, ``std``, ``per_image_std``, ...; min and max have none),
        per-channel half-widths of the 95% confidence interval, in the reported scale.
    sampled, population : int
        Images in the sample and in the dataset.
    seed : int or None
        The seed of the draw, to reproduce it.
    level : float
        The confidence level of the intervals.
    requested : int or None
        The sample size asked for, when it was more than the dataset holds.

    Examples
    --------
    >>> e = Estimate({"mean": (0.01,)}, sampled=10, population=100, seed=3)
    >>> Estimate.from_dict(e.to_dict()) == e, e.max_half_width, e.exact
    (True, 0.01, False)
    """

    half_width: dict[str, tuple[float, ...]]
    sampled: int
    population: int
    seed: int | None = None
    level: float = 0.95
    requested: int | None = None

    @property
    def max_half_width(self) -> float:
        """The widest half-width of any statistic and channel."""
        return max(max(h) for h in self.half_width.values())

    @property
    def exact(self) -> bool:
        """True when the sample is the whole dataset: the values are its own."""
        return self.sampled >= self.population

    def to_dict(self) -> dict[str, Any]:
        return {"sampled": self.sampled, "population": self.population, "seed": self.seed,
                "level": self.level, "requested": self.requested,
                "half_width": {k: list(v) for k, v in self.half_width.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Estimate:
        return cls({k: tuple(v) for k, v in data["half_width"].items()}, data["sampled"],
                   data["population"], data.get("seed"), data.get("level", 0.95),
                   data.get("requested"))


@dataclass(frozen=True)
class Outlier:
    """One unusual image: why, and its per-channel mean and std in the reported scale."""

    path: str
    reasons: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    #: How unusual (the largest robust z-score; infinite for a blank image): the order of
    #: a report, not part of what the image is.
    severity: float = field(default=0.0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "reasons": list(self.reasons), "mean": list(self.mean),
                "std": list(self.std)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outlier:
        return cls(data["path"], tuple(data["reasons"]), tuple(data["mean"]),
                   tuple(data["std"]))


@dataclass(frozen=True)
class OutlierReport:
    """The unusual images of a dataset, most unusual first, and how they were found.

    Attributes
    ----------
    images : tuple of Outlier
        The images that stand out (iterating the report gives them).
    threshold : float
        The robust z-score beyond which a per-image mean or std stands out.
    note : str or None
        Why the grayscale check did not run, when it did not.

    Examples
    --------
    >>> report = OutlierReport((Outlier("a.png", ("blank",), (0.0,), (0.0,)),), 5.0)
    >>> [o.path for o in report], OutlierReport.from_dict(report.to_dict()) == report
    (['a.png'], True)
    """

    images: tuple[Outlier, ...]
    threshold: float
    note: str | None = None

    def __iter__(self) -> Iterator[Outlier]:
        return iter(self.images)

    def __len__(self) -> int:
        return len(self.images)

    def to_dict(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "note": self.note,
                "images": [o.to_dict() for o in self.images]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OutlierReport:
        return cls(tuple(Outlier.from_dict(o) for o in data["images"]), data["threshold"],
                   data.get("note"))
