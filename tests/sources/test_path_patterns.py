import pytest

from normstats.errors import NormstatsError
from normstats.sources.path_patterns import expand_braces, expand_paths, is_pattern


@pytest.mark.parametrize("text, expected", [
    ("shard-{000000..000002}.tar", ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]),
    ("s{9..11}", ["s9", "s10", "s11"]),
    ("s{3..1}", ["s3", "s2", "s1"]),
    ("{a,b}{1..2}", ["a1", "a2", "b1", "b2"]),
    ("x{a,{b,c}}y", ["xay", "xby", "xcy"]),
    ("{x}.png", ["{x}.png"]),       # no comma, no range: literal, as in bash
    ("{open.png", ["{open.png"]),   # unmatched: literal
    ("plain.tar", ["plain.tar"]),
])
def test_braces_expand_as_bash_does(text, expected):
    assert expand_braces(text) == expected


def test_a_huge_range_is_refused_not_built():
    with pytest.raises(NormstatsError, match="more than"):
        expand_braces("s-{0..99999999}.tar")


def test_globs_are_sorted_and_an_existing_name_is_taken_literally(tmp_path):
    for name in ("b.tar", "a.tar", "c.png", "{odd}.tar"):
        (tmp_path / name).write_bytes(b"x")
    assert expand_paths(str(tmp_path / "*.tar")) == [
        str(tmp_path / n) for n in ("a.tar", "b.tar", "{odd}.tar")]
    assert expand_paths(str(tmp_path / "{odd}.tar")) == [str(tmp_path / "{odd}.tar")]
    assert expand_paths([str(tmp_path / "c.png"), str(tmp_path / "{a,b}.tar")]) == [
        str(tmp_path / n) for n in ("c.png", "a.tar", "b.tar")]
    assert is_pattern("x/*.tar") and not is_pattern("x/a.tar")


def test_a_pattern_matching_nothing_and_a_missing_brace_member_are_named(tmp_path):
    (tmp_path / "s-0.tar").write_bytes(b"x")
    with pytest.raises(NormstatsError, match=r"\*\.parquet: no file matches"):
        expand_paths(str(tmp_path / "*.parquet"))
    with pytest.raises(NormstatsError, match=r"s-1\.tar: no such file \(from the brace"):
        expand_paths(str(tmp_path / "s-{0..1}.tar"))
