"""Labelled arrays (xarray's ``DataArray``): their dimension names say the layout, their
band coordinate names the channels. Tables (a pandas, Dask or polars ``DataFrame`` or
``Series``) are vectors: a column is a feature, named by its label (see `table_array`).

=============  =====================================================================
layout letter  dimension names (any case)
=============  =====================================================================
``N``          ``n``, ``time``, ``sample``, ``image``, ``batch`` (and plurals)
``H``          ``y``, ``lat``, ``latitude``, ``row``, ``height``, ``h``
``W``          ``x``, ``lon``, ``longitude``, ``col``, ``column``, ``width``, ``w``
``C``          ``band``, ``channel``, ``c`` (and plurals)
=============  =====================================================================

The dimensions may come in any order, ``(n, y, x, band)`` as ``(band, n, y, x)``: the array
is read in a layout of `normstats.sources.arrays` (transposed to it, lazily, when its order
is none of them) and keeps its backing, so a Dask-backed array is reduced on its own graph.
The values of the channel dimension's coordinate, when it has one, name the channels
(``channels=`` overrides). Dimensions xarray named itself (``dim_0``, ``dim_1``, ...) say
nothing: the shape rule of `normstats.sources.arrays` applies, as for numpy. ``layout=``
overrides the names and applies to the array as stored. A ``Dataset`` holds several
variables, and is refused with their names: pick one.
"""

from __future__ import annotations

import os
import re
from typing import Any

from normstats.errors import InvalidOptionError
from normstats.sources.arrays import LAYOUTS
from normstats.sources.options import ReadOptions

__all__ = ["is_labelled", "is_table", "unlabelled", "table_array", "DIMENSION_NAMES"]

#: The dimension names of each layout letter (compared in lower case).
DIMENSION_NAMES = {
    "N": ("n", "time", "sample", "samples", "image", "images", "batch"),
    "H": ("y", "lat", "latitude", "row", "rows", "height", "h"),
    "W": ("x", "lon", "longitude", "col", "cols", "column", "columns", "width", "w"),
    "C": ("band", "bands", "channel", "channels", "c"),
}
_LETTER = {name: letter for letter, names in DIMENSION_NAMES.items() for name in names}
#: The layout each set of letters is read in when its order is no layout of its own.
_CANONICAL = ("NHWC", "NHW", "HWC", "HW", "NC")
#: The polars types read as tables (a LazyFrame to be refused with advice).
_POLARS_TABLES = ("DataFrame", "Series", "LazyFrame")
_NO_COLUMNS = "a table with no columns has no features"


def is_labelled(data: Any) -> bool:
    """True for an xarray ``DataArray`` or ``Dataset`` (told by their attributes, without
    importing xarray).

    Examples
    --------
    >>> import numpy as np
    >>> is_labelled(np.zeros(3)), is_labelled([1])
    (False, False)
    """
    return hasattr(data, "dims") and (hasattr(data, "data_vars") or hasattr(data, "data"))


def is_table(data: Any) -> bool:
    """True for a pandas, Dask or polars ``DataFrame`` or ``Series`` and a polars
    ``LazyFrame`` (told by their module and attributes, without importing their package).

    Examples
    --------
    >>> import numpy as np, pandas as pd, polars as pl
    >>> is_table(pd.DataFrame({"a": [1]})), is_table(pl.Series([1])), is_table(np.zeros(3))
    (True, True, False)
    """
    package = type(data).__module__.split(".")[0]
    if package == "polars":  # before any attribute: a LazyFrame's would run its query
        return type(data).__name__ in _POLARS_TABLES
    shaped = hasattr(data, "columns") or hasattr(data, "to_frame")
    return shaped and hasattr(data, "dtypes") and (
        package == "pandas" or type(data).__module__.startswith("dask.dataframe"))


