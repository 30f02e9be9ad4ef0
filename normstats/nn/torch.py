"""Optional PyTorch adapters; importing this module imports torch.

* :class:`Normalize`: an ``nn.Module`` (usable as a transform) computing
  ``((x / scale) - mean) / std`` for channels-first uint8, uint16, integer or float tensors,
  to float32 (or the dtype the module is moved to), that runs under ``torch.compile``,
  ``torch.export``, ``torch.jit.script`` and ONNX export.
* :func:`torchvision_normalize_kwargs` / :func:`torchvision_normalize`: the arguments
  for ``torchvision.transforms.Normalize`` from a ``DatasetStats``.
* :class:`Whiten`: channel whitening ``(x / scale - mean) @ matrix`` of (..., C, H, W)
  tensors (`normstats.nn.Whiten` for channels-last arrays).
"""

# No ``from __future__ import annotations``: torch.jit.script reads the class annotation of
# ``scale`` as an object, not a string.
from collections.abc import Callable
from typing import Any, Optional

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("normstats.nn.torch needs PyTorch: pip install 'normstats[torch]'") from exc

from normstats.errors import InvalidOptionError
from normstats.nn.normalize import Normalize as _ArrayNormalize
from normstats.nn.normalize import image_stats_vectors, stats_input_scale

__all__ = ["Normalize", "Whiten", "torchvision_normalize", "torchvision_normalize_kwargs"]

#: The tables and the largest value they hold: one entry per 8- and 16-bit value and channel.
_TABLES = (("lut8", 255), ("lut16", 65535))


