import os

import pytest

import normstats
from normstats.errors import NormstatsError, RefusedInputError, SkipKind
from normstats.sources.path_patterns import (
    expand_braces,
    expand_paths,
    is_pattern,
    missing_reason,
    one_path_per_file,
    regular_files,
)


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


def test_one_path_per_file_keeps_the_first_path_of_each_file(tmp_path):
    """By device and inode: spellings, symbolic and hard links are one file; two members
    of one .npz are two datasets; a path that cannot be stat'ed is kept for its reader."""
    for name in ("a.npy", "d.npz"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "soft.npy").symlink_to(tmp_path / "a.npy")
    os.link(tmp_path / "a.npy", tmp_path / "hard.npy")
    a, npz = str(tmp_path / "a.npy"), str(tmp_path / "d.npz")
    paths = [a, str(tmp_path / "." / "a.npy"), str(tmp_path / "soft.npy"),
             str(tmp_path / "hard.npy"), f"{npz}:x", f"{npz}:y", f"{npz}:x",
             str(tmp_path / "gone.npy"), str(tmp_path / "gone.npy")]
    skipped = []
    assert one_path_per_file(paths, skipped) == [a, f"{npz}:x", f"{npz}:y"] + paths[-2:]
    assert [(s.path, s.reason, s.kind) for s in skipped] == [
        (path, f"same file as {first} (named twice); read once", SkipKind.DUPLICATE)
        for path, first in zip(paths[1:4] + [paths[6]], [a, a, a, f"{npz}:x"])]


def test_a_folder_listing_skips_what_is_not_a_regular_file_unopened(tmp_path):
    os.mkfifo(tmp_path / "s-1.tar")
    (tmp_path / "s-0.tar").write_bytes(b"x")
    (tmp_path / "s-2.tar").symlink_to(tmp_path / "s-0.tar")
    paths = [str(tmp_path / f"s-{i}.tar") for i in range(3)]
    skipped = []
    assert regular_files(paths, skipped, fail_fast=False) == paths[:1]
    assert [(s.path, s.reason, s.kind) for s in skipped] == [
        (paths[1], "not a regular file (a FIFO (named pipe)); only regular files are read",
         SkipKind.REFUSED),
        (paths[2], f"same file as {paths[0]} (a hard or symbolic link); read once",
         SkipKind.DUPLICATE)]
    with pytest.raises(RefusedInputError, match=r"s-1\.tar: not a regular file"):
        regular_files(paths, [], fail_fast=True)


def test_a_missing_path_says_why(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert missing_reason(str(tmp_path / "loop")) == (
        "a symbolic link loop (ELOOP): following its links never reaches a file or folder")
    assert missing_reason(str(tmp_path / "dangling")) == \
        f"a symbolic link to {tmp_path / 'nowhere'}, which does not exist"
    assert missing_reason(str(tmp_path / "typo")) == "no such file or folder"


def test_a_missing_path_a_shell_would_have_expanded_says_so(tmp_path, monkeypatch):
    """'~/data' and '$DATA/train' given from Python (or quoted) name the path a shell would
    have read, and whether it exists; a pasted space is named; a plain typo gets neither."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NORMSTATS_TEST_DATA", str(tmp_path / "data"))
    cases = {
        "~/data": f"(a shell would read {tmp_path}/data, which exists; Python expands no ~",
        "$NORMSTATS_TEST_DATA/train": f"(a shell would read {tmp_path}/data/train, which "
                                      "does not exist either;",
        str(tmp_path / "data") + " ": "no such file or folder (the path ends with white space)",
    }
    for given, hint in cases.items():
        with pytest.raises(NormstatsError, match="no such file or folder") as caught:
            normstats.compute(given, cache=False)
        assert hint in str(caught.value)
    with pytest.raises(NormstatsError) as typo:
        normstats.compute(str(tmp_path / "dta"), cache=False)
    assert str(typo.value).endswith("dta: no such file or folder")
