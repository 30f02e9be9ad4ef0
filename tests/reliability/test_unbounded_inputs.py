"""Reliability matrix, part 8: nothing hangs, nothing grows without bound (docs/reliability.md).

Each case is a file that used to hang every scheduler or fill memory: a FIFO with an
image name, a link to ``/dev/zero``, a sparse file of 60 GB, a tiny ``.tar.gz`` that
inflates to more than the byte limit, a CIFAR pickle whose one image is repeated by a
zero stride; sizes that would take more memory than the machine has: ``--resize 100000``
or ``--center-crop 100000`` on 4x4 images, ``init-check --depth 100000``, a PNG header of
2**31 - 1 squared pixels under ``--max-pixels 5e18``. Each is now skipped (or refused) with
its reason, unread or before anything is allocated, and the rest of the result stays exact.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from oracle import assert_matches_oracle
from PIL import Image
from reliability_helpers import OWN_PEAK_KB, png_chunk

import normstats
from normstats.errors import NormstatsError
from normstats.sources.decoding.file_read import default_file_limit
from normstats.sources.decoding.policy import DEFAULT_MAX_PIXELS

pytestmark = pytest.mark.timeout(120)  # a hang fails the test instead of the suite


def _pngs(folder: Path, rng: np.random.Generator, count: int = 4) -> list[np.ndarray]:
    """``count`` random PNGs, each larger than the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    images = [rng.integers(0, 256, (6, 5 + i, 3), dtype=np.uint8) for i in range(count)]
    for i, pixels in enumerate(images):
        Image.fromarray(pixels).save(folder / f"{i}.png")
    return images


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_a_fifo_and_a_link_to_dev_zero_named_png_are_skipped_unread(tmp_path, rng, scheduler):
    root = tmp_path / "data"
    images = _pngs(root, rng)
    os.mkfifo(root / "x.png")  # opening it for reading would wait for a writer forever
    (root / "zero.png").symlink_to("/dev/zero")  # reading it would never end
    stats = normstats.compute(root, scheduler=scheduler, workers=2)
    assert_matches_oracle(stats, images, 255)
    reasons = {s.path: s.reason for s in stats.skipped}
    assert reasons == {"x.png": "not a regular file (a FIFO (named pipe)); only regular "
                                "files are read",
                       "zero.png": "not a regular file (a character device); only regular "
                                   "files are read"}
    with pytest.raises(NormstatsError, match=r"x.png: not a regular file \(a FIFO"):
        normstats.compute(root, on_error="fail", scheduler=scheduler)


