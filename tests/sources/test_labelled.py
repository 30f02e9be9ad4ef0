"""xarray DataArrays: dimension names give the layout, the band coordinate names the
channels, a Dask-backed array stays on its own graph; a Dataset is refused by name.
pandas and Dask tables: a column is a feature named by its label."""

import json
from fractions import Fraction

import dask.array as dka
import dask.dataframe as dd
import numpy as np
import pandas as pd
import polars as pl
import pytest
import xarray as xr
from oracle import integer_mean_std

import normstats
from normstats.errors import InvalidOptionError


@pytest.fixture
def stack(rng) -> np.ndarray:
    return rng.integers(0, 256, (12, 9, 7, 3), dtype=np.uint8)


@pytest.fixture
def labelled(stack) -> xr.DataArray:
    return xr.DataArray(stack, dims=("n", "y", "x", "band"), coords={"band": ["R", "G", "B"]})


def _numbers(stats) -> dict:
    fields = json.loads(stats.to_json())
    return {k: v for k, v in fields.items() if k not in ("source", "mode")}


@pytest.mark.parametrize("order", [("n", "y", "x", "band"), ("band", "n", "y", "x"),
                                   ("n", "band", "y", "x"), ("y", "band", "x", "n")])
def test_any_order_of_named_dimensions_gives_the_pixels_statistics(labelled, stack, order):
    stats = normstats.compute(labelled.transpose(*order))
    assert stats.images == 12 and stats.channels == ("R", "G", "B")
    assert (list(stats.mean), list(stats.std)) == integer_mean_std(list(stack), 255)


def test_common_dimension_names_in_any_case(stack):
    for dims in (("time", "lat", "lon", "channel"), ("Sample", "Row", "Col", "C"),
                 ("image", "height", "width", "bands")):
        stats = normstats.compute(xr.DataArray(stack, dims=dims))
        assert (list(stats.mean), list(stats.std)) == integer_mean_std(list(stack), 255)


def test_one_image_grey_images_and_vectors(labelled, stack):
    one = normstats.compute(labelled.isel(n=4).transpose("band", "y", "x"))
    assert one.images == 1 and one.channels == ("R", "G", "B")
    assert list(one.mean) == integer_mean_std([stack[4]], 255)[0]
    grey = normstats.compute(labelled.isel(band=1).transpose("x", "n", "y"))
    assert grey.images == 12 and list(grey.mean) == integer_mean_std(list(stack[..., 1:2]), 255)[0]
    table = np.arange(20, dtype=np.int64).reshape(5, 4)
    vectors = normstats.compute(xr.DataArray(table.T, dims=("band", "sample")))
    assert vectors.kind == "vectors" and list(vectors.mean) == [8.0, 9.0, 10.0, 11.0]


def test_a_dask_backed_array_is_reduced_on_its_graph(labelled, stack):
    lazy = labelled.chunk({"n": 5}).transpose("band", "n", "y", "x")
    assert isinstance(lazy.data, dka.Array)
    stats = normstats.compute(lazy, scheduler="sync")
    assert stats.source.startswith("dask array") and stats.channels == ("R", "G", "B")
    assert _numbers(stats) == _numbers(normstats.compute(labelled))
    together = normstats.reduce_lazy(lazy).compute(scheduler="sync")
    assert _numbers(together) == _numbers(stats)


def test_images_records_and_sampling_read_the_names_too(labelled):
    bandfirst = labelled.transpose("band", "n", "y", "x")
    reference = _numbers(normstats.compute(labelled))
    assert normstats.images(bandfirst).shape == (12, 9, 7, 3)
    assert _numbers(normstats.reduce(normstats.records(bandfirst))) == reference
    assert normstats.compute(bandfirst, sample=4, seed=0).channels == ("R", "G", "B")


def test_channels_and_layout_given_override_the_names(labelled, stack):
    named = normstats.compute(labelled, channels="red,green,blue")
    assert named.channels == ("red", "green", "blue")
    as_stored = normstats.compute(labelled.transpose("band", "n", "y", "x"), layout="NCHW")
    assert as_stored.images == 3 and len(as_stored.channels) == 12  # what layout= said


def test_xarray_default_names_fall_back_to_the_shape_rule(stack):
    stats = normstats.compute(xr.DataArray(stack))
    assert stats.channels == ("c0", "c1", "c2") and stats.mode == "NHWC"


