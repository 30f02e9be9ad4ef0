"""normstats.nn: use dataset normalization constants at train time.

* :class:`Normalize` and :func:`fold_into_first_layer`: fused, exact input
  normalization, or the same constants folded into the first layer's weights.
* :class:`Whiten`: fused channel whitening (ZCA or PCA, from ``compute(...,
  covariance=True)``), raw pixels in, whitened float32 out.
* :mod:`normstats.nn.init`: Xavier and Kaiming initialization (PyTorch's formulas) with
  an explicit ``numpy.random.Generator``.
* :class:`BatchNorm`, :class:`LayerNorm`, :class:`InstanceNorm`, :class:`GroupNorm`:
  reference layers with an analytic backward pass, checked against PyTorch.
* :mod:`normstats.nn.torch`: optional PyTorch adapters (import it explicitly).

Examples
--------
>>> import numpy as np
>>> from normstats.nn import Normalize
>>> image = np.full((2, 2, 1), 255, np.uint8)  # one (H, W, C) image
>>> Normalize((0.5,), (0.5,))(image, input_layout="hwc").ravel().tolist()
[1.0, 1.0, 1.0, 1.0]
"""

from normstats.nn import init
from normstats.nn.fold import fold_into_first_layer
from normstats.nn.normalize import Normalize
from normstats.nn.running_norms import BatchNorm, InstanceNorm
from normstats.nn.sample_norms import GroupNorm, LayerNorm
from normstats.nn.whiten import Whiten

__all__ = [
    "BatchNorm",
    "GroupNorm",
    "InstanceNorm",
    "LayerNorm",
    "Normalize",
    "Whiten",
    "fold_into_first_layer",
    "init",
]