def test_a_fifo_as_the_path_is_one_line_not_a_hang(tmp_path):
    fifo = tmp_path / "x.png"
    os.mkfifo(fifo)
    with pytest.raises(NormstatsError, match=r"x.png: not a regular file \(a FIFO"):
        normstats.compute(fifo)
    run = subprocess.run([sys.executable, "-m", "normstats", "compute", str(fifo)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        f"normstats: error: {fifo}: not a regular file (a FIFO (named pipe)); only regular "
        "files are read"]


def test_a_sparse_60_gb_png_is_skipped_from_its_size_without_reading_it(tmp_path, rng):
    root = tmp_path / "data"
    images = _pngs(root, rng)
    with open(root / "big.png", "wb") as handle:
        handle.truncate(60 << 30)  # sparse: no disk used, 60 GB of zeros to read
    script = (f"import json, resource, normstats; s = normstats.compute({str(root)!r}, "
              "workers=2); print(json.dumps([s.images, [[k.path, k.reason] for k in "
              f"s.skipped], {OWN_PEAK_KB}, "
              "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    count, skipped, parent_kb, children_kb = json.loads(run.stdout)
    assert count == len(images)
    limit = default_file_limit(DEFAULT_MAX_PIXELS)
    assert skipped == [["big.png", f"file of {60 << 30:,} bytes is over the limit of "
                                   f"{limit:,} bytes; raise --max-file-bytes if it is trusted"]]
    assert max(parent_kb, children_kb) < 1 << 20  # KiB: never the 60 GB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 4 << 20


def test_max_file_bytes_skips_larger_files_and_says_how_to_raise_it(tmp_path, rng):
    root = tmp_path / "data"
    images = _pngs(root, rng)
    sizes = sorted((p.stat().st_size, p.name) for p in root.iterdir())
    limit = sizes[-1][0] - 1  # only the largest file is over it
    stats = normstats.compute(root, max_file_bytes=limit, workers=1)
    kept = [images[i] for i in range(len(images)) if f"{i}.png" != sizes[-1][1]]
    assert_matches_oracle(stats, kept, 255)
    assert [(s.path, s.reason) for s in stats.skipped] == [
        (sizes[-1][1], f"file of {sizes[-1][0]:,} bytes is over the limit of {limit:,} "
                       "bytes; raise --max-file-bytes if it is trusted")]
    with pytest.raises(NormstatsError, match="max_file_bytes must be positive"):
        normstats.compute(root, max_file_bytes=0)


def test_a_small_tar_gz_inflating_past_the_limit_is_skipped_unread(tmp_path, rng):
    """With --max-pixels 1000 the byte limit is 8 × 1000 + 64 MiB; a member of 96 MiB of
    zeros compresses to ~100 KB. It is skipped from its header's size: never inflated into
    memory (the 6 GiB member of the report is the same case, larger)."""
    images = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(3)]
    shard = tmp_path / "shard.tar.gz"
    with gzip.open(shard, "wb", compresslevel=1) as stream, \
            tarfile.open(fileobj=stream, mode="w|") as tar:
        for i, pixels in enumerate(images):
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, "PNG")
            info = tarfile.TarInfo(f"{i:04d}.png")
            info.size = len(buffer.getvalue())
            tar.addfile(info, io.BytesIO(buffer.getvalue()))
        info = tarfile.TarInfo("9999.png")
        info.size = 96 << 20
        tar.addfile(info, _Zeros(info.size))
    assert shard.stat().st_size < 1 << 20
    stats = normstats.compute(shard, max_pixels=1000)
    assert_matches_oracle(stats, images, 255)
    limit = default_file_limit(1000)
    assert [(s.path, s.reason) for s in stats.skipped] == [
        (f"{shard}:9999.png", f"file of {96 << 20:,} bytes is over the limit of {limit:,} "
                              "bytes; raise --max-file-bytes if it is trusted")]


class _Zeros(io.RawIOBase):
    """``size`` zero bytes, streamed (so the test itself never holds them)."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


class _ZeroStrideBatch:
    """Pickles as ``ndarray((n, 3072), uint8, buffer, 0, (0, 1))``: only allowed globals,
    one 3 KB image read n times."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __reduce__(self):
        return (np.ndarray, ((self.count, 3072), np.dtype(np.uint8), bytes(range(256)) * 12,
                             0, (0, 1)))


def test_a_zero_stride_cifar_pickle_is_refused(tmp_path):
    batch = tmp_path / "data_batch_1"
    batch.write_bytes(pickle.dumps({b"data": _ZeroStrideBatch(50_000),
                                    b"labels": [0] * 50_000}, protocol=2))
    assert batch.stat().st_size < 200_000
    with pytest.raises(NormstatsError) as refused:
        normstats.compute(batch)
    assert str(refused.value) == (
        f"{batch}: refused to unpickle: it calls numpy.ndarray(...) itself, as no pickled "
        "array does: an array over memory the file does not hold (a forged pickle)")
    genuine = np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072)
    for protocol in (2, 4, 5):  # real batches of every protocol still load
        batch.write_bytes(pickle.dumps({b"data": genuine, b"labels": [1, 2]}, protocol))
        assert normstats.compute(batch).images == 2