def test_unknown_or_repeated_names_and_datasets_are_one_line_errors(labelled):
    with pytest.raises(InvalidOptionError,
                       match=r"dimension 'wavelength' of \(n, y, x, wavelength\).*"
                             r"rename.*layout="):
        normstats.compute(labelled.rename(band="wavelength"))
    with pytest.raises(InvalidOptionError, match=r"\(time, lat, y, band\) read as NHHC"):
        normstats.compute(labelled.rename(n="time", y="lat", x="y"))
    bands = xr.Dataset({name: labelled.isel(band=i, drop=True)
                        for i, name in enumerate(("red", "green", "nir"))})
    with pytest.raises(InvalidOptionError,
                       match=r"Dataset holds 3 variables \(red, green, nir\): pick one: "
                             r"ds\['red'\], ds\['green'\], ds\['nir'\]"):
        normstats.compute(bands)
    stacked = bands.to_dataarray(dim="band").transpose("n", "y", "x", "band")
    assert normstats.compute(stacked).channels == ("red", "green", "nir")


def test_a_table_is_vectors_one_feature_a_column_named_by_its_label(rng):
    """A DataFrame used to be taken for a map-style dataset of images: every row skipped,
    ``reading the item failed: KeyError: 0``."""
    ages = rng.integers(18, 90, 40)
    table = pd.DataFrame({"height": rng.normal(170, 10, 40), "age": ages})
    stats = normstats.compute(table)
    assert stats.channels == ("height", "age")
    assert _numbers(stats) == _numbers(normstats.compute(table.to_numpy(np.float64),
                                                         channels="height,age"))
    assert stats.mean[1] == float(Fraction(int(ages.sum()), 40))
    ints = normstats.compute(table[["age"]] * 3)  # integers alone stay integers: exact
    assert ints.mean == (float(Fraction(3 * int(ages.sum()), 40)),)
    assert normstats.compute(table["age"]).channels == ("age",)  # a Series: one feature
    assert normstats.compute(table, channels="h,a").channels == ("h", "a")

    lazy = dd.from_pandas(table, npartitions=3)
    tall = lazy[lazy.height > 170]  # Dask: rows of unknown count, computed first
    assert _numbers(normstats.compute(tall)) == _numbers(normstats.compute(
        table[table.height > 170]))


def test_tables_that_are_not_numbers_or_would_round_are_refused_by_column(rng):
    table = pd.DataFrame({"height": rng.normal(170, 10, 5), "id": 2**60 + np.arange(5)})
    for data in (table, dd.from_pandas(table, npartitions=2)):
        with pytest.raises(InvalidOptionError, match=r"round the integers of 'id' \(from "
                                                     r"1152921504606846976 to .* past 2\*\*53"):
            normstats.compute(data)
    assert normstats.compute(table[["id"]]).mean == (float(2**60 + 2),)  # int64 alone: exact
    for column, kind in ((["a", "b", "c", "d", "e"], "str"), (pd.array([1, None, 3, 4, 5]),
                                                             "Int64")):
        with pytest.raises(InvalidOptionError, match=f"'x' \\({kind}\\) is not numbers"):
            normstats.compute(table.assign(x=column))
    encoded = {"bytes": b"\x89PNG\r\n\x1a\n", "path": None}  # datasets' to_pandas
    for values, says in (([encoded] * 5, "'x' holds encoded images: give normstats the images "
                                         "rather than their table"),
                         ([np.zeros(4)] * 5, r"'x' holds arrays: normstats.compute\(np.stack"
                                             r"\(df\['x'\]\)\) reads them")):
        with pytest.raises(InvalidOptionError, match=says):
            normstats.compute(table.assign(x=values))
    with pytest.raises(InvalidOptionError, match="a table is vectors"):
        normstats.compute(table[["height"]], layout="NHW")
    with pytest.raises(InvalidOptionError, match="no columns"):
        normstats.compute(table[[]])
    with pytest.raises(normstats.EmptyDatasetError, match="no rows"):  # min and max are NaN
        normstats.compute(table.iloc[:0])
    twice = pd.concat([table, table[["id"]]], axis=1)  # columns a, id, id
    with pytest.raises(InvalidOptionError, match="'id' names more than one: rename them"):
        normstats.compute(twice)


