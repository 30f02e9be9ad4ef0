"""Helpers shared by the reliability tests (tests/reliability/): encoders and checks."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
from PIL import Image

import normstats
from normstats.sources.decoding.decode import ALLOWED_FORMATS

# A child process's own peak resident memory, in KiB, as Python source to run in it.
# VmHWM, not ``ru_maxrss``: Python starts children with vfork, and Linux carries the
# parent's peak over the child's exec into its ``ru_maxrss`` (a child of a pytest process
# grown to 1 GB reported 1.05 GB whatever it did itself).
OWN_PEAK_KB = ("next(int(line.split()[1]) for line in open('/proc/self/status') "
               "if line.startswith('VmHWM'))")


def replace_file_decoder(monkeypatch, decode) -> None:
    """Decode every file of a folder with ``decode`` (``decode_file``'s signature): folder
    tasks run as every decoding task does, file by file through ``decode_file``, not
    straight from the bytes into their records (`normstats.sources.folder.FolderTask.run`)."""
    import normstats.sources.folder as folder_module

    monkeypatch.setattr(folder_module, "decode_file", decode)
    monkeypatch.setattr(folder_module.FolderTask, "run", folder_module.DecodingTask.run)


def lock_for_decoder(monkeypatch, name: str) -> None:
    """Make the decoder's ``os.open`` of files ending in ``name`` fail with "Permission
    denied", as it would for another user (and the compiled batch read decline them, as it
    declines any file it cannot open): the suite runs as root, where chmod 000 does not
    stop a read. Only this process sees it (use a sync scheduler)."""
    import os

    import normstats.sources.decoding.file_read as file_read_module

    real_open = os.open

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith(name):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(file_read_module.os, "open", guarded_open)
    compiled = file_read_module._read_files
    if compiled is not None:  # its open() fails too: it leaves the file to read_whole_file
        monkeypatch.setattr(file_read_module, "_read_files", lambda paths, limit: [
            None if path.endswith(name) else data
            for path, data in zip(paths, compiled(paths, limit))])


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    """The bytes of ``image`` saved as ``fmt``."""
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def pillow(data: bytes, mode: str = "RGB") -> np.ndarray:
    """What Pillow decodes from ``data`` (no LOAD_TRUNCATED_IMAGES), as (H, W, C)."""
    with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as image:
        pixels = np.asarray(image.convert(mode))
    return pixels[:, :, None] if pixels.ndim == 2 else pixels


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + \
        struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_header_only(width: int, height: int) -> bytes:
    """A valid PNG signature and IHDR claiming ``width`` x ``height``, and no pixel data."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IEND", b"")


def png_16bit_rgb(pixels: np.ndarray) -> bytes:
    """A 16-bit RGB PNG written by hand (Pillow cannot write one)."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].astype(">u2").tobytes() for y in range(h))
    header = struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + \
        png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b"")


def reasons(stats: normstats.DatasetStats) -> dict[str, str]:
    """Skipped path -> reason, checking every reason is one plain line."""
    out = {s.path: s.reason for s in stats.skipped}
    for path, reason in out.items():
        assert reason and "\n" not in reason and "Traceback" not in reason, (path, reason)
        assert " at 0x" not in reason, (path, reason)  # no object reprs: say it in words
    return out


def photo(rng: np.random.Generator, height: int = 40, width: int = 50) -> Image.Image:
    """A smooth-ish RGB image, so lossy and compressed files are not trivially small."""
    ramp = np.arange(width, dtype=np.int64)[None, :, None] * 4
    noise = rng.integers(0, 40, size=(height, width, 3))
    return Image.fromarray(((ramp + noise) % 256).astype(np.uint8))


def compute_sync(root, **options) -> normstats.DatasetStats:
    """One process: fast, and monkeypatches reach the decoder."""
    return normstats.compute(root, scheduler="sync", cache=False, **options)
