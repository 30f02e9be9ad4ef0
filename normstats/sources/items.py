"""One dataset item to (H, W, C) pixels: PIL images, numpy arrays, torch tensors, in tuples
or dicts, and batches as a ``DataLoader`` yields them.

Layouts: PIL images are HWC. Arrays and tensors alike are read by their shape, never by
their type (torchvision's ``ToTensor`` and ``read_image`` give CHW tensors, a webdataset
``decode("rgb8")`` gives HWC arrays): 2-d is HW; 3-d is HWC when only its last axis has 1,
3 or 4 entries (a channel axis), CHW when only its first does, and refused when both or
neither do, as (3, 32, 3) or (13, 64, 64) (both ends 1 is one channel either way):
``layout="HWC"`` or ``"CHW"`` then says which, for every item. Both ends qualify only in
images with a side of 1, 3 or 4 pixels.

PIL images are converted to ``mode`` as torchvision's loader does (``convert("RGB")``), so a
list mixing L and RGB images works; 16-bit and float PIL images are never clipped to 8 bits
(use ``mode="keep"``). Arrays and tensors are taken as they
are: float tensors from ``ToTensor()`` are reported in their own units ([0, 1]).
"""

from __future__ import annotations

import numbers
import os
import reprlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError, UnreadableInputError
from normstats.maths.records import default_channel_names
from normstats.sources.decoding.pillow_pixels import decoded_channel_names, pixels_under_mode
from normstats.sources.decoding.policy import MODE_CHANNELS, DecodedImage

__all__ = ["item_pixels", "batch_items", "image_layout", "array_of_lists", "tensor_pixels",
           "IMAGE_KEYS"]

#: Keys a dict item's image is looked up under when ``image_key`` is not given.
IMAGE_KEYS = ("image", "img", "pixel_values", "pixels", "x", "input")
#: Entries of a channel axis: grey, RGB, RGBA (the rule of `normstats.sources.arrays`).
_CHANNEL_COUNTS = (1, 3, 4)


def item_pixels(item: Any, layout: str | None = None, mode: str = "keep",
                image_key: str | None = None) -> DecodedImage:
    """The (H, W, C) pixels of one dataset item and their channel names.

    Examples
    --------
    >>> import numpy as np
    >>> item_pixels((np.zeros((3, 8, 9), np.float32), 7)).pixels.shape
    (8, 9, 3)
    >>> item_pixels({"image": np.zeros((4, 4), np.uint8), "label": 1}).pixels.shape
    (4, 4, 1)
    """
    item = _image_of(item, image_key)
    if hasattr(item, "getbands") and hasattr(item, "mode"):  # a PIL image
        return _pil_pixels(item, mode, layout)
    if isinstance(item, str | bytes | os.PathLike):  # np.asarray would make it a 0-d image
        raise InvalidOptionError(
            f"a {type(item).__name__} ({reprlib.repr(item)}) is not an image: a dataset "
            "object's items are images (arrays, tensors, PIL images); image files are read "
            "from a folder or a list of their paths, e.g. compute(sorted(paths))")
    if type(item).__module__.startswith("torch"):
        pixels = tensor_pixels(item)
    else:
        pixels = np.asarray(item)
        if isinstance(item, list | tuple):
            _refuse_integer_lists(pixels)
    if pixels.dtype == object:
        raise UnreadableInputError(f"an item of type {type(item).__name__} is not an image")
    pixels = _to_hwc(pixels, layout)
    wanted = MODE_CHANNELS.get(mode)
    if wanted is not None and pixels.shape[2] != wanted:  # else ignored, as if converted
        raise InvalidOptionError(
            f"mode {mode} converts PIL images; this item is a {pixels.shape[2]}-channel "
            f"{type(item).__name__}, read as stored: convert it in the dataset, or leave "
            "mode out")
    return DecodedImage(pixels, default_channel_names(pixels.shape[2]))


def _image_of(item: Any, image_key: str | None) -> Any:
    if isinstance(item, Mapping):
        if image_key is not None:
            if image_key not in item:
                raise InvalidOptionError(f"item has no key {image_key!r} (keys: "
                                         f"{', '.join(map(str, item))})")
            return item[image_key]
        for key in IMAGE_KEYS:
            if key in item:
                return item[key]
        raise InvalidOptionError(f"cannot tell which key of a dict item holds the image "
                                 f"(keys: {', '.join(map(str, item))}); name it with "
                                 "image_key=")
    if isinstance(item, tuple) and item or isinstance(item, list) and item and \
            not _holds_numbers(item[0]):
        return item[0]  # (image, label, ...), as datasets return them
    return item  # a list whose first entry is numbers or a list of them: an image in lists


def _holds_numbers(entry: Any) -> bool:
    """Whether ``entry`` is a number or a (nested) list of them: the first row of an image
    given as Python lists, never the image of an (image, label) pair."""
    while isinstance(entry, list) and entry:
        entry = entry[0]
    return isinstance(entry, numbers.Number)


def _refuse_integer_lists(pixels: np.ndarray) -> None:
    """Refuse pixels numpy made of Python lists of integers: int64 is numpy's choice, not
    the data's type, and 64-bit integers are refused as not exact."""
    if pixels.dtype.kind in "iu":
        raise InvalidOptionError(
            "images given as Python lists of integers have no pixel type (numpy would read "
            "them as int64): convert them to numpy arrays of their type, "
            "np.asarray(pixels, np.uint8) (a Hugging Face dataset: declare the column's "
            "type, dataset.cast_column(name, datasets.Array3D(shape, 'uint8')), and it is "
            "used, streamed or not)")


