"""`ReadOptions`: one options object, validated once, whose choices forgive case; every
entry point that reads data takes it, or its fields as keyword arguments, and they mean
the same there."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from oracle import numbers

import normstats
from normstats.errors import InvalidOptionError
from normstats.nn import Normalize
from normstats.sources import open_source
from normstats.sources.options import READ_FIELDS, ReadArguments, ReadOptions


@pytest.mark.parametrize("field, typed, meant", [
    ("mode", "rgb", "RGB"), ("mode", "KEEP", "keep"), ("mode", "rgba", "RGBA"),
    ("layout", "nhwc", "NHWC"), ("layout", "Nchw", "NCHW"), ("on_error", "FAIL", "fail"),
    ("format", "IDX", "idx"), ("channels", " R, G ,B", ("R", "G", "B")),
])
def test_choices_forgive_case_in_python_as_on_the_command_line(field, typed, meant):
    assert getattr(ReadOptions(**{field: typed}), field) == meant


def test_a_lower_case_layout_reads_the_array_as_the_upper_case_one(rng):
    chw = rng.integers(0, 256, (5, 3, 4, 6), dtype=np.uint8)
    assert numbers(normstats.compute(chw, layout="nchw")) == \
        numbers(normstats.compute(chw, layout="NCHW")) == \
        numbers(normstats.compute(np.moveaxis(chw, 1, -1), layout="NHWC"))


def test_lower_case_mode_decodes_as_the_mode(png_folder):
    root, _ = png_folder
    assert numbers(normstats.compute(root, mode="l", workers=1)) == \
        numbers(normstats.compute(root, mode="L", workers=1))


def test_nn_layouts_forgive_case_too():
    image = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    np.testing.assert_array_equal(norm(image, input_layout="HWC"), norm(image, input_layout="hwc"))
    assert Normalize((0.5,), (0.5,), layout="HWC").layout == "hwc"
    with pytest.raises(InvalidOptionError, match="input_layout must be one of"):
        norm(image, input_layout="WHC")


@pytest.mark.parametrize("field, value, message", [
    ("mode", "cmyk", "unknown mode 'cmyk'"), ("layout", "NWHC", "unknown layout 'NWHC'"),
    ("on_error", "ignore", "on_error must be 'skip' or 'fail', got 'ignore'"),
    ("format", "gif", "unknown format 'gif'"), ("scale", 0, "scale must be positive"),
    ("max_pixels", 0, "max_pixels must be positive"),
    ("max_file_bytes", "big", "max_file_bytes must be an integer"),
    ("resize", 2.5, "resize must be a positive integer"),
    ("center_crop", -1, "center_crop must be a positive integer"),
    ("channels", "R,,B", "channels must be non-empty names"),
    ("image_key", 3, "image_key must be a name"),
    ("allow_missing_chunks", "yes", "allow_missing_chunks must be True or False"),
])
def test_each_option_is_checked_in_one_place_with_a_one_line_error(field, value, message):
    with pytest.raises(InvalidOptionError, match=message):
        ReadOptions(**{field: value})
    # every entry point checks it the same way, before reading anything
    for call in (normstats.compute, normstats.images, normstats.records, open_source):
        with pytest.raises(InvalidOptionError, match=message):
            call(np.zeros((2, 2, 2, 1), np.uint8), **{field: value})


def test_an_unknown_option_names_the_known_ones():
    with pytest.raises(InvalidOptionError, match="unknown option 'colour'; the options of "
                                                 "reading are mode, layout, scale"):
        normstats.compute(np.zeros((2, 2, 2, 1), np.uint8), colour="R")


def test_keywords_beside_the_object_replace_its_fields(rng):
    data = rng.integers(0, 256, (4, 3, 3, 2), dtype=np.uint8)
    options = ReadOptions(channels=("a", "b"), scale=1)
    stats = normstats.compute(data, options=options, scale=255, layout="nhwc")
    assert stats.channels == ("a", "b") and stats.scale == 255.0 and stats.mode == "NHWC"
    assert options.scale == 1.0  # frozen: the object itself is unchanged
    with pytest.raises(InvalidOptionError, match="options must be a ReadOptions"):
        normstats.compute(data, options={"scale": 1})


def test_the_keyword_arguments_are_the_fields_of_the_object():
    assert tuple(ReadArguments.__annotations__) == READ_FIELDS
    for call in (normstats.compute, normstats.images, normstats.records, open_source):
        parameters = inspect.signature(call).parameters
        assert parameters["options"].kind is inspect.Parameter.KEYWORD_ONLY
        assert [p.name for p in parameters.values()
                if p.kind is inspect.Parameter.VAR_KEYWORD] == ["read"]
        assert not set(READ_FIELDS) & set(parameters)  # never restated one by one


def _all_options(root) -> dict:
    """A value for every option that a Parquet file of PNGs honours (none left at its
    default): `_parquet_of` them."""
    return {"mode": "rgb", "layout": "NHWC", "scale": 1, "channels": "r,g,b",
            "on_error": "SKIP", "max_pixels": 10_000, "max_file_bytes": 10**6, "resize": 4,
            "center_crop": 3, "format": "PARQUET", "image_key": "image",
            "allow_missing_chunks": True, "batched": False, "nodata": 7}


def _parquet_of(folder) -> str:
    """The PNGs of ``folder`` as a Parquet file whose samples hold an image and a label
    (so that ``image_key`` picks one of two columns)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(folder.rglob("*.png"))
    cells = [{"bytes": f.read_bytes(), "path": f.name} for f in files]
    path = folder.parent / "train.parquet"
    pq.write_table(pa.table({"image": cells, "label": list(range(len(files)))}), path)
    return str(path)