def table_array(table: Any, options: ReadOptions) -> tuple[Any, ReadOptions]:
    """A table's columns as vectors (N, d), and ``options`` with layout ``NC`` and the column
    labels as channel names (``channels=`` overrides).

    The columns become one array, of the type numpy gives them together (int64 beside
    float64: float64). They must be numbers (integers, floats or booleans; text, dates and
    pandas' nullable types are refused, naming the columns; a column of images or arrays,
    saying how to read them), and their values must convert
    exactly: an int64 column beside floats is read when its values lie within ±2**53, and
    refused, named, when one does not (float64 would round it). A Dask table stays lazy:
    its row counts (and such a column's extremes) are computed first. The index is not a
    feature. A polars null is a missing value, as NaN is: an integer column holding one is
    read as float64 (within ±2**53), and missing values are left out per feature. A polars
    ``LazyFrame`` is a query, refused with the call that runs it.

    Examples
    --------
    >>> import pandas as pd
    >>> array, options = table_array(pd.DataFrame({"h": [1.5, 2.0], "w": [3, 4]}), ReadOptions())
    >>> array.dtype, array.shape, options.layout, options.channels
    (dtype('float64'), (2, 2), 'NC', ('h', 'w'))
    """
    import numpy as np

    if options.layout not in (None, "NC"):
        raise InvalidOptionError(f"a table is vectors (N, d), one feature a column; layout "
                                 f"{options.layout} is for arrays of images")
    if type(table).__module__.startswith("polars"):
        array, labels = _polars_array(table)
        return array, options.with_changes(layout="NC", channels=options.channels or labels)
    frame = table if hasattr(table, "columns") else table.to_frame()
    columns = list(zip(frame.columns, frame.dtypes))
    twice = frame.columns[frame.columns.duplicated()]  # pandas' Index, in Dask tables too
    if len(twice):
        raise InvalidOptionError(f"a table's columns name its features, and {str(twice[0])!r} "
                                 "names more than one: rename them, e.g. df.columns = [...]")
    other = [f"{label!r} ({dtype})" for label, dtype in columns
             if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf"]
    for label, dtype in columns:
        textual = getattr(dtype, "kind", None) in ("O", "S", "U")  # pandas' str too
        advice = _column_advice(frame[label], label) if textual else None
        if advice:
            raise InvalidOptionError(f"a table's columns are read as numeric features, and "
                                     f"{label!r} {advice}")
    if other:
        _refuse_not_numbers(other, "not numbers of numpy's types: select the numeric ones, "
                            "df.select_dtypes('number'), or convert them, "
                            "df.astype('float64')")
    if not columns:
        raise InvalidOptionError(_NO_COLUMNS)
    common = np.result_type(*(dtype for _, dtype in columns))
    wide = [label for label, dtype in columns if not _converts_exactly(dtype, common)]
    if wide:
        lows, highs = frame[wide].min(), frame[wide].max()
        if hasattr(lows, "compute"):
            import dask

            lows, highs = dask.compute(lows, highs)
        _refuse_rounded({label: (lows[label], highs[label]) for label in wide}, common)
    if hasattr(frame, "to_dask_array"):
        array = frame.astype(common).to_dask_array(lengths=True)
    else:
        array = frame.to_numpy(dtype=common)
    labels = tuple(str(label) for label, _ in columns)
    return array, options.with_changes(layout="NC", channels=options.channels or labels)


def _column_advice(column: Any, label: Any) -> str | None:
    """What an object ``column`` holds and how normstats reads it, when its first value is
    an image or an array (None otherwise)."""
    first = next(iter(column.head(1)), None)
    if isinstance(first, dict):
        first = first.get("bytes")
    if isinstance(first, bytes | bytearray):  # datasets' to_pandas: {"bytes", "path"}
        return ("holds encoded images: give normstats the images rather than their table, "
                "e.g. the Hugging Face dataset it came from (normstats.compute(dataset)), its "
                "Parquet files or a folder")
    if isinstance(first, str) and _is_image_name(first):  # a CSV of paths and labels
        return (f"holds image file paths ({first!r}, ...): normstats.compute(list(df[{label!r}]))"
                " reads those files (relative paths from the working folder)")
    if hasattr(first, "getdata"):
        return f"holds PIL images: normstats.compute(list(df[{label!r}])) reads them"
    if hasattr(first, "shape"):
        return (f"holds arrays: normstats.compute(np.stack(df[{label!r}])) reads them as one "
                "array (vectors (N, d) or images)")
    return None


def _is_image_name(text: str) -> bool:
    """Whether ``text`` ends as an image file's name does (``train/0001.jpg``)."""
    from normstats.sources.decoding.file_read import IMAGE_EXTENSIONS

    return os.path.splitext(text)[1].lower() in IMAGE_EXTENSIONS


def _polars_array(table: Any) -> tuple[Any, tuple[str, ...]]:
    """A polars ``DataFrame``'s (or ``Series``') numeric columns as one numpy array (N, d),
    exactly, and their names: nulls become NaN (an integer column holding one, float64)."""
    import numpy as np

    kind = type(table).__name__
    if kind == "LazyFrame":
        raise InvalidOptionError(
            "a polars LazyFrame is a query, not yet its rows: run it first, "
            "normstats.compute(lf.collect()) (select the numeric columns in the query to "
            "collect only those)")
    frame = table.to_frame() if kind == "Series" else table
    columns = [(name, frame[name]) for name in frame.columns]
    for name, column in columns:
        advice = _polars_column_advice(column, name)
        if advice:
            raise InvalidOptionError(f"a table's columns are read as numeric features, and "
                                     f"{name!r} {advice}")
    other = [f"{name!r} ({column.dtype})" for name, column in columns
             if not _is_polars_number(column.dtype)]
    if other:
        _refuse_not_numbers(other, "not integers, floats or booleans: select the numeric "
                            "ones, df.select(pl.selectors.numeric()), or cast them, "
                            "pl.col(...).cast(pl.Float64)")
    if not columns:
        raise InvalidOptionError(_NO_COLUMNS)
    arrays = [column.to_numpy() for _, column in columns]  # nulls: NaN, integers as float64
    common = np.result_type(*(array.dtype for array in arrays))
    _refuse_rounded({name: (column.min(), column.max()) for name, column in columns
                     if column.dtype.is_integer() and not _converts_exactly(
                         np.dtype(str(column.dtype).lower()), common)}, common,
                    "df.cast(pl.Float64)")
    array = np.empty((len(frame), len(arrays)), common)
    for j, values in enumerate(arrays):
        array[:, j] = values
    return array, tuple(str(name) for name, _ in columns)


def _is_polars_number(dtype: Any) -> bool:
    """Whether a polars ``dtype`` is a boolean, or a float or integer numpy also has (not
    polars' 128-bit integers nor its decimals)."""
    import numpy as np

    if str(dtype) == "Boolean":
        return True
    return (dtype.is_integer() or dtype.is_float()) and hasattr(np, str(dtype).lower())


def _polars_column_advice(column: Any, name: str) -> str | None:
    """How normstats reads a polars ``column`` of encoded images or arrays (None for any
    other column)."""
    dtype = str(column.dtype)
    if dtype == "Binary" or (dtype.startswith("Struct") and "bytes" in column.struct.fields):
        return ("holds encoded images: give normstats the images rather than their table, "
                "e.g. the Hugging Face dataset it came from (normstats.compute(dataset)), its "
                "Parquet files or a folder")
    if dtype.startswith("Array"):
        return (f"holds arrays: normstats.compute(df[{name!r}].to_numpy()) reads them as one "
                "array (vectors (N, d) or images)")
    if dtype.startswith("List"):
        return (f"holds lists: normstats.compute(np.stack(df[{name!r}].to_list())) reads them "
                "as one array (vectors (N, d) or images)")
    first = column.head(1).to_list()
    if dtype == "String" and first and isinstance(first[0], str) and _is_image_name(first[0]):
        return (f"holds image file paths ({first[0]!r}, ...): "
                f"normstats.compute(df[{name!r}].to_list()) reads those files (relative paths "
                "from the working folder)")
    return None


def _converts_exactly(dtype: Any, common: Any) -> bool:
    """Whether every value of ``dtype`` is one of ``common``: numpy calls int64 to float64
    a safe cast, but float64 holds integers of 53 bits only."""
    import numpy as np

    if dtype.kind in "iu" and common.kind == "f":
        return np.iinfo(dtype).bits - (dtype.kind == "i") <= _integer_bits(common)
    return bool(np.can_cast(dtype, common, "safe"))


def _integer_bits(float_type: Any) -> int:
    """The bits of the integers ``float_type`` holds exactly (53 for float64)."""
    import numpy as np

    return int(np.finfo(float_type).nmant) + 1


def _refuse_not_numbers(columns: list[str], advice: str) -> None:
    """Refuse a table whose ``columns`` (described, with their types) are not numbers."""
    raise InvalidOptionError(
        f"a table's columns are read as numeric features, and {', '.join(columns[:3])} "
        f"{'is' if len(columns) == 1 else 'are'} {advice} (missing values become NaN, left "
        "out per feature)")


def _refuse_rounded(ranges: dict[Any, tuple[Any, Any]], common: Any,
                    convert: str = "df.astype('float64')") -> None:
    """Refuse integer columns, given as {label: (lowest, highest)}, when one holds a value
    that ``common`` (a float type) would round; ``convert`` is the table's own call that
    converts them. A column of no values (its extremes NaN or None) has nothing to round."""
    if not ranges:
        return
    bits = _integer_bits(common)
    limit = 2 ** bits
    rounded = [f"{label!r} (from {int(low)} to {int(high)})"
               for label, (low, high) in ranges.items()
               if low is not None and low == low and not -limit <= int(low) <= int(high) <= limit]
    if rounded:
        raise InvalidOptionError(
            f"a table's columns are read as one array of {common}, which would round the "
            f"integers of {', '.join(rounded[:3])}, past 2**{bits}: "
            f"compute those columns apart, or convert them if that rounding is acceptable, "
            f"{convert}")


def unlabelled(data: Any, options: ReadOptions) -> tuple[Any, ReadOptions]:
    """The array behind ``data`` in a layout `ArraySource` reads, and ``options`` with that
    layout and the channel names; other data and options are returned as they are.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> da = xr.DataArray(np.zeros((3, 5, 4, 4), np.uint8), dims=("band", "n", "y", "x"),
    ...                   coords={"band": ["R", "G", "B"]})
    >>> array, options = unlabelled(da, ReadOptions())
    >>> array.shape, options.layout, options.channels
    ((5, 4, 4, 3), 'NHWC', ('R', 'G', 'B'))
    """
    if is_table(data):
        return table_array(data, options)
    if not is_labelled(data):
        return data, options
    if hasattr(data, "data_vars"):
        names = [str(name) for name in data.data_vars]
        picks = ", ".join(f"ds[{name!r}]" for name in names[:3])
        raise InvalidOptionError(
            f"an xarray Dataset holds {len(names)} variables ({', '.join(names) or 'none'}): "
            f"pick one: {picks or 'ds[name]'}; or stack bands into one: "
            "ds.to_dataarray(dim='band')")
    dims = tuple(str(dim) for dim in data.dims)
    if options.layout is not None or all(re.fullmatch(r"dim_\d+", d) for d in dims):
        channel_dim = dims[options.layout.index("C")] if "C" in (options.layout or "") else None
        return data.data, _with_names(options, data, channel_dim)
    order = _letters(dims)
    layout = order if order in LAYOUTS else next(c for c in _CANONICAL
                                                  if sorted(c) == sorted(order))
    if layout != order:
        data = data.transpose(*(dims[order.index(letter)] for letter in layout))
    channel_dim = dims[order.index("C")] if "C" in order else None
    return data.data, _with_names(options.with_changes(layout=layout), data, channel_dim)


def _letters(dims: tuple[str, ...]) -> str:
    """The layout letters of ``dims``, in their order; unknown or repeated names refused."""
    letters = [_LETTER.get(dim.lower()) for dim in dims]
    unknown = [dim for dim, letter in zip(dims, letters) if letter is None]
    if unknown:
        raise InvalidOptionError(
            f"cannot tell what dimension {unknown[0]!r} of ({', '.join(dims)}) holds: rename it "
            "(band or channel, y, x, n or time), e.g. da.rename({"
            f"{unknown[0]!r}: 'band'}}), or pass layout= for the array as stored")
    order = "".join(letters)
    if len(set(order)) != len(order) or not any(sorted(c) == sorted(order)
                                                   for c in _CANONICAL):
        raise InvalidOptionError(f"dimensions ({', '.join(dims)}) read as {order}: not images "
                                 "(n, y, x[, band]), one image (y, x[, band]) or vectors "
                                 "(n, band); pass layout= for the array as stored")
    return order


def _with_names(options: ReadOptions, data: Any, channel_dim: str | None) -> ReadOptions:
    """``options`` naming the channels by the channel dimension's coordinate, unless
    ``channels=`` already names them."""
    coords = getattr(data, "coords", {})
    if options.channels is not None or channel_dim is None or channel_dim not in coords:
        return options
    return options.with_changes(channels=tuple(str(v) for v in coords[channel_dim].values))
