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
from normstats.nn.normalize import stats_vectors

__all__ = ["Normalize", "torchvision_normalize", "torchvision_normalize_kwargs"]


class Normalize(torch.nn.Module):
    """``((x / scale) - mean) / std`` as a module, for (C, H, W) or (N, C, H, W) tensors.

    uint8 and uint16 input are looked up in the same float64-computed table as
    :class:`normstats.nn.Normalize` (exact); float input is computed in float64 and
    rounded to float32. The tables are buffers, so ``.to(device)`` moves them.

    Examples
    --------
    >>> norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    >>> x = torch.tensor([0, 255, 51], dtype=torch.uint8).view(3, 1, 1)
    >>> norm(x).flatten().tolist()
    [-2.0, 2.0, -1.2000000476837158]
    """

    def __init__(self, mean: Any, std: Any, scale: float = 255.0) -> None:
        super().__init__()
        reference = _ArrayNormalize(mean, std, scale)  # validates the arguments once
        self.scale = reference.scale
        self.register_buffer("mean", torch.tensor(reference.mean, dtype=torch.float64))
        self.register_buffer("std", torch.tensor(reference.std, dtype=torch.float64))
        self.register_buffer("lut8", torch.from_numpy(reference.lut(np.uint8)))

    @classmethod
    def from_stats(cls, stats: Any, variant: str = "std") -> Normalize:
        """Build from any object with ``mean``, ``scale`` and the ``variant`` attribute.

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.5,), std=(0.25,), scale=255.0)
        >>> Normalize.from_stats(s)(torch.full((1, 1, 1), 255, dtype=torch.uint8)).item()
        2.0
        """
        mean, std = stats_vectors(stats, variant)
        return cls(mean, std, stats.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize a channels-first tensor to float32."""
        channels = self.mean.numel()
        if x.dim() not in (3, 4) or x.shape[-3] != channels:
            raise InvalidOptionError(
                f"expected (C, H, W) or (N, C, H, W) with C={channels}, got shape {tuple(x.shape)}"
            )
        view = (channels, 1, 1)
        if x.dtype == torch.uint8:
            index = torch.arange(channels, device=x.device).view(view)
            return self.lut8[index, x.long()]
        if x.is_floating_point() or x.dtype in (torch.int16, torch.int32, torch.int64):
            y = (x.double() / self.scale - self.mean.view(view)) / self.std.view(view)
            return y.float()
        raise TypeError(f"expected uint8, integer or float pixels, got {x.dtype}")

    def extra_repr(self) -> str:
        return f"mean={self.mean.tolist()}, std={self.std.tolist()}, scale={self.scale}"


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
