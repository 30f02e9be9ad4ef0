"""Arrow files and ``save_to_disk`` folders, written by the real ``datasets``: the folder's
statistics bit for bit, from Python and from the command line; paths that leave the
dataset's folder refused and named; a ``DatasetDict`` folder refused with its splits."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa
import pytest
from datasets import Dataset, DatasetDict, Features, Image, Value
from watchdogs import finishes

import normstats
from normstats.errors import InvalidOptionError, NormstatsError, UnreadableInputError
from normstats.sources import open_source
from normstats.sources.arrow import ArrowFileSource

fw = importlib.import_module("format_writers")
oracle = importlib.import_module("oracle")

PICTURES = [np.random.default_rng(40 + i).integers(25 * i, 25 * i + 50, size=(4 + i % 2, 6, 3),
                                                   dtype=np.uint8) for i in range(7)]
_STRUCT = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
_METADATA = {b"huggingface": json.dumps({"info": {"features": {
    "image": {"_type": "Image"}, "label": {"dtype": "int64", "_type": "Value"}}}})}


@pytest.fixture(autouse=True)
def _datasets_cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    datasets.disable_progress_bars()


def _dataset() -> Dataset:
    cells = [{"bytes": fw.png_bytes(p), "path": None} for p in PICTURES]
    features = Features({"image": Image(), "label": Value("int64")})
    return Dataset.from_dict({"image": cells, "label": [i % 2 for i in range(7)]},
                             features=features)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pictures")
    for i, pixels in enumerate(PICTURES):
        (root / f"{i}.png").write_bytes(fw.png_bytes(pixels))
    return root


def _write_stream(path: Path, cells: list, file_format: bool = False) -> Path:
    table = pa.table({"image": pa.array(cells, _STRUCT), "label": list(range(len(cells)))})
    table = table.replace_schema_metadata(_METADATA)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = pa.ipc.new_file if file_format else pa.ipc.new_stream
    with opener(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=3)  # record batches of 3 rows
    return path


def test_save_to_disk_folder_and_its_arrow_files_give_the_folders_stats(tmp_path, folder):
    _dataset().save_to_disk(tmp_path / "saved", num_shards=2)
    expected = oracle.numbers(normstats.compute(folder, workers=1))
    saved = normstats.compute(tmp_path / "saved", workers=2, task_size=2)
    assert oracle.numbers(saved) == expected
    assert saved.source == f"{tmp_path / 'saved'} (Hugging Face dataset, 2 Arrow files)"
    shards = sorted(str(p) for p in (tmp_path / "saved").glob("*.arrow"))
    assert oracle.numbers(normstats.compute(shards, workers=2, task_size=1)) == expected
    assert (list(saved.mean), list(saved.std)) == oracle.integer_mean_std(PICTURES, 255)


def test_the_command_line_reads_a_save_to_disk_folder(tmp_path, folder):
    _dataset().save_to_disk(tmp_path / "saved")
    out = subprocess.run([sys.executable, "-m", "normstats", "compute", str(tmp_path / "saved"),
                          "--json", "--no-cache", "--workers", "2"], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out)["mean"] == list(normstats.compute(folder, workers=1).mean)


@pytest.mark.parametrize("file_format", [False, True], ids=["stream", "file"])
def test_both_arrow_formats_in_record_batches(tmp_path, folder, file_format):
    cells = [{"bytes": fw.png_bytes(p), "path": None} for p in PICTURES]
    path = _write_stream(tmp_path / "train.arrow", cells, file_format)
    source = open_source(path)
    assert isinstance(source, ArrowFileSource) and len(source) == 7
    assert oracle.numbers(normstats.compute(path, workers=2, task_size=2)) == \
        oracle.numbers(normstats.compute(folder, workers=1))


def test_a_dataset_dict_folder_is_refused_with_its_splits_and_a_split_is_read(tmp_path, folder):
    DatasetDict({"train": _dataset(), "test": _dataset().select([0])}).save_to_disk(
        tmp_path / "dd")
    with pytest.raises(InvalidOptionError) as caught:
        normstats.compute(tmp_path / "dd")
    assert str(caught.value) == (f"{tmp_path / 'dd'} is a Hugging Face DatasetDict of the "
                                 f"splits train, test: name the one to read, e.g. "
                                 f"{tmp_path / 'dd' / 'train'}")
    assert oracle.numbers(normstats.compute(tmp_path / "dd" / "train")) == \
        oracle.numbers(normstats.compute(folder, workers=1))
    run = subprocess.run([sys.executable, "-m", "normstats", "compute", str(tmp_path / "dd"),
                          "--no-cache"], capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.count("\n") == 1
    assert "DatasetDict of the splits train, test: name the one to read" in run.stderr


def test_paths_leaving_the_arrow_files_folder_are_refused_and_named(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "a.png").write_bytes(fw.png_bytes(PICTURES[1]))
    (tmp_path / "outside.png").write_bytes(fw.png_bytes(PICTURES[6]))
    absolute = str(tmp_path / "outside.png")
    cells = [{"bytes": None, "path": "sub/a.png"}, {"bytes": None, "path": "../outside.png"},
             {"bytes": None, "path": absolute}, {"bytes": fw.png_bytes(PICTURES[3]), "path": "x"}]
    path = _write_stream(data / "data-00000-of-00001.arrow", cells)
    stats = normstats.compute(path, workers=1)
    assert stats.images == 2
    assert list(stats.mean) == oracle.integer_mean_std([PICTURES[1], PICTURES[3]], 255)[0]
    tail = ": only images inside the Arrow file's folder are read"
    real = os.path.realpath(data)
    assert {s.path: s.reason for s in stats.skipped} == {
        "data-00000-of-00001.arrow:1": f"image path '../outside.png' resolves to "
                                       f"{os.path.realpath(absolute)}, outside {real}{tail}",
        "data-00000-of-00001.arrow:2": f"image path {absolute!r} is an absolute path{tail}"}
    with pytest.raises(UnreadableInputError, match=r"^data-00000-of-00001\.arrow:1: image path"):
        normstats.compute(path, on_error="fail", workers=1)


def test_a_state_json_naming_a_file_outside_its_folder_is_refused(tmp_path):
    _dataset().save_to_disk(tmp_path / "saved")
    os.rename(tmp_path / "saved" / "data-00000-of-00001.arrow", tmp_path / "elsewhere.arrow")
    state = json.loads((tmp_path / "saved" / "state.json").read_text())
    state["_data_files"] = [{"filename": "../elsewhere.arrow"}]
    (tmp_path / "saved" / "state.json").write_text(json.dumps(state))
    with pytest.raises(NormstatsError, match=r"saved: state\.json names a data file outside "
                                             r"the dataset's folder \('\.\./elsewhere\.arrow' "
                                             r"resolves to .*\): only files inside it are read$"):
        normstats.compute(tmp_path / "saved")


def test_a_damaged_arrow_file_is_one_line(tmp_path):
    (tmp_path / "cut.arrow").write_bytes(b"\xff\xff\xff\xff" + bytes(40))
    with pytest.raises(NormstatsError, match=r"cut\.arrow: not a readable Arrow file \(.*\)$"):
        normstats.compute(tmp_path / "cut.arrow")
    (tmp_path / "empty.arrow").write_bytes(b"")
    with pytest.raises(NormstatsError, match=r"empty\.arrow: not an Arrow file \(empty\)$"):
        normstats.compute(tmp_path / "empty.arrow")


@pytest.mark.timeout(20)
def test_a_fifo_named_like_an_arrow_file_is_refused_unread(tmp_path):
    fifo = tmp_path / "train.arrow"
    os.mkfifo(fifo)
    failed = finishes(lambda: normstats.compute(fifo), fifo=fifo)
    assert isinstance(failed, NormstatsError) and "not a regular file (a FIFO" in str(failed)