def _guard_big_allocations(monkeypatch, limit: int) -> None:
    """Fail, instead of allocating, if Pillow's resize, the crop's padding or init-check's
    networks are ever reached with more than ``limit`` pixels (or at all, for the nets):
    the refusal must come first. The fork pool's workers inherit the guards."""
    from normstats.nn import init_check
    from normstats.sources.decoding import transforms

    resize, crop = Image.Image.resize, transforms.center_crop

    def guarded_resize(image, size, *args, **kwargs):
        assert size[0] * size[1] <= limit, f"Pillow asked to allocate {size}"
        return resize(image, size, *args, **kwargs)

    def guarded_crop(pixels, size):
        assert size * size <= limit, f"asked to pad to {size}x{size}"
        return crop(pixels, size)

    def no_network(*args, **kwargs):
        raise AssertionError("init-check built its network before checking its size")

    monkeypatch.setattr(Image.Image, "resize", guarded_resize)
    monkeypatch.setattr(transforms, "center_crop", guarded_crop)
    monkeypatch.setattr(init_check, "deep_relu_variances", no_network)


@pytest.mark.parametrize(("arguments", "message"), [
    (["compute", "{d}", "--resize", "100000"],
     "--resize 100000 makes every image at least 100000x100000 = 10000000000 pixels, over the "
     "limit of 89478485 pixels (--max-pixels), so every file would be skipped; use a smaller "
     "--resize, or raise --max-pixels if the memory is there"),
    (["compare", "{d}", "--resize", "100000"],
     "--resize 100000 makes every image at least 100000x100000 = 10000000000 pixels"),
    (["compute", "{d}", "--center-crop", "100000"],
     "--center-crop 100000 makes every image 100000x100000 = 10000000000 pixels"),
    (["init-check", "--depth", "100000"],
     "--depth 100000 --width 256 --batch 512 would hold about 262.1 GB (every layer's "
     "weights and activations, kept for the backward pass), over init-check's limit of "
     "4.0 GB; lower --depth (at most 1525 at this width and batch)"),
    (["init-check", "--width", "100000", "--depth", "2"],
     "--depth 2 --width 100000 --batch 512 would hold about 161.6 GB"),
], ids=["compute-resize", "compare-resize", "compute-crop", "init-check-depth",
        "init-check-width"])
def test_sizes_that_would_exhaust_memory_are_one_line_before_any_allocation(
        tmp_path, rng, monkeypatch, arguments, message):
    from click.testing import CliRunner

    from normstats_cli import main

    _guard_big_allocations(monkeypatch, DEFAULT_MAX_PIXELS)
    for i in range(3):  # the tiny 4x4 PNGs the issue ran them on
        Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)).save(
            tmp_path / f"{i}.png")
    argv = [a.replace("{d}", str(tmp_path)) for a in arguments]
    result = CliRunner().invoke(main, argv + (["--no-cache"] if argv[0] == "compute" else []))
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"normstats: error: {message}"), lines


def _png_with_header(width: int, height: int) -> bytes:
    """An RGB PNG claiming ``width`` x ``height`` with one tiny IDAT: plain enough for the
    libpng fast path to take it, whose output buffer is sized from the header."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header)
            + png_chunk(b"IDAT", zlib.compress(b"\0" * 100)) + png_chunk(b"IEND", b""))


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_a_2e31_square_png_under_a_huge_max_pixels_is_skipped_and_named(tmp_path, rng,
                                                                       scheduler):
    root = tmp_path / "data"
    images = _pngs(root, rng)
    (root / "huge.png").write_bytes(_png_with_header(2**31 - 1, 2**31 - 1))
    stats = normstats.compute(root, max_pixels=5 * 10**18, scheduler=scheduler, workers=2,
                              cache=False)
    assert_matches_oracle(stats, images, 255)
    (skipped,) = stats.skipped
    # the caller's Pillow limit answers first in this process (sync), the header check
    # in the pool's workers: both say the pixels cannot fit in this machine's memory
    size = "2147483647x2147483647 = " if scheduler == "processes" else ""
    assert skipped.path == "huge.png"
    assert skipped.reason.startswith(f"out of memory: its {size}4611686014132420609 pixels "
                                     "need at least "), skipped.reason
    assert skipped.reason.endswith("bytes of memory (the image is within --max-pixels, but "
                                   "cannot be decoded here)")
