"""normstats: exact normalization constants of image datasets.

>>> import numpy as np, normstats
>>> stats = normstats.compute(np.zeros((4, 8, 8, 3), np.uint8))
>>> stats.mean
(0.0, 0.0, 0.0)
"""

from normstats.engine.compute import compute
from normstats.engine.dask_images import images
from normstats.engine.dask_records import ImageRecords, records, reduce
from normstats.errors import (
    EmptyDatasetError,
    IncompatibleImagesError,
    InvalidOptionError,
    NormstatsError,
    UnreadableInputError,
)
from normstats.maths.records import Skipped
from normstats.maths.stats import VARIANTS, DatasetStats

__version__ = "0.1.0"

__all__ = [
    "compute",
    "images",
    "records",
    "reduce",
    "ImageRecords",
    "DatasetStats",
    "Skipped",
    "VARIANTS",
    "NormstatsError",
    "EmptyDatasetError",
    "IncompatibleImagesError",
    "InvalidOptionError",
    "UnreadableInputError",
    "__version__",
]
