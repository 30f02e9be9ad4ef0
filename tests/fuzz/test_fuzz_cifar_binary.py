"""Fuzz target: CIFAR-10, CIFAR-100 and STL-10 binary files (fixed-size records).

These formats have no header: what tells them apart is the file's name, its size (a
whole number of records) and the label bytes. Hypothesis damages valid files (labels out
of range, a record cut short, bytes added, names of the other formats), and a run either
refuses the file in one line naming it or computes exactly the pixels its records hold.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from fuzz.fuzzing import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from oracle import assert_matches_oracle

import normstats
from normstats import NormstatsError
from normstats.sources.cifar import RECORD_FORMATS

_NAMES = {"cifar10-bin": "data_batch_1.bin", "cifar100-bin": "train.bin",
          "stl10-bin": "train_X.bin"}


@st.composite
def damaged_records(draw) -> tuple[str, str, bytes]:
    kind = draw(st.sampled_from(sorted(RECORD_FORMATS)))
    spec = RECORD_FORMATS[kind]
    count = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data = bytearray(rng.integers(0, 256, count * spec.record_bytes, dtype=np.uint8).tobytes())
    for record in range(count):  # valid labels first
        for column, limit in enumerate(spec.label_limits):
            data[record * spec.record_bytes + column] %= limit
    for _ in range(draw(st.integers(0, 2))):
        kind_of_damage = draw(st.sampled_from(["label", "cut", "grow"]))
        if kind_of_damage == "label" and spec.label_bytes:
            at = draw(st.integers(0, count - 1)) * spec.record_bytes
            data[at + draw(st.integers(0, spec.label_bytes - 1))] = draw(st.integers(0, 255))
        elif kind_of_damage == "cut":
            del data[len(data) - draw(st.integers(1, spec.record_bytes)):]
        else:
            data += bytes(draw(st.integers(1, 40)))
    name = draw(st.sampled_from([_NAMES[kind], *_NAMES.values()]))
    return kind, name, bytes(data)


@fuzz_settings(100)
@given(damaged_records())
def test_damaged_record_files_are_refused_or_read_exactly(case: tuple[str, str, bytes]) -> None:
    _, name, data = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            stats = normstats.compute(str(path), workers=1)
        except NormstatsError as error:
            assert "\n" not in str(error) and name in str(error)
            return
    kind = {v: k for k, v in _NAMES.items()}[name]
    spec = RECORD_FORMATS[kind]
    records = np.frombuffer(data, np.uint8).reshape(-1, spec.record_bytes)
    for column, limit in enumerate(spec.label_limits):  # accepted: every label in range
        assert (records[:, column] < limit).all()
    planes = records[:, spec.label_bytes:].reshape(-1, *spec.image_shape)
    assert_matches_oracle(stats, list(planes.transpose(0, 2, 3, 1)), 255)
