"""Every dataset layout users have gives the answer of the same images in a folder."""

import io
import os
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import normstats
from normstats.errors import InvalidOptionError, NormstatsError, UnreadableInputError
from normstats.sources import open_source
from normstats.sources.parquet import ParquetSource
from tests.oracle import assert_matches_oracle


def _png(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def _write_shards(folder, images, per_shard=5):
    folder.mkdir(parents=True, exist_ok=True)
    for shard, start in enumerate(range(0, len(images), per_shard)):
        with tarfile.open(folder / f"shard-{shard:06d}.tar", "w") as tar:
            for i in range(start, min(start + per_shard, len(images))):
                data = _png(images[i])
                info = tarfile.TarInfo(f"{i:06d}.png")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                label = tarfile.TarInfo(f"{i:06d}.cls")
                label.size = 1
                tar.addfile(label, io.BytesIO(b"3"))


def _write_parquet(folder, images, files=2, row_group_size=3, column="image"):
    """Hugging Face's layout: data/train-0000N-of-0000M.parquet, an Image struct column."""
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(images) // files)
    for f in range(files):
        part = images[f * per_file:(f + 1) * per_file]
        cells = pa.array([{"bytes": _png(p), "path": f"{f}-{i}.png"} for i, p in enumerate(part)])
        pq.write_table(pa.table({column: cells, "label": list(range(len(part)))}),
                       folder / f"train-{f:05d}-of-{files:05d}.parquet",
                       row_group_size=row_group_size)


@pytest.fixture
def images(rng):
    from tests.conftest import random_images

    return random_images(rng, 17)


def test_a_webdataset_folder_of_shards_is_its_samples(tmp_path, images):
    _write_shards(tmp_path / "wds", images)
    stats = normstats.compute(tmp_path / "wds", workers=1)
    assert_matches_oracle(stats, images, 255)
    assert stats.source.endswith("(4 tar files)")


@pytest.mark.parametrize("pattern", ["shard-*.tar", "shard-{000000..000003}.tar"])
def test_globs_and_brace_ranges_of_shards(tmp_path, images, pattern):
    _write_shards(tmp_path, images)
    stats = normstats.compute(str(tmp_path / pattern), workers=1)
    assert_matches_oracle(stats, images, 255)
    assert stats.source.count("shard-") == 4  # each shard named


def test_several_paths_of_different_kinds_are_their_union(tmp_path, images):
    """Image files, a folder, shards and an .npy array: one dataset, exact."""
    (tmp_path / "loose").mkdir()
    for i in range(3):
        Image.fromarray(images[i]).save(tmp_path / "loose" / f"{i}.png")
    (tmp_path / "folder").mkdir()
    for i in range(3, 6):
        Image.fromarray(images[i]).save(tmp_path / "folder" / f"{i}.png")
    _write_shards(tmp_path / "wds", images[6:11])
    same_shape = images[11:17:3]  # (5, 7) images: stacked in one .npy
    np.save(tmp_path / "more.npy", np.stack(same_shape))
    paths = [str(tmp_path / "loose" / f"{i}.png") for i in range(3)] + [
        str(tmp_path / "folder"), str(tmp_path / "wds" / "*.tar"), str(tmp_path / "more.npy")]
    # the array's channels are named like the decoded images', so they pool
    stats = normstats.compute(paths, workers=1, channels=("R", "G", "B"))
    assert_matches_oracle(stats, images[:11] + same_shape, 255)


def test_one_image_file_is_a_one_image_dataset(tmp_path, images):
    Image.fromarray(images[1]).save(tmp_path / "photo.png")
    stats = normstats.compute(tmp_path / "photo.png")
    assert_matches_oracle(stats, [images[1]], 255)
    assert stats.source == str(tmp_path / "photo.png")


def test_a_file_named_twice_counts_once(tmp_path, images):
    Image.fromarray(images[0]).save(tmp_path / "a.png")
    Image.fromarray(images[1]).save(tmp_path / "b.png")
    stats = normstats.compute([str(tmp_path / "a.png"), str(tmp_path / "*.png")])
    assert_matches_oracle(stats, images[:2], 255)


def test_format_that_does_not_fit_the_path_is_an_error_not_ignored(tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 3, 3), np.uint8))
    with pytest.raises(InvalidOptionError, match="--format folder reads a folder"):
        open_source(str(tmp_path / "x.npy"), format="folder")
    with pytest.raises(InvalidOptionError, match="--format npy reads a file, and this is a "
                                                 "folder"):
        open_source(str(tmp_path), format="npy")


