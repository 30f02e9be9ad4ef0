"""Shipped manifests, the schema check, paths kept inside the root, checksums."""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from normstats.analyses.manifests import (
    list_manifests,
    load_manifest,
    open_manifest_source,
    resolve_path,
    verify_checksums,
)
from normstats.errors import NormstatsError
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
