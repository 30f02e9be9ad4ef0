"""`normstats.compute` is the command line: every analysis of ``normstats compute`` is an
argument of the same name whose result gives the same numbers, bit for bit, as the flag
(the command prints ``stats.to_json()``), and contradictory arguments are refused alike."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import numbers
from PIL import Image

import normstats
from normstats.analyses.sampling import choose_images
from normstats.errors import InvalidOptionError
from normstats.results.stats import DatasetStats
from normstats_cli import main


@pytest.fixture
def array_file(tmp_path: Path, rng: np.random.Generator) -> str:
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (300, 5, 5, 3), dtype=np.uint8))
    return str(path)


@pytest.fixture
def classes(tmp_path: Path, rng: np.random.Generator) -> Path:
    """Two class folders and one image at the root; one blank image and one gray one."""
    root = tmp_path / "classes"
    for i in range(16):
        (root / f"class{i % 2}").mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(40 + 40 * (i % 2), 220, (6, 7, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / f"class{i % 2}" / f"{i}.png")
    Image.fromarray(np.zeros((6, 7, 3), np.uint8)).save(root / "class0" / "blank.png")
    Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8)).save(root / "top.png")
    return root


def _cli(*args: str) -> dict:
    result = CliRunner().invoke(main, ["compute", *args, "--json", "--workers", "1"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _same(cli: dict, stats: DatasetStats) -> None:
    """The command's JSON is the result's JSON: every number, bit for bit."""
    assert cli == json.loads(stats.to_json())


@pytest.mark.parametrize("flags, arguments", [
    (["--sample", "40", "--seed", "3"], {"sample": 40, "seed": 3}),
    (["--sample", "20", "--precision", "0.05", "--seed", "0"],
     {"sample": 20, "precision": 0.05, "seed": 0}),
    (["--precision", "0.2", "--seed", "7"], {"precision": 0.2, "seed": 7}),
    (["--sample", "500", "--seed", "1"], {"sample": 500, "seed": 1}),
], ids=["sample", "sample-precision", "precision", "more-than-all"])
def test_sample_seed_and_precision_are_the_flags(array_file, flags, arguments):
    stats = normstats.compute(array_file, workers=1, **arguments)
    _same(_cli(array_file, *flags), stats)
    assert stats.estimate.seed == arguments["seed"]


def test_a_sample_is_exactly_the_statistics_of_the_drawn_images(array_file):
    stats = normstats.compute(array_file, sample=40, seed=5, workers=1)
    chosen = choose_images(300, 40, np.random.default_rng(5))
    assert numbers(stats) == numbers(normstats.compute(np.load(array_file)[chosen]))
    low, high = stats.interval("mean")[0]
    assert low < stats.mean[0] < high and high - low == pytest.approx(
        2 * stats.estimate.half_width["mean"][0], abs=1e-15)


def test_percentiles_are_the_flag_and_numpy_s_exact_percentiles(array_file):
    stats = normstats.compute(array_file, percentiles=True, workers=1)
    _same(_cli(array_file, "--percentiles"), stats)
    pixels = np.load(array_file).reshape(-1, 3)
    assert stats.percentiles == {
        f"p{q:g}": tuple(float(np.percentile(pixels[:, c], q)) / 255 for c in range(3))
        for q in (0.5, 2, 98, 99.5)}
    assert stats == normstats.compute(array_file)  # the same constants


def test_by_folder_and_outliers_are_the_flags(classes):
    stats = normstats.compute(classes, by_folder=True, outliers=True, cache=False, workers=1)
    _same(_cli(str(classes), "--by-folder", "--outliers", "--no-cache"), stats)
    assert list(stats.by_folder) == [".", "class0", "class1"]
    for name in ("class0", "class1"):
        assert numbers(stats.by_folder[name]) == \
            numbers(normstats.compute(classes / name, cache=False, workers=1))
    assert [o.path for o in stats.outliers][0] == "class0/blank.png"
    assert stats.outliers.threshold == 5.0


def test_per_folder_statistics_come_from_the_cache_too(classes, tmp_path):
    cold = normstats.compute(classes, by_folder=True, cache=tmp_path / "cache", workers=1)
    warm = normstats.compute(classes, by_folder=True, cache=tmp_path / "cache", workers=1)
    assert warm.images_cached == warm.images and warm.images_decoded == 0
    assert {k: numbers(v) for k, v in warm.by_folder.items()} == \
        {k: numbers(v) for k, v in cold.by_folder.items()}


def test_percentiles_with_per_folder_statistics_in_one_decode(classes):
    """A pair the command line could not give before: both come from one pass."""
    both = normstats.compute(classes, percentiles=True, by_folder=True, cache=False, workers=1)
    _same(_cli(str(classes), "--percentiles", "--by-folder", "--no-cache"), both)
    alone = normstats.compute(classes, percentiles=True, cache=False, workers=1)
    assert both.percentiles == alone.percentiles
    assert {k: numbers(v) for k, v in both.by_folder.items()} == {k: numbers(v) for k, v in
        normstats.compute(classes, by_folder=True, cache=False, workers=1).by_folder.items()}


def test_what_a_result_carries_round_trips_through_its_json(classes):
    stats = normstats.compute(classes, percentiles=True, by_folder=True, outliers=True,
                              cache=False, workers=1)
    again = DatasetStats.from_json(stats.to_json())
    assert again.to_dict() == stats.to_dict() and again == stats
    assert again.outliers == stats.outliers and again.percentiles == stats.percentiles
    sampled = normstats.compute(classes, sample=5, seed=2, cache=False, workers=1)
    assert DatasetStats.from_json(sampled.to_json()).estimate == sampled.estimate
    plain = json.loads(normstats.compute(classes, cache=False, workers=1).to_json())
    assert [plain[k] for k in ("estimate", "percentiles", "by_folder", "outliers")] == [None] * 4


def test_on_result_still_sees_every_task_beside_the_analyses(classes):
    seen = []
    stats = normstats.compute(classes, by_folder=True, outliers=True, cache=False, workers=1,
                              on_result=lambda r: seen.append(len(r.records)))
    assert sum(seen) == stats.images
    seen.clear()
    sampled = normstats.compute(classes, sample=6, seed=0, workers=1,
                                on_result=lambda r: seen.append(len(r.records)))
    assert sum(seen) == sampled.images == 6


@pytest.mark.parametrize("arguments, message", [
    ({"sample": 5, "percentiles": True}, "--percentiles needs every pixel"),
    ({"precision": 0.1, "by_folder": True}, "--by-folder and --outliers need every image"),
    ({"seed": 3}, "--seed draws a sample"),
    ({"verify_cache": 2, "cache": False}, "--verify-cache checks the record cache"),
    ({"threads_per_worker": 2}, "--threads-per-worker needs --local-cluster"),
    ({"local_cluster": True, "scheduler": "threads"}, "drop --scheduler"),
    ({"workers": 2, "scheduler": "tcp://127.0.0.1:1"}, "the cluster's workers decide"),
])
def test_contradictions_are_refused_alike_in_python_and_on_the_command_line(
        array_file, arguments, message):
    with pytest.raises(InvalidOptionError, match=message):
        normstats.compute(array_file, **arguments)
    flags = []
    for name, value in arguments.items():
        flag = "--" + name.replace("_", "-")
        flags += [flag] if value is True else ["--no-cache"] if value is False else [flag,
                                                                                   str(value)]
    result = CliRunner().invoke(main, ["compute", array_file, *flags])
    assert result.exit_code == 2 and message in result.output


def test_per_image_reports_of_data_without_per_image_records_are_refused(rng):
    x = rng.integers(0, 256, (6, 3), dtype=np.uint8)  # vectors: features, not images
    with pytest.raises(InvalidOptionError, match="come from per-image records"):
        normstats.compute(x, by_folder=True)


@pytest.mark.slow
def test_local_cluster_is_the_flag(classes):
    stats = normstats.compute(classes, local_cluster=True, workers=1, threads_per_worker=1,
                              by_folder=True, cache=False)
    cli = CliRunner().invoke(main, ["compute", str(classes), "--local-cluster", "--workers",
                                    "1", "--threads-per-worker", "1", "--by-folder",
                                    "--no-cache", "--json"])
    assert cli.exit_code == 0, cli.output
    _same(json.loads(cli.stdout), stats)
    assert numbers(stats) == numbers(normstats.compute(classes, cache=False, workers=1))


# --- the argument checks and the small pieces of compute, called directly -----------------

SAMPLING = "not with --sample/--precision"


@pytest.mark.parametrize("arguments, message", [
    ({"sample": 5, "percentiles": True}, f"--percentiles needs every pixel: {SAMPLING}"),
    ({"precision": 0.1, "percentiles": True}, f"--percentiles needs every pixel: {SAMPLING}"),
    ({"sample": 5, "by_folder": True},
     f"--by-folder and --outliers need every image's record: {SAMPLING}"),
    ({"precision": 0.1, "outliers": True},
     f"--by-folder and --outliers need every image's record: {SAMPLING}"),
    ({"sample": 5, "mean_image": True}, f"--mean-image needs every image: {SAMPLING}"),
    ({"precision": 0.5, "covariance": True}, f"--covariance needs every image: {SAMPLING}"),
    ({"seed": 0}, "--seed draws a sample: give --sample or --precision with it"),
    *[(dict(verify_cache="all", **other),
       "--verify-cache checks the record cache of a plain compute: not with --sample, "
       "--precision, --percentiles, --mean-image or --no-cache")
      for other in ({"sample": 3}, {"precision": 0.1}, {"percentiles": True},
                    {"mean_image": True}, {"cache": False})],
    ({"threads_per_worker": 1}, "--threads-per-worker needs --local-cluster"),
    ({"local_cluster": True, "scheduler": "sync"},
     "--local-cluster starts its own scheduler; drop --scheduler"),
    ({"workers": 1, "scheduler": "tcp://10.0.0.1:8786"},
     "--workers sizes a local pool or --local-cluster; with --scheduler ADDRESS the "
     "cluster's workers decide"),
], ids=lambda value: str(value)[:60])
def test_each_contradiction_has_its_own_message(arguments: dict, message: str) -> None:
    from normstats.analyses.compute import check_arguments

    with pytest.raises(InvalidOptionError) as caught:
        check_arguments(**arguments)
    assert str(caught.value) == message


@pytest.mark.parametrize("arguments", [
    {}, {"sample": 5}, {"precision": 0.1}, {"sample": 5, "seed": 0}, {"precision": 1, "seed": 3},
    {"percentiles": True, "by_folder": True, "outliers": True, "mean_image": True,
     "covariance": True},
    {"verify_cache": 2}, {"verify_cache": "all", "cache": True, "by_folder": True},
    {"local_cluster": True, "threads_per_worker": 2, "workers": 2},
    {"workers": 2, "scheduler": "threads"}, {"scheduler": "tcp://10.0.0.1:8786"},
], ids=lambda value: str(value)[:60])
def test_arguments_that_agree_pass(arguments: dict) -> None:
    from normstats.analyses.compute import check_arguments

    assert check_arguments(**arguments) is None


@pytest.mark.parametrize(("arguments", "message"), [
    ({"sample": -3}, "sample must be a whole number of at least 1, got -3"),
    ({"sample": 0}, "sample must be a whole number of at least 1, got 0"),
    ({"sample": 2.5}, "sample must be a whole number of at least 1, got 2.5"),
    ({"sample": True}, "sample must be a whole number of at least 1, got True"),
    ({"task_size": 0}, "task_size must be a whole number of at least 1, got 0"),
    ({"percentiles": (1, 99)},
     "percentiles is True or False (it adds p0.5, p2, p98 and p99.5), got (1, 99)"),
    ({"covariance": "yes"}, "covariance is True or False, got 'yes'"),
], ids=lambda value: str(value)[:60])
def test_counts_and_flags_of_the_wrong_kind_are_refused_from_python_too(
        arguments: dict, message: str) -> None:
    """The command line's types refused these; from Python, sample=-3 drew 17 of 20 images,
    sample=0 read them all, and percentiles=(1, 99) gave p0.5, p2, p98 and p99.5."""
    x = np.zeros((20, 2, 2, 3), np.uint8)
    with pytest.raises(InvalidOptionError) as caught:
        normstats.compute(x, **arguments)
    assert str(caught.value) == message
    assert normstats.compute(x, sample=np.int64(3), seed=0, percentiles=np.bool_(False)
                             ).images == 3  # numpy's integers and booleans are kinds too


def test_what_the_pixels_are_read_for() -> None:
    from normstats.analyses.compute import _accumulators

    assert _accumulators(False, False, False) == ()
    assert _accumulators(True, False, False) == ("histogram",)
    assert _accumulators(False, True, False) == ("mean_image",)
    assert _accumulators(False, False, True) == ("mean_image_std",)
    assert _accumulators(True, True, True) == ("histogram", "mean_image_std")


def test_both_callbacks_hear_every_result_in_order() -> None:
    from normstats.analyses.compute import _both

    def first(result: object) -> None:
        heard.append(("first", result))

    heard: list[tuple[str, object]] = []
    assert _both(first, None) is first
    joined = _both(first, lambda result: heard.append(("second", result)))
    joined("r1")
    joined("r2")
    assert heard == [("first", "r1"), ("second", "r1"), ("first", "r2"), ("second", "r2")]


def test_a_covariance_asked_and_not_made_is_refused() -> None:
    from normstats.analyses.compute import _covariance_made

    stats = normstats.compute(np.zeros((2, 1, 1, 1), np.uint8))
    assert _covariance_made(stats, False) is stats
    with pytest.raises(InvalidOptionError) as caught:
        _covariance_made(stats, True)
    assert str(caught.value) == (
        "the channel covariance cannot be computed for this data here (it is made for images "
        "without nodata and for vectors; with --mean-image of a Dask array, compute it in a "
        "run of its own)")
    made = normstats.compute(np.zeros((2, 1, 1, 2), np.uint8), covariance=True)
    assert _covariance_made(made, True) is made


def test_a_library_call_prints_nothing_unless_asked(array_file, capfd) -> None:
    normstats.compute(array_file, workers=1)
    normstats.compute(array_file, sample=10, seed=0, workers=1)
    assert capfd.readouterr() == ("", "")


def test_a_sample_is_read_and_reported_with_the_options_given(array_file) -> None:
    stats = normstats.compute(array_file, sample=30, seed=2, scale=1.0, channels="A,B,C",
                              workers=1, task_size=7)
    chosen = choose_images(300, 30, np.random.default_rng(2))
    alone = normstats.compute(np.load(array_file)[chosen], scale=1.0, channels="A,B,C")
    assert numbers(stats) == numbers(alone) and stats.channels == ("A", "B", "C")
    assert stats.scale == 1.0 and stats.estimate.sampled == 30
    assert normstats.compute(array_file, precision=10.0, seed=1, workers=1).estimate.sampled \
        == 256


def test_the_cache_is_checked_when_asked(classes, tmp_path) -> None:
    cache = tmp_path / "cache"
    normstats.compute(classes, cache=cache, workers=1)
    checked = normstats.compute(classes, cache=cache, verify_cache="all", workers=1)
    assert checked.cache_checked == checked.images == 18 and checked.cache_changed == ()
    assert normstats.compute(classes, cache=cache, workers=1).cache_checked == 0


def test_a_local_cluster_runs_compute_on_its_own_client(monkeypatch) -> None:
    from contextlib import contextmanager

    import normstats.engine.cluster as cluster
    import normstats.engine.pipeline as pipeline
    from normstats.analyses import compute as module
    from normstats.sources.options import ReadOptions

    opened: list[tuple[int, int]] = []

    @contextmanager
    def fake_cluster(workers: int, threads: int):
        opened.append((workers, threads))
        yield "client"
    monkeypatch.setattr(cluster, "local_cluster", fake_cluster)
    monkeypatch.setattr(pipeline, "default_workers", lambda: 7)
    calls: list[tuple] = []
    monkeypatch.setattr(module, "compute", lambda data, **kw: calls.append((data, kw)) or "out")
    options = ReadOptions(mode="L")
    run = {"workers": None, "scheduler": None, "task_size": 5, "progress": False,
           "on_result": None}
    assert module._on_local_cluster("data", options, dict(run), None, sample=3) == "out"
    assert opened == [(7, 1)]
    assert calls == [("data", {"options": options, "task_size": 5, "progress": False,
                               "on_result": None, "scheduler": "client", "sample": 3})]
    module._on_local_cluster("data", options, {**run, "workers": 2}, 3)
    assert opened[-1] == (2, 3) and "workers" not in calls[-1][1]


def test_compute_hands_a_local_cluster_every_analysis(monkeypatch) -> None:
    from normstats.analyses import compute as module

    seen: list[tuple] = []
    monkeypatch.setattr(module, "_on_local_cluster",
                        lambda *args, **kw: seen.append((args, kw)) or "out")
    assert module.compute("data", local_cluster=True, workers=2, threads_per_worker=3,
                          task_size=4, progress=None, cache=False, by_folder=True,
                          outliers=True, percentiles=True, mean_image=True,
                          mean_image_std=True, covariance=True, mode="L") == "out"
    (data, options, run, threads), analyses = seen[0]
    assert (data, options.mode, threads) == ("data", "L", 3)
    assert run == {"workers": 2, "scheduler": None, "task_size": 4, "progress": None,
                   "on_result": None}
    assert analyses == {"cache": False, "verify_cache": None, "sample": None, "seed": None,
                        "precision": None, "percentiles": True, "by_folder": True,
                        "outliers": True, "mean_image": True, "mean_image_std": True,
                        "covariance": True}
    seen.clear()  # a sample and a cache check: asked of a local cluster, given to it
    module.compute("data", local_cluster=True, sample=7, seed=5, precision=0.25)
    module.compute("data", local_cluster=True, cache=True, verify_cache=3)
    assert [(kw["sample"], kw["seed"], kw["precision"], kw["verify_cache"])
            for _, kw in seen] == [(7, 5, 0.25, None), (None, None, None, 3)]


def test_a_sample_of_a_folder_is_reported_under_the_channel_names_given(classes) -> None:
    """A folder's reader names its channels by the mode (R, G, B); ``channels`` renames
    them in a sample's result as in the exact one."""
    sampled = normstats.compute(classes, sample=5, seed=1, channels="X,Y,Z", workers=1)
    assert sampled.channels == ("X", "Y", "Z") and sampled.estimate.sampled == 5
    assert normstats.compute(classes, cache=False, channels="X,Y,Z").channels == ("X", "Y", "Z")


