"""normstats: exact normalization constants of image datasets.

>>> import numpy as np, normstats
>>> stats = normstats.compute(np.zeros((4, 8, 8, 3), np.uint8))
>>> stats.mean
(0.0, 0.0, 0.0)

How data is read is one object, `ReadOptions`, which `compute`, `images` and `records`
take as ``options=`` or as keyword arguments of the same names:

>>> options = normstats.ReadOptions(layout="nhwc", channels="R,G,B")
>>> normstats.compute(np.zeros((4, 8, 8, 3), np.uint8), options=options).channels
('R', 'G', 'B')

A zarr array whose store lacks chunks (zarr would read them as its fill value) is refused,
naming them, unless ``compute(..., allow_missing_chunks=True)`` (``images`` takes it too;
``--allow-missing-chunks`` on the command line), and then the report says how many images
were fill values.

Importing the package loads only its error types: `compute` and the rest load numpy, Dask
and the readers the first time they are used, so ``import normstats`` and ``normstats
--help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from normstats.errors import (
    AccessError,
    EmptyDatasetError,
    IncompatibleImagesError,
    InvalidOptionError,
    NormstatsError,
    RefusedInputError,
    SkipKind,
    TransientInputError,
    UnreadableInputError,
)

if TYPE_CHECKING:
    from normstats.analyses.compare import Comparison, compare
    from normstats.analyses.compute import compute
    from normstats.analyses.patches import patch_covariance
    from normstats.engine.dask.images import images
    from normstats.engine.dask.records import ImageRecords, records, reduce, reduce_lazy
    from normstats.maths.fused import kernel_info
    from normstats.maths.records import Skipped
    from normstats.results.stats import VARIANTS, DatasetStats
    from normstats.sources.options import ReadOptions

__version__ = "0.1.0"

#: Public name -> the module that defines it, imported on first use.
_LAZY = {
    "compute": "normstats.analyses.compute",
    "patch_covariance": "normstats.analyses.patches",
    "compare": "normstats.analyses.compare",
    "Comparison": "normstats.analyses.compare",
    "ReadOptions": "normstats.sources.options",
    "images": "normstats.engine.dask.images",
    "records": "normstats.engine.dask.records",
    "reduce": "normstats.engine.dask.records",
    "reduce_lazy": "normstats.engine.dask.records",
    "ImageRecords": "normstats.engine.dask.records",
    "DatasetStats": "normstats.results.stats",
    "VARIANTS": "normstats.results.stats",
    "Skipped": "normstats.maths.records",
    "kernel_info": "normstats.maths.fused",
}

__all__ = [
    "compute",
    "patch_covariance",
    "compare",
    "Comparison",
    "images",
    "records",
    "reduce",
    "reduce_lazy",
    "ImageRecords",
    "ReadOptions",
    "DatasetStats",
    "Skipped",
    "VARIANTS",
    "NormstatsError",
    "EmptyDatasetError",
    "IncompatibleImagesError",
    "InvalidOptionError",
    "UnreadableInputError",
    "RefusedInputError",
    "TransientInputError",
    "AccessError",
    "SkipKind",
    "kernel_info",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'normstats' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
