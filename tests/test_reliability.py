"""The fault and bad-input matrix of docs/reliability.md, in its order.

Each test builds one row (or a few related rows) of the matrix: a messy input next to good
files. The promise under test: normstats never crashes on one bad file and never hangs; a
file it cannot use is skipped and named with its reason (one line, plain words, advice where
there is some); and the statistics of the files it did use equal the exact oracle of what
Pillow decodes from them. Rows already tested elsewhere are listed in the doc, not repeated.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import pickle
import struct
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import random_images
from oracle import assert_matches_oracle
from PIL import Image, ImageOps

import normstats
import normstats.sources.decoding.decode as decode_module
from normstats import EmptyDatasetError, NormstatsError
from normstats.sources.decoding.decode import ALLOWED_FORMATS, DEFAULT_MAX_PIXELS
from normstats.sources.folder import FolderSource
from normstats_cli import main

sys.path.insert(0, str(Path(__file__).parent / "sources"))
fw = importlib.import_module("format_writers")


# --- helpers -----------------------------------------------------------------------------

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


# --- 1. damaged image files --------------------------------------------------------------

TRUNCATED = {"half.jpg": ("JPEG", {}), "half.png": ("PNG", {}), "half.tif": ("TIFF", {}),
             "half_deflate.tif": ("TIFF", {"compression": "tiff_deflate"}),
             "half.gif": ("GIF", {}), "half.webp": ("WEBP", {}),
             "half_lossless.webp": ("WEBP", {"lossless": True})}


def test_truncated_jpeg_png_tiff_gif_webp_are_skipped_and_named(png_folder, rng):
    root, images = png_folder
    for name, (fmt, options) in TRUNCATED.items():
        data = encode(photo(rng), fmt, **options)
        (root / name).write_bytes(data[: len(data) // 2])
    # A PNG cut inside its final IEND chunk still holds every pixel: Pillow decodes it
    # completely, so it counts, with exactly those pixels (nothing is filled in).
    whole = encode(photo(rng), "PNG")
    (root / "no_iend.png").write_bytes(whole[:-6])
    stats = compute_sync(root)
    found = reasons(stats)
    assert set(found) == set(TRUNCATED)
    for name, reason in found.items():
        assert reason.startswith("truncated or corrupt"), (name, reason)
    # a compressed TIFF keeps its directory at the end: the reason says TIFF, not "not an image"
    assert found["half_deflate.tif"] == "truncated or corrupt TIFF file (its header cannot be read)"
    assert_matches_oracle(stats, images + [pillow(whole)], 255)


def test_jpeg_cut_after_its_signature_is_named_a_damaged_jpeg(png_folder):
    root, images = png_folder
    (root / "stub.jpg").write_bytes(encode(Image.new("RGB", (8, 8)), "JPEG")[:20])
    stats = compute_sync(root)
    assert reasons(stats) == {"stub.jpg": "truncated or corrupt JPEG file (its header cannot "
                                          "be read)"}
    assert_matches_oracle(stats, images, 255)


def test_decompression_bomb_warning_and_error_levels_are_both_refused(png_folder):
    """Pillow warns above MAX_IMAGE_PIXELS and raises above twice it: both are skipped."""
    root, images = png_folder
    warning_side, error_side = 9_500 * 9_500, 14_000 * 14_000
    assert DEFAULT_MAX_PIXELS < warning_side <= 2 * DEFAULT_MAX_PIXELS < error_side
    # headers only: the check runs on the header, before a byte of pixels is allocated
    (root / "warning_level.png").write_bytes(png_header_only(9_500, 9_500))
    (root / "error_level.png").write_bytes(png_header_only(14_000, 14_000))
    stats = compute_sync(root)
    found = reasons(stats)
    limit = f"exceeds the limit of {DEFAULT_MAX_PIXELS} pixels"  # never Pillow's 2x figure
    assert found == {
        "warning_level.png": f"decompression bomb: {warning_side} pixels {limit}; raise it "
                             "with --max-pixels if the file is trusted",
        "error_level.png": f"decompression bomb: {error_side} pixels {limit}; raise it "
                           "with --max-pixels if the file is trusted"}
    assert_matches_oracle(stats, images, 255)
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS  # the caller's Pillow is untouched


def test_max_pixels_sets_the_limit_for_both_levels_and_every_decoder(tmp_path, rng):
    """`--max-pixels` lowers the limit (PNG at 1.1x and 2.1x; JPEG on the fast path) and
    raises it again; the caller's own Pillow limit is left as it was."""
    files = {"warn.png": ("PNG", (110, 100)), "error.png": ("PNG", (210, 100)),
             "fast.jpg": ("JPEG", (110, 100)), "small.png": ("PNG", (50, 50))}
    data = {}
    for name, (fmt, (w, h)) in files.items():
        data[name] = encode(photo(rng, h, w), fmt, **({"quality": 95} if fmt == "JPEG" else {}))
        (tmp_path / name).write_bytes(data[name])
    args = ["compute", str(tmp_path), "--json", "--no-cache", "--scheduler", "sync"]
    low = CliRunner().invoke(main, args + ["--max-pixels", "10000"])
    assert low.exit_code == 0, low.output
    skipped = {s["path"]: s["reason"] for s in json.loads(low.output)["skipped"]}
    assert sorted(skipped) == ["error.png", "fast.jpg", "warn.png"]
    assert all("exceeds the limit of 10000 pixels" in r and "--max-pixels" in r
               for r in skipped.values())
    assert_matches_oracle(normstats.DatasetStats.from_json(low.output),
                          [pillow(data["small.png"])], 255)
    high = CliRunner().invoke(main, args + ["--max-pixels", "30000"])
    assert high.exit_code == 0, high.output
    stats = normstats.DatasetStats.from_json(high.output)
    assert stats.skipped == ()
    assert_matches_oracle(stats, [pillow(data[n]) for n in sorted(files)], 255)
    assert Image.MAX_IMAGE_PIXELS == DEFAULT_MAX_PIXELS


