"""The constants in each framework's own convention, ready to paste.

Each framework's `Exporter` gives its keyword arguments (`export_kwargs`,
`DatasetStats.to_kwargs`) and the code that uses them (`export`, `DatasetStats.to`), the code
built from the same arguments; `EXPORTERS` maps format names to them. The conventions
(what each framework's documentation asks for):

=================  ==========================================================================
torchvision, timm  mean and std in the reported scale ([0, 1] for integer images), RGB
albumentations     mean and std in [0, 1] plus ``max_pixel_value`` (255, 65535 or 1.0)
keras              ``Rescaling(1/255)`` then ``Normalization(axis=-1, mean=, variance=)``:
                   **variance**, channels-last
hf                 ``preprocessor_config.json`` keys ``image_mean``, ``image_std``,
                   ``do_rescale``, ``rescale_factor`` (1/255 for 8-bit), and
                   ``image_processor_type`` so that ``AutoImageProcessor`` loads it
mmcv               raw pixel units ([0, 255] for 8-bit), ``to_rgb=True`` (mmcv loads BGR;
                   False unless there are three channels)
detectron2         raw pixel units, ``PIXEL_MEAN``/``PIXEL_STD`` and ``INPUT.FORMAT`` spelled out
                   (``L`` for one channel, none for bands)
lighting           AlexNet-style PCA lighting, ``Lighting(alphastd, eigval, eigvec)`` adding
                   ``eigvec @ (alpha * eigval)`` to a (C, H, W) tensor in the reported scale:
                   ``eigval`` the covariance's eigenvalues, ``eigvec`` its eigenvectors as
                   columns (needs ``covariance=True``)
zca                ZCA whitening, ``(x - mean_vector) @ transformation_matrix`` on
                   channels-last values in the reported scale (torchvision
                   ``LinearTransformation``'s formula, kornia's matrix), ``eps`` 1e-6
                   (needs ``covariance=True``)
torchgeo           ``mean = torch.tensor([...])`` and ``std = torch.tensor([...])`` for a
                   datamodule, in the reported scale (raw units for rasters)
kornia             ``kornia.augmentation.Normalize(mean=torch.tensor, std=torch.tensor)``
bands-json,        one row per band: ``band``, ``mean``, ``std``, ``p2``, ``p98`` (the 2nd
bands-csv          and 98th percentiles of ``percentiles=True``; null / empty without them)
=================  ==========================================================================

Every export names the std variant it uses and the channel order; ``bgr=True``
reverses a three-channel order for frameworks that read BGR (OpenCV loaders, detectron2).
Numbers are printed with ``repr`` so they round-trip exactly; Python exports import
what they use, so each one runs pasted alone. The whole result as JSON
is `DatasetStats.to_json` (``--json``), not an export.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from normstats.errors import InvalidOptionError
from normstats.maths.variants import VARIANTS, VECTOR_VARIANTS

if TYPE_CHECKING:  # stats imports this module in DatasetStats.to
    from normstats.results.stats import DatasetStats

__all__ = ["EXPORTERS", "FORMATS", "COVARIANCE_FORMATS", "Constants", "constants", "export",
           "export_kwargs"]


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
    #: The channel covariance in the reported scale (population), when it was computed.
    covariance: tuple[tuple[float, ...], ...] | None = None
    #: The 2nd and 98th percentiles per channel in the reported scale, when computed.
    p2: tuple[float, ...] | None = None
    p98: tuple[float, ...] | None = None
    #: Vector data (N, d): features over rows, worded without pixels.
    vectors: bool = False
    #: mean and std in pixel units (scale 1), each rounded once from the exact totals
    #: where the result kept them (`DatasetStats.in_pixel_units`); what mmcv and
    #: detectron2 are given.
    pixel_mean: tuple[float, ...] = ()
    pixel_std: tuple[float, ...] = ()

    @property
    def axis(self) -> str:
        """What one of the constants is of: a "channel" of images, a "feature" of vectors."""
        return "feature" if self.vectors else "channel"

    @property
    def variance(self) -> tuple[float, ...]:
        return tuple(s * s for s in self.std)

    def header(self, units: str) -> str:
        """The comment line every Python export starts with (and a second one naming the
        constant channels, whose std 0 the export's Normalize divides by)."""
        from normstats.results.text_report import constant_channels_note

        note = constant_channels_note(self.channels, self.std)
        described = VECTOR_VARIANTS.get(self.variant) if self.vectors else None
        return (f"# normstats: {self.source or 'dataset'}; std variant {self.variant!r} "
                f"({described or VARIANTS[self.variant]}); {self.axis} order "
                f"{', '.join(self.channels)}; {units}"
                + (f"\n# {note}" if note else ""))


def constants(stats: DatasetStats, variant: str = "std", bgr: bool = False) -> Constants:
    """Mean and the chosen std variant, reversed to BGR on request.

    Raises
    ------
    InvalidOptionError
        For an unknown or undefined variant, or ``bgr`` on data without three channels.
    """
    mean, std, names = stats.mean, stats.variant(variant), stats.channels
    pixel_mean, pixel_std = stats.in_pixel_units("mean"), stats.in_pixel_units(variant)
    covariance = stats.covariance
    found = stats.percentiles or {}
    p2, p98 = found.get("p2"), found.get("p98")
    if bgr:
        if len(names) != 3:
            raise InvalidOptionError(f"--bgr needs three channels, these data have {len(names)} "
                                     f"({', '.join(names)})")
        mean, std, names = mean[::-1], std[::-1], names[::-1]
        pixel_mean, pixel_std = pixel_mean[::-1], pixel_std[::-1]
        covariance = None if covariance is None else tuple(row[::-1] for row in covariance[::-1])
        p2, p98 = (None if v is None else v[::-1] for v in (p2, p98))
    return Constants(tuple(mean), tuple(std), tuple(names), variant, stats.scale, stats.source,
                     bgr, covariance, p2, p98, stats.kind == "vectors", pixel_mean, pixel_std)


def _tuple(values: tuple[float, ...]) -> str:
    parts = [repr(float(v)) for v in values]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _code(value: object) -> str:
    """Python source for an argument: tuples and lists of floats in ``repr`` digits."""
    if isinstance(value, tuple):
        return _tuple(value)
    if isinstance(value, list):
        return "[" + ", ".join(_code(v) for v in value) + "]"
    return repr(value)


def _call(name: str, kwargs: dict[str, object]) -> str:
    return f"{name}(" + ", ".join(f"{k}={_code(v)}" for k, v in kwargs.items()) + ")"


def _scale_words(c: Constants) -> str:
    if c.vectors:
        return f"values divided by {c.scale:g}" if c.scale != 1 else "raw values"
    return f"values for pixels divided by {c.scale:g}" if c.scale != 1 else "raw pixel values"


@dataclass(frozen=True)
class Exporter:
    """One framework's convention: its keyword arguments, and the code that uses them."""

    kwargs: Callable[[Constants], dict[str, Any]]
    code: Callable[[Constants, dict[str, Any]], str]


def _mean_std(c: Constants) -> dict[str, Any]:
    return {"mean": c.mean, "std": c.std}


def _torchvision_code(c: Constants, kw: dict[str, Any]) -> str:
    return (c.header(_scale_words(c)) + "\nimport torchvision\n"
            + _call("torchvision.transforms.Normalize", kw))


def _timm_code(c: Constants, kw: dict[str, Any]) -> str:
    return c.header(_scale_words(c)) + f"\npretrained_cfg_overlay = {kw!r}"


def _albumentations_kwargs(c: Constants) -> dict[str, Any]:
    # A.Normalize computes (x - mean * max_pixel_value) / (std * max_pixel_value)
    return {"mean": c.mean, "std": c.std, "max_pixel_value": float(c.scale)}


def _albumentations_code(c: Constants, kw: dict[str, Any]) -> str:
    return (c.header(f"mean/std for pixels divided by max_pixel_value={c.scale!r}")
            + "\nimport albumentations\n" + _call("albumentations.Normalize", kw))


def _keras_kwargs(c: Constants) -> dict[str, Any]:
    # Normalization takes the variance, not the std, channels-last
    return {"axis": -1, "mean": list(c.mean), "variance": list(c.variance)}


def _keras_code(c: Constants, kw: dict[str, Any]) -> str:
    layer = _call("keras.layers.Normalization", kw)
    head = c.header(_scale_words(c) + "; Keras wants the variance (std squared)")
    if c.scale == 1:
        return f"{head}\nimport keras\nnormalize = {layer}"
    # the layer expects pixels already divided by the scale: the Rescaling layer does it
    return (f"{head}\nimport keras\nnormalize = keras.Sequential("
            f"[keras.layers.Rescaling({1.0 / c.scale!r}), {layer}])")


def _hf_kwargs(c: Constants) -> dict[str, Any]:
    # rescale first, then normalize; ViTImageProcessor is the plain rescale-and-normalize
    # processor, named so that AutoImageProcessor loads the fragment on its own
    return {"image_processor_type": "ViTImageProcessor", "do_rescale": c.scale != 1,
            "rescale_factor": 1.0 / c.scale, "do_normalize": True,
            "image_mean": list(c.mean), "image_std": list(c.std)}


def _hf_code(c: Constants, kw: dict[str, Any]) -> str:
    # JSON holds no comment and every key survives save_pretrained: no metadata key here
    return json.dumps(kw, indent=2)


def _mmcv_kwargs(c: Constants) -> dict[str, Any]:
    # raw pixel units; to_rgb=True turns mmcv's BGR loading into RGB. Only three channels
    # have an order to turn: mmcv's conversion (OpenCV's cvtColor BGR2RGB) makes three
    # channels of one, drops a fourth, and fails on more.
    to_rgb = len(c.channels) == 3 and not c.bgr
    return {"mean": list(c.pixel_mean), "std": list(c.pixel_std), "to_rgb": to_rgb}


def _mmcv_code(c: Constants, kw: dict[str, Any]) -> str:
    count = len(c.channels)
    why = ("because mmcv loads BGR" if count == 3 else
           "because a single channel has no BGR order to turn" if count == 1 else
           f"because {count} channels have no BGR order to turn")
    return (c.header(f"raw pixel units (x{c.scale:g}); to_rgb={kw['to_rgb']} {why}") + "\n"
            + "img_norm_cfg = " + _call("dict", kw))


def _detectron2_kwargs(c: Constants) -> dict[str, Any]:
    # detectron2 reads images as BGR, RGB or L (grayscale); other channel counts come
    # from the user's own DatasetMapper, and the config then names no format
    fmt = {1: "L", 3: "BGR" if c.bgr else "RGB"}.get(len(c.channels))
    return ({"INPUT.FORMAT": fmt} if fmt else {}) | {
        "MODEL.PIXEL_MEAN": list(c.pixel_mean), "MODEL.PIXEL_STD": list(c.pixel_std)}


def _detectron2_code(c: Constants, kw: dict[str, Any]) -> str:
    fmt = kw.get("INPUT.FORMAT")
    said = f"this is {fmt}" if fmt else (
        f"these are {len(c.channels)} channels, which its readers (BGR, RGB, L) do not make: read "
        "them with a DatasetMapper of your own")
    return "\n".join([
        c.header(f"raw pixel units (x{c.scale:g}); detectron2 defaults to BGR, {said}"),
        *(f"cfg.{key} = {_code(value)}" for key, value in kw.items())])


def _covariance(c: Constants, fmt: str) -> tuple[tuple[float, ...], ...]:
    if c.covariance is None:
        raise InvalidOptionError(f"--to {fmt} needs the channel covariance: compute with "
                                 "--covariance (covariance=True)")
    return c.covariance


def _rows(values: Any) -> list[tuple[float, ...]]:
    return [tuple(float(v) for v in row) for row in values]


def _lighting_kwargs(c: Constants) -> dict[str, Any]:
    # AlexNet's PCA lighting: eigenvalues of the covariance, eigenvectors as columns
    from normstats.maths.whitening import principal_axes

    values, vectors = principal_axes(_covariance(c, "lighting"))
    return {"alphastd": 0.1, "eigval": tuple(float(v) for v in values),
            "eigvec": _rows(vectors)}


_LIGHTING_CLASS = '''import torch


class Lighting:
    """Add eigvec @ (alpha * eigval), alpha ~ N(0, alphastd) drawn per call, to every
    pixel of a (C, H, W) tensor (AlexNet-style PCA lighting)."""

    def __init__(self, alphastd, eigval, eigvec):
        self.alphastd = alphastd
        self.eigval = torch.tensor(eigval)
        self.eigvec = torch.tensor(eigvec)

    def __call__(self, img):
        if self.alphastd == 0:
            return img
        alpha = torch.randn(self.eigval.shape) * self.alphastd
        shift = self.eigvec @ (alpha * self.eigval)
        return img + shift.to(img.dtype).view(-1, 1, 1)

'''


def _covariance_header(c: Constants, what: str) -> str:
    """The first line of a covariance export (no std variant is involved)."""
    return (f"# normstats: {c.source or 'dataset'}; {c.axis} order {', '.join(c.channels)}; "
            f"{_scale_words(c)}; {what}")


def _lighting_code(c: Constants, kw: dict[str, Any]) -> str:
    head = _covariance_header(c, "eigval: eigenvalues of the population channel covariance, "
                              "largest first; eigvec: eigenvectors as columns, each signed so "
                              "that its largest component is positive")
    return f"{head}\n{_LIGHTING_CLASS}\nlighting = " + _call("Lighting", kw)


def _zca_kwargs(c: Constants) -> dict[str, Any]:
    from normstats.maths.whitening import DEFAULT_EPS, zca_matrix

    matrix = zca_matrix(_covariance(c, "zca"), DEFAULT_EPS)
    return {"mean_vector": c.mean, "transformation_matrix": _rows(matrix), "eps": DEFAULT_EPS}


_ZCA_CLASS = '''import torch


class ChannelWhitening:
    """(x - mean_vector) @ transformation_matrix over the channels of every pixel of a
    (C, H, W) tensor; eps was added to each eigenvalue."""

    def __init__(self, mean_vector, transformation_matrix, eps):
        self.mean_vector = torch.tensor(mean_vector)
        self.transformation_matrix = torch.tensor(transformation_matrix)
        self.eps = eps

    def __call__(self, img):
        pixels = img.movedim(-3, -1) - self.mean_vector.to(img.dtype)
        return (pixels @ self.transformation_matrix.to(img.dtype)).movedim(-1, -3)

'''


#: The ZCA of vector data (N, d): rows, whitened over their last axis.
_ZCA_ROWS_CLASS = '''import torch


class FeatureWhitening:
    """(x - mean_vector) @ transformation_matrix over the features (the last axis) of rows
    (N, d) or one row (d,), in the rows' dtype; eps was added to each eigenvalue."""

    def __init__(self, mean_vector, transformation_matrix, eps):
        self.mean_vector = torch.tensor(mean_vector, dtype=torch.float64)
        self.transformation_matrix = torch.tensor(transformation_matrix, dtype=torch.float64)
        self.eps = eps

    def __call__(self, rows):
        centred = rows - self.mean_vector.to(rows.dtype)
        return centred @ self.transformation_matrix.to(rows.dtype)

'''


def _zca_code(c: Constants, kw: dict[str, Any]) -> str:
    head = _covariance_header(c, f"ZCA of the population {c.axis} covariance, "
                              f"U·diag(1/sqrt(λ + eps))·Uᵀ with eps={kw['eps']!r}")
    if c.vectors:
        return f"{head}\n{_ZCA_ROWS_CLASS}\nwhiten = " + _call("FeatureWhitening", kw)
    return f"{head}\n{_ZCA_CLASS}\nwhiten = " + _call("ChannelWhitening", kw)


def _torchgeo_code(c: Constants, kw: dict[str, Any]) -> str:
    # a torchgeo datamodule keeps them as tensors and normalizes with kornia
    return (c.header(_scale_words(c)) + "\nimport torch\n"
            + f"mean = torch.tensor({_code(list(kw['mean']))})\n"
            + f"std = torch.tensor({_code(list(kw['std']))})")


def _kornia_code(c: Constants, kw: dict[str, Any]) -> str:
    tensors = {name: f"torch.tensor({_code(list(values))})" for name, values in kw.items()}
    return (c.header(_scale_words(c)) + "\nimport kornia\nimport torch\nnormalize = "
            + "kornia.augmentation.Normalize("
            + ", ".join(f"{k}={v}" for k, v in tensors.items()) + ")")


def _bands_kwargs(c: Constants) -> dict[str, Any]:
    def at(values: tuple[float, ...] | None, index: int) -> float | None:
        return None if values is None else float(values[index])

    return {"bands": [{"band": name, "mean": float(c.mean[i]), "std": float(c.std[i]),
                       "p2": at(c.p2, i), "p98": at(c.p98, i)}
                      for i, name in enumerate(c.channels)]}


def _bands_json_code(c: Constants, kw: dict[str, Any]) -> str:
    return json.dumps(kw["bands"], indent=2)


def _bands_csv_code(c: Constants, kw: dict[str, Any]) -> str:
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("band", "mean", "std", "p2", "p98"))
    for row in kw["bands"]:
        writer.writerow([row["band"], *("" if row[k] is None else repr(row[k])
                                        for k in ("mean", "std", "p2", "p98"))])
    return out.getvalue().rstrip("\n")


