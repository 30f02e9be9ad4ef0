"""Reliability matrix, part 4: dataset files (docs/reliability.md, section 4)."""

from __future__ import annotations

import importlib
import pickle

import numpy as np
import pytest

import normstats
from normstats import NormstatsError

fw = importlib.import_module("format_writers")



NPY_CASES = {
    "truncated": (lambda data: data[: len(data) // 2],
                  "truncated .npy file: its header's shape needs more bytes than the file holds"),
    "claims_more": (lambda data: data.replace(b"(6, 4, 4, 3)", b"(9, 4, 4, 3)"),
                    "truncated .npy file: its header's shape needs more bytes than the file holds"),
    "claims_fewer": (lambda data: data.replace(b"(6, 4, 4, 3)", b"(5, 4, 4, 3)"),
                     "header claims shape (5, 4, 4, 3) uint8 = 240 bytes but the file holds "
                     "288: the header and the data disagree"),
}


@pytest.mark.parametrize("case", sorted(NPY_CASES))
def test_npy_truncated_or_with_a_lying_header_is_a_clear_error(tmp_path, rng, case):
    """A header claiming fewer images than the data holds would silently drop images:
    it is refused like a truncated file (IDX and .npz members follow the same rule)."""
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (6, 4, 4, 3), dtype=np.uint8))
    change, message = NPY_CASES[case]
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(NormstatsError) as caught:
        normstats.compute(path)
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize("compressed", [False, True])
def test_truncated_npz_is_a_clear_error(tmp_path, compressed):
    path = fw.write_npz(tmp_path / "data.npz", fw.images(1, 6, 8, 8, 3), compressed)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(NormstatsError, match=r"data.npz: not a readable .npz \(zip\) file"):
        normstats.compute(path)


def test_truncated_cifar_pickle_is_a_clear_error_and_runs_nothing(tmp_path):
    path = fw.write_cifar_python(tmp_path / "data_batch_1", fw.images(2, 4, 32, 32, 3))
    data = path.read_bytes()
    assert pickle.loads(data)  # the whole file is a good batch
    for cut in (30, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(NormstatsError, match="data_batch_1: not a readable pickle"):
            normstats.compute(path)
