"""Commits as results arrive, and segments of listed records written one array at a time."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image

import normstats
import normstats.engine.cache.listed_segment as listed_segment
from normstats.engine.cache import writer as writer_module
from normstats.engine.cache.listed_segment import RecordRows, write_listed
from normstats.engine.cache.segment import read_segment
from normstats.engine.cache.store import DatasetCache
from normstats.engine.cache.writer import SegmentWriter, _narrowest, held
from normstats.maths.records import concat_records, cross_sums_wanted, records_from_stack
from normstats.sources.base import TaskResult
from normstats.sources.decoding.policy import DecodePolicy
from normstats.sources.file_list import FileList
from normstats.sources.folder import FolderSource


def make_folder(root: Path, count: int) -> Path:
    for i in range(count):
        rng = np.random.default_rng(i)
        path = root / f"d{i % 3}" / f"{i:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)).save(path)
    return root


def loaded(store: DatasetCache) -> list:
    return [read_segment(store.segments_dir, marker)
            for marker in sorted(store.markers_dir.glob("*.json"))]


def test_many_commits_end_as_one_segment_in_listing_order(tmp_path, monkeypatch):
    """Commits after every task, from two worker processes finishing in any order: the run
    ends with one segment whose rows are the listing's, so the next plan matches it row
    for row, and every run equals a cold run bit for bit."""
    folder = make_folder(tmp_path / "data", 40)
    monkeypatch.setattr(writer_module, "FLUSH_BYTES", 1)
    reference = normstats.compute(folder, cache=False, workers=1)
    first = normstats.compute(folder, cache=tmp_path / "c", workers=2, task_size=2)
    store = DatasetCache.open(tmp_path / "c", str(folder), DecodePolicy())
    (segment,) = loaded(store)
    assert list(segment.index.paths) == FolderSource(folder).walk.files.paths()
    warm = normstats.compute(folder, cache=tmp_path / "c", workers=2)
    assert first == reference == warm and warm.images_decoded == 0


def result_of(files: FileList, rows: list[int], seed: int) -> TaskResult:
    rng = np.random.default_rng(seed)
    stack = rng.integers(0, 256, (len(rows), 3, 2, 3), dtype=np.uint8)
    return TaskResult(records_from_stack(stack, keys=tuple(files[r].path for r in rows),
                                         channel_names=("R", "G", "B")))


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_each_record_is_keyed_by_its_own_listed_file(tmp_path, order):
    """A listing in path order is searched a task's window at a time; any other order
    through a dict of every path: either way each record gets its own file's key."""
    paths = [f"f{i:02d}.png" for i in range(12)]
    if order == "shuffled":
        paths = paths[5:] + paths[:5]
    files = FileList.from_columns(paths, np.arange(12) + 100, np.arange(12) * 7,
                                  np.arange(12) * 11)
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    writer = SegmentWriter(store, files, flush_seconds=3600)
    results = [result_of(files, [4, 5, 8], 1), result_of(files, [0, 1, 2, 3], 2),
               result_of(files, [9, 6, 7], 3), result_of(files, [10, 11], 4)]
    for result in results:
        writer(result)
    writer.close()
    (segment,) = loaded(store)
    expected = concat_records([r.records for r in results])
    for position, path in enumerate(segment.index.paths):
        row = paths.index(path)
        assert (segment.index.sizes[position], segment.index.mtimes[position],
                segment.index.stamps[position]) == (100 + row, 7 * row, 11 * row)
        mine = expected.keys.index(path)
        assert np.array_equal(segment.records.sums[position], expected.sums[mine])
    assert sorted(segment.index.paths) == sorted(expected.keys)


def test_a_result_waiting_for_its_commit_holds_no_path_strings(tmp_path):
    files = FileList.from_columns([f"{i}.png" for i in range(4)], [1] * 4, [2] * 4)
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    writer = SegmentWriter(store, files, flush_seconds=3600)
    writer(result_of(files, [0, 1, 2, 3], 0))
    assert [part.records.keys for part in writer._pending] == [()]
    assert writer._pending[0].listed.tolist() == [0, 1, 2, 3]


