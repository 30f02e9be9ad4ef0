"""The patch covariance of a Dask array of images, as a `dask.array.reduction`.

**chunk**: a block of whole images (blocks split along H, W or C are joined first: a
patch spans them) becomes the exact `normstats.maths.patches.PatchMoments` of its
patches; **combine** and **aggregate** add them (``split_every`` 8). The totals are
Python ints, so the result is the same for any chunking, order or scheduler.
"""

from __future__ import annotations

from functools import partial, reduce
from typing import Any

import numpy as np

from normstats.engine.dask.reduce import FAN_IN, boxed, fresh_name
from normstats.maths.patches import PatchMoments

__all__ = ["lazy_patch_moments"]


def _chunk(block: np.ndarray, axis: Any = None, keepdims: bool = True, *,
           size: int) -> np.ndarray:
    return boxed(PatchMoments.from_stack(np.asarray(block), size))


def _leaves(nested: Any) -> list[PatchMoments]:
    if isinstance(nested, np.ndarray):
        return list(nested.ravel())
    return [leaf for item in nested for leaf in _leaves(item)]


def _combine(nested: Any, axis: Any = None, keepdims: bool = True) -> np.ndarray:
    return boxed(reduce(PatchMoments.merge, _leaves(nested)))


def _aggregate(nested: Any, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    return boxed(_combine(nested).item(), 0)


def lazy_patch_moments(x: Any, size: int) -> Any:
    """The 0-d Dask array of the `PatchMoments` of (N, H, W, C) Dask array ``x``.

    Examples
    --------
    >>> import dask.array as da
    >>> x = da.from_array(np.arange(36, dtype=np.uint8).reshape(4, 3, 3, 1), chunks=(1, 3, 3, 1))
    >>> lazy_patch_moments(x, 2).compute(scheduler="sync").item().count
    16
    """
    import dask.array as da

    whole = x.rechunk({1: -1, 2: -1, 3: -1})  # a patch spans H, W and C
    return da.reduction(whole, partial(_chunk, size=size), _aggregate, combine=_combine,
                        split_every={0: FAN_IN}, concatenate=False, dtype=object,
                        meta=np.empty((), dtype=object), name=fresh_name("patches"))
