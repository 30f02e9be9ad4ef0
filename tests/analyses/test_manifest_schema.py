"""The manifest schema: every key parsed to its exact value, every refusal's exact message.

Each case calls the parser on a small in-memory document (a parsed TOML table), so it
runs in microseconds; the file-level checks (TOML syntax, symlinks, checksums of real
files) are in ``test_manifests.py``.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from normstats.analyses.manifest_schema import (
    CLAIMABLE,
    Manifest,
    Reference,
    SourceSpec,
    check_relative,
    manifest_error,
    parse_checksum,
    parse_manifest,
    parse_reference,
    parse_source,
)
from normstats.errors import NormstatsError

WHERE = "m.toml"
MD5 = "0123456789abcdef" * 2
SHA = "fedcba9876543210" * 4


def document(**changes: Any) -> dict[str, Any]:
    """A valid manifest document, with top-level keys changed (None removes one)."""
    data: dict[str, Any] = {
        "name": "toy", "dataset": "Toy", "split": "train", "description": "d",
        "source": {"format": "idx", "files": ["a-idx3-ubyte"]},
        "references": [{"label": "x", "source": "y", "mean": [0.5]}]}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def source(**changes: Any) -> dict[str, Any]:
    table: dict[str, Any] = {"format": "idx", "files": ["a"]}
    table.update(changes)
    return {k: v for k, v in table.items() if v is not None}


def refused(call: Any, *args: Any) -> str:
    """The one-line message of the manifest error ``call(*args)`` raises."""
    with pytest.raises(NormstatsError) as caught:
        call(*args)
    assert caught.value.path == WHERE
    return str(caught.value)


def test_the_error_names_the_manifest_and_says_invalid_manifest() -> None:
    error = manifest_error("where.toml", "a reason")
    assert isinstance(error, NormstatsError) and error.path == "where.toml"
    assert str(error) == "where.toml: invalid manifest: a reason"


def test_a_full_manifest_parses_to_exact_values() -> None:
    data = document(homepage="https://h", source=source(
        format="tar", files=["s/a.tar", "s/b.tar"], mode="L", images=7, channels=["Y"],
        member="x_train", image_ext="png", layout="HWC",
        checksums={"s/a.tar": "MD5:" + MD5.upper(), "s/b.tar": "sha256:" + SHA},
        counts={"s/a.tar": 3, "s/b.tar": 4}), references=[
        {"label": "one", "source": "src", "note": "n", "scale": 255, "tolerance": 0,
         "decides": False, "mean": [1, 2.5], "std": [3.0, 4]},
        {"label": "two", "source": "s2", "per_image_std_ddof1": [0.25]}])
    assert parse_manifest(data, WHERE) == Manifest(
        name="toy", dataset="Toy", split="train", description="d",
        source=SourceSpec(format="tar", files=("s/a.tar", "s/b.tar"), mode="L", images=7,
                          channels=("Y",), member="x_train", image_ext="png", layout="HWC",
                          checksums={"s/a.tar": "md5:" + MD5, "s/b.tar": "sha256:" + SHA},
                          counts={"s/a.tar": 3, "s/b.tar": 4}),
        references=(Reference("one", "src", {"mean": (1.0, 2.5), "std": (3.0, 4.0)},
                              255.0, 0.0, "n", False),
                    Reference("two", "s2", {"per_image_std_ddof1": (0.25,)})),
        homepage="https://h", path=WHERE)


def test_optional_keys_take_their_defaults() -> None:
    manifest = parse_manifest(document(references=None), WHERE)
    assert manifest.references == () and manifest.homepage == "" and manifest.path == WHERE
    assert manifest.source == SourceSpec("idx", ("a-idx3-ubyte",))
    assert manifest.source.mode == "RGB" and manifest.source.images is None
    assert (manifest.source.channels, manifest.source.member, manifest.source.image_ext,
            manifest.source.layout) == (None, None, None, None)
    assert manifest.source.checksums == {} and manifest.source.counts == {}
    reference = parse_reference({"label": "x", "source": "y", "max": [255]}, WHERE, 0)
    assert reference == Reference("x", "y", {"max": (255.0,)}, 1.0, 5e-5, "", True)
    assert type(reference.values["max"][0]) is float
    empty = parse_source(source(mode="", member="", image_ext="", layout=""), WHERE)
    assert (empty.mode, empty.member, empty.image_ext, empty.layout) == ("RGB", None, None, None)


def test_values_of_every_claimable_variant_are_kept_in_order() -> None:
    table = {"label": "x", "source": "y", **{k: [i, i + 0.5] for i, k in enumerate(CLAIMABLE)}}
    values = parse_reference(table, WHERE, 0).values
    assert list(values) == list(CLAIMABLE)
    assert values == {k: (float(i), i + 0.5) for i, k in enumerate(CLAIMABLE)}
    assert CLAIMABLE == ("mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                         "rms_per_image_std", "min", "max")


TOP_KEYS = "dataset, description, homepage, name, references, source, split"
SOURCE_KEYS = ("channels, checksums, counts, files, format, image_ext, images, layout, member, "
               "mode")
REFERENCE_KEYS = ("decides, label, max, mean, min, note, per_image_std, per_image_std_ddof1, "
                  "rms_per_image_std, scale, source, std, std_ddof1, tolerance")


@pytest.mark.parametrize(("data", "message"), [
    (document(colour=1, b=2), f"unknown keys b, colour in the manifest; allowed: {TOP_KEYS}"),
    (document(references={"label": "x"}),
     "'references' must be an array of tables ([[references]])"),
    (document(name=None), "'name' must be a non-empty string, got None"),
    (document(name=" "), "'name' must be a non-empty string, got ' '"),
    (document(dataset=3), "'dataset' must be a non-empty string, got 3"),
    (document(split=""), "'split' must be a non-empty string, got ''"),
    (document(description=["d"]), "'description' must be a non-empty string, got ['d']"),
    (document(homepage=1), "'homepage' must be a non-empty string, got 1"),
    (document(source=None), "missing [source] table"),
    (document(source=["idx"]), "missing [source] table"),
], ids=lambda v: str(v)[:40])
def test_manifest_level_refusals(data: dict[str, Any], message: str) -> None:
    assert refused(parse_manifest, data, WHERE) == f"{WHERE}: invalid manifest: {message}"


FILES = "'source.files' must be a non-empty list of relative paths"


@pytest.mark.parametrize(("table", "message"), [
    (source(colour=1), f"unknown key colour in [source]; allowed: {SOURCE_KEYS}"),
    (source(files=None), FILES),
    (source(files="a"), FILES),
    (source(files=[]), FILES),
    (source(files=["a", 3]), FILES),
    (source(format=None), "'format' must be a non-empty string, got None"),
    (source(format=" "), "'format' must be a non-empty string, got ' '"),
    (source(mode=1), "'mode' must be a non-empty string, got 1"),
    (source(member=2), "'member' must be a non-empty string, got 2"),
    (source(image_ext=False), "'image_ext' must be a non-empty string, got False"),
    (source(layout=["HWC"]), "'layout' must be a non-empty string, got ['HWC']"),
    (source(checksums="md5:0"),
     "'source.checksums' must be a table of file = value ([source.checksums]), got 'md5:0'"),
    (source(counts=[1]), "'source.counts' must be a table of file = value ([source.counts]), "
                         "got [1]"),
    (source(counts={"a": 0}), "'source.counts['a']' must be a positive integer, got 0"),
    (source(counts={"a": True}), "'source.counts['a']' must be a positive integer, got True"),
    (source(counts={"a": 1.0}), "'source.counts['a']' must be a positive integer, got 1.0"),
    (source(images=0), "'source.images' must be a positive integer, got 0"),
    (source(images=-3), "'source.images' must be a positive integer, got -3"),
    (source(images=True), "'source.images' must be a positive integer, got True"),
    (source(images="5"), "'source.images' must be a positive integer, got '5'"),
    (source(channels="RGB"), "'source.channels' must be a list of channel names such as "
                             "[\"R\", \"G\", \"B\"], got 'RGB'"),
    (source(channels=[]), "'source.channels' must be a list of channel names such as "
                          "[\"R\", \"G\", \"B\"], got []"),
    (source(channels=["R", ""]), "'source.channels' must be a list of channel names such as "
                                 "[\"R\", \"G\", \"B\"], got ['R', '']"),
    (source(channels=["R", 1]), "'source.channels' must be a list of channel names such as "
                                "[\"R\", \"G\", \"B\"], got ['R', 1]"),
    (source(files=["../x"]), "path '../x' escapes the dataset root (it must be relative, "
                             "without '..')"),
    (source(checksums={"/x": "md5:" + MD5}), "path '/x' escapes the dataset root (it must be "
                                             "relative, without '..')"),
    (source(checksums={"a": "md5:0"}), "checksum of 'a' must be 'md5:<32 hex>' or "
                                        "'sha256:<64 hex>', got 'md5:0'"),
    (source(counts={"a/../../x": 1}), "path 'a/../../x' escapes the dataset root (it must "
                                      "be relative, without '..')"),
], ids=lambda v: str(v)[:40])
def test_source_refusals(table: dict[str, Any], message: str) -> None:
    assert refused(parse_source, table, WHERE) == f"{WHERE}: invalid manifest: {message}"


def test_a_table_of_one_count_and_one_image_is_accepted() -> None:
    spec = parse_source(source(images=1, counts={"a": 1}, channels=["R", "G"]), WHERE)
    assert (spec.images, spec.counts, spec.channels) == (1, {"a": 1}, ("R", "G"))


def reference(**changes: Any) -> dict[str, Any]:
    table: dict[str, Any] = {"label": "x", "source": "y", "mean": [0.5]}
    table.update(changes)
    return {k: v for k, v in table.items() if v is not None}


@pytest.mark.parametrize(("table", "message"), [
    ("not a table", "references[4] must be a table"),
    (reference(colour=1), f"unknown key colour in references[4]; allowed: {REFERENCE_KEYS}"),
    (reference(mean=None), "references[4] publishes no values (give any of mean, std, "
                           "std_ddof1, per_image_std, per_image_std_ddof1, rms_per_image_std, "
                           "min, max)"),
    (reference(mean=[]), "references[4].mean must be a list of numbers"),
    (reference(std=0.2), "references[4].std must be a list of numbers"),
    (reference(mean=[0.5, "1"]), "'references[4].mean' must be a finite number, got '1'"),
    (reference(mean=[True]), "'references[4].mean' must be a finite number, got True"),
    (reference(mean=[math.nan]), "'references[4].mean' must be a finite number, got nan"),
    (reference(mean=[-math.inf]), "'references[4].mean' must be a finite number, got -inf"),
    (reference(scale="1"), "'references[4].scale' must be a finite number, got '1'"),
    (reference(tolerance=math.inf), "'references[4].tolerance' must be a finite number, "
                                    "got inf"),
    (reference(scale=0), "references[4]: scale must be positive and tolerance not negative"),
    (reference(scale=-1.0), "references[4]: scale must be positive and tolerance not negative"),
    (reference(tolerance=-1e-9), "references[4]: scale must be positive and tolerance not "
                                 "negative"),
    (reference(decides=1), "references[4].decides must be true or false, got 1"),
    (reference(decides="yes"), "references[4].decides must be true or false, got 'yes'"),
    (reference(label=None), "'label' must be a non-empty string, got None"),
    (reference(source=""), "'source' must be a non-empty string, got ''"),
    (reference(note=5), "'note' must be a non-empty string, got 5"),
], ids=lambda v: str(v)[:40])
def test_reference_refusals(table: Any, message: str) -> None:
    assert refused(parse_reference, table, WHERE, 4) == f"{WHERE}: invalid manifest: {message}"


def test_a_reference_refusal_inside_a_manifest_names_its_index() -> None:
    data = document(references=[reference(), reference(), reference(scale=0)])
    assert refused(parse_manifest, data, WHERE) == (
        f"{WHERE}: invalid manifest: references[2]: scale must be positive and tolerance not "
        "negative")


@pytest.mark.parametrize(("value", "parsed"), [
    ("md5:" + MD5, "md5:" + MD5),
    ("MD5:" + MD5.upper(), "md5:" + MD5),
    ("sha256:" + SHA, "sha256:" + SHA),
    ("Sha256:" + SHA.upper(), "sha256:" + SHA),
])
def test_checksums_are_lower_cased(value: str, parsed: str) -> None:
    assert parse_checksum(value, WHERE, "f") == parsed


@pytest.mark.parametrize("value", [
    "md5:" + MD5[:-1], "md5:" + MD5 + "0", "md5:" + MD5[:-1] + "g", "sha256:" + SHA[:-1],
    "sha256:" + SHA + "a", "sha256:" + MD5, "md5:" + SHA, "crc:" + MD5, MD5, "sha1:" + "0" * 40,
    "md5:md5:" + MD5[:28], None, 5,
])
def test_malformed_checksums_are_refused(value: Any) -> None:
    assert refused(parse_checksum, value, WHERE, "f") == (
        f"{WHERE}: invalid manifest: checksum of 'f' must be 'md5:<32 hex>' or "
        f"'sha256:<64 hex>', got {value!r}")


@pytest.mark.parametrize("name", ["a", "a/b/c.png", "a\\b", ".hidden", "a..b", "ab:c",
                                  "x/./y", "c"])
def test_relative_names_pass(name: str) -> None:
    assert check_relative(name, WHERE) is None


@pytest.mark.parametrize("name", ["", "/etc/passwd", "..", "../a", "a/../../b", "a\\..\\b",
                                  "\\\\server\\share", "C:", "c:\\windows", "d:/x"])
def test_names_that_leave_the_root_are_refused(name: str) -> None:
    assert refused(check_relative, name, WHERE) == (
        f"{WHERE}: invalid manifest: path {name!r} escapes the dataset root (it must be "
        "relative, without '..')")


def test_a_nul_character_is_refused_before_anything_else() -> None:
    assert refused(check_relative, "a\0b", WHERE) == (
        f"{WHERE}: invalid manifest: path 'a\\x00b' holds a NUL character")
