"""Parquet files: a path column is read only inside the Parquet file's folder, and a FIFO
named like a Parquet file is never opened for reading."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from watchdogs import finishes

import normstats
from normstats.errors import NormstatsError, UnreadableInputError
from normstats.sources.parquet import ParquetSource

_FIFO_REASON = "not a regular file (a FIFO (named pipe)); only regular files are read"


def _save(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((4, 4, 3), value, np.uint8)).save(path)


def test_paths_leaving_the_parquet_files_folder_are_refused_with_the_row_named(tmp_path):
    data = tmp_path / "data"
    _save(data / "a.png", 10)
    _save(data / "sub" / "b.png", 20)
    _save(tmp_path / "outside.png", 250)
    os.symlink(tmp_path / "outside.png", data / "link.png")  # inside, leading outside
    absolute = str(tmp_path / "outside.png")
    pq.write_table(pa.table({"image_path": ["a.png", "../outside.png", absolute, "link.png",
                                            "sub/b.png"]}), data / "paths.parquet")
    stats = normstats.compute(data / "paths.parquet")
    assert stats.images == 2 and stats.mean == (15 / 255,) * 3  # a.png and sub/b.png only
    real = os.path.realpath(data)
    outside = os.path.realpath(tmp_path / "outside.png")
    tail = ": only images inside the Parquet file's folder are read"
    assert {s.path: s.reason for s in stats.skipped} == {
        "paths.parquet:1": f"image path '../outside.png' resolves to {outside}, outside "
                           f"{real}{tail}",
        "paths.parquet:2": f"image path {absolute!r} is an absolute path{tail}",
        "paths.parquet:3": f"image path 'link.png' resolves to {outside}, outside {real}{tail}"}
    with pytest.raises(UnreadableInputError, match=r"^paths\.parquet:[123]: image path "):
        normstats.compute(data / "paths.parquet", on_error="fail")


def test_a_hugging_face_image_struct_with_only_a_path_is_held_inside_too(tmp_path):
    _save(tmp_path / "images" / "a.png", 30)
    _save(tmp_path.parent / f"{tmp_path.name}-secret.png", 250)
    cells = pa.array([{"bytes": None, "path": "images/a.png"},
                      {"bytes": None, "path": f"../{tmp_path.name}-secret.png"}],
                     pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    pq.write_table(pa.table({"image": cells}), tmp_path / "train.parquet")
    stats = normstats.compute(tmp_path / "train.parquet")
    assert stats.images == 1 and stats.mean == (30 / 255,) * 3
    assert [s.path for s in stats.skipped] == ["train.parquet:1"]
    assert "resolves to" in stats.skipped[0].reason


@pytest.mark.timeout(20)
def test_a_fifo_named_like_a_parquet_file_in_a_folder_of_them_is_skipped_unread(tmp_path):
    pixels = [np.full((4, 4, 3), v, np.uint8) for v in (10, 30)]
    cells = pa.array([_png(p) for p in pixels], pa.binary())
    pq.write_table(pa.table({"png": cells}), tmp_path / "a.parquet")
    fifo = tmp_path / "x.parquet"
    os.mkfifo(fifo)
    stats = finishes(lambda: normstats.compute(tmp_path), fifo=fifo)
    assert not isinstance(stats, Exception), stats
    assert stats.images == 2 and stats.mean == (20 / 255,) * 3
    assert [(s.path, s.reason) for s in stats.skipped] == [(str(fifo), _FIFO_REASON)]
    failed = finishes(lambda: normstats.compute(tmp_path, on_error="fail"), fifo=fifo)
    assert isinstance(failed, NormstatsError) and str(failed) == f"{fifo}: {_FIFO_REASON}"


@pytest.mark.timeout(20)
def test_a_fifo_given_to_the_parquet_source_is_skipped_unread(tmp_path):
    """The source itself refuses it, whoever listed it (a glob, a brace range, the API)."""
    pq.write_table(pa.table({"png": pa.array([_png(np.zeros((2, 2, 3), np.uint8))],
                                             pa.binary())}), tmp_path / "a.parquet")
    fifo = tmp_path / "x.parquet"
    os.mkfifo(fifo)
    paths = [str(tmp_path / "a.parquet"), str(fifo)]
    source = finishes(lambda: ParquetSource(paths), fifo=fifo)
    assert len(source) == 1 and [(s.path, s.reason) for s in source.skipped] == \
        [(str(fifo), _FIFO_REASON)]
    failed = finishes(lambda: ParquetSource(paths, fail_fast=True), fifo=fifo)
    assert isinstance(failed, NormstatsError) and str(failed) == f"{fifo}: {_FIFO_REASON}"
    # a brace range: each PATH's format is detected first, which stops at the FIFO
    error = finishes(lambda: normstats.compute(str(tmp_path / "{a,x}.parquet")), fifo=fifo)
    assert isinstance(error, NormstatsError) and str(error) == f"{fifo}: {_FIFO_REASON}"
    stats = finishes(lambda: normstats.compute(str(tmp_path / "{a,x}.parquet"),
                                                format="parquet"), fifo=fifo)
    assert stats.images == 1 and [s.path for s in stats.skipped] == [str(fifo)]


def _png(pixels: np.ndarray) -> bytes:
    import io

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()