def test_an_8_bit_rgb_image_is_held_in_26_bytes_and_written_as_computed(tmp_path):
    """Each array in its narrowest exact dtype: pixels 2 bytes, minima and maxima 1 a
    channel, sums 2 and squares 4 (an RGB image of 16²), not 104 bytes; the segment written
    from the records held is the one written from the records as computed, digest and
    all."""
    rng = np.random.default_rng(3)
    stack = rng.integers(0, 256, (5, 16, 16, 3), dtype=np.uint8)
    records = records_from_stack(stack, keys=tuple(f"{i}.png" for i in range(5)),
                                 channel_names=("R", "G", "B"))
    kept = held(records)
    assert sum(getattr(kept, f).nbytes for f in kept.array_fields()) == 5 * 26
    assert sum(getattr(records, f).nbytes for f in records.array_fields()) == 5 * 104
    files = FileList.from_columns(list(records.keys), np.arange(5), np.arange(5))
    written = []
    for name, part in (("computed", records), ("held", kept)):
        store = DatasetCache.open(tmp_path / name, str(tmp_path / "data"), DecodePolicy())
        segment = write_listed(store, files, [RecordRows(part, np.array([3, 0, 4, 1, 2]))],
                               (), ())
        folder = store.segments_dir / segment.name
        written.append({f.relative_to(folder): f.read_bytes() for f in folder.rglob("*")
                        if f.is_file()})
        (loaded_segment,) = loaded(store)
        assert loaded_segment is not None
    assert written[0] == written[1] and len(written[0]) > 10  # every array, byte for byte


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    hnp.arrays(np.int64, st.integers(0, 6), elements=st.one_of(
        st.integers(-2**63, 2**63 - 1), st.integers(-70000, 70000), st.integers(0, 300),
        st.sampled_from([0, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
                         -1, -128, -129, -32768, -32769, -2**31, -2**31 - 1]))),
    hnp.arrays(np.float64, st.integers(0, 6), elements=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 70000).map(float),
        st.sampled_from([-0.0, 0.0, 0.5, 255.0, 255.5, 256.0, 65535.0, 65536.0, -1.0,
                         float("nan"), float("inf")])))))
def test_an_array_held_narrow_widens_back_bit_for_bit(values):
    """Against the values themselves: whatever the narrow dtype, widening it back to the
    array's own dtype gives the same bits (-0.0, NaN, fractions and values past 32 bits
    stay as they are), and never a wider one."""
    narrow = _narrowest(values)
    assert narrow.dtype.itemsize <= values.dtype.itemsize
    widened = narrow.astype(values.dtype)
    assert widened.tobytes() == values.tobytes()
    if narrow.dtype != values.dtype:
        assert narrow.dtype.kind in "iu"


@pytest.mark.parametrize("values, dtype", [
    ([0, 255], np.uint8), ([0, 256], np.uint16), ([0, 65536], np.uint32),
    ([0, 2**32], np.int64), ([-1, 127], np.int8), ([-129, 0], np.int16),
    ([-2**31, 2**31 - 1], np.int32), ([0.0, 255.0], np.uint8), ([0.0, 256.0], np.uint16),
    ([0.0, 65536.0], np.float64), ([0.5, 1.0], np.float64), ([-0.0, 1.0], np.float64)])
def test_an_array_is_held_in_the_narrowest_dtype_that_holds_it(values, dtype):
    kind = np.float64 if isinstance(values[0], float) else np.int64
    assert _narrowest(np.array(values, kind)).dtype == dtype


def test_records_are_committed_when_those_held_reach_flush_bytes(tmp_path, monkeypatch):
    """What a run holds is bounded in bytes as held (`held`), not in images: results are
    committed once the bytes held reach FLUSH_BYTES, and not before."""
    files = FileList.from_columns([f"{i:02d}.png" for i in range(12)], [1] * 12, [2] * 12)
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    one = held(result_of(files, [0, 1, 2, 3], 0).records)
    size = sum(getattr(one, f).nbytes for f in one.array_fields()) + 4  # rows as uint8
    monkeypatch.setattr(writer_module, "FLUSH_BYTES", 2 * size)
    writer = SegmentWriter(store, files, flush_seconds=3600)
    writer(result_of(files, [0, 1, 2, 3], 0))
    assert writer.segments == 0 and writer._pending_bytes == size
    writer(result_of(files, [4, 5, 6, 7], 1))
    assert writer.segments == 1 and writer._pending_bytes == 0
    writer(result_of(files, [8, 9, 10, 11], 2))
    assert writer.segments == 1 and writer.has_pending


def parts(valid: tuple[bool, bool], cross: tuple[bool, bool]) -> list[RecordRows]:
    made = []
    for index in (0, 1):
        rng = np.random.default_rng(index)
        with cross_sums_wanted(cross[index]):
            records = records_from_stack(rng.integers(0, 256, (3, 2, 2, 3), dtype=np.uint8),
                                         keys=tuple(f"{index}{i}" for i in range(3)),
                                         channel_names=("R", "G", "B"))
        if valid[index]:
            records = dataclasses.replace(records, valid=np.full((3, 3), 4, np.int64))
        made.append(RecordRows(records, np.array([4, 0, 2]) + index))
    return made


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("valid, cross", [((False, False), (True, True)),
                                          ((True, False), (True, False)),
                                          ((False, True), (False, False))])