class Normalize(torch.nn.Module):
    """``((x / scale) - mean) / std`` as a module, for (..., C, H, W) tensors.

    A drop-in replacement for ``torchvision.transforms.Normalize`` in a ``Compose``: after
    ``ToTensor`` (float input is taken as already in [0, 1]) and before it, on uint8 or
    uint16 tensors (divided by 255 or 65535). Other integer tensors are divided by their
    dtype maximum; an explicit ``scale`` applies to every input.

    Every output is the formula computed in float64 from the float64 constants and rounded
    once to the module's dtype: float32, or what ``.half()``, ``.bfloat16()``, ``.double()``
    or ``.to(dtype)`` made it (a float16 module gives float16 for every input, uint8
    included; its constants stay float64). uint8 and uint16 input is looked up in tables of
    those rounded values; the tables are rebuilt from ``mean`` and ``std`` rather than saved
    in the ``state_dict``. ``forward`` runs under ``torch.compile(fullgraph=True)``,
    ``torch.export.export``, ``torch.jit.script`` and ``torch.onnx.export(dynamo=True)``.

    Examples
    --------
    >>> norm = Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))
    >>> x = torch.tensor([0, 255, 51], dtype=torch.uint8).view(3, 1, 1)
    >>> norm(x).flatten().tolist()
    [-2.0, 2.0, -1.2000000476837158]
    >>> norm(x.float() / 255).flatten().tolist()  # after ToTensor: the same values
    [-2.0, 2.0, -1.2000000476837158]
    >>> norm.half()(x).dtype
    torch.float16
    """

    scale: Optional[float]  # noqa: UP045 - torch.jit.script reads this annotation

    def __init__(self, mean: Any, std: Any, scale: float | None = None, *,
                 variant: str | None = None,
                 channel_names: tuple[str, ...] | None = None) -> None:
        super().__init__()
        # validates the arguments once, with the numpy Normalize's messages
        reference = _ArrayNormalize(mean, std, scale, variant=variant,
                                    channel_names=channel_names)
        self.scale = reference.scale
        self.variant, self.channel_names = reference.variant, reference.channel_names
        self.register_buffer("mean", torch.tensor(reference.mean, dtype=torch.float64))
        self.register_buffer("std", torch.tensor(reference.std, dtype=torch.float64))
        for name, _ in _TABLES:
            # 786 KB for three channels at 16 bits: rebuilt from mean and std, never saved
            self.register_buffer(name, torch.empty(0), persistent=False)
        self._build_tables(torch.float32)

    @classmethod
    def from_stats(cls, stats: Any, variant: str = "std") -> "Normalize":
        """Build from any object with ``mean``, ``scale`` and the ``variant`` attribute,
        keeping the variant and the channel order (``stats.channels``).

        Examples
        --------
        >>> from types import SimpleNamespace
        >>> s = SimpleNamespace(mean=(0.5,), std=(0.25,), scale=255.0)
        >>> Normalize.from_stats(s)(torch.full((1, 1, 1), 255, dtype=torch.uint8)).item()
        2.0
        """
        mean, std = image_stats_vectors(stats, variant)
        return cls(mean, std, stats_input_scale(stats), variant=variant,
                   channel_names=getattr(stats, "channels", None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize a channels-first tensor to the module's dtype (float32 by default)."""
        # No numpy, tuple() of a shape or dict lookups here: torch.jit.script, torch.compile
        # and torch.export compile this method.
        channels = self.mean.shape[0]
        if x.dim() < 3 or x.shape[-3] != channels:
            raise InvalidOptionError(
                f"expected (..., C, H, W) with C={channels}, got shape {list(x.shape)}")
        if x.dtype == torch.uint8:
            return _lookup(self.lut8, x)
        if x.dtype == torch.uint16:
            return _lookup(self.lut16, x)
        return _round_once(self._formula(x.double(), self._divisor(x)), self.lut8.dtype)

    def _divisor(self, x: torch.Tensor) -> float:
        """``scale`` if given, else the input's convention: 1 for floats, the dtype maximum."""
        if x.is_floating_point():
            natural = 1.0
        elif x.dtype == torch.int8:
            natural = 127.0
        elif x.dtype == torch.int16:
            natural = 32767.0
        elif x.dtype == torch.int32:
            natural = 2147483647.0
        elif x.dtype == torch.int64:
            natural = 9223372036854775807.0
        else:
            raise TypeError(f"expected integer or float pixels, got {x.dtype}")
        scale = self.scale
        return natural if scale is None else scale

    def _formula(self, x: torch.Tensor, divisor: float) -> torch.Tensor:
        """The float64 values, for float64 ``x`` of shape (..., C, H, W)."""
        return (x / divisor - self.mean.view(-1, 1, 1)) / self.std.view(-1, 1, 1)

    def _build_tables(self, dtype: torch.dtype) -> None:
        """Every 8- and 16-bit value through ``_formula``, rounded once to ``dtype``."""
        for name, top in _TABLES:
            values = torch.arange(top + 1, dtype=torch.float64, device=self.mean.device)
            divisor = float(top) if self.scale is None else self.scale
            table = self._formula(values.view(1, 1, -1), divisor)[:, 0]
            setattr(self, name, _round_once(table, dtype))

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor],
               recurse: bool = True) -> "Normalize":
        """``.to()``, ``.half()``, ``.cuda()``...: the constants keep their float64 values (a
        dtype change is a change of output dtype), and the tables are rebuilt from them, so
        each table entry is rounded once rather than float32 entries rounded again."""
        exact, table_dtype = {"mean": self.mean, "std": self.std}, self.lut8.dtype
        super()._apply(fn, recurse)
        for name, value in exact.items():
            if getattr(self, name).dtype != torch.float64:
                setattr(self, name, value.to(getattr(self, name).device))
        if self.lut8.dtype != table_dtype:
            self._build_tables(self.lut8.dtype)
        return self

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str,
                              *args: Any, **kwargs: Any) -> None:
        # checkpoints written while the tables were saved still hold them: they are rebuilt
        # from the loaded mean and std instead, so the two can never disagree
        for name, _ in _TABLES:
            state_dict.pop(prefix + name, None)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._build_tables(self.lut8.dtype)

    def extra_repr(self) -> str:
        scale = "by dtype" if self.scale is None else self.scale
        text = f"mean={self.mean.tolist()}, std={self.std.tolist()}, scale={scale}"
        if self.variant is not None:
            text += f", variant={self.variant!r}"
        if self.channel_names is not None:
            text += f", channels={self.channel_names!r}"
        return text


