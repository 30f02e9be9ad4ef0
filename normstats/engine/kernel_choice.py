"""Whether a run of image files should load the compiled kernel, decided from a few headers.

Loading numba and the compiled kernel from its cache takes ~0.5 s of the parent process
before any worker starts (more where scipy is installed: numba's BLAS check imports it).
The kernel then reduces 8-bit pixels at ~0.25 ns a byte, numpy's passes at ~1.4 ns
(256² images) to ~3.6 ns (32² images, stacked a task at a time). Below
`KERNEL_WORTH_BYTES` of decoded pixels numpy finishes first: a folder of 20,000 PNGs
32² (61 MB of pixels) is reduced by numpy in ~0.1 s of worker time, the kernel would
cost 0.5 s to load. The decoded size is estimated from the headers of a few files
spread over the listing; anything that cannot be read cheaply counts as large, so the
kernel is loaded whenever in doubt.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["compiled_kernel_pays", "KERNEL_WORTH_BYTES", "estimated_pixel_bytes"]

#: Decoded bytes above which loading the compiled kernel pays for itself (see above).
KERNEL_WORTH_BYTES = 256 << 20

#: Files whose headers are read for the estimate, spread evenly over the listing.
SAMPLE_FILES = 16

#: Bytes a decoded pixel takes under each mode (``keep``: at most RGBA).
_BYTES_PER_PIXEL = {"RGB": 3, "L": 1, "RGBA": 4, "keep": 4}


def estimated_pixel_bytes(source: Any) -> int | None:
    """Decoded bytes of a local folder-like ``source``, from a sample of headers; None
    when the source is not one or a sampled header cannot be read.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from PIL import Image
    >>> from normstats.sources import FolderSource
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for i in range(3):
    ...     Image.new("RGB", (8, 4)).save(d / f"{i}.png")
    >>> estimated_pixel_bytes(FolderSource(d))
    288
    """
    walk, root = getattr(source, "walk", None), getattr(source, "root", None)
    policy = getattr(source, "policy", None)
    if walk is None or not isinstance(root, str) or "://" in root or policy is None:
        return None
    files = walk.files
    if len(files) == 0:
        return 0
    picks = np.unique(np.linspace(0, len(files) - 1, min(len(files), SAMPLE_FILES)).astype(int))
    pixels = []
    for index in picks:
        size = _header_size(os.path.join(root, files[int(index)].path))
        if size is None:
            return None
        pixels.append(size[0] * size[1])
    return int(np.mean(pixels) * _BYTES_PER_PIXEL.get(policy.mode, 4) * len(files))


def _header_size(path: str) -> tuple[int, int] | None:
    """(width, height) from the file's header (Pillow reads no pixels to tell), or None."""
    from PIL import Image

    try:
        with Image.open(path) as image:
            return image.size
    except Exception:  # noqa: BLE001 - damaged, unknown or huge: count the source as large
        return None


def compiled_kernel_pays(source: Any) -> bool:
    """True unless ``source`` is image files whose pixels are known to be few (and the
    kernel is not loaded in this process already).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.sources import open_source
    >>> compiled_kernel_pays(open_source(np.zeros((2, 2, 2, 3), np.uint8)))
    True
    """
    from normstats.maths import fused

    if fused.is_loaded():  # nothing left to save: this process loaded it already
        return True
    estimate = estimated_pixel_bytes(source)
    return estimate is None or estimate > KERNEL_WORTH_BYTES
