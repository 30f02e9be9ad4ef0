"""Hugging Face ``Dataset`` objects, read through their Arrow table by the real ``datasets``.

Every form of a dataset (in memory, memory-mapped, paths only, ``decode=False``, any
``with_format``) gives the statistics of the same images in a folder, bit for bit; a
``select``/``shuffle``/``filter``/``train_test_split`` gives the statistics of exactly the
rows the dataset holds, in its order, each once, against an exact integer oracle.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import datasets
import numpy as np
import pytest
from datasets import Dataset, DatasetDict, Features, Image, Value

import normstats
from normstats.errors import InvalidOptionError, NormstatsError
from normstats.sources import open_source
from normstats.sources.hf_dataset import HFDatasetSource
from normstats.sources.mapped import MappedSource

fw = importlib.import_module("format_writers")
oracle = importlib.import_module("oracle")

#: Ten images of three sizes, each of its own brightness: a row read in place of another,
#: or a row read twice, moves every statistic.
PICTURES = [np.random.default_rng(i).integers(20 * i, 20 * i + 60, size=(5 + i % 3, 7 - i % 2, 3),
                                              dtype=np.uint8) for i in range(10)]
FEATURES = Features({"image": Image(), "id": Value("int64"), "label": Value("int64")})


@pytest.fixture(autouse=True)
def _datasets_cache_in_tmp(tmp_path, monkeypatch):
    """datasets writes nothing outside the test's folder (its cache of loaded datasets)."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    datasets.disable_progress_bars()


def _in_memory() -> Dataset:
    cells = [{"bytes": fw.png_bytes(p), "path": None} for p in PICTURES]
    return Dataset.from_dict({"image": cells, "id": list(range(10)),
                              "label": [i % 3 for i in range(10)]}, features=FEATURES)


def _on_disk(tmp_path: Path) -> Dataset:
    _in_memory().save_to_disk(tmp_path / "saved")
    return datasets.load_from_disk(tmp_path / "saved")


def _dataset(storage: str, tmp_path: Path) -> Dataset:
    return _in_memory() if storage == "memory" else _on_disk(tmp_path)


def _paths(tmp_path: Path) -> Dataset:
    """What ``load_dataset("imagefolder")`` holds: absolute paths, no bytes."""
    folder = tmp_path / "files"
    folder.mkdir()
    files = [str(folder / f"{i:04d}.png") for i in range(10)]
    for file, pixels in zip(files, PICTURES, strict=True):
        Path(file).write_bytes(fw.png_bytes(pixels))
    return Dataset.from_dict({"image": files}).cast_column("image", Image())


FORMS = {
    "in memory": lambda tmp: _in_memory(),
    "memory-mapped": _on_disk,
    "paths": _paths,
    "decode=False": lambda tmp: _on_disk(tmp).cast_column("image", Image(decode=False)),
    "decode=False in memory": lambda tmp: _in_memory().cast_column("image", Image(decode=False)),
    "numpy": lambda tmp: _on_disk(tmp).with_format("numpy"),
    "torch": lambda tmp: _on_disk(tmp).with_format("torch"),
    "arrow, in memory": lambda tmp: _in_memory().with_format("arrow"),
    "pandas": lambda tmp: _on_disk(tmp).with_format("pandas", columns=["label"]),
}


@pytest.fixture(scope="module")
def folder_stats(tmp_path_factory) -> normstats.DatasetStats:
    folder = tmp_path_factory.mktemp("pictures")
    for i, pixels in enumerate(PICTURES):
        (folder / f"{i:04d}.png").write_bytes(fw.png_bytes(pixels))
    return normstats.compute(folder, workers=1)


@pytest.mark.parametrize("form", FORMS)
def test_every_form_gives_the_folders_statistics_bit_for_bit(form, tmp_path, folder_stats):
    dataset = FORMS[form](tmp_path)
    assert isinstance(open_source(dataset), HFDatasetSource)  # the table, not the items
    stats = normstats.compute(dataset, workers=2, task_size=3)
    assert oracle.numbers(stats) == oracle.numbers(folder_stats)
    assert (list(stats.mean), list(stats.std)) == oracle.integer_mean_std(PICTURES, 255)
    assert stats.source.startswith("Hugging Face Dataset (10 rows, column 'image')")


