"""CIFAR binary and python batches, and the restricted unpickler."""

from __future__ import annotations

import importlib
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import normstats
from normstats.errors import NormstatsError
from normstats.sources.cifar import open_cifar_python, open_records

fw = importlib.import_module("format_writers")

RGB = fw.images(5, 7, 32, 32, 3)


def test_binary_and_python_batches_agree(tmp_path: Path) -> None:
    runs = [normstats.compute(str(fw.write_cifar_bin(tmp_path / "data_batch_1.bin", RGB))),
            normstats.compute(str(fw.write_cifar_bin(tmp_path / "train.bin", RGB, 2))),
            normstats.compute(str(fw.write_cifar_python(tmp_path / "data_batch_2", RGB))),
            normstats.compute(str(fw.write_cifar_python(tmp_path / "test_batch", RGB, True)))]
    assert {(s.mean, s.std, s.per_image_std) for s in runs} == {
        (runs[0].mean, runs[0].std, runs[0].per_image_std)}
    assert all(s.channels == ("R", "G", "B") for s in runs)


def test_size_not_a_multiple_of_the_record(tmp_path: Path) -> None:
    path = fw.write_cifar_bin(tmp_path / "data_batch_1.bin", RGB)
    path.write_bytes(path.read_bytes() + b"\0" * 10)
    with pytest.raises(NormstatsError) as caught:
        open_records(str(path), "cifar10-bin")
    assert str(path) in str(caught.value) and "3,073 bytes" in str(caught.value)
    assert "10 bytes left over" in str(caught.value)


def test_labels_out_of_range_name_the_other_format(tmp_path: Path) -> None:
    records = bytearray(fw.cifar_records(RGB, 1))
    records[3073 * 2] = 200
    path = tmp_path / "data_batch_3.bin"
    path.write_bytes(bytes(records))
    with pytest.raises(NormstatsError, match="record 2 has label 200"):
        open_records(str(path), "cifar10-bin")


def test_pickle_calling_os_system_is_refused_and_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": Payload()}, protocol=2))
    with pytest.raises(NormstatsError) as caught:
        open_cifar_python(str(path))
    message = str(caught.value)
    assert str(path) in message and "refused" in message
    assert "system" in message and "not run" in message
    assert not marker.exists()


@pytest.mark.parametrize("payload", [
    pickle.dumps({b"data": np.zeros((2, 3072), np.float32)}, 2),
    pickle.dumps([1, 2, 3], 2),
    pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1]}, 2),
    b"\x80\x02}q\x00(X",
])
def test_batches_with_the_wrong_content(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "data_batch_9"
    path.write_bytes(payload)
    with pytest.raises(NormstatsError, match="data_batch_9"):
        open_cifar_python(str(path))


def test_codecs_other_than_latin1_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "data_batch_1"
    path.write_bytes(b"\x80\x02c_codecs\nencode\nX\x01\x00\x00\x00aX\x05\x00\x00\x00rot13\x86R.")
    with pytest.raises(NormstatsError, match="rot13"):
        open_cifar_python(str(path))
