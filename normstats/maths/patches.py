"""The exact covariance of all k×k patches of integer images, without making the patches.

A patch at anchor (i, j) of an (H, W, C) image is x[i:i+k, j:j+k, :], flattened in
channel-major order (c, u, v) — PyTorch's ``unfold`` order, dimension D = C·k² — at every
anchor of the image (stride 1, no padding: (H − k + 1)·(W − k + 1) patches). The second
moment of two patch entries a = (c1, u1, v1) and b = (c2, u2, v2) is

    Q[a, b] = Σ over images and anchors of x[i+u1, j+v1, c1] · x[i+u2, j+v2, c2],

a sum of products of pixels a fixed offset (du, dv) = (u2 − u1, v2 − v1) apart. Laid end
to end, an image's pixels are one sequence, and that offset is the shift s = du·W + dv
along it: for s ≥ 0 the sum over *all* pixels t of X[t]ᵀ·X[t + s] is one C×C matrix
product of two views of the same float64 array (exact: blocks of products stay below
2⁵³), for a whole batch of images at once. What differs from Q[a, b] lies on the images'
borders — the rows above u1 and below u1 + H − k, the columns left of v1 and right of
v1 + W − k (where the shifted partner may also wrap to the next row or image) — and is
subtracted exactly from products of those border pixels alone. So each of the
(k − 1)(2k − 1) + k shifts costs one matrix product over the data, not k⁴ of them, and
nothing of the size of the patches is ever built.

`PatchMoments` keeps the exact totals (patch count, Σp and Σpᵀp as Python ints), merges
by addition and finalizes through fractions into the correctly rounded D×D covariance.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from normstats.errors import IncompatibleImagesError, InvalidOptionError
from normstats.maths.image_moments import MAX_INTEGER_BITS

__all__ = ["PatchMoments", "patch_dimension_names"]

_EXACT = 2**53
_BATCH_BYTES = 32 << 20  # float64 copy of a batch of images


def patch_dimension_names(channels: tuple[str, ...], size: int) -> tuple[str, ...]:
    """Names of the D = C·k² patch dimensions, channel-major: ``R[0,0]``, ``R[0,1]``, …

    Examples
    --------
    >>> patch_dimension_names(("R", "G"), 2)[:5]
    ('R[0,0]', 'R[0,1]', 'R[1,0]', 'R[1,1]', 'G[0,0]')
    """
    return tuple(f"{c}[{u},{v}]" for c in channels for u in range(size) for v in range(size))


def _shifts(size: int, width: int) -> list[int]:
    """Every shift s = du·W + dv ≥ 0 between two positions of a k×k patch."""
    return sorted({du * width + dv for du in range(size) for dv in range(-(size - 1), size)
                   if du * width + dv >= 0})


@dataclass(frozen=True)
class PatchMoments:
    """Exact totals of the k×k patches of integer images: count, Σp and Σpᵀp.

    Attributes
    ----------
    size : int
        k.
    channels : int
        C; a patch has D = C·k² dimensions, in (c, u, v) order.
    count : int
        Number of patches.
    total : tuple of int
        Σp, D entries.
    products : tuple of int
        Σpᵀp, the D·(D+1)/2 entries of its upper triangle, row by row.

    Examples
    --------
    >>> x = np.arange(9, dtype=np.uint8).reshape(1, 3, 3, 1)
    >>> m = PatchMoments.from_stack(x, 2)
    >>> m.count, m.total
    (4, (8, 12, 20, 24))
    >>> m.covariance().tolist()[0]
    [2.5, 2.5, 2.5, 2.5]
    """

    size: int
    channels: int
    count: int
    total: tuple[int, ...]
    products: tuple[int, ...]

    @property
    def dimension(self) -> int:
        return self.channels * self.size * self.size

    @classmethod
    def from_stack(cls, stack: np.ndarray, size: int) -> PatchMoments:
        """Totals of the k×k patches of an (N, H, W, C) stack of integer images."""
        stack = _checked(stack, size)
        n, h, w, c = stack.shape
        images = max(1, _BATCH_BYTES // max(1, h * w * c * 8))
        total = cls(size, c, 0, (0,) * (c * size * size),
                    (0,) * (c * size * size * (c * size * size + 1) // 2))
        for start in range(0, n, images):
            total = total.merge(_batch_moments(stack[start:start + images], size))
        return total

    def merge(self, other: PatchMoments) -> PatchMoments:
        """Exact sum of the totals of two sets of patches of the same size and channels."""
        if (self.size, self.channels) != (other.size, other.channels):
            raise IncompatibleImagesError(
                f"cannot pool {self.size}×{self.size} patches of {self.channels} channels with "
                f"{other.size}×{other.size} patches of {other.channels}")
        return PatchMoments(self.size, self.channels, self.count + other.count,
                            tuple(a + b for a, b in zip(self.total, other.total)),
                            tuple(a + b for a, b in zip(self.products, other.products)))

    def covariance(self, scale: float = 1, ddof: int = 0) -> np.ndarray:
        """The correctly rounded D×D covariance of the patches, divided by ``scale**2``."""
        n = self.count
        if n - ddof <= 0:
            raise InvalidOptionError(f"a patch covariance with ddof={ddof} needs more than "
                                     f"{ddof} patches")
        d = self.dimension
        denominator = n * (n - ddof) * Fraction(scale) ** 2
        out = np.empty((d, d))
        rows, cols = np.triu_indices(d)
        for r, c, q in zip(rows.tolist(), cols.tolist(), self.products):
            value = float(Fraction(n * q - self.total[r] * self.total[c]) / denominator)
            out[r, c] = out[c, r] = value
        return out

    def mean(self, scale: float = 1) -> np.ndarray:
        """The correctly rounded mean patch (D,), divided by ``scale``."""
        return np.array([float(Fraction(t, self.count) / Fraction(scale)) for t in self.total])


def _checked(stack: np.ndarray, size: int) -> np.ndarray:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        raise InvalidOptionError(f"the patch size must be a positive integer, got {size!r}")
    stack = np.asarray(stack)
    if stack.ndim != 4:
        raise InvalidOptionError(f"patches are taken from (N, H, W, C) images, got shape "
                                 f"{stack.shape}")
    if stack.dtype == np.bool_:
        stack = stack.view(np.uint8)
    if stack.dtype.kind not in "iu" or stack.dtype.itemsize * 8 > MAX_INTEGER_BITS:
        raise IncompatibleImagesError(f"the patch covariance is exact for integer images of at "
                                      f"most 16 bits, not {stack.dtype}")
    if stack.shape[1] < size or stack.shape[2] < size:
        raise InvalidOptionError(f"images of {stack.shape[1]}×{stack.shape[2]} pixels have no "
                                 f"{size}×{size} patch")
    return stack


def _batch_moments(stack: np.ndarray, size: int) -> PatchMoments:
    """Totals of the patches of one batch of images (see the module's docstring)."""
    n, h, w, c = stack.shape
    k, rows_h, cols_w = size, h - size + 1, w - size + 1
    summed = stack.sum(axis=0, dtype=np.int64)  # (H, W, C): each image's pixels, added
    total = [int(summed[u:u + rows_h, v:v + cols_w, ch].sum())
             for ch in range(c) for u in range(k) for v in range(k)]
    shifts = _shifts(k, w)
    flat = np.zeros((n * h * w + shifts[-1], c), np.int64)
    flat[:n * h * w] = stack.reshape(-1, c)
    values = flat.astype(np.float64)  # once: every shift's product reads views of it
    info = np.iinfo(stack.dtype)
    exact = n * max(h, w) * max(int(info.max), -int(info.min)) ** 2 < _EXACT
    corrections = _BorderProducts(values if exact else flat, n, h, w, k)
    full = {s: _shifted_products(values, s, n * h * w, stack.dtype) for s in shifts}
    d = c * k * k
    q = np.empty((d, d), dtype=object)
    positions = [(u, v) for u in range(k) for v in range(k)]
    for a, (u1, v1) in enumerate(positions):
        for b, (u2, v2) in enumerate(positions):
            s = (u2 - u1) * w + (v2 - v1)
            if s >= 0:
                block = full[s] - corrections.outside(s, u1, v1)
            else:  # the pair the other way round, transposed
                block = (full[-s] - corrections.outside(-s, u2, v2)).T
            q[a::k * k, b::k * k] = block
    upper = q[np.triu_indices(d)]
    return PatchMoments(k, c, n * rows_h * cols_w, tuple(total), tuple(int(v) for v in upper))


def _shifted_products(values: np.ndarray, shift: int, length: int,
                      dtype: np.dtype) -> np.ndarray:
    """Σ_t X[t]ᵀ·X[t + shift] over t < length, exactly (a C×C object array of ints): float64
    products of integer ``values`` over runs of rows short enough that every partial sum
    stays below 2⁵³."""
    info = np.iinfo(dtype)
    largest = max(int(info.max), -int(info.min)) ** 2
    step = max(1, (_EXACT - 1) // largest)
    channels = values.shape[1]
    out = np.zeros((channels, channels), dtype=object)
    for start in range(0, length, step):
        stop = min(length, start + step)
        product = values[start:stop].T @ values[start + shift:stop + shift]
        out += product.astype(np.int64).astype(object)
    return out


def _integers(values: np.ndarray) -> np.ndarray:
    """Sums of integer products as int64 (float64 ones hold exact integers)."""
    return values.astype(np.int64) if values.dtype.kind == "f" else values


class _BorderProducts:
    """Products X[t]ᵀ·X[t + s] of the border pixels of every image of a batch, summed over
    images: whole rows of the top and bottom k − 1 rows, and each row of the left and right
    k − 1 columns. ``outside(s, u1, v1)`` is their total over the pixels outside the
    anchors' rectangle of offset (u1, v1). The shifted partners are a view of the same
    array s pixels further on (past the last image: the zeros it is padded with). ``flat``
    is float64 when every sum below stays under 2⁵³ (BLAS adds exact integers), int64
    otherwise."""

    def __init__(self, flat: np.ndarray, n: int, h: int, w: int, k: int) -> None:
        self.flat, self.n, self.h, self.w, self.k = flat, n, h, w, k
        self.images = flat[:n * h * w].reshape(n, h, w, -1)
        self.border_rows = [p for p in range(h) if p < k - 1 or p >= h - k + 1]
        self.border_columns = [q for q in range(w) if q < k - 1 or q >= w - k + 1]
        self._rows: dict[int, dict[int, np.ndarray]] = {}
        self._columns: dict[int, dict[int, np.ndarray]] = {}

    def _partners(self, s: int) -> np.ndarray:
        n, h, w = self.n, self.h, self.w
        return self.flat[s:s + n * h * w].reshape(n, h, w, -1)

    def rows(self, s: int) -> dict[int, np.ndarray]:
        """Per border row p: (C, C) Σ over images and columns (exact int64: products below
        2³², fewer than 2³¹ of them)."""
        if s not in self._rows:
            partners = self._partners(s)
            self._rows[s] = {p: _integers(np.tensordot(self.images[:, p], partners[:, p],
                                                       axes=([0, 1], [0, 1])))
                             for p in self.border_rows}
        return self._rows[s]

    def columns(self, s: int) -> dict[int, np.ndarray]:
        """Per border column q: (H + 1, C, C) running totals over the rows above each row."""
        if s not in self._columns:
            partners = self._partners(s)
            self._columns[s] = {}
            for q in self.border_columns:
                per_row = _integers(np.matmul(self.images[:, :, q].transpose(1, 2, 0),
                                              partners[:, :, q].transpose(1, 0, 2)))
                self._columns[s][q] = np.concatenate([np.zeros_like(per_row[:1]),
                                                      np.cumsum(per_row, axis=0)])
        return self._columns[s]

    def outside(self, s: int, u1: int, v1: int) -> np.ndarray:
        """Σ X[t]ᵀ·X[t + s] over the pixels outside the rectangle of anchors offset by
        (u1, v1): the rows above and below it, then its own rows' columns left and right."""
        h, w, k = self.h, self.w, self.k
        low, high = u1, u1 + h - k + 1  # the rectangle's rows [low, high)
        out = np.zeros(self.flat.shape[1:] * 2, dtype=object)
        for p, value in self.rows(s).items():
            if p < low or p >= high:
                out += value.astype(object)
        for q, running in self.columns(s).items():
            if q < v1 or q >= v1 + w - k + 1:
                out += (running[high] - running[low]).astype(object)
        return out