def test_a_polars_table_is_vectors_too_and_its_nulls_are_missing_values(rng):
    """A polars DataFrame used to be iterated as images, column by column: (N, 2) features
    gave one channel L whose mean pooled both columns."""
    ages = rng.integers(18, 90, 40)
    heights = rng.normal(170, 10, 40)
    table = pl.DataFrame({"height": heights, "age": ages})
    stats = normstats.compute(table)
    assert stats.kind == "vectors" and stats.channels == ("height", "age")
    assert _numbers(stats) == _numbers(normstats.compute(pd.DataFrame({"height": heights,
                                                                       "age": ages})))
    assert stats.mean[1] == float(Fraction(int(ages.sum()), 40))
    ints = normstats.compute(table.select(pl.col("age") * 3))  # integers stay integers
    assert ints.dtype == "int64" and ints.mean == (float(Fraction(3 * int(ages.sum()), 40)),)
    assert normstats.compute(table["age"]).channels == ("age",)  # a Series: one feature
    assert normstats.compute(table, channels="h,a").channels == ("h", "a")
    reduced = _numbers(normstats.reduce(normstats.records(table)))
    # float rows merged one by one, not in blocks: the float contract (README,
    # Exactness), relative error below 1e-12; counted per feature, as compute counts
    assert reduced["std_ddof1"] == pytest.approx(_numbers(stats)["std_ddof1"], rel=1e-12)
    assert reduced == {**_numbers(stats), "std_ddof1": reduced["std_ddof1"]}

    # a null is a missing value, left out of its feature as NaN is (an integer column
    # holding one is read as float64, exactly: its values lie within 2**53)
    holes = table.with_columns(pl.when(pl.int_range(40) % 4 == 0).then(None)
                               .otherwise(pl.col("age")).alias("age"))
    kept = [int(a) for i, a in enumerate(ages) if i % 4]
    with_holes = normstats.compute(holes)
    assert with_holes.counts == (40, len(kept)) and with_holes.mean[0] == stats.mean[0]
    assert with_holes.mean[1] == pytest.approx(float(Fraction(sum(kept), len(kept))),
                                               rel=1e-12)  # float64: the float contract
    as_nan = pd.DataFrame({"height": heights, "age": [a if i % 4 else np.nan
                                                      for i, a in enumerate(ages)]})
    assert _numbers(with_holes) == _numbers(normstats.compute(as_nan))  # NaN, as pandas


def test_polars_columns_that_are_not_numbers_or_would_round_are_refused_by_name(rng):
    table = pl.DataFrame({"height": rng.normal(170, 10, 5), "id": 2**60 + np.arange(5)})
    nulls = pl.DataFrame({"id": [2**60, None, 3]})  # integers alone, but a null: float64
    for data in (table, nulls):
        with pytest.raises(InvalidOptionError, match=r"round the integers of 'id' \(from "
                                                     r"\d+ to .* past 2\*\*53: compute those "
                                                     r"columns apart, or .* df.cast\(pl.Float64"):
            normstats.compute(data)
    assert normstats.compute(table.select("id")).mean == (float(2**60 + 2),)  # exact
    with pytest.raises(InvalidOptionError, match=r"'x' \(String\) is not integers, floats or "
                                                 r"booleans: select the numeric ones"):
        normstats.compute(table.with_columns(pl.lit("a").alias("x")))
    with pytest.raises(InvalidOptionError, match=r"'x' \(Decimal"):
        normstats.compute(table.with_columns(pl.col("height").cast(pl.Decimal(10, 2))
                                             .alias("x")))
    for values, says in (([b"\x89PNG\r\n\x1a\n"] * 5, "'x' holds encoded images"),
                         ([[1.0, 2.0]] * 5, r"'x' holds lists: normstats.compute\(np.stack"),
                         (np.zeros((5, 2)), r"'x' holds arrays: normstats.compute\(df\['x'\]"
                                            r".to_numpy\(\)\)")):
        with pytest.raises(InvalidOptionError, match=says):
            normstats.compute(table.with_columns(pl.Series("x", values)))
    with pytest.raises(InvalidOptionError, match=r"LazyFrame is a query.*lf.collect\(\)"):
        normstats.compute(table.lazy())
    with pytest.raises(InvalidOptionError, match="no columns"):
        normstats.compute(pl.DataFrame())
    with pytest.raises(normstats.EmptyDatasetError, match="no rows"):
        normstats.compute(table.head(0))


def test_a_table_of_image_paths_says_how_to_read_the_files(tmp_path, rng):
    """A CSV of paths and labels, as pandas (object and str columns), a pandas Series and
    polars read it: refused as features, with the call that reads the files, which gives
    the files' exact statistics."""
    from PIL import Image

    images = [rng.integers(0, 256, (4, 5, 3), dtype=np.uint8) for _ in range(3)]
    paths = []
    for i, pixels in enumerate(images):
        paths.append(str(tmp_path / f"{i}.png"))
        Image.fromarray(pixels).save(paths[-1])
    tables = {"pandas": pd.DataFrame({"path": paths, "label": [0, 1, 0]}),
              "pandas object": pd.DataFrame({"path": np.array(paths, dtype=object)}),
              "Series": pd.Series(paths, name="path"),
              "polars": pl.DataFrame({"path": paths, "label": [0, 1, 0]})}
    for kind, table in tables.items():
        with pytest.raises(InvalidOptionError, match=r"'path' holds image file paths \(") as e:
            normstats.compute(table)
        call = "df['path'].to_list()" if kind == "polars" else "list(df['path'])"
        assert f"normstats.compute({call}) reads those files" in str(e.value), kind
    stats = normstats.compute(list(tables["pandas"]["path"]), cache=False)
    mean, std = integer_mean_std(images, 255)
    assert list(stats.mean) == mean and list(stats.std) == std
    with pytest.raises(InvalidOptionError, match=r"'name' \(str\) is not numbers"):
        normstats.compute(pd.DataFrame({"name": ["a.txt", "b"], "x": [1, 2]}))
