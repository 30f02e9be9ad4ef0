"""The constants in each framework's own convention, ready to paste.

One small pure function per framework turns `DatasetStats` into text; `EXPORTERS` maps
format names to them and `export` (or `DatasetStats.to`) picks one. The conventions
(what each framework's documentation asks for):

=================  ==========================================================================
torchvision, timm  mean and std in the reported scale ([0, 1] for integer images), RGB
albumentations     mean and std in [0, 1] plus ``max_pixel_value`` (255, 65535 or 1.0)
keras              ``Normalization(axis=-1, mean=, variance=)``: **variance**, channels-last
hf                 ``preprocessor_config.json`` keys ``image_mean``, ``image_std``,
                   ``do_rescale``, ``rescale_factor`` (1/255 for 8-bit)
mmcv               raw pixel units ([0, 255] for 8-bit), ``to_rgb=True`` (mmcv loads BGR)
detectron2         raw pixel units, ``PIXEL_MEAN``/``PIXEL_STD`` and ``INPUT.FORMAT`` spelled out
=================  ==========================================================================

Every export names the std variant it uses and the channel order; ``bgr=True``
reverses a three-channel order for frameworks that read BGR (OpenCV loaders, detectron2).
Numbers are printed with ``repr`` so they round-trip exactly. The whole result as JSON
is `DatasetStats.to_json` (``--json``), not an export.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from normstats.errors import InvalidOptionError
from normstats.maths.variants import VARIANTS

if TYPE_CHECKING:  # stats imports this module in DatasetStats.to
    from normstats.results.stats import DatasetStats

__all__ = ["EXPORTERS", "FORMATS", "Constants", "constants", "export"]


@dataclass(frozen=True)
class Constants:
    """What every exporter needs: mean and std in the reported scale, and their context.

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.array([[[[0, 0, 0]]], [[[255, 255, 255]]]], np.uint8))
    >>> constants(s, bgr=True).channels
    ('c2', 'c1', 'c0')
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    channels: tuple[str, ...]
    variant: str
    scale: float
    source: str
    bgr: bool = False

    @property
    def variance(self) -> tuple[float, ...]:
        return tuple(s * s for s in self.std)

    def raw(self, values: tuple[float, ...]) -> tuple[float, ...]:
        """Values in raw pixel units ([0, 255] for 8-bit images).

        15 significant digits: the product's last-bit noise (125.44375000000001) would
        only make a pasted config harder to read.
        """
        return tuple(float(format(v * self.scale, ".15g")) for v in values)

    def header(self, units: str) -> str:
        """The comment line every Python export starts with."""
        return (f"# normstats: {self.source or 'dataset'}; std variant {self.variant!r} "
                f"({VARIANTS[self.variant]}); channel order {', '.join(self.channels)}; {units}")


def constants(stats: DatasetStats, variant: str = "std", bgr: bool = False) -> Constants:
    """Mean and the chosen std variant, reversed to BGR on request.

    Raises
    ------
    InvalidOptionError
        For an unknown or undefined variant, or ``bgr`` on data without three channels.
    """
    mean, std, names = stats.mean, stats.variant(variant), stats.channels
    if bgr:
        if len(names) != 3:
            raise InvalidOptionError(f"--bgr needs three channels, these data have {len(names)} "
                                     f"({', '.join(names)})")
        mean, std, names = mean[::-1], std[::-1], names[::-1]
    return Constants(tuple(mean), tuple(std), tuple(names), variant, stats.scale, stats.source,
                     bgr)


def _tuple(values: tuple[float, ...]) -> str:
    parts = [repr(float(v)) for v in values]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _list(values: tuple[float, ...]) -> str:
    return "[" + ", ".join(repr(float(v)) for v in values) + "]"


def _scale_words(c: Constants) -> str:
    return f"values for pixels divided by {c.scale:g}" if c.scale != 1 else "raw pixel values"


def to_torchvision(c: Constants) -> str:
    """``torchvision.transforms.Normalize(mean=..., std=...)`` after ``ToTensor()``."""
    return (c.header(_scale_words(c)) + "\n"
            f"torchvision.transforms.Normalize(mean={_tuple(c.mean)}, std={_tuple(c.std)})")