def test_a_segment_written_array_by_array_holds_what_joined_records_hold(tmp_path, valid,
                                                                        cross, compress):
    """Valid-value counts when any part has them, cross sums only when all do, rows in
    listing order: `concat_records`, then sorted, one array at a time; a commit during a
    run (not compressed) keeps the same arrays packed in one."""
    files = FileList.from_columns([f"{r}.png" for r in range(6)], np.arange(6), np.arange(6))
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    given = parts(valid, cross)
    written = write_listed(store, files, given, (), (), compress=compress)
    arrays = sorted(p.name for p in (store.segments_dir / written.name).iterdir() if p.is_dir())
    assert (arrays == ["packed"]) == (not compress) and len(arrays) >= 1
    (segment,) = loaded(store)
    joined = concat_records([part.records for part in given])
    order = np.argsort(np.concatenate([part.listed for part in given]))
    expected = joined.take(order)
    assert segment.index.paths == tuple(f"{r}.png" for r in range(6))
    for field in expected.array_fields():
        assert np.array_equal(getattr(segment.records, field), getattr(expected, field)), field
    assert (segment.records.cross_sums is None) == (not all(cross))
    assert (segment.records.valid is None) == (not any(valid))


@pytest.mark.parametrize("failing", ["maximum", "sums_sq"])
def test_an_array_the_compressing_thread_cannot_write_fails_the_segment(tmp_path, monkeypatch,
                                                                        failing):
    """A compaction writes each array from a second thread: an error writing any of them,
    the last one too, is raised by `write_listed`, and nothing is committed."""
    files = FileList.from_columns([f"{r}.png" for r in range(6)], np.arange(6), np.arange(6))
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    real = listed_segment.write_array
    threads = set()

    def write_array(folder, values, compress=True):
        threads.add(threading.current_thread().name)
        if folder.name == failing:
            raise OSError(28, "No space left on device")
        return real(folder, values, compress)

    monkeypatch.setattr(listed_segment, "write_array", write_array)
    with pytest.raises(OSError, match="No space"):
        write_listed(store, files, parts((False, False), (True, True)), (), ())
    assert loaded(store) == [] and len(threads) == 1
    assert threads.pop().startswith("normstats-cache-compress")


def test_records_answering_one_file_twice_are_not_written(tmp_path):
    files = FileList.from_columns(["a.png", "b.png"], [1, 2], [3, 4])
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    records = parts((False, False), (False, False))[0].records
    with pytest.raises(ValueError, match="answered twice"):
        write_listed(store, files, [RecordRows(records, np.array([0, 1, 0]))], (), ())
    assert loaded(store) == []


def test_replaced_segments_are_moved_aside_and_deleted_before_the_run_returns(tmp_path,
                                                                              monkeypatch):
    """The compaction only renames the folders it replaces; a background thread deletes
    them (and the next run that writes deletes what a process ended before deleting), and
    the run waits for it before it returns: a caller that copies or deletes the cache next
    (as `shutil.rmtree` in a benchmark did) never races the deletion."""
    folder = make_folder(tmp_path / "data", 12)
    monkeypatch.setattr(writer_module, "FLUSH_BYTES", 1)
    normstats.compute(folder, cache=tmp_path / "c", workers=1, task_size=2)
    store = DatasetCache.open(tmp_path / "c", str(folder), DecodePolicy())
    assert len([p for p in store.segments_dir.iterdir() if p.is_dir()]) == 1
    assert "normstats-cache-trash" not in [thread.name for thread in threading.enumerate()]
    assert list((store.path / "trash").iterdir()) == []
    leftover = store.path / "trash" / "killed-run" / "some-segment"
    leftover.mkdir(parents=True)
    assert normstats.compute(folder, cache=tmp_path / "c", workers=1).images_decoded == 0
    assert "normstats-cache-trash" not in [thread.name for thread in threading.enumerate()]
    assert list((store.path / "trash").iterdir()) == []


def test_a_compaction_of_packed_commits_equals_one_of_the_records_in_memory(tmp_path):
    """Rows committed packed during a run (with cross sums: arrays of channel pairs, and
    valid counts) read back one array at a time from the packed file make the same
    compressed segment as the same records from memory."""
    files = FileList.from_columns([f"{r}.png" for r in range(6)], np.arange(6), np.arange(6))
    given = parts((True, True), (True, True))
    direct = DatasetCache.open(tmp_path / "a", str(tmp_path / "data"), DecodePolicy())
    write_listed(direct, files, given, (), ())
    staged = DatasetCache.open(tmp_path / "b", str(tmp_path / "data"), DecodePolicy())
    commits = [write_listed(staged, files, [part], (), (), compress=False) for part in given]
    final = write_listed(staged, files, (), commits, ())
    (expected,) = loaded(direct)
    (got,) = [s for s in loaded(staged) if s.index.name == final.name]
    for field in expected.records.array_fields():
        assert np.array_equal(getattr(got.records, field), getattr(expected.records, field)), \
            field
    assert got.index.paths == expected.index.paths