def array_of_lists(data: list | tuple) -> np.ndarray | None:
    """Images given as nested Python lists of numbers (``[image.tolist(), ...]``) as the
    array numpy makes of them, read as any array is; None when ``data`` is not such lists
    or they are ragged (images of several sizes: each is then an item).

    Examples
    --------
    >>> array_of_lists([[[0.5, 1.0], [0.0, 0.25]]]).shape
    (1, 2, 2)
    >>> array_of_lists([[[0.5]], [[0.5, 1.0]]]) is None
    True
    """
    if not data or not (isinstance(data[0], list) and _holds_numbers(data[0])):
        return None
    try:
        pixels = np.asarray(data)
    except ValueError:  # ragged
        return None
    if pixels.dtype == object:
        return None
    _refuse_integer_lists(pixels)
    return pixels


def tensor_pixels(tensor: Any) -> np.ndarray:
    """A torch tensor's values as numpy, on the CPU; bfloat16 becomes float32 (exactly:
    numpy has no bfloat16).

    Examples
    --------
    >>> import torch
    >>> tensor_pixels(torch.ones(2, 3, dtype=torch.bfloat16)).dtype
    dtype('float32')
    """
    try:
        tensor = tensor.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        return tensor.numpy()
    except (TypeError, RuntimeError, NotImplementedError) as error:  # sparse, quantized,
        # float8 tensors; meta tensors (no data: NotImplementedError as they are copied)
        raise UnreadableInputError(f"a {tensor.dtype} tensor is not an image "
                                   f"({' '.join(str(error).split())})") from None


def _pil_pixels(image: Any, mode: str, layout: str | None) -> DecodedImage:
    if layout not in (None, "HWC"):
        raise InvalidOptionError(f"PIL images are HWC; layout={layout!r} does not apply")
    pixels = pixels_under_mode(image, b"", mode, "item")
    names = decoded_channel_names(image.mode, mode, pixels.shape[2]) if mode == "keep" \
        else decoded_channel_names(mode, mode, pixels.shape[2])
    return DecodedImage(pixels, names)


def _to_hwc(pixels: np.ndarray, layout: str | None) -> np.ndarray:
    if pixels.ndim == 2:
        return pixels[:, :, None]
    if pixels.ndim == 4:
        raise InvalidOptionError(
            f"an item of shape {pixels.shape} is a batch of images, not one image: pass "
            "batched=True when every item is a batch (N, C, H, W) or (N, H, W, C)")
    if pixels.ndim != 3:
        raise InvalidOptionError(f"an image item must be 2-d or 3-d, got shape {pixels.shape}")
    layout = layout or image_layout(pixels.shape)
    if layout not in ("HWC", "CHW"):
        raise InvalidOptionError(f"layout for image items must be HWC or CHW, got {layout!r}")
    return pixels if layout == "HWC" else pixels.transpose(1, 2, 0)


def image_layout(shape: tuple[int, ...]) -> str:
    """``"HWC"`` or ``"CHW"``: where the channel axis of a 3-d image of ``shape`` is, by the
    rule in this module's docstring (the type of the image never decides).

    Raises
    ------
    InvalidOptionError
        When both ends, or neither, could be the channel axis: ``layout=`` says which.

    Examples
    --------
    >>> image_layout((32, 32, 3)), image_layout((3, 32, 32))
    ('HWC', 'CHW')
    """
    first, last = shape[0] in _CHANNEL_COUNTS, shape[-1] in _CHANNEL_COUNTS
    if first != last or shape[0] == shape[-1] == 1:  # (1, n, 1): one channel either way
        return "HWC" if last else "CHW"
    which = "both its first and its last axis" if first else "neither its first nor its last axis"
    raise InvalidOptionError(f"cannot tell the channel axis of an image of shape {tuple(shape)}"
                             f": {which} could hold channels (1, 3 or 4 entries); pass "
                             "layout='HWC' or 'CHW'")


def batch_items(batch: Any, image_key: str | None = None) -> Iterator[Any]:
    """The images of one batch (of a ``DataLoader``, a webdataset ``.batched(n)``, ...):
    ``(N, C, H, W)``, ``(N, H, W, C)`` or ``(N, H, W)`` arrays or tensors, alone, in
    ``(images, labels)`` or in a dict of batched fields, one image at a time.

    Examples
    --------
    >>> import numpy as np
    >>> [x.shape for x in batch_items((np.zeros((2, 3, 4, 5)), np.array([0, 1])))]
    [(3, 4, 5), (3, 4, 5)]
    """
    images = _image_of(batch, image_key)
    if isinstance(images, list | tuple):  # collate kept a list (PIL images, odd sizes)
        yield from images
        return
    shape = getattr(images, "shape", None)
    if shape is None or len(shape) not in (3, 4):
        raise InvalidOptionError(
            f"a batch should hold (N, C, H, W), (N, H, W, C) or (N, H, W) images, got "
            f"{type(images).__name__} of shape {shape}")
    yield from (images[i] for i in range(shape[0]))