def _lookup(table: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``table[c, x]`` for each channel c of (..., C, H, W) ``x``, as one flat gather."""
    offsets = torch.arange(table.shape[0], device=x.device).view(-1, 1, 1) * table.shape[1]
    return table.view(-1)[x.long() + offsets]


def _round_once(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Float64 ``y`` rounded once (to nearest, ties to even) to the float ``dtype``.

    torch rounds float64 to float16 and bfloat16 through float32, twice: a value that float32
    rounds onto a tie of the narrow type then goes to the even side, whichever side ``y``
    was on. Two fixes give the same values: ``torch.compile`` drops a cast to float16 and
    back inside a kernel, so it gets the one built on float32 bits; TorchScript cannot
    reinterpret bits and the ONNX exporter does not translate it, so they (and torch.export,
    which feeds the ONNX exporter) get the one built on casts.
    """
    if dtype != torch.float16 and dtype != torch.bfloat16:
        return y.to(dtype)
    if not torch.jit.is_scripting():  # TorchScript skips this block without compiling it
        if torch.compiler.is_compiling() and not torch.compiler.is_exporting():
            return _round_to_odd(y).to(dtype)
    return _round_false_ties(y, dtype)


def _round_false_ties(y: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Send each value float32 rounds onto a tie of ``dtype`` to ``y``'s side of it: those
    false ties are the only way two roundings differ from one."""
    wide = y.float()
    near = wide.to(dtype).float()
    other = 2 * wide - near  # the other neighbour when wide is a tie, exact in float32
    tie = (other.to(dtype).float() == other) & (other != near) & torch.isfinite(near)
    exact = wide.double()
    side = torch.where(y > exact, torch.maximum(near, other), torch.minimum(near, other))
    return torch.where(tie & (y != exact), side, near).to(dtype)


def _round_to_odd(y: torch.Tensor) -> torch.Tensor:
    """``y`` to float32 rounded toward zero with the last bit set when inexact ("round to
    odd"): rounding that to any type with at least two bits fewer is one rounding of ``y``."""
    wide = y.float()
    exact = wide.double()
    bits = wide.view(torch.int32)
    # a sign-and-magnitude pattern: one less is one step toward zero, whatever the sign
    bits = (bits - (exact.abs() > y.abs()).int()) | (exact != y).int()
    return bits.view(torch.float32)


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
    mean, std = image_stats_vectors(stats, variant)
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


class Whiten(torch.nn.Module):
    """``(x / scale - mean) @ matrix`` over the channels of (..., C, H, W) tensors.

    uint8 and uint16 tensors are divided by 255 or 65535, other integers by their dtype
    maximum, floats are taken as already in the scale (after ``ToTensor``); an explicit
    ``scale`` applies to every input. Computed in float64 from the float64 constants and
    rounded once to float32: what `normstats.nn.Whiten` gives channels-last arrays.

    Examples
    --------
    >>> w = Whiten(mean=(0.5, 0.5), matrix=[[2.0, 0.0], [0.0, 4.0]])
    >>> w(torch.tensor([255, 0], dtype=torch.uint8).view(2, 1, 1)).flatten().tolist()
    [1.0, -2.0]
    """

    def __init__(self, mean: Any, matrix: Any, scale: Optional[float] = None) -> None:  # noqa: UP045
        super().__init__()
        from normstats.nn.whiten import Whiten as _ArrayWhiten

        checked = _ArrayWhiten(mean, matrix, scale)  # the same checks as the array version
        self.scale = checked.scale
        self.register_buffer("mean", torch.tensor(checked.mean, dtype=torch.float64))
        self.register_buffer("matrix", torch.tensor(checked.matrix, dtype=torch.float64))

    @classmethod
    def from_stats(cls, stats: Any, eps: Optional[float] = None,  # noqa: UP045
                   kind: str = "zca") -> "Whiten":
        """The whitening of a `normstats.DatasetStats` computed with ``covariance=True``."""
        whitening = stats.whitening(kind=kind) if eps is None else \
            stats.whitening(eps, kind=kind)
        return cls(whitening.mean, whitening.matrix, stats_input_scale(stats))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 3 or x.shape[-3] != self.mean.shape[0]:
            raise InvalidOptionError(f"expected (..., C, H, W) input with {self.mean.shape[0]} "
                                     f"channels, got shape {tuple(x.shape)}")
        scale = self.scale
        if scale is None:
            scale = 1.0 if x.dtype.is_floating_point else float(torch.iinfo(x.dtype).max)
        centred = x.to(torch.float64) / scale - self.mean.view(-1, 1, 1)
        return torch.einsum("...chw,cd->...dhw", centred, self.matrix).to(torch.float32)