def test_compute_images_and_records_take_every_option_and_agree_exactly(png_folder):
    """The same options through the three entry points give the same numbers, bit for
    bit: each option means the same in every call that reads data."""
    root = _parquet_of(png_folder[0])
    given = _all_options(root)
    assert set(given) == set(READ_FIELDS) - {"storage_options"}  # for URLs only
    stats = normstats.compute(root, workers=1, task_size=3, **given)
    assert stats.channels == ("r", "g", "b") and stats.scale == 1.0
    assert stats.mode == "RGB, Resize(4), CenterCrop(3), nodata 7"
    pixels = normstats.images(root, workers=1, task_size=3, **given)
    assert pixels.shape[1:] == (3, 3, 3)
    # the array's pixels are raw (scale is for statistics), reduced with the same options
    assert numbers(normstats.compute(pixels, scheduler="sync", scale=1,
                                     channels="r,g,b")) == numbers(stats)
    rec = normstats.records(root, workers=1, task_size=3, **given)
    assert numbers(normstats.reduce(rec, scheduler="sync")) == numbers(stats)
    as_object = normstats.records(root, options=ReadOptions(**given), workers=1)
    assert numbers(normstats.reduce(as_object, scheduler="sync")) == numbers(stats)


def test_records_take_image_key_and_task_size(tmp_path, rng):
    items = [{"pixels": rng.integers(0, 256, (5, 3, 1), dtype=np.uint8), "mask": i}
             for i in range(7)]
    rec = normstats.records(items, image_key="pixels", task_size=2, workers=1)
    stats = normstats.compute(np.stack([item["pixels"] for item in items]))
    assert numbers(normstats.reduce(rec, scheduler="sync")) == numbers(stats)
    with pytest.raises(InvalidOptionError, match="item has no key 'nope'"):
        normstats.records(items, image_key="nope", on_error="fail", workers=1)


def test_images_cut_their_chunks_for_the_workers_given(rng):
    data = rng.integers(0, 256, (64, 2, 2, 1), dtype=np.uint8)
    one, four = normstats.images(data, workers=1), normstats.images(data, workers=4)
    assert len(one.chunks[0]) < len(four.chunks[0])
    np.testing.assert_array_equal(one.compute(scheduler="sync"), four.compute(scheduler="sync"))


def test_decode_policy_has_one_import_path():
    import normstats.sources as sources
    import normstats.sources.decoding.decode as decode
    from normstats.sources.decoding.policy import DecodePolicy

    assert "DecodePolicy" not in decode.__all__ and "DecodePolicy" not in sources.__all__
    with pytest.raises(AttributeError):
        sources.DecodePolicy  # noqa: B018
    assert ReadOptions(mode="l", resize=8).policy == DecodePolicy("L", resize=8)