@pytest.mark.parametrize("task_size", [None, 1, 2, 5, 100])
def test_parquet_dataset_any_split_is_exact(tmp_path, images, task_size):
    _write_parquet(tmp_path / "hf" / "data", images)
    stats = normstats.compute(tmp_path / "hf", workers=2, task_size=task_size,
                              scheduler="processes")
    assert_matches_oracle(stats, images, 255)
    assert stats.source.endswith("(2 Parquet files)")


def test_parquet_tasks_cover_every_row_once_even_with_few_row_groups(tmp_path, images):
    _write_parquet(tmp_path, images, files=1, row_group_size=100)  # one row group
    source = ParquetSource([str(next(tmp_path.glob("*.parquet")))])
    tasks = source.tasks(workers=2)
    assert len(tasks) == 4  # split for the workers
    covered = [(t.start, t.stop) for t in tasks]
    assert covered[0][0] == 0 and covered[-1][1] == 17
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:], strict=False))


def test_parquet_binary_and_path_columns(tmp_path, images):
    Image.fromarray(images[0]).save(tmp_path / "a.png")
    (tmp_path / "sub").mkdir()
    Image.fromarray(images[1]).save(tmp_path / "sub" / "b.png")
    pq.write_table(pa.table({"image_path": ["a.png", "sub/b.png"]}), tmp_path / "paths.parquet")
    assert_matches_oracle(normstats.compute(tmp_path / "paths.parquet"), images[:2], 255)
    pq.write_table(pa.table({"png": pa.array([_png(p) for p in images[:3]], pa.binary())}),
                   tmp_path / "bytes.parquet")
    assert_matches_oracle(normstats.compute(tmp_path / "bytes.parquet"), images[:3], 255)


def test_parquet_bad_rows_are_named_and_skipped_or_stop_the_run(tmp_path, images):
    cells = pa.array([{"bytes": _png(images[0]), "path": "a.png"},
                      {"bytes": _png(images[1])[:40], "path": "cut.png"},
                      None,
                      {"bytes": _png(images[2]), "path": "c.png"}])
    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"image": cells}), path)
    stats = normstats.compute(path)
    assert_matches_oracle(stats, [images[0], images[2]], 255)
    assert [s.path for s in stats.skipped] == ["train.parquet:1", "train.parquet:2"]
    assert "empty cell" in stats.skipped[1].reason
    with pytest.raises(UnreadableInputError, match=r"train\.parquet:[12]: "):
        normstats.compute(path, on_error="fail")


