"""Fuzz target: a record cache segment read back (`normstats.engine.cache.segment.read_segment`).

A segment is a completion marker (JSON) and a zarr group of arrays, each a ``zarr.json``
and one compressed chunk, or (a run's own commits) one uncompressed array ``packed``
holding them all. Hypothesis damages one of the files of either kind: a field of the marker or of an
array's metadata set to another JSON value (a huge shape, a wrong dtype, a string where a
number was), either file replaced by random bytes or cut short, a chunk's bytes flipped,
cut or grown. Whatever the damage, the segment reads back as exactly the records written
or not at all (None, or `DamagedFile` naming the file), and reading it never allocates
what the damaged file claims.
"""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given
from hypothesis import strategies as st

from normstats.engine.cache.listed_segment import RecordRows, write_listed
from normstats.engine.cache.segment import DamagedFile, read_segment
from normstats.engine.cache.store import DatasetCache
from normstats.maths.records import records_from_stack
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.file_list import FileList

_MEMORY_LIMIT = 32 << 20
_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64), st.text(max_size=8),
                    st.sampled_from([[10**12, 3], [10**12], [2, 3], [6], "int64", "float64",
                                     "uint8", 2**40, -1, 0]),
                    st.lists(st.integers(-1, 2**40), max_size=3))
_TEMPLATE = Path(tempfile.mkdtemp(prefix="normstats-fuzz-segment-"))
_RECORDS = records_from_stack(np.random.default_rng(0).integers(0, 256, (6, 3, 4, 3), np.uint8),
                              keys=tuple(f"{i}.png" for i in range(6)),
                              channel_names=("R", "G", "B"))
_CACHE = DatasetCache.open(_TEMPLATE, "/data", DecodePolicy())
_NAME = _CACHE.write_segment(_RECORDS, np.arange(6), np.arange(6), ())
#: The same records committed packed, as a run commits them, in a cache of their own.
_PACKED_CACHE = DatasetCache.open(_TEMPLATE / "packed", "/data", DecodePolicy())
_PACKED_NAME = write_listed(_PACKED_CACHE,
                            FileList.from_columns(list(_RECORDS.keys), np.arange(6),
                                                  np.arange(6), np.zeros(6, np.int64)),
                            [RecordRows(_RECORDS, np.arange(6))], (), (), compress=False).name


def _segment_files(cache: DatasetCache) -> list[str]:
    return sorted(str(p.relative_to(cache.path)) for p in cache.path.rglob("*")
                  if p.is_file() and p.name not in ("lock", "normstats-group.json")
                  and p.parent != cache.path and p.parent != cache.segments_dir)


_FILES = _segment_files(_CACHE)
_PACKED_FILES = _segment_files(_PACKED_CACHE)


@st.composite
def damage(draw, cache: DatasetCache = _CACHE, files: list[str] = _FILES
           ) -> tuple[str, str, bytes]:
    """(file, kind of damage, what is written instead): one file of the segment damaged."""
    name = draw(st.sampled_from(files))
    data = (cache.path / name).read_bytes()
    kind = draw(st.sampled_from(["field", "random", "cut", "flip", "grow"]))
    if kind == "field" and name.endswith(".json"):
        document = json.loads(data)
        key = draw(st.sampled_from(sorted(document)))
        document[key] = draw(_VALUES)
        data = json.dumps(document).encode()
    elif kind == "random":
        data = draw(st.binary(max_size=64))
    elif kind == "cut" or kind == "field":
        data = data[:draw(st.integers(0, max(len(data) - 1, 0)))]
    elif kind == "flip":
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    else:
        data = data + draw(st.binary(min_size=1, max_size=64))
    return name, kind, data


@fuzz_settings(100)
@given(damage())
def test_a_damaged_segment_reads_back_exactly_or_not_at_all(case: tuple[str, str, bytes]):
    _check(case[0], case[2])


@pytest.mark.parametrize("cache, segment", [(_CACHE, _NAME), (_PACKED_CACHE, _PACKED_NAME)])
def test_either_undamaged_segment_reads_back_exactly(cache: DatasetCache, segment: str):
    """What the damaged cases are held to: both templates read back, bit for bit."""
    group = cache.path
    loaded = read_segment(group / "segments", group / "markers" / f"{segment}.json")
    assert loaded.records.keys == _RECORDS.keys
    for field in _RECORDS.array_fields():
        assert np.array_equal(getattr(loaded.records, field), getattr(_RECORDS, field))


@fuzz_settings(100)
@given(damage(_PACKED_CACHE, _PACKED_FILES))
def test_a_damaged_packed_segment_reads_back_exactly_or_not_at_all(
        case: tuple[str, str, bytes]):
    assert any(name.endswith("packed/c.0") for name in _PACKED_FILES)
    _check(case[0], case[2], _PACKED_CACHE, _PACKED_NAME)


@pytest.mark.parametrize("path", regression_inputs("cache_segment"), ids=lambda p: p.name)
def test_saved_cache_segment_inputs_read_back_exactly_or_not_at_all(path: Path) -> None:
    # First line: the file it replaces; "{segment}" stands for the segment's name.
    name, _, data = path.read_bytes().replace(b"{segment}", _NAME.encode()).partition(b"\n")
    _check(name.decode(), data)


def _check(name: str, data: bytes, cache: DatasetCache = _CACHE, segment: str = _NAME
           ) -> None:
    group = cache.path
    original = (group / name).read_bytes()
    (group / name).write_bytes(data)  # put back below: one copy of the segment serves all
    tracemalloc.start()
    try:
        loaded = read_segment(group / "segments", group / "markers" / f"{segment}.json")
    except DamagedFile as damaged:
        assert str(damaged).startswith(str(group)) and "\n" not in str(damaged)
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        (group / name).write_bytes(original)
        assert peak < _MEMORY_LIMIT, f"{peak:,} bytes allocated reading {name}"
    if loaded is not None:  # only what was written, bit for bit
        assert loaded.records.keys == _RECORDS.keys and not loaded.rejected
        for field in _RECORDS.array_fields():
            assert np.array_equal(getattr(loaded.records, field), getattr(_RECORDS, field))