# --- 2. modes and bit depths -------------------------------------------------------------

def mode_zoo(root: Path, rng: np.random.Generator) -> dict[str, bytes]:
    """One file of every Pillow mode the matrix lists, written to ``root``."""
    base = Image.fromarray(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8))
    palette = base.convert("P")
    files = {
        "cmyk.tif": encode(base.convert("CMYK"), "TIFF"),
        "cmyk.jpg": encode(base.convert("CMYK"), "JPEG"),
        "p_transparent.png": encode(palette, "PNG", transparency=3),
        "la.png": encode(base.convert("LA"), "PNG"),
        "rgba.png": encode(base.convert("RGBA"), "PNG"),
        "mode1.png": encode(base.convert("1"), "PNG"),
        "float.tif": encode(Image.fromarray(rng.random((6, 7)).astype(np.float32)), "TIFF"),
        "gray16.png": encode(Image.fromarray(rng.integers(0, 65536, (6, 7)).astype(np.uint16)),
                             "PNG"),
        "rgb16.png": png_16bit_rgb(rng.integers(0, 65536, (6, 7, 3)).astype(np.uint16)),
    }
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return files


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA"])
def test_every_pillow_mode_under_an_8_bit_policy(tmp_path, rng, mode):
    """8-bit files are exactly Pillow's ``convert(mode)``; 16-bit gray and float are refused
    with a pointer to ``--mode keep``; a 16-bit RGB PNG gives the 8 bits Pillow decodes."""
    files = mode_zoo(tmp_path / "zoo", rng)
    stats = compute_sync(tmp_path / "zoo", mode=mode)
    found = reasons(stats)
    assert set(found) == {"float.tif", "gray16.png"}
    assert all("would clip it to 8 bits; use --mode keep" in r for r in found.values())
    used = sorted(set(files) - set(found))
    assert stats.channels == {"RGB": ("R", "G", "B"), "L": ("L",),
                              "RGBA": ("R", "G", "B", "A")}[mode]
    assert_matches_oracle(stats, [pillow(files[name], mode) for name in used], 255)


KEEP = {"cmyk.tif": ("C", "M", "Y", "K"), "cmyk.jpg": ("C", "M", "Y", "K"),
        "p_transparent.png": ("R", "G", "B", "A"), "la.png": ("L", "A"),
        "rgba.png": ("R", "G", "B", "A"), "mode1.png": ("L",), "float.tif": ("L",),
        "gray16.png": ("L",)}


def native(data: bytes, name: str) -> tuple[np.ndarray, float]:
    """The pixels ``--mode keep`` must give, written without normstats, and their scale."""
    with Image.open(io.BytesIO(data)) as image:
        if name == "p_transparent.png":
            return pillow(data, "RGBA"), 255
        if name == "mode1.png":
            return pillow(data, "L"), 255
        pixels = np.asarray(image)
    pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels
    if pixels.dtype.kind == "f":
        return pixels, 1
    if pixels.dtype.itemsize == 2 or image.mode.startswith("I;16"):
        return pixels.astype(np.uint16), 65535
    return pixels, 255


