"""A compiled, single-pass kernel for 8-bit images: Σx, Σx², min and max per channel.

8-bit images are what most datasets hold, and for them the statistics must cost little
next to decoding. numpy needs four passes (a float copy, two matrix products, min, max);
the C kernel `normstats.maths._moments`, compiled when normstats is installed, reads each
byte once. On x86-64 with AVX-512BW (VNNI used where present) or AVX2, picked at import
by the CPU, each image row is cut into periods of lcm(C, 64) bytes, so that every vector
lane always holds one channel: the bytes of two periods are paired into 16-bit words
whose squares ``vpmaddwd`` adds into 32-bit lanes of one byte offset each, sums run in
16-bit lanes, extremes are byte minima and maxima, and the lanes are flushed into int64
every 65,536 pixels, before they could overflow. Three-channel images of up to 128×128
keep every accumulator in registers (with AVX-512 and with AVX2) and end in register
folds (the general end of an image cost as much as reading a 32×32×3 one), and reads from
memory are prefetched in the order the kernel takes them (small images whole, 24 KB
ahead: 50,000 32×32×3 images from 80% to 93% of the memory's read speed), never past the
pixels of the call (where no page is mapped, each such hint cost a page walk: a lone 256×256×3 array
took 2.5× as long on a virtual machine's EPYC). Measured on one core of a Zen 4 EPYC,
images in cache: 39 GB/s on 256×256×3 images (35 with one channel, 42 with four) and
29 GB/s on batches of 32×32×3 ones, streamed from memory 24 and 26, where the
compiler-vectorised loop that other platforms use gives 11 and 6 GB/s (as exact).
Integer arithmetic throughout: results are exact and identical to
`normstats.maths.image_moments`. The same pass bins each image's std and variance for
the summary as soon as it has the image's sums (`KernelTotals`): on 50,000 32x32x3
images in memory a second pass over the records added 1.0 ms to 10.3 ms of reading on
two threads, binning them as they are read 0.5 ms. The same library adds 8-bit images
onto the mean image's running sums (`uint8_running_sums`).

Loading it is an ordinary import of a small library: no compiler runs at run time, and a
run of three images pays nothing for it. An installation without it (built where no C
compiler was found, or a source tree used without ``pip install``) falls back to numpy's
passes, which give the same results more slowly, and says so once: when the process the
user started imports this module, never in the pool or cluster workers it starts.
`kernel_info` (and ``normstats --version``) tells which kernel is in use.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

__all__ = ["uint8_moments", "uint8_summary", "KernelTotals", "uint8_moments_into",
           "uint8_moments_rows",
           "uint8_running_sums", "outputs", "available", "KERNEL_CHANNELS", "exponent_bins",
           "integer_spreads", "kernel_info", "MISSING_NOTICE", "integer_histogram"]

MISSING_NOTICE = (
    "normstats: this installation has no compiled kernels, so statistics take numpy's slower "
    "passes (the results are the same). To build them, install a C compiler and the Python "
    "headers (e.g. `apt install build-essential python3-dev`), then reinstall from the normstats "
    "checkout: `pip install --force-reinstall --no-deps .` (or `pip install -e .`)")


@functools.cache
def _extension() -> ModuleType | None:
    """`normstats.maths._moments`, or None when it was not built."""
    try:
        from normstats.maths import _moments
    except ImportError:
        return None
    return _moments


def _in_worker_process() -> bool:
    """True in a process started by `multiprocessing` (a pool worker, a Dask worker)."""
    # Such a child always has multiprocessing loaded (it was started through it), so a
    # process without the module was started by the user, and need not import it. The name
    # is set before a spawned child imports anything, unlike `parent_process()`.
    multiprocessing = sys.modules.get("multiprocessing")
    return multiprocessing is not None and multiprocessing.current_process().name != "MainProcess"


def _say_when_missing() -> None:
    """Say `MISSING_NOTICE` when the kernel is missing, in the process the user started
    only: its workers run the same installation, and a notice per worker is noise."""
    if _extension() is None and not _in_worker_process():
        logging.getLogger(__name__).warning(MISSING_NOTICE)


def kernel_info() -> str:
    """Which kernel computes the statistics of 8-bit images: the compiled C one with the
    variant this CPU runs (``avx512vnni``, ``avx512``, ``avx2`` or ``portable``), or
    numpy's passes when the installation has none. The results are the same either way.

    Examples
    --------
    >>> kernel_info()
    'compiled C (...)'
    """
    module = _extension()
    if module is None:
        return "numpy (no compiled kernel in this installation: exact, slower)"
    return f"compiled C ({module._variants()[0]})"


def available() -> bool:
    """True when the compiled kernel is installed (it is built with normstats).

    Examples
    --------
    >>> available()
    True
    """
    return _extension() is not None


def exponent_bins() -> Callable[[np.ndarray, np.ndarray, np.ndarray], None] | None:
    """The compiled significand binning of `normstats.maths.exact`: ``(bits, low_sums,
    high_sums)``, int64 arrays (rows, columns) and (2048, columns); None without the kernel.

    Examples
    --------
    >>> import numpy as np
    >>> bins = exponent_bins()
    >>> low, high = np.zeros((2048, 1), np.int64), np.zeros((2048, 1), np.int64)
    >>> bins(np.array([[1.5]]).view(np.int64), low, high)
    >>> int(low[1023, 0]), int(high[1023, 0])  # 1.5 = (2**52 + 2**51) · 2**-52
    (0, 50331648)
    """
    module = _extension()
    if module is None:
        return None

    def binned(bits: np.ndarray, low_sums: np.ndarray, high_sums: np.ndarray) -> None:
        module.exponent_bins(np.ascontiguousarray(bits, np.int64), bits.shape[1],
                             low_sums, high_sums)
    return binned


#: 32-bit limbs (each in a uint64) of a fixed-point total of `spread_sums` (FIXED_LIMBS in C).
_FIXED_LIMBS = 72
#: The most channels one call of the compiled passes takes (CHANNELS_MAX of _moments.c).
KERNEL_CHANNELS = 128


def integer_spreads(pixels: np.ndarray, sums: np.ndarray,
                    squares: np.ndarray) -> tuple[list[list[int]], list[int], list[int]] | None:
    """The exact sums over images of each image's std, sample std (images of two pixels or
    more) and variance per channel, from integer records' exact sums, in one compiled pass:
    three lists (std, sample std, variance) of fixed-point totals per channel (scaled by
    ``2**FIXED_BITS``, as `normstats.maths.exact.fixed_sum` gives them), then the exact
    totals of the sums and of the squares per channel (the pooled moments). The values
    summed are those of `IntegerRecords.image_variance` (and their square roots) bit for
    bit, computed in one pass instead of numpy's dozen. None without the compiled kernel,
    or where numpy's way must take the records (sums whose products pass int64, images
    without pixels, sums that are no variance).

    Examples
    --------
    >>> import numpy as np
    >>> from normstats.maths.exact import FIXED_BITS
    >>> spreads, totals, squares = integer_spreads(np.array([4]), np.array([[6]]),
    ...                                            np.array([[14]]))
    >>> spreads[2] == [5 * 2**(FIXED_BITS - 2)]  # variance (4·14 − 36) / 16 = 1.25
    True
    >>> totals, squares
    ([6], [14])
    """
    module = _extension()
    channels = sums.shape[1]
    if module is None:
        return None
    if channels > KERNEL_CHANNELS:  # the kernel's limit: the channels a group at a time
        groups = [integer_spreads(pixels, sums[:, i:i + KERNEL_CHANNELS],
                                  squares[:, i:i + KERNEL_CHANNELS])
                  for i in range(0, channels, KERNEL_CHANNELS)]
        if any(group is None for group in groups):
            return None
        return ([sum((group[0][k] for group in groups), []) for k in range(3)],
                sum((group[1] for group in groups), []), sum((group[2] for group in groups), []))
    spreads, totals = _spread_buffers(channels)
    complete = module.spread_sums(np.ascontiguousarray(sums, np.int64),
                                  np.ascontiguousarray(squares, np.int64),
                                  np.ascontiguousarray(pixels, np.int64), channels, spreads,
                                  totals)
    return _exact_totals(spreads, totals) if complete else None


def _spread_buffers(channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Zeroed totals for the compiled spread passes: fixed-point limbs (3, C, 72) and
    int128s (2, C, 2: low word, then high)."""
    return (np.zeros((3, channels, _FIXED_LIMBS), np.uint64),
            np.zeros((2, channels, 2), np.uint64))