def test_resize_and_center_crop_apply_as_to_the_folder(tmp_path, folder_stats):
    folder = Path(folder_stats.source)
    for dataset in (_in_memory(), _on_disk(tmp_path)):
        cropped = normstats.compute(dataset, resize=9, center_crop=4, workers=2, task_size=3)
        assert cropped.mode == "RGB, Resize(9), CenterCrop(4)"
        assert oracle.numbers(cropped) == oracle.numbers(
            normstats.compute(folder, resize=9, center_crop=4, workers=1))
        assert cropped.pixels_per_channel == 10 * 16


def _expected(derived: Dataset) -> list[np.ndarray]:
    """The images the dataset holds, in its order, as datasets itself lists them."""
    return [PICTURES[i] for i in derived.with_format(None)["id"]]


def _derived(dataset: Dataset) -> dict[str, Dataset]:
    split = dataset.train_test_split(test_size=4, seed=3)
    return {"select": dataset.select([7, 2, 2, 9, 0]),
            "shuffle": dataset.shuffle(seed=0),
            "filter": dataset.filter(lambda row: row["label"] == 1),
            "train split": split["train"], "test split": split["test"],
            "select of a shuffle": dataset.shuffle(seed=1).select([0, 3, 4]),
            "contiguous select": dataset.select(range(3, 8)),
            "filter of a torch format": dataset.with_format("torch").filter(
                lambda row: row["label"] != 0)}


@pytest.mark.parametrize("storage", ["memory", "disk"])
def test_an_indices_mapping_is_read_exactly_rows_in_order_each_once(storage, tmp_path):
    for name, derived in _derived(_dataset(storage, tmp_path)).items():
        expected = _expected(derived)
        assert 0 < len(expected) < 10 or name == "shuffle", name
        stats = normstats.compute(derived, workers=2, task_size=2)
        means, stds = oracle.integer_mean_std(expected, 255)
        assert (list(stats.mean), list(stats.std)) == (means, stds), name
        assert stats.images == len(expected), name
        records = normstats.records(derived, workers=2, task_size=2)
        assert list(records.keys) == [f"item {i}" for i in range(len(expected))], name
        sums = [[int(p[:, :, c].astype(np.int64).sum()) for c in range(3)] for p in expected]
        assert np.asarray(records.arrays["sums"]).tolist() == sums, name