def test_every_pillow_mode_under_keep(tmp_path, rng):
    """Native channels and depth per file (each alone: keep refuses to pool mixed kinds)."""
    files = mode_zoo(tmp_path / "zoo", rng)
    for name, channels in KEEP.items():
        alone = tmp_path / name.replace(".", "_")
        alone.mkdir()
        (alone / name).write_bytes(files[name])
        stats = compute_sync(alone, mode="keep")
        assert stats.channels == channels, name
        pixels, scale = native(files[name], name)
        assert stats.dtype == str(pixels.dtype) and stats.scale == scale, name
        assert_matches_oracle(stats, [pixels], scale)
    alone = tmp_path / "rgb16"
    alone.mkdir()
    (alone / "rgb16.png").write_bytes(files["rgb16.png"])
    with pytest.raises(EmptyDatasetError, match="rgb16.png: 16-bit colour PNG.*use --mode RGB"):
        compute_sync(alone, mode="keep")


@pytest.mark.parametrize("fmt", ["WEBP", "TIFF"])  # GIF: tests/sources/test_folder.py
def test_multi_frame_webp_and_tiff_contribute_their_first_frame(tmp_path, fmt):
    frames = [Image.new("RGB", (4, 3), (v, v // 2, 255 - v)) for v in (10, 200, 90)]
    options = {"lossless": True} if fmt == "WEBP" else {}
    data = encode(frames[0], fmt, save_all=True, append_images=frames[1:], **options)
    assert Image.open(io.BytesIO(data)).n_frames == 3
    (tmp_path / f"anim.{fmt.lower()}").write_bytes(data)
    stats = compute_sync(tmp_path)
    assert_matches_oracle(stats, [np.asarray(frames[0])], 255)


def test_exif_orientation_leaves_the_statistics_unchanged(tmp_path, rng):
    """The stored pixels are used, as torchvision's loader does; a rotation would only
    permute them, so every per-channel statistic is the same either way."""
    pixels = rng.integers(0, 256, (5, 9, 3), dtype=np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees on display
    data = encode(Image.fromarray(pixels), "PNG", exif=exif.tobytes())
    (tmp_path / "rotated.png").write_bytes(data)
    stats = compute_sync(tmp_path)
    assert_matches_oracle(stats, [pixels], 255)
    upright = np.asarray(ImageOps.exif_transpose(Image.open(io.BytesIO(data))))
    assert upright.shape == (9, 5, 3)
    assert_matches_oracle(stats, [upright], 255)


# --- 3. the filesystem -------------------------------------------------------------------

def test_permission_denied_is_skipped_with_its_reason(png_folder, monkeypatch):
    """The suite runs as root (chmod 000 does not stop it), so the decoder's open() is made
    to fail as it would for another user; the sync scheduler keeps the patch in-process."""
    root, images = png_folder
    Image.new("RGB", (4, 4)).save(root / "locked.png")

    real_open = os.open

    def guarded_open(path, *args, **kwargs):
        if str(path).endswith("locked.png"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(decode_module.os, "open", guarded_open)
    stats = compute_sync(root)
    assert reasons(stats) == {"locked.png": "permission denied"}
    assert_matches_oracle(stats, images, 255)


def test_file_deleted_between_listing_and_reading(png_folder):
    root, images = png_folder
    Image.new("RGB", (4, 4)).save(root / "fleeting.png")
    source = FolderSource(root)  # lists the folder, fleeting.png included
    (root / "fleeting.png").unlink()
    stats = compute_sync(source)
    assert reasons(stats) == {"fleeting.png": "file disappeared before it could be read"}
    assert_matches_oracle(stats, images, 255)


def test_non_utf8_file_names_are_used_and_reported(tmp_path, rng):
    """Names that are not UTF-8 (Latin-1 here) are decoded and, when bad, named in the
    report as Python spells them (surrogate escapes), JSON included."""
    pixels = random_images(rng, 2)
    root = os.fsencode(tmp_path)
    for i, name in enumerate((b"caf\xe9.png", b"\xff\xfe.png")):
        with open(os.path.join(root, name), "wb") as handle:
            handle.write(fw.png_bytes(pixels[i]))
    with open(os.path.join(root, b"bad\xe9.jpg"), "wb") as handle:
        handle.write(b"not a jpeg")
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--json", "--no-cache",
                                       "--scheduler", "sync"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["skipped"] == [{"path": os.fsdecode(b"bad\xe9.jpg"), "reason":
                                "not an image (content is none of PNG, JPEG, BMP, TIFF, WEBP, "
                                "GIF, PPM)"}]
    assert_matches_oracle(normstats.DatasetStats.from_dict(data), pixels, 255)


def test_longest_file_name_and_a_folder_beyond_path_max(tmp_path, rng):
    """A 255-byte name is an ordinary file; a folder nested past PATH_MAX (4096) cannot be
    opened by path: it is named with the system's reason, not a crash of the walk."""
    pixels = random_images(rng, 2)
    longest = "n" * 251 + ".png"
    Image.fromarray(pixels[0]).save(tmp_path / longest)
    parent = os.open(tmp_path, os.O_RDONLY)
    for _ in range(20):  # 20 x 251 characters: created relative to a descriptor
        os.mkdir("d" * 250, dir_fd=parent)
        child = os.open("d" * 250, os.O_RDONLY, dir_fd=parent)
        os.close(parent)
        parent = child
    deep = os.open("deep.png", os.O_WRONLY | os.O_CREAT, dir_fd=parent)
    os.write(deep, fw.png_bytes(pixels[1]))
    os.close(deep)
    os.close(parent)
    stats = compute_sync(tmp_path)
    ((path, reason),) = reasons(stats).items()
    assert path.startswith("d" * 250 + "/") and path.endswith("/")
    assert len(os.path.join(str(tmp_path), path)) > 4096
    assert reason == "cannot open folder: File name too long"
    assert_matches_oracle(stats, pixels[:1], 255)


def test_dangling_symlink_is_named(png_folder):
    root, images = png_folder
    os.symlink(root / "nowhere.png", root / "ghost.png")
    stats = compute_sync(root)
    assert reasons(stats) == {"ghost.png": "cannot stat file: No such file or directory"}
    assert_matches_oracle(stats, images, 255)


# --- 4. dataset files --------------------------------------------------------------------

NPY_CASES = {
    "truncated": (lambda data: data[: len(data) // 2],
                  "truncated .npy file: its header's shape needs more bytes than the file holds"),
    "claims_more": (lambda data: data.replace(b"(6, 4, 4, 3)", b"(9, 4, 4, 3)"),
                    "truncated .npy file: its header's shape needs more bytes than the file holds"),
    "claims_fewer": (lambda data: data.replace(b"(6, 4, 4, 3)", b"(5, 4, 4, 3)"),
                     "header claims shape (5, 4, 4, 3) uint8 = 240 bytes but the file holds "
                     "288: the header and the data disagree"),
}


@pytest.mark.parametrize("case", sorted(NPY_CASES))
def test_npy_truncated_or_with_a_lying_header_is_a_clear_error(tmp_path, rng, case):
    """A header claiming fewer images than the data holds would silently drop images:
    it is refused like a truncated file (IDX and .npz members follow the same rule)."""
    path = tmp_path / "images.npy"
    np.save(path, rng.integers(0, 256, (6, 4, 4, 3), dtype=np.uint8))
    change, message = NPY_CASES[case]
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(NormstatsError) as caught:
        normstats.compute(path)
    assert str(caught.value) == f"{path}: {message}"


@pytest.mark.parametrize("compressed", [False, True])
def test_truncated_npz_is_a_clear_error(tmp_path, compressed):
    path = fw.write_npz(tmp_path / "data.npz", fw.images(1, 6, 8, 8, 3), compressed)
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(NormstatsError, match=r"data.npz: not a readable .npz \(zip\) file"):
        normstats.compute(path)


def test_truncated_cifar_pickle_is_a_clear_error_and_runs_nothing(tmp_path):
    path = fw.write_cifar_python(tmp_path / "data_batch_1", fw.images(2, 4, 32, 32, 3))
    data = path.read_bytes()
    assert pickle.loads(data)  # the whole file is a good batch
    for cut in (30, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(NormstatsError, match="data_batch_1: not a readable pickle"):
            normstats.compute(path)


# --- 5. dataset extremes, the cache and the local pool -----------------------------------

@pytest.mark.slow
def test_uint16_at_its_maximum_past_int64_end_to_end():
    """2.16e9 pixels at 65535: the pooled sum of squares passes 2**63 and stays exact
    (a zero-stride array, so no memory is needed for it)."""
    images = np.broadcast_to(np.uint16(65535), (33_000, 256, 256, 1))
    stats = normstats.compute(images)
    assert stats.pixels_per_channel * 65535**2 > 2**63
    assert stats.mean == (1.0,) and stats.std == (0.0,) and stats.per_image_std == (0.0,)
    assert stats.min == stats.max == (1.0,) and stats.images == 33_000


def test_bit_flipped_cache_chunks_are_caught_by_the_digest(png_folder, tmp_path):
    """Unlike a truncated chunk (tests/test_cache.py), a flipped bit can still decompress;
    the segment's SHA-256 digest catches it and the files are decoded again."""
    root, images = png_folder
    cache = tmp_path / "cache"
    first = normstats.compute(root, cache=cache, workers=1)
    chunks = [p for p in cache.rglob("*") if p.is_file() and "/c/" in p.as_posix()]
    assert chunks
    for chunk in chunks:
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x10
        chunk.write_bytes(bytes(data))
    again = normstats.compute(root, cache=cache, workers=1)
    assert (again.images_decoded, again.images_cached) == (len(images), 0)
    assert again == first
    assert_matches_oracle(again, images, 255)


def test_a_local_worker_killed_once_costs_a_rerun_not_the_run(png_folder, monkeypatch, capfd):
    """When a forked pool worker dies, the run goes on on a local Dask cluster, which
    retries tasks and isolates a file that kills every worker (that case, a file crashing
    every worker, is tests/test_distributed.py's poisoned-image test). The poisoned decoder
    here kills forked pool workers only, so on the cluster every file decodes: exact."""
    import normstats.sources.folder as folder_module

    root, images = png_folder
    parent, real = os.getpid(), folder_module.decode_file

    def poisoned(path, policy, name=None, scratch=None, **options):
        if path.endswith("013.png") and os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return real(path, policy, name, scratch, **options)

    monkeypatch.setattr(folder_module, "decode_file", poisoned)
    stats = normstats.compute(root, workers=2, task_size=4, scheduler="processes", cache=False)
    assert "running again on a local Dask cluster" in capfd.readouterr().err
    assert stats.skipped == ()
    assert_matches_oracle(stats, images, 255)


# --- 6. the report: every skipped file named, the rest exact -----------------------------

def write_messy_folder(root: Path, rng: np.random.Generator) -> dict[str, str]:
    """A mixture of the matrix's bad files; returns file -> words its reason must hold."""
    good_jpeg = encode(photo(rng), "JPEG")
    bad = {
        "cut.jpg": (good_jpeg[:200], "truncated or corrupt"),
        "half.webp": (encode(photo(rng), "WEBP")[:300], "truncated or corrupt"),
        "empty.png": (b"", "zero-byte file"),
        "README.jpg": (b"# my dataset\n", "not an image"),
        "bomb.png": (png_header_only(20_000, 20_000), "--max-pixels"),
        "deep.png": (encode(Image.fromarray(np.full((3, 3), 4000, np.uint16)), "PNG"),
                     "--mode keep"),
    }
    for name, (data, _) in bad.items():
        (root / name).write_bytes(data)
    (root / "folder.jpg").mkdir()  # a folder, walked like any other: not a skipped file
    os.symlink(root / "missing.png", root / "dangling.png")
    expected = {name: words for name, (_, words) in bad.items()}
    expected["dangling.png"] = "cannot stat file"
    return expected


def test_messy_folder_report_names_every_skipped_file_and_the_rest_is_exact(png_folder, rng):
    """The CLI's JSON report, with the default scheduler (a process pool)."""
    root, images = png_folder
    expected = write_messy_folder(root, rng)
    result = CliRunner().invoke(main, ["compute", str(root), "--json", "--no-cache",
                                       "--workers", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    skipped = {s["path"]: s["reason"] for s in data["skipped"]}
    assert set(skipped) == set(expected)
    for name, words in expected.items():
        assert words in skipped[name] and "\n" not in skipped[name], (name, skipped[name])
    assert_matches_oracle(normstats.DatasetStats.from_dict(data), images, 255)


@pytest.mark.parametrize("name, data, advice", [
    ("deep.png", encode(Image.fromarray(np.full((3, 3), 4000, np.uint16)), "PNG"),
     "deep.png: 16-bit image (Pillow mode I;16): converting it to RGB would clip it to 8 bits; "
     "use --mode keep to compute it at its native depth"),
    ("bomb.png", png_header_only(20_000, 20_000),
     "bomb.png: decompression bomb: 400000000 pixels exceeds the limit of 89478485 pixels; "
     "raise it with --max-pixels if the file is trusted"),
    ("cut.tif", encode(Image.new("RGB", (30, 30)), "TIFF", compression="tiff_deflate")[:100],
     "cut.tif: truncated or corrupt TIFF file (its header cannot be read)"),
])
def test_on_error_fail_is_one_line_with_the_path_the_reason_and_the_advice(tmp_path, name,
                                                                           data, advice):
    (tmp_path / name).write_bytes(data)
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--on-error", "fail",
                                       "--no-cache", "--scheduler", "sync"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"normstats: error: {advice}"]