def _exact_totals(limbs: np.ndarray, totals: np.ndarray
                  ) -> tuple[list[list[int]], list[int], list[int]]:
    """The spread passes' buffers as `integer_spreads` gives them: the std, sample std and
    variance fixed-point totals per channel, then the totals of the sums and squares."""
    fixed = _limb_totals(limbs)
    # (low, high) words as little-endian bytes, whatever the machine's byte order
    exact = [[int.from_bytes(pair.tobytes(), "little", signed=True) for pair in kind]
             for kind in totals.astype("<u8")]
    return [fixed[0], fixed[1], fixed[2]], exact[0], exact[1]


@dataclass(frozen=True)
class KernelTotals:
    """The summary's totals of the images of one compiled pass over 8-bit images, made as
    the pass read them (each image's right after its sums, while they are in cache and its
    next image's bytes are on their way): the spreads `integer_spreads` computes from
    their records afterwards, bit for bit, and the extremes of all the images; a summary
    of the records then reads none of them again (a task of 25,000 32x32x3 images, one
    thread: 0.2 ms to summarise, where a pass over the records took 0.8).

    Attributes
    ----------
    images : int
        The images (record rows) they cover.
    pixels : int
        The values of each image per channel.
    image_sums : numpy.ndarray or None
        The (N, C) Σx the pass wrote: records holding this very array (not an equal copy,
        not one changed since) hold the images it read. None from `uint8_summary`, which
        keeps no record: these totals then cover no records.
    limbs : numpy.ndarray
        (3, C, 72) uint64: the fixed-point totals of each image's std, sample std and
        variance per channel, in 32-bit limbs.
    totals : numpy.ndarray
        (2, C, 2) uint64: the exact Σx and Σx² over the images, int128 low and high words.
    extremes : numpy.ndarray
        (2, C) uint8: each channel's minimum, then its maximum, over the images.
    cross : tuple of int, optional
        Each pair's Σx_c·x_d over the images, pairs c < d (`uint8_summary` with ``cross``).

    Examples
    --------
    >>> import numpy as np
    >>> sums, _, _, _, kernel = uint8_moments(np.array([[[[3], [5]]], [[[4], [9]]]], np.uint8))
    >>> kernel.images, kernel.spreads()[1:], kernel.minimum, kernel.maximum
    (2, ([21], [131]), (3.0,), (9.0,))
    >>> kernel.covers(np.array([2, 2]), sums)
    True
    >>> kernel.covers(np.array([2, 3]), sums), kernel.covers(np.array([2, 2]), sums + 1)
    (False, False)
    """

    images: int
    pixels: int
    image_sums: np.ndarray | None = field(repr=False)
    limbs: np.ndarray = field(repr=False)
    totals: np.ndarray = field(repr=False)
    extremes: np.ndarray = field(repr=False)
    cross: tuple[int, ...] | None = None

    @property
    def channels(self) -> int:
        return int(self.limbs.shape[1])

    @property
    def minimum(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.extremes[0])

    @property
    def maximum(self) -> tuple[float, ...]:
        return tuple(float(v) for v in self.extremes[1])

    @property
    def images_ddof1(self) -> int:
        """The images with a sample std (two values or more)."""
        return self.images if self.pixels >= 2 else 0

    def spreads(self) -> tuple[list[list[int]], list[int], list[int]]:
        """As `integer_spreads` gives them: the std, sample std and variance fixed-point
        totals per channel, then the totals of the sums and of the squares."""
        return _exact_totals(self.limbs, self.totals)

    def covers(self, pixels: np.ndarray, sums: np.ndarray) -> bool:
        """Whether these are the totals of records of ``pixels`` (N) values per image and
        Σx ``sums`` (N, C): the array the pass wrote, and the pixel counts of the images
        it read. False for records changed since (other rows, channels, pixel counts or
        sums), which `normstats.maths.records.IntegerRecords.replaced` should have
        prevented: a check, for ~10 µs a task, that stale totals never reach a result
        (comparing Σx itself would cost 0.4 ms a task of 25,000 images)."""
        return sums is self.image_sums and sums.shape == (self.images, self.channels) and \
            len(pixels) == self.images and bool(np.all(pixels == self.pixels))