def test_a_transform_makes_the_items_so_they_are_read_one_by_one():
    halved = _in_memory().with_transform(
        lambda batch: {"image": [np.asarray(i) // 2 for i in batch["image"]]})
    assert isinstance(open_source(halved), MappedSource)
    stats = normstats.compute(halved, workers=1)
    assert list(stats.mean) == oracle.integer_mean_std([p // 2 for p in PICTURES], 255)[0]


def test_an_iterable_dataset_keeps_the_iterable_path(folder_stats):
    stats = normstats.compute(_in_memory().to_iterable_dataset(), mode="RGB")
    assert oracle.numbers(stats) == oracle.numbers(folder_stats)
    assert not stats.source.startswith("Hugging Face")


def test_a_dataset_dict_is_refused_with_its_splits_named(tmp_path):
    splits = DatasetDict({"train": _in_memory(), "validation": _in_memory()})
    with pytest.raises(InvalidOptionError) as caught:
        normstats.compute(splits)
    assert str(caught.value) == ("a Hugging Face DatasetDict of the splits train, validation: "
                                 "pass the one to compute, e.g. dataset['train']")


def test_a_dataset_without_an_image_column_is_one_line_naming_its_columns():
    with pytest.raises(NormstatsError) as caught:
        normstats.compute(Dataset.from_dict({"text": ["a", "b"], "label": [0, 1]}))
    assert str(caught.value) == (
        "Hugging Face Dataset (2 rows): no image column (encoded bytes, an image path, or a "
        "struct of bytes and path); the columns are text, label")


def test_pixel_arrays_in_nested_lists_are_read_from_the_table_in_their_stored_type():
    """``map`` makes nested ``List`` features of a function returning numpy pixels: the
    most common preprocessed column. datasets gives its items as int64 in every format, so
    they were refused as 64-bit integers unless ``with_format("numpy", dtype=np.uint8)``
    said otherwise. Each row is now read from the table as stored (uint8): one array when
    the rows share a shape, else a row at a time; a ragged row and vectors of several
    lengths are refused naming them, and a column of equal vectors is read as (N, d)."""
    pixels = datasets.List(datasets.List(datasets.List(Value("uint8"))))
    arrays = Dataset.from_dict({"pixel_values": [p.tolist() for p in PICTURES]},
                               features=Features({"pixel_values": pixels}))
    expected = oracle.integer_mean_std(PICTURES, 255)
    for form in (arrays, arrays.with_format("torch"),
                 arrays.with_format("numpy", dtype=np.uint8)):
        stats = normstats.compute(form, layout="HWC")
        assert (list(stats.mean), list(stats.std)) == expected and stats.dtype == "uint8"
    same = [p[:5, :6] for p in PICTURES]
    with_image = _in_memory().map(lambda row, i: {"pixels": same[i]}, with_indices=True,
                                  remove_columns=["image"])
    stats = normstats.compute(with_image)
    assert list(stats.mean) == oracle.integer_mean_std(same, 255)[0] and stats.mode == "NHWC"
    assert stats.source == "Hugging Face Dataset column 'pixels' (10 rows, List)"
    ragged = Dataset.from_dict({"pixels": [[[1, 2], [3, 4]], [[1, 2], [3]]]})
    with pytest.raises(NormstatsError, match=r"column 'pixels' \(2 rows, List\): row 1 is not "
                                             r"an array: its lists at nesting level 2 hold 1 "
                                             r"to 2 values$"):
        normstats.compute(ragged)
    vectors = Dataset.from_dict({"x": [[1.0, 2.0], [3.0, 5.0], [5.0, 8.0]]})
    assert normstats.compute(vectors).mean == (3.0, 5.0)
    with pytest.raises(NormstatsError, match="rows of 1 to 2 values: one list a row is a "
                                             "vector"):
        normstats.compute(Dataset.from_dict({"x": [[1.0, 2.0], [3.0]]}))


def test_several_image_columns_need_image_key(folder_stats):
    two = _in_memory().add_column("other", [{"bytes": fw.png_bytes(p // 3), "path": None}
                                            for p in PICTURES])
    two = two.cast_column("other", Image())
    with pytest.raises(NormstatsError, match=r"several Image columns \(image, other\); "
                                             r"choose one with --image-key \(image_key=\)$"):
        normstats.compute(two)
    assert oracle.numbers(normstats.compute(two, image_key="image")) == \
        oracle.numbers(folder_stats)
    thirds = normstats.compute(two, image_key="other")
    assert list(thirds.mean) == oracle.integer_mean_std([p // 3 for p in PICTURES], 255)[0]


def test_an_image_feature_with_a_mode_is_read_only_under_that_mode(tmp_path):
    gray = _in_memory().cast_column("image", Image(mode="L"))
    with pytest.raises(InvalidOptionError, match=r"column 'image' is Image\(mode='L'\), so the "
                                                 r"dataset gives its images as L; read them "
                                                 r"so with mode='L' \(--mode L\)$"):
        normstats.compute(gray)
    as_datasets_gives = [np.asarray(gray[i]["image"])[:, :, None] for i in range(10)]
    stats = normstats.compute(gray, mode="L")
    assert list(stats.mean) == oracle.integer_mean_std(as_datasets_gives, 255)[0]


def test_paths_are_read_as_datasets_reads_them_and_a_missing_one_is_named(tmp_path):
    dataset = _paths(tmp_path)
    missing = str(tmp_path / "files" / "0003.png")
    Path(missing).unlink()
    stats = normstats.compute(dataset, workers=1)
    assert stats.images == 9
    assert [s.path for s in stats.skipped] == ["item 3"]
    assert list(stats.mean) == oracle.integer_mean_std(
        [p for i, p in enumerate(PICTURES) if i != 3], 255)[0]


def test_tasks_carry_file_names_or_their_own_rows_never_the_whole_table(tmp_path):
    """A memory-mapped table travels as the names of its files; a table in memory sends
    each task only its rows (a pickled Arrow slice would carry the whole column)."""
    import pickle

    encoded = [fw.png_bytes(p) for p in PICTURES]
    for name, dataset in {"memory-mapped": _on_disk(tmp_path).shuffle(seed=0),
                          "in memory": _in_memory(), "in memory, shuffled":
                          _in_memory().shuffle(seed=0)}.items():
        tasks = open_source(dataset).tasks(task_size=2)
        assert [task.size for task in tasks] == [2] * 5
        for task in tasks:
            shipped = pickle.dumps(task)
            own = [cell["bytes"] for _, cell in task.cells()]
            carried = [png for png in encoded if png in shipped]
            assert carried == ([] if name == "memory-mapped" else
                               [png for png in encoded if png in own]), name


def test_a_fixed_shape_array_column_is_read_with_its_declared_dtype():
    """Array3D((H, W, 3), "uint8") is how preprocessed pixels are stored; its items come
    as Python lists, and the numpy and torch formats give int64, so every form was refused
    as 64-bit integers. The column is read from the table with its declared dtype: the
    oracle's numbers, in every format, after select (rows in the dataset's order), and
    under image_key for another name."""
    pictures = [p[:5, :6] for p in PICTURES]  # one size, as a fixed shape holds them
    features = Features({"image": datasets.Array3D((5, 6, 3), "uint8"),
                         "label": Value("int64")})
    table = Dataset.from_dict({"image": [p.tolist() for p in pictures],
                               "label": list(range(len(pictures)))}, features=features)
    expected = oracle.integer_mean_std(pictures, 255)[0]
    for form in (table, table.with_format("numpy"), table.with_format("torch")):
        stats = normstats.compute(form)
        assert list(stats.mean) == expected and stats.dtype == "uint8"
        assert stats.source == f"Hugging Face Dataset column 'image' ({len(pictures)} rows, " \
                               "Array3D)"
    chosen = table.select([7, 2, 5])
    assert list(normstats.compute(chosen).mean) == \
        oracle.integer_mean_std([pictures[i] for i in (7, 2, 5)], 255)[0]
    renamed = table.rename_column("image", "frames")
    assert list(normstats.compute(renamed, image_key="frames").mean) == expected


def test_a_variable_height_array_column_is_read_with_its_declared_dtype():
    """Array3D((None, W, 3), "uint8") holds images of several heights; datasets gives its
    items as int64 in every format, so they were refused as 64-bit integers. Each row is
    read from the table with the declared dtype and its own height: the oracle's numbers,
    after select too (rows in the dataset's order, each once)."""
    pictures = [p[:, :6] for p in PICTURES]  # heights 5, 6 and 7: only the first axis varies
    features = Features({"image": datasets.Array3D((None, 6, 3), "uint8")})
    table = Dataset.from_dict({"image": [p.tolist() for p in pictures]}, features=features)
    for form in (table, table.with_format("numpy"), table.with_format("torch")):
        stats = normstats.compute(form)
        assert (list(stats.mean), list(stats.std)) == oracle.integer_mean_std(pictures, 255)
        assert stats.dtype == "uint8" and stats.images == len(pictures)
        assert stats.source.startswith("Hugging Face Dataset column 'image' (10 rows, Array3D")
    chosen = table.select([7, 2, 5, 2])
    assert list(normstats.compute(chosen).mean) == \
        oracle.integer_mean_std([pictures[i] for i in (7, 2, 5, 2)], 255)[0]


def test_the_files_of_a_dataset_of_pixel_arrays_name_the_dataset_object_as_the_way(tmp_path):
    """The files readers take image columns only; a saved dataset (save_to_disk, Parquet)
    whose pixels are an Array3D column used to be refused with its columns listed only.
    The message now names the column, its feature, and the call that reads it exactly."""
    pictures = [p[:5, :6] for p in PICTURES]
    features = Features({"frames": datasets.Array3D((5, 6, 3), "uint8"),
                         "label": Value("int64")})
    table = Dataset.from_dict({"frames": [p.tolist() for p in pictures],
                               "label": list(range(len(pictures)))}, features=features)
    table.save_to_disk(str(tmp_path / "saved"))
    table.to_parquet(str(tmp_path / "frames.parquet"))
    for path, image_key in ((tmp_path / "saved", None), (tmp_path / "frames.parquet", None),
                            (tmp_path / "saved", "frames")):
        with pytest.raises(NormstatsError) as raised:
            normstats.compute(str(path), image_key=image_key)
        assert "column 'frames' holds pixel arrays (Array3D of shape (5, 6, 3), uint8)" in \
            str(raised.value) and "normstats.compute(dataset, image_key='frames')" in \
            str(raised.value), str(raised.value)
    loaded = datasets.load_from_disk(str(tmp_path / "saved"))
    assert list(normstats.compute(loaded, image_key="frames").mean) == \
        oracle.integer_mean_std(pictures, 255)[0]
    mapped = _in_memory().map(lambda row, i: {"pixels": pictures[i]}, with_indices=True,
                              remove_columns=["image"])  # List(List(List(uint8)))
    mapped.save_to_disk(str(tmp_path / "mapped"))
    with pytest.raises(NormstatsError, match=r"column 'pixels' holds pixel arrays \(3 levels "
                                             r"of lists of uint8\).*normstats.compute\(dataset\)"):
        normstats.compute(str(tmp_path / "mapped"))
    assert list(normstats.compute(datasets.load_from_disk(str(tmp_path / "mapped"))).mean) == \
        oracle.integer_mean_std(pictures, 255)[0]


def test_a_streamed_column_of_pixel_arrays_is_read_in_its_declared_dtype():
    """An IterableDataset streams an Array3D or nested List column of uint8 as Python
    lists (int64 arrays under the numpy and torch formats), which were refused as pixels
    of no type ("read it whole, not streamed"). Each row is read in the feature's dtype:
    the oracle's numbers, in every format, images of several heights too; a value the
    dtype cannot hold is an error naming the row, and a column of int64 stays refused."""
    pictures = [p[:, :6] for p in PICTURES]  # heights 5, 6 and 7
    expected = oracle.integer_mean_std(pictures, 255)
    declared = {"Array3D": datasets.Array3D((None, 6, 3), "uint8"),
                "List": datasets.List(datasets.List(datasets.List(Value("uint8"))))}
    for kind, feature in declared.items():
        table = Dataset.from_dict({"pixels": [p.tolist() for p in pictures],
                                   "label": list(range(len(pictures)))},
                                  features=Features({"pixels": feature, "label": Value("int64")}))
        stream = table.to_iterable_dataset()
        for form in (stream, stream.with_format("numpy"), stream.with_format("torch")):
            stats = normstats.compute(form, image_key="pixels")
            assert (list(stats.mean), list(stats.std)) == expected, kind
            assert stats.dtype == "uint8" and stats.images == len(pictures)
            assert stats.source == (f"Hugging Face IterableDataset column 'pixels' ({kind} of "
                                    "uint8), streamed")
    wide = Dataset.from_dict({"pixels": [p.astype(np.int64).tolist() for p in pictures]})
    with pytest.raises(NormstatsError, match="int64 images are not supported exactly"):
        normstats.compute(wide.to_iterable_dataset(), image_key="pixels")
    from normstats.sources.hf_dataset import StreamedPixels

    rows = StreamedPixels([{"pixels": [[1, 2]]}, {"pixels": [[300, 2]]}], "pixels",
                          np.dtype("uint8"))
    with pytest.raises(NormstatsError, match="row 1: column 'pixels' holds values its "
                                             "feature's type uint8 cannot hold"):
        list(rows)
