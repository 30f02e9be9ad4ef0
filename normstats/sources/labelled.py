"""Labelled arrays (xarray's ``DataArray``): their dimension names say the layout, their
band coordinate names the channels.

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

import re
from typing import Any

from normstats.errors import InvalidOptionError
from normstats.sources.arrays import LAYOUTS
from normstats.sources.options import ReadOptions

__all__ = ["is_labelled", "unlabelled", "DIMENSION_NAMES"]

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