def _limb_totals(limbs: np.ndarray) -> list[list[int]]:
    """The integers that rows of 32-bit limbs make (each limb held in a uint64, so it may
    have grown past 32 bits; limb l weighs ``2**(32 l)``), for every row of a (K, C, L)
    array: a K x C list. The low and high halves of the limbs are each a little-endian run
    of 32-bit words, read by `int.from_bytes` at once: a summary pays ~1 µs a total where
    a Python sum over the limbs paid ~13 (a task's fixed cost on small images).

    Examples
    --------
    >>> import numpy as np
    >>> _limb_totals(np.array([[[5, 2**32 + 1, 0]]], np.uint64)) == [[5 + 2**32 + 2**64]]
    True
    """
    low = (limbs & np.uint64(0xFFFFFFFF)).astype("<u4")
    high = (limbs >> np.uint64(32)).astype("<u4")
    return [[int.from_bytes(low_row.tobytes(), "little")
             + (int.from_bytes(high_row.tobytes(), "little") << 32)
             for low_row, high_row in zip(low_kind, high_kind)]
            for low_kind, high_kind in zip(low, high)]


def _kernel(channels: int) -> Callable:
    """The kernel: the compiled one, or numpy's passes when it is missing."""
    module = _extension()
    if module is None:
        return _numpy_kernel

    def compiled(flat: np.ndarray, sums: np.ndarray, squares: np.ndarray, lows: np.ndarray,
                 highs: np.ndarray) -> None:
        module.moments(flat, sums.shape[0], channels, sums, squares, lows, highs)
    return compiled


