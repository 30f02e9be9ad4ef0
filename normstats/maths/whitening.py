"""Principal axes and whitening of a covariance matrix: PCA lighting and ZCA.

Given a C×C (or D×D) covariance Σ in some scale:

- `principal_axes`: eigenvalues in decreasing order and unit eigenvectors as columns, each
  eigenvector signed so that its component of largest magnitude is positive (the first
  such component on a tie). An eigenvector is only defined up to its sign; this rule makes
  the output reproducible and comparable between runs, datasets and libraries (flip a
  column to compare with a copy that uses another rule). Eigenvalues that rounding made
  slightly negative are clipped to 0.
- PCA lighting (AlexNet-style colour augmentation): ``shift = eigvec @ (alpha * eigval)``
  with ``alpha ~ N(0, alphastd)`` per image, eigvec's columns the eigenvectors and eigval
  the eigenvalues of the covariance in the scale of the tensors it is added to.
- `zca_matrix`: ``W = U·diag(1/√(λ + eps))·Uᵀ``, applied as ``(x − mean) @ W`` on
  flattened channels-last values (torchvision's ``LinearTransformation`` formula; kornia's
  ``ZCAWhitening`` builds the same matrix). W is symmetric, so ``W @ (x − mean)`` on
  column vectors is the same.
- `pca_whitening_matrix`: ``diag(1/√(λ + eps))·Uᵀ`` as rows, applied as ``(x − mean) @ Wᵀ``:
  the decorrelated coordinates along the principal axes, each of unit variance.

With ``eps`` 0 the whitened data have the identity as covariance (exactly, up to
rounding); a positive ``eps`` damps the directions of smallest variance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from normstats.errors import InvalidOptionError

__all__ = ["PrincipalAxes", "principal_axes", "zca_matrix", "pca_whitening_matrix",
           "Whitening", "parse_eps", "condition_number", "covariance_conditions",
           "DEFAULT_EPS"]

#: The ``eps`` of whitening unless one is given: kornia's ``ZCAWhitening`` and Keras'
#: ``zca_epsilon`` default, negligible beside the variances of image channels.
DEFAULT_EPS = 1e-6


def principal_axes(covariance: Any) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (decreasing) and eigenvectors (columns) of a symmetric PSD matrix.

    Each eigenvector's component of largest magnitude is positive (the first on a tie).

    Examples
    --------
    >>> values, vectors = principal_axes([[2.0, 1.0], [1.0, 2.0]])
    >>> values.tolist()
    [3.0, 1.0]
    >>> np.round(vectors, 4).tolist()
    [[0.7071, 0.7071], [0.7071, -0.7071]]
    """
    matrix = np.asarray(covariance, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
        raise InvalidOptionError(f"a covariance must be a finite square matrix, got shape "
                                 f"{matrix.shape}")
    values, vectors = np.linalg.eigh(matrix)
    order = np.argsort(-values, kind="stable")
    values, vectors = np.maximum(values[order], 0.0), vectors[:, order]
    largest = np.argmax(np.abs(vectors), axis=0)  # argmax: the first on a tie
    signs = np.where(vectors[largest, np.arange(vectors.shape[1])] < 0, -1.0, 1.0)
    return values, vectors * signs


def condition_number(h: Any) -> float:
    """λmax/λmin of a symmetric positive semi-definite matrix (inf when singular).

    Examples
    --------
    >>> condition_number(np.diag([4.0, 2.0]))
    2.0
    """
    eigenvalues = np.linalg.eigvalsh(np.asarray(h, dtype=np.float64))
    low, high = float(eigenvalues[0]), float(eigenvalues[-1])
    return high / low if low > high * 1e-15 else float("inf")


def covariance_conditions(covariance: Any) -> tuple[float, float, float]:
    """κ of a covariance Σ as is, after standardizing (D·Σ·D, D = diag(1/σ): the
    correlation matrix) and after ZCA whitening (W·Σ·W: the identity, κ = 1 up to
    rounding); inf where a step is undefined (a constant channel, a singular Σ).

    Examples
    --------
    >>> [round(k, 3) for k in covariance_conditions([[4.0, 1.9], [1.9, 1.0]])]
    [62.086, 39.0, 1.0]
    """
    matrix = np.asarray(covariance, dtype=np.float64)
    raw = condition_number(matrix)
    std = np.sqrt(np.diag(matrix))
    if (std == 0).any():
        return raw, float("inf"), float("inf")
    standardized = condition_number(matrix / np.outer(std, std))
    if not np.isfinite(raw):
        return raw, standardized, float("inf")
    w = zca_matrix(matrix)
    return raw, standardized, condition_number(w @ matrix @ w)


def parse_eps(eps: float) -> float:
    """A finite, non-negative ``eps``."""
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not np.isfinite(eps) \
            or eps < 0:
        raise InvalidOptionError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def _inverse_roots(values: np.ndarray, eps: float) -> np.ndarray:
    damped = values + eps
    if (damped <= values[0] * 1e-15).any() or values[0] == 0:
        raise InvalidOptionError(
            "the covariance is singular (a constant channel, or channels that are exact "
            "combinations of others): whitening is undefined; give a positive eps")
    return 1.0 / np.sqrt(damped)


def zca_matrix(covariance: Any, eps: float = 0.0) -> np.ndarray:
    """The ZCA whitening matrix ``U·diag(1/√(λ + eps))·Uᵀ`` (symmetric).

    Examples
    --------
    >>> w = zca_matrix([[4.0, 0.0], [0.0, 1.0]])
    >>> w.tolist()
    [[0.5, 0.0], [0.0, 1.0]]
    """
    values, vectors = principal_axes(covariance)
    matrix = (vectors * _inverse_roots(values, parse_eps(eps))) @ vectors.T
    return (matrix + matrix.T) / 2  # exactly symmetric


def pca_whitening_matrix(covariance: Any, eps: float = 0.0) -> np.ndarray:
    """The PCA whitening matrix ``diag(1/√(λ + eps))·Uᵀ``: row i projects on axis i.

    Examples
    --------
    >>> pca_whitening_matrix([[4.0, 0.0], [0.0, 1.0]]).tolist()
    [[0.5, 0.0], [0.0, 1.0]]
    """
    values, vectors = principal_axes(covariance)
    return (vectors * _inverse_roots(values, parse_eps(eps))).T


def _matrix(rows: Any) -> tuple[tuple[float, ...], ...]:
    return tuple(tuple(float(v) for v in row) for row in np.asarray(rows))


@dataclass(frozen=True)
class PrincipalAxes:
    """Eigenvalues and eigenvectors of a channel covariance, in a stated scale.

    Attributes
    ----------
    eigenvalues : tuple of float
        Variances along the axes, largest first (what PCA lighting calls ``eigval``).
    eigenvectors : tuple of tuple of float
        ``eigenvectors[i][j]``: channel i of axis j, one axis per column (``eigvec``);
        each column's component of largest magnitude is positive.
    channels : tuple of str
        Channel names, in the order of the rows.
    scale : float
        Pixel values were divided by this (255: the [0, 1] scale of 8-bit images).
    ddof : int
        0: the population covariance; 1: the sample one.

    Examples
    --------
    >>> axes = PrincipalAxes.of([[2.0, 1.0], [1.0, 2.0]], ("a", "b"), 1.0)
    >>> axes.eigenvalues, axes.std
    ((3.0, 1.0), (1.7320508075688772, 1.0))
    """

    eigenvalues: tuple[float, ...]
    eigenvectors: tuple[tuple[float, ...], ...]
    channels: tuple[str, ...]
    scale: float
    ddof: int = 0

    @classmethod
    def of(cls, covariance: Any, channels: tuple[str, ...], scale: float,
           ddof: int = 0) -> PrincipalAxes:
        values, vectors = principal_axes(covariance)
        return cls(tuple(float(v) for v in values), _matrix(vectors), tuple(channels),
                   float(scale), ddof)

    @property
    def std(self) -> tuple[float, ...]:
        """Standard deviations along the axes (square roots of the eigenvalues)."""
        return tuple(float(np.sqrt(v)) for v in self.eigenvalues)

    @property
    def explained(self) -> tuple[float, ...]:
        """Share of the total variance along each axis."""
        total = sum(self.eigenvalues)
        return tuple(v / total if total else 0.0 for v in self.eigenvalues)

    def to_dict(self) -> dict[str, Any]:
        return {"eigenvalues": list(self.eigenvalues),
                "eigenvectors": [list(r) for r in self.eigenvectors],
                "channels": list(self.channels), "scale": self.scale, "ddof": self.ddof}


@dataclass(frozen=True)
class Whitening:
    """A whitening transform: ``(x / scale − mean) @ matrix`` on channels-last values.

    Attributes
    ----------
    mean : tuple of float
        Per-channel mean in the scale (``mean_vector``).
    matrix : tuple of tuple of float
        ``matrix[i][j]`` multiplies input channel i into output j (``transformation_matrix``
        of torchvision's ``LinearTransformation``; ZCA's is symmetric).
    eps : float
        Added to every eigenvalue before the inverse square root.
    kind : {"zca", "pca"}
        ZCA (stays close to the input channels) or PCA (output j: principal axis j).
    channels, scale, ddof
        As in `PrincipalAxes`.

    Examples
    --------
    >>> w = Whitening.of([0.5, 0.5], [[4.0, 0.0], [0.0, 1.0]], ("a", "b"), 1.0, eps=0)
    >>> w.apply(np.array([[2.5, 1.5]])).tolist()
    [[1.0, 1.0]]
    """

    mean: tuple[float, ...]
    matrix: tuple[tuple[float, ...], ...]
    eps: float
    kind: str
    channels: tuple[str, ...]
    scale: float
    ddof: int = 0

    @classmethod
    def of(cls, mean: Any, covariance: Any, channels: tuple[str, ...], scale: float,
           eps: float = DEFAULT_EPS, kind: str = "zca", ddof: int = 0) -> Whitening:
        kind = str(kind).lower()
        if kind not in ("zca", "pca"):
            raise InvalidOptionError(f"whitening kind must be 'zca' or 'pca', got {kind!r}")
        matrix = zca_matrix(covariance, eps) if kind == "zca" else \
            pca_whitening_matrix(covariance, eps).T
        return cls(tuple(float(v) for v in mean), _matrix(matrix), parse_eps(eps), kind,
                   tuple(channels), float(scale), ddof)

    def apply(self, values: Any) -> np.ndarray:
        """Whitened float64 values of channels-last ``values`` already in the scale."""
        x = np.asarray(values, dtype=np.float64)
        return (x - np.asarray(self.mean)) @ np.asarray(self.matrix)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "mean": list(self.mean),
                "matrix": [list(r) for r in self.matrix], "eps": self.eps,
                "channels": list(self.channels), "scale": self.scale, "ddof": self.ddof}