def to_timm(c: Constants) -> str:
    """A timm ``pretrained_cfg_overlay`` with ``mean``/``std`` (as in ``create_model``)."""
    return (c.header(_scale_words(c)) + "\n"
            f"pretrained_cfg_overlay = {{'mean': {_tuple(c.mean)}, 'std': {_tuple(c.std)}}}")


def to_albumentations(c: Constants) -> str:
    """``A.Normalize``: computes (x - mean·max_pixel_value) / (std·max_pixel_value)."""
    return (c.header(f"mean/std for pixels divided by max_pixel_value={c.scale!r}") + "\n"
            f"albumentations.Normalize(mean={_tuple(c.mean)}, std={_tuple(c.std)}, "
            f"max_pixel_value={float(c.scale)!r})")


def to_keras(c: Constants) -> str:
    """``keras.layers.Normalization`` takes the **variance**, channels-last."""
    lines = [c.header(_scale_words(c) + "; Keras wants the variance (std squared)")]
    if c.scale != 1:
        lines.append(f"# inputs must be scaled first: keras.layers.Rescaling(1 / {c.scale:g})")
    lines.append(f"keras.layers.Normalization(axis=-1, mean={_list(c.mean)}, "
                 f"variance={_list(c.variance)})")
    return "\n".join(lines)


def _metadata(c: Constants) -> dict:
    return {"variant": c.variant, "variant_meaning": VARIANTS[c.variant],
            "channels": list(c.channels), "scale": c.scale, "source": c.source}


def to_hf(c: Constants) -> str:
    """A ``preprocessor_config.json`` fragment; rescale first, then normalize."""
    fragment = {"do_rescale": c.scale != 1, "rescale_factor": 1.0 / c.scale,
                "do_normalize": True, "image_mean": list(c.mean), "image_std": list(c.std),
                "_normstats": _metadata(c)}
    return json.dumps(fragment, indent=2)


def to_mmcv(c: Constants) -> str:
    """mmcv ``img_norm_cfg``: raw pixel units; ``to_rgb=True`` turns mmcv's BGR into RGB."""
    to_rgb = "False" if c.bgr else "True"
    return (c.header(f"raw pixel units (x{c.scale:g}); to_rgb={to_rgb} because mmcv loads BGR")
            + "\n" + f"img_norm_cfg = dict(mean={_list(c.raw(c.mean))}, "
                     f"std={_list(c.raw(c.std))}, to_rgb={to_rgb})")


def to_detectron2(c: Constants) -> str:
    """detectron2 config: raw pixel units and the channel order said in ``INPUT.FORMAT``."""
    order = "BGR" if c.bgr else "RGB"
    return "\n".join([
        c.header(f"raw pixel units (x{c.scale:g}); detectron2 defaults to BGR, "
                 f"this is {order}"),
        f"cfg.INPUT.FORMAT = {order!r}",
        f"cfg.MODEL.PIXEL_MEAN = {_list(c.raw(c.mean))}",
        f"cfg.MODEL.PIXEL_STD = {_list(c.raw(c.std))}"])


EXPORTERS: dict[str, Callable[[Constants], str]] = {
    "torchvision": to_torchvision, "timm": to_timm, "albumentations": to_albumentations,
    "keras": to_keras, "hf": to_hf, "mmcv": to_mmcv, "detectron2": to_detectron2,
}
FORMATS = tuple(EXPORTERS)


def export(stats: DatasetStats, fmt: str, variant: str = "std", bgr: bool = False) -> str:
    """The constants of ``stats`` as framework ``fmt`` expects them.

    Parameters
    ----------
    stats : DatasetStats
        Computed constants.
    fmt : str
        One of `FORMATS`.
    variant : str
        The std variant to export (see `normstats.VARIANTS`); pooled ``std`` by default.
    bgr : bool
        Reverse the channel order (three channels only).

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
    >>> print(export(s, "keras").splitlines()[-1])
    keras.layers.Normalization(axis=-1, mean=[0.5], variance=[0.25])
    """
    if fmt not in EXPORTERS:
        raise InvalidOptionError(f"unknown export format {fmt!r}; choose one of "
                                 f"{', '.join(FORMATS)}")
    return EXPORTERS[fmt](constants(stats, variant, bgr))
