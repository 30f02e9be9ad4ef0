"""Reliability matrix, parts 3 and 8: a FIFO among many inputs never hangs a run, and a
file named twice is read once (docs/reliability.md, sections 3, 4 and 8).

A FIFO opened for reading waits for a writer forever: every way of naming several files
(PATHs, a glob, a brace range, a folder of shards, a manifest, a shard index) must name it
as skipped or stop with one line naming it. Each run happens in a thread watched by
`_within`: a hang fails the test (the FIFO is then written to, so the thread ends) instead
of stalling the suite.
"""

from __future__ import annotations

import importlib
import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracle import assert_matches_oracle

import normstats
from normstats.analyses.manifests import compute_manifest, load_manifest
from normstats.errors import NormstatsError

fw = importlib.import_module("format_writers")

FIFO_REASON = "not a regular file (a FIFO (named pipe)); only regular files are read"
RGB = fw.images(5, 6, 32, 32, 3)
GRAY = fw.images(6, 5, 6, 4, 1)[..., 0]
#: What every statistic of two runs must share, bit for bit.
FIELDS = ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
          "rms_per_image_std", "min", "max", "images", "pixels_per_channel", "channels",
          "dtype")

pytestmark = pytest.mark.timeout(20)


def _within(seconds: float, fifos: list[Path], call: Any) -> Any:
    """``call()`` in a thread; a run still waiting after ``seconds`` fails the test."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test below
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:  # a writer that closes at once: the blocked reader sees its end
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(5)
        pytest.fail(f"still waiting after {seconds} s: a FIFO was opened for reading")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _compute(data: Any, fifos: list[Path], **options: Any) -> normstats.DatasetStats:
    return _within(8, fifos, lambda: normstats.compute(data, scheduler="sync", cache=False,
                                                       **options))


def _fails_naming(data: Any, fifo: Path) -> None:
    with pytest.raises(NormstatsError) as caught:
        _compute(data, [fifo])
    message = str(caught.value)
    assert message.startswith(f"{fifo}: ") and "\n" not in message
    assert message.endswith(FIFO_REASON)


def _same(first: normstats.DatasetStats, second: normstats.DatasetStats) -> None:
    assert [getattr(first, f) for f in FIELDS] == [getattr(second, f) for f in FIELDS]


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# ------------------------------------------------------------------ FIFOs never hang


def test_a_fifo_named_beside_an_image_or_matched_by_a_glob_is_skipped(tmp_path: Path) -> None:
    fw.write_folder(tmp_path, RGB[:2])
    fifo = _fifo(tmp_path / "pipe.png")
    for data in ([str(tmp_path / "0000.png"), str(fifo)], str(tmp_path / "*.png")):
        stats = _compute(data, [fifo])
        assert {s.path: s.reason for s in stats.skipped} == {"pipe.png": FIFO_REASON}
        expected = list(RGB[:1]) if isinstance(data, list) else list(RGB[:2])
        assert_matches_oracle(stats, expected, 255)


def test_a_fifo_in_a_brace_range_of_shards_is_one_error_naming_it(tmp_path: Path) -> None:
    fw.write_tar(tmp_path / "s-0.tar", RGB[:2])
    fifo = _fifo(tmp_path / "s-1.tar")
    _fails_naming(str(tmp_path / "s-{0..1}.tar"), fifo)
    _fails_naming([str(tmp_path / "s-0.tar"), str(fifo)], fifo)


@pytest.mark.parametrize("kind", ["tar", "parquet"])
def test_a_fifo_in_a_folder_of_shards_is_skipped(tmp_path: Path, kind: str) -> None:
    if kind == "tar":
        fw.write_tar(tmp_path / "s-0.tar", RGB[:3])
    else:
        cells = pa.array([{"bytes": fw.png_bytes(p), "path": f"{i}.png"}
                          for i, p in enumerate(RGB[:3])])
        pq.write_table(pa.table({"image": cells}), tmp_path / "s-0.parquet")
    fifo = _fifo(tmp_path / f"s-1.{kind}")
    stats = _compute(tmp_path, [fifo])
    assert {s.path: s.reason for s in stats.skipped} == {str(fifo): FIFO_REASON}
    assert_matches_oracle(stats, list(RGB[:3]), 255)
    with pytest.raises(NormstatsError, match=re.escape(f"{fifo}: {FIFO_REASON}")):
        _within(8, [fifo], lambda: normstats.compute(tmp_path, scheduler="sync", cache=False,
                                                     on_error="fail"))


@pytest.mark.parametrize("name", ["b.npy", "t10k-images-idx3-ubyte", "data_batch_2.bin",
                                  "noname"])
def test_a_fifo_named_beside_a_dataset_file_is_one_error_naming_it(tmp_path: Path,
                                                                   name: str) -> None:
    np.save(tmp_path / "a.npy", RGB[:2])
    _fails_naming([str(tmp_path / "a.npy"), str(_fifo(tmp_path / name))], tmp_path / name)


@pytest.mark.parametrize("name", ["pipe.npy", "pipe.png", "pipe.tar", "pipe-idx3-ubyte.gz",
                                  "noname"])
def test_a_fifo_alone_is_one_error_naming_it(tmp_path: Path, name: str) -> None:
    _fails_naming(str(_fifo(tmp_path / name)), tmp_path / name)


_WRITERS = {"idx": lambda path: fw.write_idx(path, GRAY),
            "tar": lambda path: fw.write_tar(path, RGB[:2]),
            "npz": lambda path: fw.write_npz(path, RGB[:2]),
            "cifar-python": lambda path: fw.write_cifar_python(path, RGB[:2])}


@pytest.mark.parametrize("fmt", sorted(_WRITERS))
def test_a_fifo_listed_by_a_manifest_is_one_error_naming_it(tmp_path: Path, fmt: str) -> None:
    """The manifest names the file and its format: no detection reads it first."""
    _WRITERS[fmt](tmp_path / f"real.{fmt}")
    fifo = _fifo(tmp_path / f"pipe.{fmt}")
    manifest = _manifest(tmp_path, fmt, [f"real.{fmt}", fifo.name])
    with pytest.raises(NormstatsError) as caught:
        _within(8, [fifo], lambda: compute_manifest(manifest, str(tmp_path),
                                                    scheduler="sync", cache=False))
    assert str(caught.value) == f"{fifo}: {FIFO_REASON}"


def test_a_fifo_listed_by_a_shard_index_is_named(tmp_path: Path) -> None:
    """The tar reader's own opens go through the one door: the FIFO is skipped, named, or
    stops the run in one line naming it; never a hang."""
    fw.write_tar(tmp_path / "s-0.tar", RGB[:2])
    fifo = _fifo(tmp_path / "s-1.tar")
    index = fw.write_index(tmp_path / "index.json", {"s-0.tar": 2, "s-1.tar": 2})
    try:
        stats = _compute(str(index), [fifo])
    except NormstatsError as error:
        assert str(error) == f"{fifo}: {FIFO_REASON}"
        return
    assert [(s.path, s.reason) for s in stats.skipped] == [(str(fifo), FIFO_REASON)]
    assert_matches_oracle(stats, list(RGB[:2]), 255)


def test_a_symlink_loop_is_named_as_one(tmp_path: Path) -> None:
    loop = tmp_path / "loop.npy"
    loop.symlink_to(loop)
    reason = "a symbolic link loop (ELOOP): following its links never reaches a file or folder"
    for data in (str(loop), [str(loop), str(loop) + "x"]):
        with pytest.raises(NormstatsError, match=f"^{re.escape(f'{loop}: {reason}')}$"):
            normstats.compute(data, cache=False)


# ------------------------------------------------------- a file named twice, read once


def _aliases(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``name``, ``./name``, its absolute path and a symbolic link to it (cwd: tmp_path)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / f"link-{name}").symlink_to(tmp_path / name)
    return [name, f"./{name}", str(tmp_path / name), f"link-{name}"]


@pytest.mark.parametrize("name", ["a.npy", "t10k-images-idx3-ubyte", "data_batch_1.bin",
                                  "data_batch_1"])
def test_a_dataset_file_named_four_ways_is_read_once(tmp_path: Path, name: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "a.npy":
        np.save(tmp_path / name, RGB)
    elif "idx" in name:
        fw.write_idx(tmp_path / name, GRAY)
    elif name.endswith(".bin"):
        fw.write_cifar_bin(tmp_path / name, RGB)
    else:
        fw.write_cifar_python(tmp_path / name, RGB)
    paths = _aliases(tmp_path, name, monkeypatch)
    once, four = normstats.compute(name, cache=False), normstats.compute(paths, cache=False)
    _same(four, once)
    assert_matches_oracle(four, list(GRAY[..., None] if "idx" in name else RGB), 255)
    assert [(s.path, s.reason) for s in four.skipped] == [
        (path, f"same file as {name} (named twice); read once") for path in paths[1:]]
    assert four.source == name


def test_two_members_of_one_npz_are_two_datasets(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", x=RGB[:2], y=RGB[2:5])
    both = normstats.compute([f"{tmp_path}/d.npz:x", f"{tmp_path}/d.npz:y",
                              f"{tmp_path}/./d.npz:y"], cache=False)
    assert both.images == 5 and [s.path for s in both.skipped] == [f"{tmp_path}/./d.npz:y"]
    assert_matches_oracle(both, list(RGB[:5]), 255)


def test_a_shard_linked_twice_in_a_folder_is_read_once(tmp_path: Path) -> None:
    fw.write_tar(tmp_path / "s-0.tar", RGB[:3])
    (tmp_path / "s-1.tar").symlink_to(tmp_path / "s-0.tar")
    stats = normstats.compute(tmp_path, cache=False, scheduler="sync")
    assert_matches_oracle(stats, list(RGB[:3]), 255)
    assert [(s.path, s.reason) for s in stats.skipped] == [
        (str(tmp_path / "s-1.tar"), f"same file as {tmp_path / 's-0.tar'} (a hard or "
                                    "symbolic link); read once")]


def test_a_manifest_listing_one_file_three_times_reads_it_once(tmp_path: Path) -> None:
    fw.write_cifar_python(tmp_path / "data_batch_1", RGB)
    fw.write_cifar_python(tmp_path / "data_batch_2", RGB[:2])
    manifest = _manifest(tmp_path, "cifar-python",
                         ["data_batch_1", "data_batch_2", "data_batch_1", "./data_batch_1"])
    stats = compute_manifest(manifest, str(tmp_path), cache=False, scheduler="sync")
    assert_matches_oracle(stats, list(RGB) + list(RGB[:2]), 255)
    first = str(tmp_path / "data_batch_1")
    assert [(s.path, s.reason) for s in stats.skipped] == [
        (path, f"same file as {first} (listed twice in manifest toy); read once")
        for path in (first, str(tmp_path / "." / "data_batch_1"))]


def _manifest(root: Path, fmt: str, files: list[str]) -> Any:
    listed = ", ".join(f'"{name}"' for name in files)
    path = root / "toy.toml"
    path.write_text(f'name = "toy"\ndataset = "Toy"\nsplit = "train"\ndescription = "d"\n'
                    f'[source]\nformat = "{fmt}"\nfiles = [{listed}]\n')
    return load_manifest(str(path))
