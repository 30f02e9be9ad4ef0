""".npz archives: members chosen by name, headers checked before allocating, never pickle."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

import normstats
from normstats.errors import NormstatsError
from normstats.sources.npz import open_npz

fw = importlib.import_module("format_writers")

RGB = fw.images(4, 6, 8, 8, 3)


def test_member_by_name_and_by_path_suffix(tmp_path: Path) -> None:
    path = tmp_path / "mnist.npz"
    np.savez(path, x_train=RGB, x_test=RGB[:2])
    assert len(open_npz(str(path))) == len(RGB)  # the usual training name wins
    assert len(open_npz(str(path), "x_test")) == 2
    np.savez(tmp_path / "two.npz", a=RGB, b=RGB)
    with pytest.raises(NormstatsError, match="holds 2 arrays .a, b.; name one"):
        open_npz(str(tmp_path / "two.npz"))
    assert normstats.compute(f"{path}:x_test").images == 2


def test_header_claiming_gigabytes_is_refused_before_allocating(tmp_path: Path) -> None:
    path = fw.write_npz_claiming(tmp_path / "bomb.npz", (100_000, 1000, 1000))
    with pytest.raises(NormstatsError) as caught:
        open_npz(str(path))
    message = str(caught.value)
    assert str(path) in message and "100,000,000,000 bytes" in message
    assert "holds 16" in message


def test_object_arrays_are_refused_not_unpickled(tmp_path: Path) -> None:
    path = tmp_path / "objects.npz"
    np.savez(path, images=np.array([{"a": 1}, None], dtype=object))
    with pytest.raises(NormstatsError, match="Python objects .* refused"):
        open_npz(str(path))


def test_not_a_zip(tmp_path: Path) -> None:
    path = tmp_path / "broken.npz"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(NormstatsError, match="not a readable .npz"):
        open_npz(str(path))


def test_stored_members_are_memory_mapped(tmp_path: Path) -> None:
    source = open_npz(str(fw.write_npz(tmp_path / "d.npz", RGB)))
    assert type(source.tasks()[0].array).__name__ == "MappedRecords"
