"""Folders of image files: the oracle is Pillow's own decode of each file."""

import gc
import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import random_images
from oracle import assert_matches_oracle
from PIL import Image

import normstats
from normstats import IncompatibleImagesError, SkipKind, UnreadableInputError
from normstats.sources import open_source
from normstats.sources.folder import FolderSource
from normstats.sources.walk import walk_images


def pillow_rgb(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def write_mixed_folder(root: Path, rng) -> list[Path]:
    """PNG, JPEG, BMP, TIFF, WebP, GIF and PPM files; gray, RGBA, palette; several sizes."""
    pixels = random_images(rng, 8, sizes=((9, 13), (16, 16), (5, 3)))
    root.mkdir(parents=True, exist_ok=True)
    files = []
    specs = [("a.png", None), ("b.jpg", None), ("c.bmp", None), ("d.tiff", None),
             ("e.webp", None), ("f.png", "L"), ("g.png", "RGBA"), ("h.gif", "P")]
    for (name, mode), array in zip(specs, pixels):
        image = Image.fromarray(array)
        if mode == "RGBA":
            image = image.convert("RGBA")
            image.putalpha(128)
        elif mode:
            image = image.convert(mode)
        image.save(root / name)
        files.append(root / name)
    (root / "sub").mkdir()
    Image.fromarray(pixels[0]).save(root / "sub" / "i.ppm")
    files.append(root / "sub" / "i.ppm")
    return files


def test_mixed_formats_sizes_and_modes_match_pillow_convert_rgb(tmp_path, rng):
    files = write_mixed_folder(tmp_path / "mixed", rng)
    (tmp_path / "mixed" / "README.txt").write_text("not an image, ignored")
    stats = normstats.compute(tmp_path / "mixed", workers=2)
    assert stats.channels == ("R", "G", "B") and stats.mode == "RGB"
    assert stats.skipped == ()
    assert_matches_oracle(stats, [pillow_rgb(p) for p in sorted(files)], 255)


def test_png_folder_is_identical_across_workers_and_task_sizes(png_folder):
    root, images = png_folder
    runs = [normstats.compute(root, task_size=size, workers=workers)
            for size in (1, 7, None) for workers in (1, 2)]
    assert all(run == runs[0] for run in runs)
    assert_matches_oracle(runs[0], images, 255)


def write_bad_files(root: Path, good: bytes) -> dict[str, str]:
    """One file of each bad kind, and the words its reason must contain."""
    jpeg = root / "ok.jpg"
    Image.fromarray(np.full((32, 32, 3), 100, np.uint8)).save(jpeg, quality=90)
    jpeg_bytes = jpeg.read_bytes()
    jpeg.unlink()
    cases = {
        "truncated.png": (good[: len(good) // 2], "truncated or corrupt"),
        "cut.jpg": (jpeg_bytes[:200], "truncated or corrupt"),
        "empty.png": (b"", "zero-byte"),
        "text.jpg": (b"this is a README, not a JPEG\n" * 4, "not an image"),
    }
    for name, (data, _) in cases.items():
        (root / name).write_bytes(data)
    (root / "folder.jpg").mkdir()
    return {name: words for name, (_, words) in cases.items()}


def test_bad_files_are_named_skipped_and_the_rest_stays_exact(png_folder):
    root, images = png_folder
    good = next(root.rglob("*.png")).read_bytes()
    expected = write_bad_files(root, good)
    stats = normstats.compute(root)
    reasons = {s.path: s.reason for s in stats.skipped}
    assert set(reasons) == set(expected)
    for name, words in expected.items():
        assert words in reasons[name], (name, reasons[name])
    assert_matches_oracle(stats, images, 255)


def test_on_error_fail_stops_at_the_first_bad_file(png_folder):
    root, _ = png_folder
    (root / "zero.png").write_bytes(b"")
    with pytest.raises(UnreadableInputError, match="zero.png: zero-byte file"):
        normstats.compute(root, on_error="fail", workers=1)


@pytest.mark.parametrize(("make", "error", "kind"), [
    (os.mkfifo, normstats.RefusedInputError, SkipKind.REFUSED),
    (lambda path: os.symlink("nowhere.png", path), normstats.TransientInputError,
     SkipKind.TRANSIENT)], ids=["fifo", "dangling-link"])
def test_what_the_listing_cannot_use_has_a_kind_and_stops_a_failing_run_as_its_type(
        png_folder, make, error, kind):
    root, images = png_folder
    make(root / "odd.png")
    (skipped,) = normstats.compute(root, workers=1).skipped
    assert (skipped.path, skipped.kind) == ("odd.png", kind)
    with pytest.raises(error, match="odd.png: "):
        normstats.compute(root, on_error="fail", workers=1)


def test_decompression_bomb_is_skipped_with_its_reason(png_folder):
    root, images = png_folder
    Image.new("L", (300, 300)).save(root / "bomb.png")
    stats = normstats.compute(root, max_pixels=200 * 200)
    (skipped,) = stats.skipped
    assert skipped.path == "bomb.png" and "decompression bomb" in skipped.reason
    assert skipped.kind is SkipKind.REFUSED
    assert "--max-pixels" in skipped.reason
    assert_matches_oracle(stats, images, 255)


def test_symlink_loops_end_and_linked_files_count_once(png_folder):
    root, images = png_folder
    os.symlink(root, root / "cat" / "loop")
    os.symlink(root / "dog" / "000.png", root / "alias.png")
    os.link(root / "dog" / "002.png", root / "hard.png")
    walk = walk_images(root)
    assert len(walk.files) == len(images)
    assert {s.path: s.reason for s in walk.skipped} == {
        "dog/000.png": "same file as alias.png (a hard or symbolic link); counted once",
        "hard.png": "same file as dog/002.png (a hard or symbolic link); counted once"}
    assert {s.kind for s in walk.skipped} == {SkipKind.DUPLICATE}
    stats = normstats.compute(root, on_error="fail")  # a second name is no failure
    assert_matches_oracle(stats, images, 255)


def test_sixteen_bit_gray_is_refused_under_rgb_and_kept_exact_under_keep(tmp_path, rng):
    images = random_images(rng, 4, dtype=np.uint16, channels=1, sizes=((6, 5),))
    for i, pixels in enumerate(images):
        Image.fromarray(pixels[:, :, 0]).save(tmp_path / f"{i}.png")
    with pytest.raises(normstats.EmptyDatasetError, match="--mode keep"):
        normstats.compute(tmp_path)
    stats = normstats.compute(tmp_path, mode="keep")
    assert stats.dtype == "uint16" and stats.scale == 65535 and stats.channels == ("L",)
    assert_matches_oracle(stats, images, 65535)


def test_keep_mode_names_two_example_files_of_incompatible_modes(tmp_path, rng):
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(tmp_path / "colour.png")
    Image.fromarray(np.zeros((4, 4), np.uint16)).save(tmp_path / "deep.png")
    with pytest.raises(IncompatibleImagesError, match="colour.png.*deep.png|deep.png.*colour.png"):
        normstats.compute(tmp_path, mode="keep")


def test_multi_frame_gif_contributes_its_first_frame(tmp_path):
    frames = [Image.new("L", (4, 4), v) for v in (10, 200)]
    frames[0].save(tmp_path / "anim.gif", save_all=True, append_images=frames[1:])
    stats = normstats.compute(tmp_path, mode="L")
    assert stats.mean == (Image.open(tmp_path / "anim.gif").convert("L").getpixel((0, 0)) / 255,)


def test_folder_source_reports_ignored_files_and_its_channels(png_folder):
    root, images = png_folder
    (root / "labels.csv").write_text("a,b")
    source = FolderSource(root)
    assert len(source) == len(images) and source.ignored == 1
    assert source.channel_names == ("R", "G", "B")


def test_a_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(normstats.NormstatsError, match="no such file or folder"):
        normstats.compute(tmp_path / "nope")


def retained_bytes_of_a_walk(root: Path) -> tuple[int, object]:
    """Bytes of Python and numpy allocations a walk's result keeps alive (tracemalloc)."""
    gc.collect()  # a full collection also empties the free lists of tuples, floats, ...
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        walk = walk_images(root)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, walk
    finally:
        tracemalloc.stop()


def test_a_walk_keeps_a_few_bytes_a_file_beyond_its_paths(tmp_path):
    # A tuple of FileEntry objects kept ~170 bytes a file beyond the path characters
    # (entry, path string, int objects); the columns keep 24. The slope between two
    # sizes cancels whatever a walk keeps once (caches, the result's own objects).
    def write(start: int, stop: int) -> None:
        for i in range(start, stop):
            folder = tmp_path / f"d{i % 4}"
            folder.mkdir(exist_ok=True)
            (folder / f"{i:06d}.png").touch()  # 14-character relative paths

    write(0, 1000)
    small, _ = retained_bytes_of_a_walk(tmp_path)
    write(1000, 4000)
    large, walk = retained_bytes_of_a_walk(tmp_path)
    assert len(walk.files) == 4000 and walk.files[-1].path == "d3/003999.png"
    per_file = (large - small) / 3000
    assert per_file < 14 + 40, per_file


def test_a_file_dated_beyond_2262_is_listed_with_a_saturated_mtime(png_folder):
    root, images = png_folder
    far = next(root.rglob("*.png"))
    os.utime(far, ns=(0, 10**19))  # year 2286: more nanoseconds than an int64 holds
    if far.stat().st_mtime_ns <= np.iinfo(np.int64).max:
        pytest.skip("this filesystem cannot store a date after 2262")
    walk = walk_images(root)
    assert len(walk.files) == len(images)
    (entry,) = [f for f in walk.files if f.path == far.relative_to(root).as_posix()]
    assert entry.mtime_ns == np.iinfo(np.int64).max
    assert_matches_oracle(normstats.compute(root, workers=2), images, 255)


def test_masked_images_are_reduced_alike_as_decoded_and_all_at_once(rng):
    """Images with a mask (one band for all, or one per band) among plain ones: the
    streaming reduction and the grouped one (tasks that decode all their images at once)
    leave the same values out as the masked records of the stack."""
    from normstats.maths.masked import masked_records
    from normstats.maths.records import concat_records
    from normstats.sources.decoding.policy import DecodedImage
    from normstats.sources.folder import records_of_images, reduce_as_decoded

    pixels = [rng.integers(0, 4000, (5, 6, 3), np.uint16) for _ in range(5)]
    masks = [rng.random((5, 6, 1)) < 0.3, None, rng.random((5, 6, 3)) < 0.5, None,
             np.ones((5, 6, 1), bool)]  # the last one hides every pixel
    decoded = [(f"k{i}", DecodedImage(p, ("a", "b", "c"), None, True, m))
               for i, (p, m) in enumerate(zip(pixels, masks))]
    full = np.stack([np.zeros((5, 6, 3), bool) if m is None else np.broadcast_to(m, (5, 6, 3))
                     for m in masks])
    expected = masked_records(np.stack(pixels), mask=full, keys=tuple(k for k, _ in decoded),
                              channel_names=("a", "b", "c"), raw_units=True)

    def by_key(records):
        order = np.argsort(records.keys)
        return (records.valid[order].tolist(), records.sums[order].tolist(),
                records.sums_sq[order].tolist(),
                np.nan_to_num(records.minimum[order], nan=-1).tolist())  # none: NaN

    streamed = reduce_as_decoded(lambda scratch: iter(decoded), 5)
    grouped = records_of_images(decoded)
    assert by_key(streamed) == by_key(grouped) == by_key(concat_records([expected]))
    assert expected.valid.tolist()[1] == [30, 30, 30] and expected.valid.tolist()[4] == [0] * 3
    assert streamed.pixels.tolist() == [30] * 5


# -- plain files go from their bytes straight into the records (FolderTask.run) -------------

def write_plain_and_other_files(root: Path, rng) -> set[str]:
    """Files the fast decoders take, and files they leave to decode_file (Pillow's
    formats and modes, damage, a file over the byte limit): the latter's names."""
    from PIL import ImageCms

    root.mkdir(parents=True, exist_ok=True)
    rgb = rng.integers(0, 256, (12, 10, 3), np.uint8)
    Image.fromarray(rgb).save(root / "a_rgb.png")
    Image.fromarray(rgb[..., 0]).save(root / "b_grey.png")
    profile = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    Image.fromarray(rgb).save(root / "c_icc.png", icc_profile=profile)
    Image.fromarray(rgb).save(root / "d_photo.jpg", quality=90)
    Image.fromarray(rgb[..., 1]).save(root / "e_grey.jpg", quality=90)
    Image.fromarray(rgb).convert("P").save(root / "f_palette.png")
    Image.fromarray(rgb).save(root / "g.bmp")
    Image.fromarray(rng.integers(0, 65536, (6, 5), np.uint16)).save(root / "h_16bit.png")
    (root / "i_cut.png").write_bytes((root / "a_rgb.png").read_bytes()[:60])
    (root / "j_empty.jpg").write_bytes(b"")
    Image.fromarray(rng.integers(0, 256, (300, 300, 3), np.uint8)).save(root / "k_big.png")
    return {"f_palette.png", "g.bmp", "h_16bit.png", "i_cut.png", "j_empty.jpg", "k_big.png"}


def record_fields(records) -> list:
    return [records.keys, records.channel_names, records.pixels.tolist(),
            records.sums.tolist(), records.sums_sq.tolist(), records.minimum.tolist(),
            records.maximum.tolist()]


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_plain_files_go_straight_into_the_records_as_decode_file_would_give_them(
        tmp_path, rng, monkeypatch, mode):
    """FolderTask.run reads every file once and adds what the fast decoders take without
    an image tuple; every other file is decoded from the same bytes, and the records and
    skips are those of decoding each file into an image first (`decode_all`), key for key
    and in order."""
    from normstats.maths.records import concat_records
    from normstats.sources import folder
    from normstats.sources.decoding import decode as decode_module
    from normstats.sources.decoding.decode import fast_pixels

    others = write_plain_and_other_files(tmp_path / "d", rng)
    source = open_source(tmp_path / "d", mode=mode, max_file_bytes=100_000)
    (task,) = source.tasks(100, 1)
    paths = {path for path, _ in task.files.paths_and_sizes()}
    fast = {path for path in paths - {"k_big.png"}  # over --max-file-bytes: never decoded
            if fast_pixels((tmp_path / "d" / path).read_bytes(), task.policy) is not None}
    assert fast == ({"a_rgb.png", "b_grey.png", "c_icc.png", "d_photo.jpg", "e_grey.jpg"}
                    if mode == "RGB" else {"b_grey.png", "e_grey.jpg"}) and not fast & others
    reads, slow = [], []
    read, read_plain, decode_bytes = (folder.read_image_bytes, folder.read_plain_files,
                                      folder.decode_bytes)
    monkeypatch.setattr(folder, "read_image_bytes", lambda path, *a: (
        reads.append(os.path.basename(path)), read(path, *a))[1])

    def plain_reads(paths, limit):  # only the files it gives bytes of: the others go on
        found = read_plain(paths, limit)
        reads.extend(os.path.basename(p) for p, data in zip(paths, found) if data is not None)
        return found

    monkeypatch.setattr(folder, "read_plain_files", plain_reads)
    monkeypatch.setattr(folder, "decode_bytes", lambda data, name, *a, **k: (
        slow.append(name), decode_bytes(data, name, *a, **k))[1])
    monkeypatch.setattr(folder, "decode_file", None)  # never called: each file read once
    tried_again = []
    monkeypatch.setattr(decode_module, "fast_pixels", lambda *a: tried_again.append(a))
    result = task.run()
    assert sorted(reads) == sorted(paths) and tried_again == []  # refused once is enough
    assert sorted(slow) == sorted(paths - fast - {"k_big.png"})  # over the limit: unread
    monkeypatch.undo()
    decoded, skipped = task.decode_all()
    assert result.skipped == skipped
    assert {s.path for s in skipped} == {"h_16bit.png", "i_cut.png", "j_empty.jpg", "k_big.png"}
    assert record_fields(result.records) == \
        record_fields(concat_records([folder.records_of_images(decoded)]))


def test_a_task_reads_its_files_a_few_dozen_at_a_time_in_order(tmp_path):
    """At most 64 files a batch, and a batch ends once its files (by the listing's sizes)
    reach 1 MiB; every file once, in the listing's order, whatever the batches."""
    from normstats.sources.decoding.decode import DecodePolicy
    from normstats.sources.folder import read_in_batches

    def batches(sizes):
        folder = tmp_path / f"d{len(sizes)}"
        folder.mkdir()
        for number, size in enumerate(sizes):
            (folder / f"{number:03d}.png").write_bytes(bytes([number % 256]) * size)
        files = walk_images(folder).files
        found = list(read_in_batches(f"{folder}/", files, DecodePolicy()))
        assert [path for batch in found for path, _ in batch] == \
            [entry.path for entry in files] == [f"{n:03d}.png" for n in range(len(sizes))]
        assert [data for batch in found for _, data in batch] == \
            [bytes([n % 256]) * size for n, size in enumerate(sizes)]
        return [len(batch) for batch in found]

    assert batches([1] * 130) == [64, 64, 2]
    assert batches([400_000] * 7) == [3, 3, 1]  # 1.2 MB held: the batch ends
    assert batches([2 << 20, 1, 1]) == [1, 2]  # one file over the bound is a batch


def test_a_task_yields_every_image_to_callers_that_look_at_each(tmp_path, rng):
    """`decoded` (which the mean image and the percentiles tap) never adds a file to the
    records itself, even handed the records as its buffer."""
    from normstats.maths.uint8_rows import Uint8Rows

    write_plain_and_other_files(tmp_path / "d", rng)
    (task,) = open_source(tmp_path / "d", max_file_bytes=100_000).tasks(100, 1)
    skipped = []
    keys = [key for key, _ in task.decoded(skipped, Uint8Rows(task.size))]
    assert len(keys) + len(skipped) == task.size == 11
    assert {"a_rgb.png", "d_photo.jpg"} <= set(keys)


@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_a_tapped_run_hands_the_tap_every_image_decode_all_gives(tmp_path, rng, mode):
    """`FolderTask.run(tap)` (what the mean image and the percentiles run) keeps the plain
    run's path, files the fast decoders take going straight into the records, and hands
    the tap every image in order, before the next decode reuses its buffer: the pixels
    `decode_all` gives, with no image around those of the fast decoders. The records and
    skips are the plain run's."""
    write_plain_and_other_files(tmp_path / "d", rng)
    (task,) = open_source(tmp_path / "d", mode=mode, max_file_bytes=100_000).tasks(100, 1)
    tapped = []
    result = task.run(lambda key, pixels, image: tapped.append((key, pixels.copy(), image)))
    decoded, skipped = task.decode_all()
    assert [key for key, _, _ in tapped] == [key for key, _ in decoded]
    for (key, pixels, image), (_, reference) in zip(tapped, decoded):
        assert pixels.dtype == reference.pixels.dtype and \
            np.array_equal(pixels, reference.pixels), key
        assert image is None or image.pixels is not None
    fast = {"a_rgb.png", "b_grey.png", "c_icc.png", "d_photo.jpg", "e_grey.jpg"} \
        if mode == "RGB" else {"b_grey.png", "e_grey.jpg"}
    assert {key for key, _, image in tapped if image is None} == fast
    plain = task.run()
    assert result.skipped == plain.skipped == skipped
    assert record_fields(result.records) == record_fields(plain.records)


def test_a_resizing_policy_decodes_every_file_through_decode_file(tmp_path, rng, monkeypatch):
    from normstats.sources import folder

    write_plain_and_other_files(tmp_path / "d", rng)
    (task,) = open_source(tmp_path / "d", resize=6, max_file_bytes=100_000).tasks(100, 1)
    calls = []
    decode_file = folder.decode_file
    monkeypatch.setattr(folder, "decode_file", lambda path, *a, **k: (
        calls.append(path), decode_file(path, *a, **k))[1])
    task.run()
    assert len(calls) == task.size