EXPORTERS: dict[str, Exporter] = {
    "torchvision": Exporter(_mean_std, _torchvision_code),
    "timm": Exporter(_mean_std, _timm_code),
    "albumentations": Exporter(_albumentations_kwargs, _albumentations_code),
    "keras": Exporter(_keras_kwargs, _keras_code),
    "hf": Exporter(_hf_kwargs, _hf_code),
    "mmcv": Exporter(_mmcv_kwargs, _mmcv_code),
    "detectron2": Exporter(_detectron2_kwargs, _detectron2_code),
    "lighting": Exporter(_lighting_kwargs, _lighting_code),
    "zca": Exporter(_zca_kwargs, _zca_code),
    "torchgeo": Exporter(_mean_std, _torchgeo_code),
    "kornia": Exporter(_mean_std, _kornia_code),
    "bands-json": Exporter(_bands_kwargs, _bands_json_code),
    "bands-csv": Exporter(_bands_kwargs, _bands_csv_code),
}
FORMATS = tuple(EXPORTERS)
#: The formats written from the channel covariance (no std variant; ``covariance=True``).
COVARIANCE_FORMATS = ("lighting", "zca")


#: The formats whose constants apply to vectors (N, d) as well as to images: the others
#: normalize the channels of images, (C, H, W) tensors or (H, W, C) arrays.
VECTOR_FORMATS = ("keras", "zca", "bands-json", "bands-csv")