def test_a_covariance_that_cannot_be_made_is_refused_on_the_plain_path() -> None:
    """Images with nodata have no channel covariance; asking for it is an error, never a
    result silently without it."""
    x = np.arange(24, dtype=np.uint8).reshape(2, 2, 3, 2)
    with pytest.raises(InvalidOptionError) as caught:
        normstats.compute(x, nodata=0, covariance=True, layout="NHWC")
    assert str(caught.value).startswith("the channel covariance cannot be computed for this "
                                        "data here (it is made for images without nodata")
    assert normstats.compute(x, nodata=0, layout="NHWC").covariance is None


def test_the_read_options_reach_a_sample(rng) -> None:
    x = rng.integers(0, 256, (40, 3, 4, 2), dtype=np.uint8)
    nchw = normstats.compute(np.moveaxis(x, -1, 1), sample=10, seed=4, layout="NCHW")
    nhwc = normstats.compute(x, sample=10, seed=4, layout="NHWC")
    assert numbers(nchw) == numbers(nhwc) and nchw.mean != normstats.compute(
        np.moveaxis(x, -1, 1), sample=10, seed=4, layout="NHWC").mean


@pytest.mark.parametrize("asked", [{"outliers": True}, {"covariance": True},
                                   {"mean_image": True}, {"mean_image_std": True}])
