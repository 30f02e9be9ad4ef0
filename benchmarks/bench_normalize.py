"""Fused uint8 NHWC -> float32 NCHW normalization against its peers, in one run.

Usage::

    python benchmarks/bench_normalize.py          # 256 x 224 x 224 x 3, 11 rounds
    python benchmarks/bench_normalize.py --quick  # 32 images, 5 rounds

Peers (all produce float32 ``((x / 255) - mean) / std`` in NCHW order):

* ``torch idiom``: ``torch.from_numpy(x).permute(0,3,1,2).float().div(255).sub(m).div(s)``
  with torch's default intra-op threads (its result is an NCHW view over
  channels-last memory, not a contiguous NCHW array).
* ``numpy two-step``: ``y = x.astype(float32); y /= 255`` then ``y -= m; y /= s`` in
  place, returned as an NCHW view (``transpose``), the cheapest plain-numpy spelling.
* ``normstats Normalize``: per-channel 256-entry float32 table, ``np.take`` straight
  into the contiguous NCHW output, one image at a time; also with ``threads=2`` and
  writing into a reused output buffer (``out=``).

Each round runs every method once, in rotating order, so drift on a noisy machine hits
all of them alike; the table reports medians, min-max spread and ratios of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from normstats.nn import Normalize

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def make_batch(n: int, seed: int = 0) -> np.ndarray:
    """Deterministic uint8 NHWC batch of 224 x 224 RGB noise."""
    return np.random.default_rng(seed).integers(0, 256, (n, 224, 224, 3), dtype=np.uint8)


def numpy_two_step(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float32)
    y /= np.float32(255)
    y -= np.asarray(MEAN, np.float32)
    y /= np.asarray(STD, np.float32)
    return y.transpose(0, 3, 1, 2)


def torch_idiom_factory() -> Callable[[np.ndarray], object] | None:
    try:
        import torch
    except ImportError:
        return None
    m = torch.tensor(MEAN, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(STD, dtype=torch.float32).view(1, 3, 1, 1)

    def torch_idiom(x: np.ndarray) -> object:
        return torch.from_numpy(x).permute(0, 3, 1, 2).float().div(255).sub(m).div(s)

    return torch_idiom


def methods(x: np.ndarray) -> dict[str, Callable[[np.ndarray], object]]:
    norm = Normalize(MEAN, STD, 255)
    buffer = np.empty((x.shape[0], 3) + x.shape[1:3], np.float32)
    found: dict[str, Callable[[np.ndarray], object]] = {
        "normstats Normalize": norm,
        "normstats Normalize threads=2": Normalize(MEAN, STD, 255, threads=2),
        # A data loader can reuse its output batch; this skips the page faults of a
        # fresh 150 MB allocation that every other row pays.
        "normstats Normalize, reused out=": lambda b: norm(b, out=buffer[: b.shape[0]]),
        "numpy two-step": numpy_two_step,
    }
    torch_idiom = torch_idiom_factory()
    if torch_idiom is not None:
        found["torch idiom"] = torch_idiom
    return found


def check_agreement(x: np.ndarray, funcs: dict[str, Callable[[np.ndarray], object]]) -> None:
    ref = funcs["normstats Normalize"](x[:2])
    for name, f in funcs.items():
        diff = np.abs(np.asarray(f(x[:2])) - ref).max()
        print(f"  max |{name} - Normalize| on 2 images: {diff:.2e}")


def measure(
    x: np.ndarray, funcs: dict[str, Callable[[np.ndarray], object]], rounds: int
) -> dict[str, list[float]]:
    names = list(funcs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm-up: page in the input, build tables, start thread pools
        funcs[name](x)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            result = funcs[name](x)
            times[name].append(time.perf_counter() - t0)
            del result
    return times


def report(times: dict[str, list[float]], nbytes: int) -> None:
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    peers = [p for p in ("torch idiom", "numpy two-step") if p in medians]
    header = (
        "| method | median s | min-max s | input GB/s | "
        + " | ".join(f"{p} / this" for p in peers)
        + " |"
    )
    print(header)
    print("|" + "---|" * (4 + len(peers)))
    for name, ts in times.items():
        ratios = " | ".join(f"{medians[p] / medians[name]:.2f}x" for p in peers)
        print(
            f"| {name} | {medians[name]:.4f} | {min(ts):.4f}-{max(ts):.4f} |"
            f" {nbytes / medians[name] / 1e9:.2f} | {ratios} |"
        )


def environment() -> str:
    try:
        import torch

        torch_info = f"torch {torch.__version__} ({torch.get_num_threads()} threads)"
    except ImportError:
        torch_info = "torch not installed"
    return (
        f"numpy {np.__version__}, {torch_info}, python {platform.python_version()},"
        f" {os.cpu_count()} cores, {platform.machine()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 images, 5 rounds")
    parser.add_argument("--images", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the raw timings here")
    args = parser.parse_args()
    n = args.images or (32 if args.quick else 256)
    rounds = args.rounds or (5 if args.quick else 11)
    x = make_batch(n)
    funcs = methods(x)
    print(f"# uint8 {x.shape} NHWC -> float32 NCHW, {x.nbytes / 1e6:.1f} MB in, {rounds} rounds")
    print(f"# {environment()}")
    check_agreement(x, funcs)
    times = measure(x, funcs, rounds)
    report(times, x.nbytes)
    if args.json:
        Path(args.json).write_text(json.dumps({"images": n, "rounds": rounds,
                                               "nbytes": x.nbytes, "times": times}))


if __name__ == "__main__":
    main()