def _exporter(fmt: str, stats: DatasetStats) -> Exporter:
    if fmt not in EXPORTERS:
        raise InvalidOptionError(f"unknown export format {fmt!r}; choose one of "
                                 f"{', '.join(FORMATS)}")
    if stats.kind == "vectors" and fmt not in VECTOR_FORMATS:
        raise InvalidOptionError(
            f"the {fmt} export normalizes the channels of images, and these are vectors "
            f"(N, d) of {len(stats.channels)} features: export them as "
            f"{', '.join(VECTOR_FORMATS)} (keras: Normalization(axis=-1)), or use the "
            "report's StandardScaler line")
    return EXPORTERS[fmt]


def export_kwargs(stats: DatasetStats, fmt: str, variant: str = "std",
                  bgr: bool = False) -> dict[str, Any]:
    """The keyword arguments framework ``fmt`` takes, as a dict (what `export` prints as code).

    Parameters are those of `export`. Values are the framework's own units: tuples or lists
    of floats in the reported scale, raw pixel units for mmcv and detectron2 (whose keys are
    the config's dotted names).

    Examples
    --------
    >>> import numpy as np, normstats
    >>> s = normstats.compute(np.array([[[[0]]], [[[255]]]], np.uint8))
    >>> export_kwargs(s, "albumentations")
    {'mean': (0.5,), 'std': (0.5,), 'max_pixel_value': 255.0}
    """
    return _exporter(fmt, stats).kwargs(constants(stats, variant, bgr))


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
    >>> print(export(s, "torchvision").splitlines()[-1])
    torchvision.transforms.Normalize(mean=(0.5,), std=(0.5,))
    """
    exporter = _exporter(fmt, stats)
    c = constants(stats, variant, bgr)
    return exporter.code(c, exporter.kwargs(c))
