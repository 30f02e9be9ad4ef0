"""What `normstats.sources.opening.open_source` refuses, and how it says so."""

from __future__ import annotations

import os

import numpy as np
import pytest

import normstats
from normstats.errors import NormstatsError
from normstats.sources import open_source


@pytest.mark.parametrize("data", [b"train.npy", bytearray(b"train.npy")])
def test_bytes_are_refused_naming_the_str_path_they_stand_for(data, tmp_path):
    np.save(tmp_path / "train.npy", np.zeros((2, 4, 4, 3), np.uint8))
    refusal = rf"{type(data).__name__} object: .*os\.fsdecode\(path\)"
    with pytest.raises(NormstatsError, match=refusal):
        open_source(data)
    # the way the message names works: the same file given as a str is read
    assert normstats.compute(os.fsdecode(os.fsencode(tmp_path / "train.npy"))).images == 2


@pytest.mark.parametrize("data", [None, 5, 2.5])
def test_an_object_that_is_no_dataset_is_named_with_what_is_read(data):
    with pytest.raises(NormstatsError, match=f"cannot compute statistics of a "
                                             f"{type(data).__name__}: pass a folder"):
        open_source(data)