def test_parquet_image_column_is_chosen_or_asked_for(tmp_path, images):
    cells = pa.array([{"bytes": _png(images[0]), "path": "a.png"}])
    pq.write_table(pa.table({"image": cells, "thumbnail": cells}), tmp_path / "two.parquet")
    with pytest.raises(NormstatsError, match=r"several image columns \(image, thumbnail\); "
                                             "choose one with --image-key"):
        normstats.compute(tmp_path / "two.parquet")
    stats = normstats.compute(tmp_path / "two.parquet", image_key="thumbnail")
    assert_matches_oracle(stats, images[:1], 255)
    with pytest.raises(InvalidOptionError, match="no column 'nope'"):
        normstats.compute(tmp_path / "two.parquet", image_key="nope")
    # a column of numbers chosen beside the image columns: named (it was told "every
    # column is a number", judged by the chosen column alone)
    pq.write_table(pa.table({"image": cells, "label": [1]}), tmp_path / "labelled.parquet")
    with pytest.raises(InvalidOptionError) as chosen:
        normstats.compute(tmp_path / "labelled.parquet", image_key="label")
    assert str(chosen.value).endswith("column 'label' (int64) holds no images (bytes, a path, "
                                      "or a struct of them); the columns that can hold images "
                                      "are image")
    pq.write_table(pa.table({"label": [1]}), tmp_path / "none.parquet")
    with pytest.raises(NormstatsError, match="no image column") as caught:
        normstats.compute(tmp_path / "none.parquet")
    # a file of numbers, or of pixel lists written by pyarrow itself (no datasets
    # metadata), says how to read it (it said only which columns it has)
    assert str(caught.value).endswith(
        "every column is a number: for per-feature statistics of the table, pass it as a "
        "pandas or polars DataFrame, in Python normstats.compute(pd.read_parquet(path)) for a "
        "Parquet file, normstats.compute(dataset.to_pandas()) for a Hugging Face dataset")
    pair = [images[0], images[0][::-1].copy()]  # one size: one array
    pixels = pa.array([image.tolist() for image in pair])
    pq.write_table(pa.table({"pixels": pixels, "label": [1, 2]}), tmp_path / "lists.parquet")
    with pytest.raises(NormstatsError) as caught:
        normstats.compute(tmp_path / "lists.parquet")
    assert str(caught.value).endswith(
        "the columns are pixels, label; column 'pixels' holds lists of int64 (3 levels): if "
        "they are pixels or vectors, read them into one array and pass it, in Python "
        "normstats.compute(np.array(pq.read_table(path)['pixels'].to_pylist()))")
    advised = np.array(pq.read_table(tmp_path / "lists.parquet")["pixels"].to_pylist())
    assert_matches_oracle(normstats.compute(advised.astype(np.uint8)), pair, 255)


def test_a_damaged_parquet_file_is_one_error_naming_it(tmp_path, images):
    _write_parquet(tmp_path, images, files=1)
    good = next(tmp_path.glob("*.parquet"))
    (tmp_path / "cut.parquet").write_bytes(good.read_bytes()[:200])
    with pytest.raises(NormstatsError, match="cut.parquet: not a readable Parquet file"):
        normstats.compute(tmp_path / "cut.parquet")


def test_without_pyarrow_parquet_says_how_to_install_it(tmp_path, images, monkeypatch):
    import builtins

    _write_parquet(tmp_path, images, files=1)
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(NormstatsError, match=r"pip install 'normstats\[parquet\]'"):
        normstats.compute(tmp_path)


def test_images_of_a_parquet_dataset_as_a_dask_array_match_compute(tmp_path, rng):
    same = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(7)]
    _write_parquet(tmp_path, same, files=2, row_group_size=2)
    x = normstats.images(str(tmp_path), on_error="fail")  # known chunk sizes
    assert x.shape == (7, 6, 5, 3)
    assert np.array_equal(x.compute(scheduler="sync"), np.stack(same))
    assert normstats.compute(x) == normstats.compute(str(tmp_path))


def test_a_folder_of_both_shards_and_parquet_asks_which(tmp_path, images):
    _write_shards(tmp_path / "d", images[:5])
    _write_parquet(tmp_path / "d", images[5:], files=1)
    with pytest.raises(NormstatsError, match="holds both tar shards"):
        normstats.compute(tmp_path / "d")
    os.remove(next((tmp_path / "d").glob("*.parquet")))
    assert normstats.compute(tmp_path / "d").images == 5


def test_a_folder_and_paths_inside_it_count_each_image_once(tmp_path, images):
    _write_shards(tmp_path / "wds", images[:10])
    shards = normstats.compute([str(tmp_path / "wds"), str(tmp_path / "wds" / "*.tar"),
                                str(tmp_path / "wds")])
    assert_matches_oracle(shards, images[:10], 255)
    first = str(tmp_path / "wds" / "shard-000000.tar")
    twice = normstats.compute([first, str(tmp_path / "wds" / "." / "shard-000000.tar")])
    assert_matches_oracle(twice, images[:5], 255)  # one shard, two spellings
    (tmp_path / "photos" / "cats").mkdir(parents=True)
    for i in range(10, 14):
        Image.fromarray(images[i]).save(tmp_path / "photos" / "cats" / f"{i}.png")
    folder = normstats.compute([str(tmp_path / "photos" / "cats" / "10.png"),
                                str(tmp_path / "photos"), str(tmp_path / "photos" / "cats")])
    assert_matches_oracle(folder, images[10:14], 255)
