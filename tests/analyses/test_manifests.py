"""Shipped manifests, the schema check, paths kept inside the root, checksums."""

from __future__ import annotations

import gzip
import hashlib
import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import Image

import normstats
from normstats.analyses import manifests
from normstats.analyses.manifests import (
    Manifest,
    SourceSpec,
    compute_manifest,
    list_manifests,
    load_manifest,
    manifest_paths,
    open_manifest_source,
    resolve_path,
    verify_checksums,
)
from normstats.errors import NormstatsError, RefusedInputError, SkipKind
from normstats_cli import main

fw = importlib.import_module("format_writers")

HEAD = '''name = "toy"
dataset = "Toy"
split = "train"
description = "two CIFAR python batches"
'''


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "toy.toml"
    path.write_text(HEAD + body)
    return path


def test_shipped_manifests_load_and_cover_the_known_datasets() -> None:
    names = {m.name for m in list_manifests()}
    assert {"mnist-train", "mnist-test", "fashion-mnist-train", "cifar10-train",
            "cifar100-train", "svhn-train", "stl10-train", "imagenet-train"} <= names
    cifar = load_manifest("cifar10-train")
    seeds = cifar.references[0].values
    assert seeds["mean"] == (0.49140105, 0.48215663, 0.44653168)
    assert seeds["std"] == (0.24703284, 0.24348499, 0.26158834)
    assert seeds["per_image_std"] == (0.20220193, 0.19931635, 0.20086373)
    imagenet = load_manifest("imagenet-train").references[0].values
    assert imagenet == {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
    assert all(r.source for m in list_manifests() for r in m.references)


@pytest.mark.parametrize(("body", "message"), [
    ('[source]\nformat = "idx"\nfiles = ["a"]\ncolour = 1\n', "unknown key.*colour"),
    ('[source]\nformat = "idx"\nfiles = []\n', "non-empty list"),
    ('[source]\nformat = "idx"\nfiles = ["a"]\n[source.checksums]\na = "crc:1"\n',
     "md5:<32 hex>"),
    ('[source]\nformat = "idx"\nfiles = ["a"]\n[[references]]\nlabel = "x"\nsource = "y"\n',
     "publishes no values"),
    ('[source]\nformat = "idx"\nfiles = ["a"]\n[[references]]\nlabel = "x"\nsource = "y"\n'
     'mean = "0.5"\n', "list of numbers"),
    ('[source]\nformat = "idx"\nfiles = ["../../etc/passwd"]\n', "escapes the dataset root"),
    ('[source]\nformat = "idx"\nfiles = ["/etc/passwd"]\n', "escapes the dataset root"),
    ('[source\n', "not valid TOML"),
])
def test_schema_errors_name_the_manifest(tmp_path: Path, body: str, message: str) -> None:
    path = _write(tmp_path, body)
    with pytest.raises(NormstatsError, match=message) as caught:
        load_manifest(str(path))
    assert str(caught.value).startswith(f"{path}: invalid manifest")


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    manifest = load_manifest(str(_write(tmp_path, '[source]\nformat = "idx"\n'
                                                  'files = ["link/x"]\n')))
    with pytest.raises(NormstatsError, match="resolves outside the dataset root"):
        resolve_path(manifest, str(root), "link/x")
    with pytest.raises(NormstatsError, match="resolves outside"):
        open_manifest_source(manifest, str(root))


def test_checksums_are_verified(tmp_path: Path) -> None:
    batch = fw.write_cifar_python(tmp_path / "data_batch_1", fw.images(1, 3, 32, 32, 3))
    digest = hashlib.md5(batch.read_bytes()).hexdigest()
    good = _write(tmp_path, f'[source]\nformat = "cifar-python"\nfiles = ["data_batch_1"]\n'
                            f'[source.checksums]\ndata_batch_1 = "md5:{digest}"\n')
    assert verify_checksums(load_manifest(str(good)), str(tmp_path)) == ["data_batch_1: md5 ok"]
    bad = _write(tmp_path, '[source]\nformat = "cifar-python"\nfiles = ["data_batch_1"]\n'
                           f'[source.checksums]\ndata_batch_1 = "md5:{"0" * 32}"\n')
    with pytest.raises(NormstatsError, match="data_batch_1: md5 checksum mismatch"):
        verify_checksums(load_manifest(str(bad)), str(tmp_path))


def test_cli_lists_and_computes_a_manifest(tmp_path: Path) -> None:
    runner = CliRunner()
    listing = runner.invoke(main, ["manifests"])
    assert listing.exit_code == 0 and "cifar10-train" in listing.output
    for i in (1, 2):
        fw.write_cifar_python(tmp_path / f"data_batch_{i}", fw.images(i, 4, 32, 32, 3))
    manifest = _write(tmp_path, '[source]\nformat = "cifar-python"\n'
                                'files = ["data_batch_1", "data_batch_2"]\n')
    result = runner.invoke(main, ["compute", "--manifest", str(manifest), "--root",
                                  str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert '"images": 8' in result.output
    missing = runner.invoke(main, ["compute", "--manifest", "cifar10-train", "--root",
                                   str(tmp_path)])
    assert missing.exit_code == 1 and "not found under the root" in missing.output


# --- loading: every refusal word for word -------------------------------------------------

def test_an_unknown_name_lists_the_shipped_manifests(tmp_path: Path) -> None:
    names = ", ".join(m.name for m in list_manifests())
    for name in ("no-such-manifest", str(tmp_path)):  # a folder is not a manifest file
        with pytest.raises(NormstatsError) as caught:
            load_manifest(name)
        assert str(caught.value) == (f"no manifest named {name!r} and no such file; "
                                     f"shipped: {names}")


def test_shipped_manifests_are_found_by_name_and_listed_in_order() -> None:
    paths = manifest_paths()
    assert paths == sorted(paths) and all(p.endswith(".toml") for p in paths)
    assert [m.path for m in map(load_manifest, paths)] == paths
    assert load_manifest("mnist-test").path == next(p for p in paths
                                                    if p.endswith("/mnist-test.toml"))
    listed = [m.name for m in list_manifests()]
    assert listed == sorted(listed) and len(listed) == len(paths)


def test_a_manifest_at_the_size_limit_loads_and_one_byte_more_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path, '[source]\nformat = "idx"\nfiles = ["a"]\n')
    size = path.stat().st_size
    monkeypatch.setattr(manifests, "MANIFEST_LIMIT", size)
    assert load_manifest(str(path)).source.files == ("a",)
    monkeypatch.setattr(manifests, "MANIFEST_LIMIT", size - 1)
    with pytest.raises(NormstatsError) as caught:
        load_manifest(str(path))
    assert str(caught.value) == (f"{path}: invalid manifest: larger than {size - 1:,} bytes; a "
                                 "manifest lists files, it does not hold them")
    assert manifests.MANIFEST_LIMIT == size - 1 and (64 << 20) == 67_108_864


def test_the_size_limit_is_64_mib() -> None:
    import importlib as loader

    assert loader.reload(manifests).MANIFEST_LIMIT == 64 * 1024 * 1024


def test_text_that_is_not_utf8_or_not_toml_or_unreadable_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tomllib

    path = tmp_path / "bad.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(NormstatsError) as caught:
        load_manifest(str(path))
    assert str(caught.value) == (f"{path}: invalid manifest: not UTF-8 text (byte 8); a "
                                 "manifest is a TOML file")
    path.write_text("name = \n")
    try:
        tomllib.loads("name = \n")
    except tomllib.TOMLDecodeError as error:
        expected = f"{path}: invalid manifest: not valid TOML ({error})"
    with pytest.raises(NormstatsError) as caught:
        load_manifest(str(path))
    assert str(caught.value) == expected

    def failing(path: str) -> None:
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(manifests, "open_regular", failing)
    with pytest.raises(NormstatsError) as caught:
        load_manifest(str(path))
    assert str(caught.value) == (f"{path}: invalid manifest: cannot read it (Input/output "
                                 "error)")

    def failing_without_strerror(path: str) -> None:
        raise OSError("no words")
    monkeypatch.setattr(manifests, "open_regular", failing_without_strerror)
    with pytest.raises(NormstatsError) as caught:
        load_manifest(str(path))
    assert str(caught.value) == f"{path}: invalid manifest: cannot read it (no words)"


def test_a_fifo_named_like_a_manifest_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.toml")
    with pytest.raises(RefusedInputError, match="not a regular file"):
        load_manifest(str(tmp_path / "pipe.toml"))


# --- paths under the root ------------------------------------------------------------------

def _manifest(files: tuple[str, ...] = ("a",), path: str = "m.toml", **source: Any) -> Manifest:
    return Manifest("toy", "Toy", "train", "d", SourceSpec(source.pop("format", "idx"), files,
                                                            **source), (), path=path)


def test_resolve_path_joins_under_the_root_and_refuses_a_sibling_folder(tmp_path: Path) -> None:
    root, sibling = tmp_path / "data", tmp_path / "data2"
    (root / "sub").mkdir(parents=True)
    sibling.mkdir()
    (root / "link").symlink_to(sibling)
    (root / "inside").symlink_to(root / "sub")
    (root / "back").symlink_to(root)
    manifest = _manifest()
    assert resolve_path(manifest, str(root), "sub/x") == f"{root}/sub/x"
    assert resolve_path(manifest, str(root), "inside/x") == f"{root}/inside/x"
    assert resolve_path(manifest, str(root), "back") == f"{root}/back"  # the root itself
    assert resolve_path(manifest, str(root) + "/", "sub") == f"{root}/sub"
    for where in ("m.toml", ""):
        with pytest.raises(NormstatsError) as caught:
            resolve_path(_manifest(path=where), str(root), "link/x")
        assert caught.value.path == (where or "toy")
        assert str(caught.value) == (f"{where or 'toy'}: manifest path 'link/x' resolves "
                                     f"outside the dataset root {root} (to {sibling}/x)")
    with pytest.raises(NormstatsError) as caught:
        resolve_path(_manifest(path=""), str(root), "../x")
    assert str(caught.value).startswith("toy: invalid manifest: path '../x' escapes")


# --- checksums -----------------------------------------------------------------------------

def _checksummed(root: Path, **checksums: str) -> Manifest:
    return _manifest(tuple(checksums), checksums=checksums)


def test_checksum_lines_in_the_manifest_s_order(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    (tmp_path / "b").write_bytes(b"x" * ((1 << 20) + 5))  # more than one block
    manifest = _checksummed(tmp_path, b="sha256:" + hashlib.sha256(b"x" * ((1 << 20) + 5))
                            .hexdigest(), a="md5:" + hashlib.md5(b"abc").hexdigest())
    assert verify_checksums(manifest, str(tmp_path)) == ["b: sha256 ok", "a: md5 ok"]
    assert verify_checksums(_manifest(), str(tmp_path)) == []


def test_a_checksum_mismatch_names_both_digests(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    with pytest.raises(NormstatsError) as caught:
        verify_checksums(_checksummed(tmp_path, a="md5:" + "0" * 32), str(tmp_path))
    assert caught.value.path == str(tmp_path / "a")
    assert str(caught.value) == (f"{tmp_path}/a: md5 checksum mismatch: expected {'0' * 32}, "
                                 f"got {hashlib.md5(b'abc').hexdigest()} (not the published "
                                 "file, or a damaged download)")


def test_a_whole_gzip_stream_counts_only_under_a_gz_name(tmp_path: Path) -> None:
    payload = gzip.compress(b"pixels" * 1000, mtime=0)
    for name in ("a.gz", "a"):
        (tmp_path / name).write_bytes(payload)
    wrong = "md5:" + "0" * 32
    assert verify_checksums(_checksummed(tmp_path, **{"a.gz": wrong}), str(tmp_path)) == [
        "a.gz: md5 differs from the published file, but it is one complete gzip stream (a "
        "copy compressed again?): its pixels are checked by the image count and the "
        "references, not by the checksum"]
    with pytest.raises(NormstatsError, match="md5 checksum mismatch"):
        verify_checksums(_checksummed(tmp_path, a=wrong), str(tmp_path))  # not named .gz
    (tmp_path / "a.gz").write_bytes(payload[:-4])  # the CRC is there, the size is not
    with pytest.raises(NormstatsError, match="md5 checksum mismatch"):
        verify_checksums(_checksummed(tmp_path, **{"a.gz": wrong}), str(tmp_path))
    with pytest.raises(NormstatsError, match=r"damaged download\)$"):  # gzip, if cut
        verify_checksums(_checksummed(tmp_path, **{"a.gz": wrong}), str(tmp_path))
    (tmp_path / "a.gz").write_bytes(b"not gzip at all")  # what a browser's gunzip leaves
    with pytest.raises(NormstatsError, match="md5 checksum mismatch") as caught:
        verify_checksums(_checksummed(tmp_path, **{"a.gz": wrong}), str(tmp_path))
    assert str(caught.value).endswith(
        "damaged download; it is no gzip stream: if a browser saved it decompressed under "
        "its .gz name, rename it a and it is read as the extracted copy)")
    (tmp_path / "b.gz").write_bytes(gzip.compress(b"x" * (3 << 20), mtime=0))  # several reads
    assert "one complete gzip stream" in verify_checksums(
        _checksummed(tmp_path, **{"b.gz": wrong}), str(tmp_path))[0]


def test_an_extracted_copy_stands_in_for_a_missing_gz_file_only(tmp_path: Path) -> None:
    digest = "md5:" + "0" * 32
    (tmp_path / "t10k").write_bytes(b"raw")
    assert verify_checksums(_checksummed(tmp_path, **{"t10k.gz": digest}), str(tmp_path)) == [
        "t10k.gz: not found; its extracted copy t10k is read instead (the checksum is of the "
        "compressed file, so the image count and the references check its pixels)"]
    assert manifests.manifest_file(_manifest(), str(tmp_path), "t10k.gz") == f"{tmp_path}/t10k"
    assert manifests.manifest_file(_manifest(), str(tmp_path), "t10k") == f"{tmp_path}/t10k"
    assert manifests.manifest_file(_manifest(), str(tmp_path), "gone") == f"{tmp_path}/gone"
    (tmp_path / "dir").mkdir()  # a folder is no extracted copy
    for name in ("dir.gz", "t10k.zip", "gone.gz"):
        with pytest.raises(NormstatsError) as caught:
            verify_checksums(_checksummed(tmp_path, **{name: digest}), str(tmp_path))
        assert caught.value.path == f"{tmp_path}/{name}"
        assert str(caught.value) == (f"{tmp_path}/{name}: file of manifest toy not found "
                                     f"under the root {tmp_path}")
    assert manifests.manifest_file(_manifest(), str(tmp_path), "dir.gz") == f"{tmp_path}/dir.gz"


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").write_bytes(b"abc")

    def failing(path: str) -> None:
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(manifests, "open_regular", failing)
    with pytest.raises(NormstatsError) as caught:
        verify_checksums(_checksummed(tmp_path, a="md5:" + "0" * 32), str(tmp_path))
    assert caught.value.path == f"{tmp_path}/a"
    assert str(caught.value) == f"{tmp_path}/a: cannot read file (Input/output error)"

    def failing_without_strerror(path: str) -> None:
        raise OSError("no words")
    monkeypatch.setattr(manifests, "open_regular", failing_without_strerror)
    with pytest.raises(NormstatsError) as caught:
        verify_checksums(_checksummed(tmp_path, a="md5:" + "0" * 32), str(tmp_path))
    assert str(caught.value) == f"{tmp_path}/a: cannot read file (no words)"


# --- opening and computing a manifest's files ----------------------------------------------

def test_a_folder_manifest_reads_under_its_mode_and_stays_in_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    rgb = fw.images(3, 4, 5, 6, 3)
    fw.write_folder(root / "imgs", rgb)
    fw.write_folder(tmp_path / "outside", rgb[:1])
    (root / "imgs" / "link.png").symlink_to(tmp_path / "outside" / "0000.png")
    manifest = _manifest(("imgs",), format="folder", mode="L", channels=("Y",))
    source = open_manifest_source(manifest, str(root))
    assert len(source) == 4 and source.mode == "L"
    stats = compute_manifest(manifest, str(root), workers=1)
    gray = [np.asarray(Image.fromarray(p).convert("L"))[:, :, None] for p in rgb]
    assert stats.images == 4 and stats.channels == ("Y",) and stats.mode == "L"
    assert stats.mean == normstats.compute(np.stack(gray)).mean
    assert [(s.path, s.reason.split(";")[0]) for s in stats.skipped] == [
        ("link.png", f"a link out of the dataset root {root} (to {tmp_path}/outside/0000.png)")]
    (root / "imgs" / "link.png").unlink()
    (root / "imgs" / "0001.png").write_bytes(b"broken")
    assert compute_manifest(manifest, str(root), workers=1).images == 3
    with pytest.raises(NormstatsError, match="0001.png"):
        compute_manifest(manifest, str(root), workers=1, on_error="fail")


def test_file_formats_get_the_manifest_s_layout_channels_mode_and_members(
        tmp_path: Path) -> None:
    gray = fw.images(4, 3, 4, 5, 1)[..., 0]
    fw.write_idx(tmp_path / "a-idx3-ubyte", gray)
    idx = compute_manifest(_manifest(("a-idx3-ubyte",), channels=("Y",)), str(tmp_path),
                           workers=1)
    assert idx.channels == ("Y",) and idx.mean == normstats.compute(gray[..., None]).mean
    rgb = fw.images(5, 3, 4, 4, 3)
    fw.write_tar(tmp_path / "s.tar", rgb)
    tar = compute_manifest(_manifest(("s.tar",), format="tar", mode="L", image_ext="png",
                                     counts={"s.tar": 3}), str(tmp_path), workers=1)
    assert tar.mode == "L" and tar.channels == ("L",) and tar.images == 3
    fw.write_npz(tmp_path / "a.npz", np.moveaxis(rgb, -1, 1))
    npz = compute_manifest(_manifest(("a.npz",), format="npz", member="x_train", layout="NCHW",
                                     channels=("R", "G", "B")), str(tmp_path), workers=1)
    assert npz.channels == ("R", "G", "B") and npz.mean == normstats.compute(rgb).mean
    np.save(tmp_path / "a.npy", np.moveaxis(rgb, -1, 1))  # read by open_source
    npy = compute_manifest(_manifest(("a.npy",), format="npy", layout="NCHW",
                                     channels=("X", "Y", "Z")), str(tmp_path), workers=1)
    assert npy.channels == ("X", "Y", "Z") and npy.mean == normstats.compute(rgb).mean
    assert compute_manifest(_manifest(("a.npy",), format="npy", layout="NCHW",
                                      channels=("X", "Y", "Z")), str(tmp_path),
                            channels="P,Q,S", workers=1).channels == ("P", "Q", "S")


def test_the_caller_s_limits_resize_and_scale_apply(tmp_path: Path) -> None:
    rgb = fw.images(6, 2, 6, 6, 3)
    fw.write_folder(tmp_path / "imgs", rgb)
    manifest = _manifest(("imgs",), format="folder")
    small = compute_manifest(manifest, str(tmp_path), workers=1, resize=3, scale=1.0)
    assert small.scale == 1.0 and small.images == 2
    assert small.to_dict()["pixels_per_channel"] == 2 * 9
    assert small.mean == normstats.compute(tmp_path / "imgs", resize=3, scale=1.0).mean
    with pytest.raises(NormstatsError, match="exceeds"):
        compute_manifest(manifest, str(tmp_path), workers=1, max_pixels=10, on_error="fail")
    options = manifests.ReadOptions(center_crop=4)
    cropped = compute_manifest(manifest, str(tmp_path), options=options, workers=1)
    assert cropped.to_dict()["pixels_per_channel"] == 2 * 16


def test_resize_and_center_crop_together_apply_once_each(tmp_path: Path) -> None:
    """Both transforms, in torchvision's order: the shorter side to 4 (6×8 → 4×5), then the
    central 3×3; neither is lost nor applied twice when the result is computed."""
    fw.write_folder(tmp_path / "imgs", fw.images(7, 3, 6, 8, 3))
    manifest = _manifest(("imgs",), format="folder")
    both = compute_manifest(manifest, str(tmp_path), workers=1, resize=4, center_crop=3)
    alone = normstats.compute(tmp_path / "imgs", resize=4, center_crop=3, cache=False,
                              workers=1)
    assert both.pixels_per_channel == 3 * 3 * 3
    assert both == alone and both.mode == alone.mode == "RGB, Resize(4), CenterCrop(3)"


def test_a_file_listed_twice_is_read_once_and_several_files_are_one_source(
        tmp_path: Path) -> None:
    for i in (1, 2):
        fw.write_cifar_python(tmp_path / f"b{i}", fw.images(i, 2, 32, 32, 3))
    manifest = _manifest(("b1", "b2", "./b1"), format="cifar-python")
    source = open_manifest_source(manifest, str(tmp_path))
    assert len(source) == 4 and source.description == f"{tmp_path} (toy)"
    assert [(s.path, s.reason, s.kind) for s in source.skipped] == [
        (f"{tmp_path}/b1", f"same file as {tmp_path}/b1 (listed twice in manifest toy); "
                             "read once", SkipKind.DUPLICATE)]
    one = open_manifest_source(_manifest(("b1",), format="cifar-python"), str(tmp_path))
    assert len(one) == 2 and tuple(one.skipped) == ()


def test_a_root_holding_the_downloaded_archive_says_to_extract_it(tmp_path: Path) -> None:
    """The official CIFAR-10 download is cifar-10-python.tar.gz; the manifest names the
    batches inside it. Verify and compute said only "not found under the root". An archive
    normstats cannot tell is the download (a WebDataset shard, say) is named too, and the
    advice is conditional: it once said the manifest's files were inside any archive."""
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"")
    expected = (f"{tmp_path}/cifar-10-batches-py/data_batch_1: file of manifest cifar10-train "
                f"not found under the root {tmp_path}; the root holds the archive "
                "cifar-10-python.tar.gz: if the manifest's files are inside it, extract it "
                f"first (tar -xf {tmp_path}/cifar-10-python.tar.gz -C {tmp_path})")
    for command in (["verify", "cifar10-train"], ["compute", "--manifest", "cifar10-train"]):
        result = CliRunner().invoke(main, [*command, "--root", str(tmp_path)])
        assert result.exit_code == 1 and result.output == f"normstats: error: {expected}\n"
    (tmp_path / "cifar-10-python.tar.gz").rename(tmp_path / "cifar-10-python.zip")
    with pytest.raises(NormstatsError, match=r"extract it first \(unzip .*cifar-10-python.zip "
                                             rf"-d {tmp_path}\)$"):
        open_manifest_source(load_manifest("cifar10-train"), str(tmp_path))


def test_a_missing_file_or_a_fifo_is_refused_before_reading(tmp_path: Path) -> None:
    with pytest.raises(NormstatsError) as caught:
        open_manifest_source(_manifest(("gone",)), str(tmp_path))
    assert str(caught.value) == (f"{tmp_path}/gone: file of manifest toy not found under the "
                                 f"root {tmp_path}")
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(RefusedInputError) as refused:
        open_manifest_source(_manifest(("pipe",)), str(tmp_path))
    assert refused.value.path == f"{tmp_path}/pipe" and "FIFO" in str(refused.value)


def test_the_manifest_s_members_extensions_counts_and_limits_reach_the_readers(
        tmp_path: Path) -> None:
    rgb = fw.images(7, 3, 4, 4, 3)
    fw.write_tar(tmp_path / "s.tar", rgb)
    with pytest.raises(NormstatsError, match="holds 3 samples but its index says 2"):
        open_manifest_source(_manifest(("s.tar",), format="tar", counts={"s.tar": 2}),
                             str(tmp_path))
    with pytest.raises(NormstatsError, match="no usable image|no image"):
        compute_manifest(_manifest(("s.tar",), format="tar", image_ext="jpg"), str(tmp_path),
                         workers=1)
    np.savez(tmp_path / "two.npz", a=rgb[:1], b=rgb)
    assert len(open_manifest_source(_manifest(("two.npz",), format="npz", member="b"),
                                    str(tmp_path))) == 3
    fw.write_folder(tmp_path / "imgs", rgb)
    with pytest.raises(NormstatsError, match="over the limit of 10 bytes"):
        compute_manifest(_manifest(("imgs",), format="folder"), str(tmp_path), workers=1,
                         max_file_bytes=10)
    idx = fw.write_idx(tmp_path / "a-idx3-ubyte", rgb[..., 0])
    assert open_manifest_source(_manifest((idx.name,), channels=("Y",)),
                                str(tmp_path)).channel_names == ("Y",)
    np.save(tmp_path / "a.npy", rgb)
    assert open_manifest_source(_manifest(("a.npy",), format="npy", channels=("X", "Y", "Z")),
                                str(tmp_path)).channel_names == ("X", "Y", "Z")


def test_a_file_format_stops_at_the_first_damaged_member_when_asked(tmp_path: Path) -> None:
    import io
    import tarfile

    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for name, data in (("0.png", fw.png_bytes(fw.images(1, 1, 3, 3, 3)[0])),
                           ("1.png", b"broken")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    manifest = _manifest(("s.tar",), format="tar")
    assert compute_manifest(manifest, str(tmp_path), workers=1).images == 1
    with pytest.raises(NormstatsError, match="1.png"):
        compute_manifest(manifest, str(tmp_path), workers=1, on_error="fail")


def test_the_format_is_the_manifest_s_not_a_guess(tmp_path: Path) -> None:
    import zarr

    zarr.create_array(tmp_path / "a.zarr", shape=(2, 3, 3, 1), chunks=(1, 3, 3, 1),
                      dtype="uint8")[:] = 9
    assert compute_manifest(_manifest(("a.zarr",), format="zarr"), str(tmp_path),
                            workers=1).images == 2
    with pytest.raises(NormstatsError):
        compute_manifest(_manifest(("a.zarr",), format="npy"), str(tmp_path), workers=1)


def test_compute_manifest_passes_the_analyses_on(tmp_path: Path) -> None:
    fw.write_folder(tmp_path / "imgs", fw.images(8, 2, 4, 4, 3))
    seen = []
    stats = compute_manifest(_manifest(("imgs",), format="folder"), str(tmp_path), workers=1,
                             on_result=lambda result: seen.append(len(result.records)))
    assert sum(seen) == stats.images == 2


def test_a_root_at_the_top_of_the_file_system_holds_everything() -> None:
    assert resolve_path(_manifest(), "/", "tmp") == "/tmp"


def test_every_checksum_is_checked_after_a_stand_in(tmp_path: Path) -> None:
    (tmp_path / "t10k").write_bytes(b"raw")
    (tmp_path / "r.gz").write_bytes(gzip.compress(b"r", mtime=0))
    (tmp_path / "a").write_bytes(b"abc")
    wrong, right = "md5:" + "0" * 32, "md5:" + hashlib.md5(b"abc").hexdigest()
    lines = verify_checksums(_checksummed(tmp_path, **{"t10k.gz": wrong, "r.gz": wrong,
                                                       "a": right}), str(tmp_path))
    assert [line.split(":")[0] for line in lines] == ["t10k.gz", "r.gz", "a"]
    for first in ("t10k.gz", "r.gz"):
        with pytest.raises(NormstatsError, match="md5 checksum mismatch"):
            verify_checksums(_checksummed(tmp_path, **{first: wrong, "a": wrong}),
                             str(tmp_path))
