"""Activation and gradient variance through a deep ReLU net under each initialization
(the experiment of Glorot & Bengio, and He et al., "Delving Deep into Rectifiers").

A plain fully connected ReLU network (``f^l = W^l relu(f^{l-1})``, zero biases) of ``depth`` layers
of ``width`` units gets white-noise input ``x ~ N(0, 1)``; a white-noise gradient
``N(0, 1)`` enters at the top and is propagated back. Per layer we record the variance
of the pre-activations ``f^l`` (forward) and of ``dL/df^l`` (backward) for

* ``xavier``: ``Var W = 2 / (n_in + n_out)`` -- with ReLU each layer halves the
  variance (``Var f^l = n Var W · Var f^{l-1} / 2`` with ``n Var W = 1``), so it vanishes
  as ``2**-depth``;
* ``kaiming``: ``Var W = 2 / n_in`` -- the halving is compensated, variance stays ~1;
* ``xavier+bn``: Xavier weights with a BatchNorm (training mode) before each
  ReLU, which re-standardizes every layer whatever the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from normstats.errors import InvalidOptionError
from normstats.nn import init
from normstats.nn.running_norms import BatchNorm

__all__ = [
    "CONFIGS",
    "InitCheckResult",
    "LayerVariances",
    "MEMORY_LIMIT",
    "deep_relu_variances",
    "memory_needed",
    "format_table",
    "plot_variances",
    "run_init_check",
]

CONFIGS: tuple[str, ...] = ("xavier", "kaiming", "xavier+bn")
#: The most memory one check may hold (bytes). A demonstration needs far less (the defaults
#: take 79 MB); this lets ``--depth`` reach 1,000 at the default width and batch, where
#: Xavier's halving variance (2**-1000) nears float64's smallest value.
MEMORY_LIMIT = 4_000_000_000


@dataclass(frozen=True)
class LayerVariances:
    """Per-layer variances of one network, index 0 = layer 1.

    Attributes
    ----------
    forward : numpy.ndarray
        ``Var f^l`` for ``l = 1..depth``.
    backward : numpy.ndarray
        ``Var dL/df^l`` for ``l = 1..depth`` (the top one is the injected noise).
    """

    forward: np.ndarray
    backward: np.ndarray


@dataclass(frozen=True)
class InitCheckResult:
    """Everything ``normstats init-check`` prints or plots."""

    depth: int
    width: int
    batch: int
    seed: int
    input_var: float
    top_grad_var: float
    curves: dict[str, LayerVariances]


def _weights(config: str, depth: int, width: int, rng: np.random.Generator) -> list[np.ndarray]:
    shape = (width, width)
    if config == "kaiming":
        return [
            init.kaiming_normal(shape, rng, nonlinearity="relu", dtype=np.float64)
            for _ in range(depth)
        ]
    if config in ("xavier", "xavier+bn"):
        return [init.xavier_normal(shape, rng, dtype=np.float64) for _ in range(depth)]
    raise InvalidOptionError(f"unknown configuration {config!r}; expected one of {CONFIGS}")


def deep_relu_variances(
    config: str, x: np.ndarray, top_grad: np.ndarray, depth: int, rng: np.random.Generator
) -> LayerVariances:
    """Forward ``x`` through a fresh ``depth``-layer ReLU net, back-propagate ``top_grad``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x, g = rng.standard_normal((2, 256, 64))
    >>> v = deep_relu_variances("xavier", x, g, 10, rng)
    >>> bool(v.forward[-1] < 0.01 * v.forward[0])  # halves per layer with ReLU
    True
    """
    weights = _weights(config, depth, x.shape[1], rng)
    norms = [BatchNorm(x.shape[1], affine=False, dtype=np.float64) for _ in range(depth - 1)]
    use_bn = config.endswith("+bn")
    fs, relu_inputs = [x @ weights[0].T], []
    for layer in range(1, depth):
        h = norms[layer - 1](fs[-1]) if use_bn else fs[-1]
        relu_inputs.append(h)
        fs.append(np.maximum(h, 0.0) @ weights[layer].T)
    g, grads = top_grad, [top_grad.var()]
    for layer in range(depth - 1, 0, -1):
        g = (g @ weights[layer]) * (relu_inputs[layer - 1] > 0)
        if use_bn:
            g = norms[layer - 1].backward(g)[0]
        grads.append(g.var())
    return LayerVariances(np.array([f.var() for f in fs]), np.array(grads[::-1]))


def memory_needed(depth: int, width: int, batch: int) -> int:
    """Bytes a check holds at its peak: every layer's (width, width) float64 weights, and
    its (batch, width) pre-activations and BatchNorm outputs, kept for the backward pass.

    Examples
    --------
    >>> memory_needed(30, 256, 512) / 1e6  # the command's defaults, in MB
    78.6432
    """
    return 8 * depth * (width * width + 2 * batch * width)


def _check_sizes(depth: int, width: int, batch: int, seed: int) -> None:
    if depth < 1 or width < 1 or batch < 2:
        raise InvalidOptionError(
            f"need depth >= 1, width >= 1 and batch >= 2, got {depth}, {width}, {batch}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidOptionError(f"seed must be a non-negative integer, got {seed!r}")
    needed = memory_needed(depth, width, batch)
    if needed > MEMORY_LIMIT:
        deepest = MEMORY_LIMIT // memory_needed(1, width, batch)
        lower = (f"--depth (at most {deepest} at this width and batch)" if deepest >= 2
                 else "--width or --batch")
        raise InvalidOptionError(
            f"--depth {depth} --width {width} --batch {batch} would hold about "
            f"{needed / 1e9:,.1f} GB (every layer's weights and activations, kept for the "
            f"backward pass), over init-check's limit of {MEMORY_LIMIT / 1e9:.1f} GB; "
            f"lower {lower}"
        )


def run_init_check(
    depth: int = 30, width: int = 256, batch: int = 512, seed: int = 0
) -> InitCheckResult:
    """Run every configuration on the same white-noise input and top gradient.

    Raises
    ------
    InvalidOptionError
        For sizes below the minimums, a negative seed, or sizes that would hold more than
        `MEMORY_LIMIT` bytes (`memory_needed`), before anything is allocated.

    Examples
    --------
    >>> r = run_init_check(depth=5, width=32, batch=64, seed=1)
    >>> sorted(r.curves) == sorted(CONFIGS), r.curves["kaiming"].forward.shape
    (True, (5,))
    """
    _check_sizes(depth, width, batch, seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, width))
    top_grad = rng.standard_normal((batch, width))
    curves = {c: deep_relu_variances(c, x, top_grad, depth, rng) for c in CONFIGS}
    return InitCheckResult(depth, width, batch, seed, float(x.var()), float(top_grad.var()), curves)


def format_table(result: InitCheckResult) -> str:
    """A fixed-width text table: one row per layer, forward and backward per config.

    Examples
    --------
    >>> table = format_table(run_init_check(depth=2, width=8, batch=16))
    >>> print(table.splitlines()[1])
    layer    xavier:fwd    xavier:bwd   kaiming:fwd   kaiming:bwd xavier+bn:fwd xavier+bn:bwd
    """
    header = (
        f"# deep ReLU net: depth {result.depth}, width {result.width}, batch {result.batch},"
        f" seed {result.seed}, white-noise input (Var x = {result.input_var:.4g})"
    )
    names = [f"{c}:{d}" for c in result.curves for d in ("fwd", "bwd")]
    lines = [header, "layer " + " ".join(f"{n:>13}" for n in names)]
    for i in range(result.depth):
        cells = []
        for v in result.curves.values():
            cells += [f"{v.forward[i]:>13.3e}", f"{v.backward[i]:>13.3e}"]
        lines.append(f"{i + 1:>5} " + " ".join(cells))
    return "\n".join(lines + ["", *summary_lines(result)])


def summary_lines(result: InitCheckResult) -> list[str]:
    """The claim in words: last-layer variance over input variance, per configuration."""
    lines = []
    for name, v in result.curves.items():
        fwd = v.forward[-1] / result.input_var
        bwd = v.backward[0] / result.top_grad_var
        per_layer = fwd ** (1.0 / max(result.depth - 1, 1))
        lines.append(
            f"{name}: Var f^{result.depth} / Var x = {fwd:.3g} ({per_layer:.3f} per layer),"
            f" Var grad f^1 / Var grad f^{result.depth} = {bwd:.3g}"
        )
    return lines


def plot_variances(result: InitCheckResult, path: str | Path) -> None:
    """Draw forward and backward variance per layer (log scale) into ``path``.

    Needs matplotlib (``pip install 'normstats[plot]'``); raises ImportError otherwise.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plotting needs matplotlib: pip install 'normstats[plot]' (or pip install matplotlib)"
        ) from exc
    layers = np.arange(1, result.depth + 1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for name, v in result.curves.items():
        axes[0].semilogy(layers, v.forward / result.input_var, marker=".", label=name)
        axes[1].semilogy(layers, v.backward / result.top_grad_var, marker=".", label=name)
    axes[0].set(title="forward: Var f^l / Var x", xlabel="layer l")
    axes[1].set(title="backward: Var dL/df^l / Var dL/df^L", xlabel="layer l")
    axes[0].legend()
    fig.suptitle(f"ReLU net, width {result.width}, batch {result.batch}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
