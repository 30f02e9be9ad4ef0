"""Fuzz target: manifest files (TOML), through `load_manifest` and `parse_manifest`.

A manifest comes from anywhere (`normstats verify my.toml`), so its parser is a parser of
untrusted bytes. Hypothesis starts from every shipped manifest and damages it twice over:
as text (flipped and cut bytes, spliced TOML fragments) and as data (keys dropped, values
replaced by values of every TOML type, files that climb out of the root). Property: a
`Manifest`, or a one-line `NormstatsError` naming the file; never another exception, and
no accepted manifest names a file outside its root.
"""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path

from fuzz.fuzzing import fuzz_settings, regression_inputs
from hypothesis import given
from hypothesis import strategies as st

from normstats import NormstatsError
from normstats.analyses.manifests import load_manifest, manifest_paths, parse_manifest

_SHIPPED = {Path(p).name: Path(p).read_bytes() for p in manifest_paths()}

_FRAGMENTS = [b'files = ["../../etc/passwd"]', b'files = ["/abs/path"]', b"images = -1",
              b"images = 1e400", b"scale = 0.0", b"scale = nan", b"tolerance = -1.0",
              b"mean = []", b"mean = [inf]", b'mean = ["x"]', b"[[references]]",
              b"[source]", b'format = "pickle"', b"channels = 7", b"\x00", b'"""',
              b"[source.checksums]", b'"a" = "md5:zz"', b"= =", b"\xff\xfe"]

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True), st.text(max_size=12),
                    st.lists(st.one_of(st.integers(-5, 300), st.floats(), st.text(max_size=4)),
                             max_size=4),
                    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3))


@st.composite
def damaged_text(draw) -> bytes:
    data = bytearray(_SHIPPED[draw(st.sampled_from(sorted(_SHIPPED)))])
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "cut", "splice"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        else:
            data[at:at] = b"\n" + draw(st.sampled_from(_FRAGMENTS)) + b"\n"
    return bytes(data)


def _accepts_only_paths_inside(manifest) -> None:
    for name in manifest.source.files:
        parts = Path(name).parts
        assert not Path(name).is_absolute() and ".." not in parts, name


@fuzz_settings(200)
@given(damaged_text())
def test_damaged_manifest_text_is_parsed_or_refused_in_one_line(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mine.toml"
        path.write_bytes(data)
        try:
            manifest = load_manifest(str(path))
        except NormstatsError as error:
            assert "\n" not in str(error) and "mine.toml" in str(error)
            return
    _accepts_only_paths_inside(manifest)


@st.composite
def damaged_data(draw) -> dict:
    data = tomllib.loads(_SHIPPED[draw(st.sampled_from(sorted(_SHIPPED)))].decode())
    tables = [data, data["source"], *data.get("references", [])]
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(tables))
        if not table:
            continue
        key = draw(st.sampled_from(sorted(table)))
        if draw(st.booleans()):
            del table[key]
        else:
            table[key] = draw(_VALUES)
    return data


@fuzz_settings(300)
@given(damaged_data())
def test_damaged_manifest_values_are_parsed_or_refused_in_one_line(data: dict) -> None:
    try:
        manifest = parse_manifest(data, "mine.toml")
    except NormstatsError as error:
        assert "\n" not in str(error) and "mine.toml" in str(error)
        return
    _accepts_only_paths_inside(manifest)


def test_saved_manifest_regressions_are_refused_in_one_line() -> None:
    saved = regression_inputs("manifests")
    assert saved, "the saved inputs of this target are missing"
    for path in saved:
        try:
            load_manifest(str(path))
        except NormstatsError as error:
            assert "\n" not in str(error) and path.name in str(error)
        else:
            raise AssertionError(f"{path.name} was accepted")