def test_what_needs_every_image_is_refused_with_a_sample(array_file, asked) -> None:
    with pytest.raises(InvalidOptionError, match="not with --sample/--precision"):
        normstats.compute(array_file, sample=5, **asked)


def test_the_mean_image_in_the_reported_scale(rng) -> None:
    import math
    import statistics
    from fractions import Fraction

    x = rng.integers(0, 256, (3, 2, 3, 2), dtype=np.uint8)
    exact = [[[float(Fraction(int(x[:, i, j, c].sum()), 3 * 255)) for c in range(2)]
              for j in range(3)] for i in range(2)]
    alone = normstats.compute(x, mean_image=True, layout="NHWC")
    assert alone.mean_image.tolist() == exact and alone.mean_image_std is None
    both = normstats.compute(np.moveaxis(x, -1, 1), mean_image_std=True, layout="NCHW",
                             scale=1.0, covariance=True)
    assert both.mean_image.tolist() == (np.array(exact) * 255).tolist()
    variances = [[[statistics.pvariance([Fraction(int(v)) for v in x[:, i, j, c]])
                   for c in range(2)] for j in range(3)] for i in range(2)]
    assert both.mean_image_std.tolist() == [[[math.sqrt(v) for v in row] for row in plane]
                                            for plane in variances]
    assert both.covariance is not None and both.scale == 1.0
    assert normstats.compute(x, mean_image=True, percentiles=True,
                             layout="NHWC").percentiles is not None
    import dask.array as da

    with pytest.raises(InvalidOptionError, match="with --mean-image of a Dask array"):
        normstats.compute(da.from_array(x, chunks=1), mean_image=True, covariance=True,
                          layout="NHWC")