def _numpy_kernel(flat: np.ndarray, sums: np.ndarray, squares: np.ndarray, lows: np.ndarray,
                  highs: np.ndarray) -> None:
    """The kernels' contract in numpy: accumulate (N, H·W·C) uint8 rows into the outputs."""
    n, channels = sums.shape
    values = flat.reshape(n, -1, channels)
    wide = values.astype(np.int64)
    sums += wide.sum(axis=1)
    squares += np.einsum("npc,npc->nc", wide, wide)
    np.minimum(lows, values.min(axis=1, initial=255), out=lows)
    np.maximum(highs, values.max(axis=1, initial=0), out=highs)


def outputs(n: int, channels: int) -> tuple[np.ndarray, ...]:
    """Per-image, per-channel accumulators: sums and squares at 0, min at 255, max at 0."""
    return (np.zeros((n, channels), np.int64), np.zeros((n, channels), np.int64),
            np.full((n, channels), 255, np.uint8), np.zeros((n, channels), np.uint8))


def uint8_moments(stack: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                              KernelTotals | None]:
    """Exact (sums, sums of squares, min, max), each (N, C), of a uint8 (N, H, W, C) stack
    of at most `KERNEL_CHANNELS` channels, and their `KernelTotals` (None without the
    compiled kernel, or where the summary must compute the spreads numpy's way).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)
    >>> [a.tolist() for a in uint8_moments(x)[:4]]
    [[[18, 22, 26]], [[126, 166, 214]], [[0.0, 1.0, 2.0]], [[9.0, 10.0, 11.0]]]
    """
    n, h, w, c = stack.shape
    flat = np.ascontiguousarray(stack).reshape(n, h * w * c)
    module = _extension()
    if module is None:
        sums, squares, lows, highs = outputs(n, c)
        _numpy_kernel(flat, sums, squares, lows, highs)
        return sums, squares, lows.astype(np.float64), highs.astype(np.float64), None
    sums, squares = np.zeros((n, c), np.int64), np.zeros((n, c), np.int64)
    lows, highs = np.empty((n, c)), np.empty((n, c))  # float64, written image by image
    limbs, totals = _spread_buffers(c)
    extremes = np.empty((2, c), np.uint8)
    complete = module.records(flat, n, c, sums, squares, lows, highs, limbs, totals, extremes)
    kernel = KernelTotals(n, h * w, sums, limbs, totals, extremes) if complete else None
    return sums, squares, lows, highs, kernel


