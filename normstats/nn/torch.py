"""Optional PyTorch adapters; importing this module imports torch.

* :class:`Normalize`: an ``nn.Module`` (usable as a transform) computing
  ``((x / scale) - mean) / std`` to float32 for channels-first uint8 or float tensors.
* :func:`torchvision_normalize_kwargs` / :func:`torchvision_normalize`: the arguments
  for ``torchvision.transforms.Normalize`` from a ``DatasetStats``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("normstats.nn.torch needs PyTorch: pip install 'normstats[torch]'") from exc

from normstats.errors import InvalidOptionError
from normstats.nn.normalize import Normalize as _ArrayNormalize
from normstats.nn.normalize import stats_input_scale, stats_vectors

__all__ = ["Normalize", "torchvision_normalize", "torchvision_normalize_kwargs"]


class Normalize(torch.nn.Module):
    """``((x / scale) - mean) / std`` as a module, for (..., C, H, W) tensors.

    A drop-in replacement for ``torchvision.transforms.Normalize`` in a ``Compose``: after
    ``ToTensor`` (float input is taken as already in [0, 1]) and before it, on uint8 or
    uint16 tensors (divided by 255 or 65535, looked up in the same float64-computed table as
    :class:`normstats.nn.Normalize`, so exact). Other integer tensors are divided by their
    dtype maximum; an explicit ``scale`` applies to every input. The tables are buffers,
    so ``.to(device)`` moves them.

    Examples
    --------
    >>> norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    >>> x = torch.tensor([0, 255, 51], dtype=torch.uint8).view(3, 1, 1)
    >>> norm(x).flatten().tolist()
    [-2.0, 2.0, -1.2000000476837158]
    >>> norm(x.float() / 255).flatten().tolist()  # after ToTensor: the same values
    [-2.0, 2.0, -1.2000000476837158]
    """

    def __init__(self, mean: Any, std: Any, scale: float | None = None, *,
                 variant: str | None = None,
                 channel_names: tuple[str, ...] | None = None) -> None:
        super().__init__()
        # validates the arguments once, and computes the tables
        reference = _ArrayNormalize(mean, std, scale, variant=variant,
                                    channel_names=channel_names)
        self.reference = reference
        self.scale = reference.scale
        self.variant, self.channel_names = reference.variant, reference.channel_names
        self.register_buffer("mean", torch.tensor(reference.mean, dtype=torch.float64))
        self.register_buffer("std", torch.tensor(reference.std, dtype=torch.float64))
        self.register_buffer("lut8", torch.from_numpy(reference.lut(np.uint8)))
        self.register_buffer("lut16", torch.from_numpy(reference.lut(np.uint16)))

    @classmethod
    def from_stats(cls, stats: Any, variant: str = "std") -> Normalize:
        """Build from any object with ``mean``, ``scale`` and the ``variant`` attribute,
        keeping the variant and the channel order (``stats.channels``).

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.5,), std=(0.25,), scale=255.0)
        >>> Normalize.from_stats(s)(torch.full((1, 1, 1), 255, dtype=torch.uint8)).item()
        2.0
        """
        mean, std = stats_vectors(stats, variant)
        return cls(mean, std, stats_input_scale(stats), variant=variant,
                   channel_names=getattr(stats, "channels", None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize a channels-first tensor to float32."""
        channels = self.mean.numel()
        if x.dim() < 3 or x.shape[-3] != channels:
            raise InvalidOptionError(
                f"expected (..., C, H, W) with C={channels}, got shape {tuple(x.shape)}"
            )
        view = (channels, 1, 1)
        table = {torch.uint8: self.lut8, torch.uint16: self.lut16}.get(x.dtype)
        if table is not None:
            index = torch.arange(channels, device=x.device).view(view)
            return table[index, x.long()]
        if x.is_floating_point() or x.dtype in (torch.int8, torch.int16, torch.int32,
                                                  torch.int64):
            numpy_dtype = torch.empty(0, dtype=x.dtype).numpy().dtype
            scale = self.reference.scale_for(numpy_dtype)
            y = (x.double() / scale - self.mean.view(view)) / self.std.view(view)
            return y.float()
        raise TypeError(f"expected integer or float pixels, got {x.dtype}")

    def extra_repr(self) -> str:
        scale = "by dtype" if self.scale is None else self.scale
        text = f"mean={self.mean.tolist()}, std={self.std.tolist()}, scale={scale}"
        if self.variant is not None:
            text += f", variant={self.variant!r}"
        if self.channel_names is not None:
            text += f", channels={self.channel_names!r}"
        return text


def torchvision_normalize_kwargs(stats: Any, variant: str = "std") -> dict[str, list[float]]:
    """``mean`` and ``std`` for ``torchvision.transforms.Normalize``, in the stats' scale.

    torchvision's ``ToTensor`` / ``ToDtype(float32, scale=True)`` divide 8-bit images by
    255 first, which is the ``[0, 1]`` scale ``DatasetStats`` reports integer images in.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(mean=(0.4914, 0.4822, 0.4465), std=(0.2470, 0.2435, 0.2616))
    >>> torchvision_normalize_kwargs(s)
    {'mean': [0.4914, 0.4822, 0.4465], 'std': [0.247, 0.2435, 0.2616]}
    """
    mean, std = stats_vectors(stats, variant)
    return {"mean": mean.tolist(), "std": std.tolist()}


def torchvision_normalize(stats: Any, variant: str = "std") -> Any:
    """A ``torchvision.transforms.Normalize`` built from ``stats`` (needs torchvision).

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> s = SimpleNamespace(mean=(0.5,), std=(0.25,))
    >>> torchvision_normalize(s)  # doctest: +SKIP
    Normalize(mean=[0.5], std=[0.25])
    """
    try:
        from torchvision import transforms
    except ImportError as exc:
        raise ImportError(
            "torchvision is not installed; use torchvision_normalize_kwargs"
            " or normstats.nn.torch.Normalize"
        ) from exc
    return transforms.Normalize(**torchvision_normalize_kwargs(stats, variant))