def test_the_cache_is_checked_beside_the_per_folder_statistics(classes, tmp_path) -> None:
    cache = tmp_path / "cache"
    normstats.compute(classes, cache=cache, workers=1)
    checked = normstats.compute(classes, cache=cache, verify_cache=3, by_folder=True,
                                workers=1)
    assert checked.cache_checked == 3 and list(checked.by_folder) == [".", "class0", "class1"]


@pytest.mark.parametrize("nodata", [99999, -9999, 0.5, float("nan")])
@pytest.mark.parametrize("percentiles", [False, True])
def test_a_nodata_that_cannot_occur_in_the_pixels_is_said(nodata, percentiles, caplog):
    images = np.full((2, 4, 4, 3), 7, np.uint16)
    with caplog.at_level(logging.WARNING, logger="normstats.analyses"):
        stats = normstats.compute(images, nodata=nodata, percentiles=percentiles)
    assert [r.getMessage() for r in caplog.records] == [
        f"normstats: nodata {nodata:g} cannot occur in uint16 pixels: nothing was left out, "
        "every value is counted"]
    assert stats.counts is None and stats.mean == (7 / 65535,) * 3  # as without nodata


@pytest.mark.parametrize("nodata", [None, 12345, 7])
def test_a_nodata_that_can_occur_is_left_out_without_a_word(nodata, caplog):
    images = np.full((2, 4, 4, 3), 7, np.uint16)
    images[0, 0, 0] = 9
    with caplog.at_level(logging.WARNING, logger="normstats.analyses"):
        stats = normstats.compute(images, nodata=nodata)
    assert caplog.records == []
    assert stats.counts == (None if nodata is None else (32, 32, 32) if nodata == 12345
                            else (1, 1, 1))