def uint8_summary(stack: np.ndarray, cross: bool = False) -> KernelTotals | None:
    """The `KernelTotals` of a uint8 (N, H, W, C) stack of at most `KERNEL_CHANNELS`
    channels from the compiled pass, without records: what `uint8_moments` gives beside
    them, bit for bit, where no one keeps the records (the pass neither allocates nor
    writes them). With ``cross``, their ``cross`` totals too: each pair's Σx_c·x_d over
    the images, read a part of the stack at a time right after its moments, from cache.
    None without the compiled kernels, or where the summary must compute the spreads
    numpy's way (from records).

    Examples
    --------
    >>> import numpy as np
    >>> kernel = uint8_summary(np.array([[[[3, 1]], [[5, 2]]], [[[4, 0]], [[9, 1]]]], np.uint8),
    ...                        cross=True)
    >>> kernel.images, kernel.spreads()[1:], kernel.minimum, kernel.cross
    (2, ([21, 4], [131, 6]), (3.0, 0.0), (22,))
    """
    n, h, w, c = stack.shape
    module = _extension()
    api = _cross_api() if cross else None
    if module is None or (cross and api is None):
        return None
    flat = np.ascontiguousarray(stack).reshape(n, h * w * c)
    limbs, totals = _spread_buffers(c)
    extremes = np.empty((2, c), np.uint8)
    pairs = np.zeros((c * (c - 1) // 2, 2), np.uint64)  # int128s: low, then high word
    made = module.summary(flat, n, c, limbs, totals, extremes, api, pairs) if cross else \
        module.summary(flat, n, c, limbs, totals, extremes)
    if not made:
        return None
    return KernelTotals(n, h * w, None, limbs, totals, extremes,
                        tuple(int(low) + (int(high) << 64) for low, high in pairs)
                        if cross else None)


def _cross_api() -> object | None:
    """The cross sums kernel `uint8_summary` calls between parts (the capsule
    `normstats.maths._cross` exports), or None where it was not built."""
    try:
        from normstats.maths import _cross
    except ImportError:
        return None
    return getattr(_cross, "_C_API", None)


def uint8_moments_into(image: np.ndarray, row: int, sums: np.ndarray, squares: np.ndarray,
                       lows: np.ndarray, highs: np.ndarray) -> None:
    """Reduce one (H, W, C) uint8 image into row ``row`` of arrays made by `outputs`.

    Examples
    --------
    >>> import numpy as np
    >>> out = outputs(2, 1)
    >>> uint8_moments_into(np.full((2, 2, 1), 3, np.uint8), 1, *out)
    >>> out[0].tolist()
    [[0], [12]]
    """
    module = _extension()
    if module is not None and image.flags.c_contiguous:
        # straight to the kernel: one call a decoded image, ~1 µs of Python around it
        module.moments(image, 1, sums.shape[1], sums[row], squares[row], lows[row], highs[row])
        return
    flat = np.ascontiguousarray(image).reshape(1, -1)
    end = row + 1
    _kernel(sums.shape[1])(flat, sums[row:end], squares[row:end], lows[row:end], highs[row:end])


def uint8_running_sums(images: np.ndarray, run: np.ndarray, squares: np.ndarray | None) -> None:
    """Add uint8 images position by position onto ``run``, uint16 sums of one image's shape,
    and, unless ``squares`` is None, their squares onto uint32 ``squares``.

    ``images`` is one image of ``run``'s shape or a stack of them. The sums wrap modulo
    2¹⁶ and 2³², so they are exact while ``run`` holds at most 257 images
    (257·255 = 65,535): the caller folds it into wider totals before that
    (`normstats.maths.mean_image`). The compiled loop (vectorised with AVX-512 or AVX2
    where the CPU has them) reads each image once; numpy's passes answer without it.

    Examples
    --------
    >>> import numpy as np
    >>> run, squares = np.zeros(3, np.uint16), np.zeros(3, np.uint32)
    >>> uint8_running_sums(np.array([[1, 2, 255], [3, 4, 255]], np.uint8), run, squares)
    >>> run.tolist(), squares.tolist()
    ([4, 6, 510], [10, 20, 130050])
    """
    images = np.ascontiguousarray(images)
    module = _extension()
    if module is not None:
        module.running_sums(images, images.size // max(1, run.size), run, squares)
    elif run.size:  # images of no values add nothing (nor can they be cut into rows)
        _numpy_running_sums(images.reshape(-1, run.size), run.reshape(-1),
                            None if squares is None else squares.reshape(-1))


def integer_histogram(pixels: np.ndarray, counts: np.ndarray,
                      valid: np.ndarray | None = None) -> None:
    """Add the per-channel histogram of 8- or 16-bit integer ``pixels`` (..., C) onto int64
    ``counts`` (C, 2**bits), in place: bin k holds value k, or k − 2**(bits − 1) for
    signed dtypes; values whose ``valid`` (bool, broadcast to the pixels) is False are
    left out.

    The compiled count reads each value once. For uint8 with every value valid: 0.3 ns a
    value for RGB images, 0.4 grey, up to 0.8 for other channel counts, where numpy's
    index array and ``bincount`` took 7 (one core, 256×256 images). numpy's ``bincount``
    per channel answers without it.

    Examples
    --------
    >>> import numpy as np
    >>> counts = np.zeros((2, 256), np.int64)
    >>> integer_histogram(np.array([[[0, 7], [0, 255]]], np.uint8), counts)
    >>> counts[:, [0, 7, 255]].tolist()
    [[2, 0, 0], [0, 1, 1]]
    >>> signed = np.zeros((1, 65536), np.int64)
    >>> integer_histogram(np.array([[-2], [5]], np.int16), signed, np.array([[True], [False]]))
    >>> np.flatnonzero(signed).tolist()  # -2 + 32768
    [32766]
    """
    dtype = np.dtype(pixels.dtype)
    if dtype == np.bool_:
        pixels, dtype = pixels.view(np.uint8), np.dtype(np.uint8)
    channels = pixels.shape[-1]
    if dtype.kind not in "iu" or dtype.itemsize > 2:
        raise ValueError(f"integer_histogram counts 8- and 16-bit integers, not {dtype}")
    bins = 1 << (8 * dtype.itemsize)
    if counts.shape != (channels, bins) or counts.dtype != np.int64:
        raise ValueError(f"counts must be int64 ({channels}, {bins}), not {counts.dtype} "
                         f"{counts.shape}")
    if valid is not None:
        valid = np.ascontiguousarray(np.broadcast_to(valid, pixels.shape), dtype=bool)
    module = _extension()
    if module is not None and channels:
        module.histogram(np.ascontiguousarray(pixels), dtype.itemsize, dtype.kind == "i",
                         channels, counts, None if valid is None else valid.view(np.uint8))
        return
    flat = pixels.reshape(-1, channels).astype(np.int64)
    if dtype.kind == "i":
        flat += bins // 2
    kept = None if valid is None else valid.reshape(-1, channels)
    for channel in range(channels):
        column = flat[:, channel] if kept is None else flat[kept[:, channel], channel]
        counts[channel] += np.bincount(column, minlength=bins)


#: Bytes of the 16-bit squares numpy's running sums make at a time.
_SCRATCH_BYTES = 4 << 20


def _numpy_running_sums(images: np.ndarray, run: np.ndarray, squares: np.ndarray | None) -> None:
    """`uint8_running_sums` in numpy, on (count, values) images and flat sums."""
    rows = max(1, _SCRATCH_BYTES // max(1, 2 * run.size))
    for start in range(0, len(images), rows):
        block = images[start:start + rows]
        np.add(run, block.sum(axis=0, dtype=np.uint16), out=run)
        if squares is not None:
            block_squares = np.square(block, dtype=np.uint16)  # 255² < 2¹⁶: exact
            np.add(squares, block_squares.sum(axis=0, dtype=np.uint32), out=squares)


def uint8_moments_rows(images: np.ndarray, row: int, sums: np.ndarray, squares: np.ndarray,
                       lows: np.ndarray, highs: np.ndarray) -> None:
    """Reduce ``count`` uint8 images of equal size, given as a contiguous (count, bytes)
    block with channels interleaved, into rows ``row`` to ``row + count`` of `outputs`.

    Examples
    --------
    >>> import numpy as np
    >>> out = outputs(3, 2)
    >>> uint8_moments_rows(np.arange(8, dtype=np.uint8).reshape(2, 4), 1, *out)
    >>> out[0].tolist()
    [[0, 0], [2, 4], [10, 12]]
    """
    end = row + len(images)
    _kernel(sums.shape[1])(np.ascontiguousarray(images), sums[row:end], squares[row:end],
                           lows[row:end], highs[row:end])


# Once per process, as the module loads: the process the user started imports it before any
# image is reduced, whether the reduction then runs here or in workers.
_say_when_missing()
