"""What a run finds beside the constants: an estimate's half-widths, an outlier report.

Plain values: exact fields, their properties, and their dicts (what ``--json`` holds)
round-tripping to equal objects.
"""

from __future__ import annotations

import json

import pytest

from normstats.results.findings import Estimate, Outlier, OutlierReport


def test_an_estimate_s_widest_half_width_and_whether_it_is_exact() -> None:
    estimate = Estimate({"mean": (0.25, 0.5), "std": (0.75, 0.125)}, sampled=10,
                        population=100, seed=3)
    assert estimate.max_half_width == 0.75
    assert Estimate({"mean": (0.0, -1.0)}, 1, 2).max_half_width == 0.0
    assert (estimate.seed, estimate.level, estimate.requested) == (3, 0.95, None)
    assert not estimate.exact
    assert Estimate({}, sampled=100, population=100).exact
    assert Estimate({}, sampled=101, population=100).exact
    assert not Estimate({}, sampled=99, population=100).exact


def test_an_estimate_s_dict_holds_every_field_and_comes_back_equal() -> None:
    estimate = Estimate({"mean": (0.25, 0.5), "std": (0.75,)}, sampled=10, population=100,
                        seed=3, level=0.9, requested=500)
    data = estimate.to_dict()
    assert data == {"sampled": 10, "population": 100, "seed": 3, "level": 0.9,
                    "requested": 500, "half_width": {"mean": [0.25, 0.5], "std": [0.75]}}
    again = Estimate.from_dict(json.loads(json.dumps(data)))
    assert again == estimate and again.half_width["mean"] == (0.25, 0.5)
    assert type(again.half_width["std"]) is tuple
    short = Estimate.from_dict({"half_width": {"mean": [0.1]}, "sampled": 4, "population": 9})
    assert short == Estimate({"mean": (0.1,)}, 4, 9, None, 0.95, None)


def test_an_outlier_s_dict_leaves_its_severity_out() -> None:
    outlier = Outlier("a/1.png", ("blank: every pixel is 0", "x"), (0.0, 0.5), (0.0, 0.25),
                      severity=7.5)
    assert outlier.to_dict() == {"path": "a/1.png", "reasons": ["blank: every pixel is 0", "x"],
                                 "mean": [0.0, 0.5], "std": [0.0, 0.25]}
    again = Outlier.from_dict(json.loads(json.dumps(outlier.to_dict())))
    assert again == outlier and again.severity == 0.0
    assert (type(again.reasons), type(again.mean), type(again.std)) == (tuple, tuple, tuple)
    assert again == Outlier("a/1.png", ("blank: every pixel is 0", "x"), (0.0, 0.5),
                            (0.0, 0.25), severity=1.0)
    assert again != Outlier("a/1.png", ("x",), (0.0, 0.5), (0.0, 0.25))


def test_a_report_iterates_its_images_and_round_trips() -> None:
    images = (Outlier("a.png", ("blank",), (0.0,), (0.0,)),
              Outlier("b.png", ("mean high (z = +6.0)",), (0.9,), (0.1,)))
    report = OutlierReport(images, 5.0, "grayscale check off: why")
    assert list(report) == list(images) and len(report) == 2
    assert len(OutlierReport((), 5.0)) == 0 and list(OutlierReport((), 5.0)) == []
    data = report.to_dict()
    assert data == {"threshold": 5.0, "note": "grayscale check off: why",
                    "images": [o.to_dict() for o in images]}
    again = OutlierReport.from_dict(json.loads(json.dumps(data)))
    assert again == report and type(again.images) is tuple
    assert OutlierReport.from_dict({"images": [], "threshold": 2.5}) == \
        OutlierReport((), 2.5, None)
    with pytest.raises(KeyError):
        OutlierReport.from_dict({"images": []})
