"""`patch_covariance`: the exact covariance of every k×k patch of a dataset, for patch ZCA.

CIFAR-style ZCA whitens k×k×C patches (or whole images) with the covariance of all of
them, which is usually computed by loading every patch into memory as float. Here the
images are read as `normstats.images` reads them (any dataset `normstats.compute` reads,
its images of one size, after ``resize`` and ``center_crop``), and their patches' totals
are summed exactly without making the patches (`normstats.maths.patches`), in one Dask
reduction (`normstats.engine.dask.patches`). The result holds the mean patch and the
D×D covariance (D = C·k², channel-major: PyTorch's ``unfold`` order), correctly rounded,
and gives the whitening of flattened patches, ``(p − mean) @ matrix``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Unpack

import numpy as np

from normstats.errors import IncompatibleImagesError
from normstats.maths.patches import PatchMoments, patch_dimension_names
from normstats.maths.scale import default_scale, parse_scale
from normstats.maths.whitening import DEFAULT_EPS, Whitening
from normstats.sources.options import ReadArguments, ReadOptions, read_options

__all__ = ["PatchCovariance", "patch_covariance"]


@dataclass(frozen=True, eq=False)
class PatchCovariance:
    """The mean and covariance of every k×k patch of a dataset, in a stated scale.

    Attributes
    ----------
    size : int
        k.
    channels : tuple of str
        The images' channel names; a patch has D = C·k² dimensions (`names`).
    patches : int
        Number of patches (every anchor of every image, stride 1, no padding).
    scale : float
        Pixel values were divided by this (255: the [0, 1] scale of 8-bit images).
    mean : numpy.ndarray
        The mean patch (D,), flattened channel-major.
    covariance, covariance_ddof1 : numpy.ndarray
        (D, D) population and sample covariance, each entry correctly rounded.

    Examples
    --------
    >>> x = np.arange(32, dtype=np.uint8).reshape(2, 4, 4, 1)
    >>> p = patch_covariance(x, 2, scale=1)
    >>> p.patches, p.names[:2], p.covariance.shape
    (18, ('L[0,0]', 'L[0,1]'), (4, 4))
    """

    size: int
    channels: tuple[str, ...]
    patches: int
    scale: float
    mean: np.ndarray
    covariance: np.ndarray
    covariance_ddof1: np.ndarray | None

    @property
    def names(self) -> tuple[str, ...]:
        """The D patch dimensions: ``R[u,v]`` is channel R at row u, column v of the patch."""
        return patch_dimension_names(self.channels, self.size)

    def whitening(self, eps: float = DEFAULT_EPS, kind: str = "zca", ddof: int = 0
                  ) -> Whitening:
        """The whitening of flattened patches, ``(p / scale − mean) @ matrix`` (see
        `normstats.maths.whitening`); for k equal to the image size, the matrix of
        torchvision's ``LinearTransformation`` of whole CHW images."""
        matrix = self.covariance if ddof == 0 else self.covariance_ddof1
        return Whitening.of(self.mean, matrix, self.names, self.scale, eps, kind, ddof)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the numbers and what they are."""
        return {"size": self.size, "channels": list(self.channels), "names": list(self.names),
                "patches": self.patches, "scale": self.scale, "mean": self.mean.tolist(),
                "covariance": self.covariance.tolist(),
                "covariance_ddof1": None if self.covariance_ddof1 is None else
                self.covariance_ddof1.tolist()}


def patch_covariance(data: Any, size: int = 3, *, options: ReadOptions | None = None,
                     scheduler: Any = None, workers: int | None = None,
                     task_size: int | None = None,
                     **read: Unpack[ReadArguments]) -> PatchCovariance:
    """The exact covariance of every ``size``×``size`` patch of the images of ``data``.

    Parameters
    ----------
    data : str, os.PathLike or array
        What `normstats.images` reads: integer images of one size (after ``resize`` and
        ``center_crop``).
    size : int
        k: patches of k×k pixels and every channel (at least 1; k = 2, 3 for patch ZCA).
    options, **read
        How the data is read, as in `normstats.compute` (``scale`` defaults to the dtype's
        maximum, ``channels`` names the channels).
    scheduler, workers, task_size
        Where the Dask reduction runs, as in `normstats.compute`.

    Raises
    ------
    IncompatibleImagesError
        For float images (the covariance is exact for integers) or images of several sizes.
    """
    from normstats.engine.dask.images import images
    from normstats.engine.dask.lazy import run_graph
    from normstats.engine.dask.patches import lazy_patch_moments

    options = read_options(options, dict(read))
    x = images(data, options=options, task_size=task_size, workers=workers)
    if np.dtype(x.dtype).kind == "f":
        raise IncompatibleImagesError(f"the patch covariance is exact for integer images, not "
                                      f"{x.dtype}")
    moments = run_graph(lazy_patch_moments(x, size), scheduler, workers).item()
    scale = default_scale(str(x.dtype)) if options.scale is None else parse_scale(options.scale)
    channels = options.channels or _channel_names(x)
    return _finished(moments, tuple(channels), float(scale))


def _channel_names(x: Any) -> tuple[str, ...]:
    """The channel names the source of an `images` array knows (R, G, B for decoded
    colour images), else those `normstats.compute` gives arrays (c0, c1, ...)."""
    from normstats.engine.dask.images import readers_in
    from normstats.maths.records import default_channel_names

    known = [layer.source.channel_names for _, layer in readers_in(x)]
    if known and known[0] and len(known[0]) == x.shape[3]:
        return tuple(known[0])
    return default_channel_names(int(x.shape[3]))


def _finished(moments: PatchMoments, channels: tuple[str, ...], scale: float) -> PatchCovariance:
    if len(channels) != moments.channels:
        raise IncompatibleImagesError(f"{len(channels)} channel names for {moments.channels} "
                                      "channels")
    return PatchCovariance(moments.size, channels, moments.count, scale, moments.mean(scale),
                           moments.covariance(scale),
                           moments.covariance(scale, ddof=1) if moments.count > 1 else None)