def test_parts_in_any_order_land_on_their_listed_rows_by_slice_or_by_index(tmp_path):
    """Parts whose rows are one consecutive run of the listing are copied as a slice,
    the others through their ranks: every record lands on its own listed row, with parts
    given in any order (tasks finish out of order), as `concat_records` then a sort."""
    rng = np.random.default_rng(5)
    files = FileList.from_columns([f"{r:02d}.png" for r in range(12)], np.arange(12),
                                  np.arange(12))
    rows = [np.array([6, 7, 8]), np.array([0, 3, 4]), np.array([9]), np.array([1, 2, 5]),
            np.array([10, 11])]
    given = [RecordRows(records_from_stack(
        rng.integers(0, 256, (len(r), 2, 2, 3), dtype=np.uint8),
        keys=tuple(f"{i:02d}.png" for i in r), channel_names=("R", "G", "B")), r)
        for r in rows]
    places = listed_segment._places(np.argsort(np.argsort(np.concatenate(rows))),
                                    [len(r) for r in rows])
    assert [isinstance(place, slice) for place in places] == [True, False, True, False, True]
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    write_listed(store, files, given, (), ())
    (segment,) = loaded(store)
    joined = concat_records([part.records for part in given])
    expected = joined.take(np.argsort(np.concatenate(rows)))
    for field in expected.array_fields():
        assert np.array_equal(getattr(segment.records, field), getattr(expected, field)), field
    assert list(segment.index.paths) == files.paths()


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"),
                                     KeyboardInterrupt()])
def test_records_a_failed_compaction_held_are_committed_as_during_the_run(
        tmp_path, monkeypatch, failure):
    """The compaction takes what arrived since the last commit from memory: when it fails
    (a full disk: the run still returns) or is interrupted (Ctrl-C), those records are
    committed as a run commits them, and the next run decodes nothing."""
    from normstats.engine.cache import run as cache_run

    folder = make_folder(tmp_path / "data", 12)
    monkeypatch.setattr(cache_run, "FLUSH_SECONDS", 3600.0)  # no commit during the run
    real = cache_run.write_listed

    def compaction_fails(*args, **kwargs):
        raise failure
    monkeypatch.setattr(cache_run, "write_listed", compaction_fails)
    if isinstance(failure, KeyboardInterrupt):
        with pytest.raises(KeyboardInterrupt):
            normstats.compute(folder, cache=tmp_path / "c", workers=1, task_size=5)
    else:
        normstats.compute(folder, cache=tmp_path / "c", workers=1, task_size=5)
    monkeypatch.setattr(cache_run, "write_listed", real)
    store = DatasetCache.open(tmp_path / "c", str(folder), DecodePolicy())
    assert len(loaded(store)) == 1  # the records, committed packed
    again = normstats.compute(folder, cache=tmp_path / "c", workers=1)
    assert (again.images_cached, again.images_decoded) == (12, 0)
    assert again == normstats.compute(folder, cache=False, workers=1)


@pytest.mark.parametrize("damage", ["truncated", "longer", "fifo", "shape"])
def test_a_damaged_packed_commit_is_refused_before_it_is_read(tmp_path, damage):
    """The packed file of a commit a killed run left: cut short, grown, replaced by a FIFO
    (never opened for reading: it would wait forever), or its zarr.json promising more
    bytes than the marker's rows allow: the segment is not used (decoded again)."""
    import os

    from normstats.engine.cache.segment import DamagedFile

    files = FileList.from_columns([f"{r}.png" for r in range(6)], np.arange(6), np.arange(6))
    store = DatasetCache.open(tmp_path, str(tmp_path / "data"), DecodePolicy())
    written = write_listed(store, files, parts((False, False), (False, False)), (), (),
                           compress=False)
    packed = store.segments_dir / written.name / "packed"
    chunk = packed / "c.0"
    data = chunk.read_bytes()
    if damage == "truncated":
        chunk.write_bytes(data[:-9])
    elif damage == "longer":
        chunk.write_bytes(data + b"\0" * 8)
    elif damage == "fifo":
        chunk.unlink()
        os.mkfifo(chunk)
    else:
        meta = (packed / "zarr.json").read_text()
        (packed / "zarr.json").write_text(meta.replace(f"[{len(data)}]", f"[{10**9}]"))
    marker = store.markers_dir / f"{written.name}.json"
    try:
        assert read_segment(store.segments_dir, marker) is None
    except DamagedFile:
        assert damage in ("fifo", "shape")
