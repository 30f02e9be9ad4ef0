"""The folder walk against an oracle: os.walk and os.stat, one file at a time.

The oracle spells out the walk's contract in the plainest code: folders depth first in
name order, each entered once, links followed; image extensions by ``splitext``;
regular files only; each physical file once, at its first path in sorted order; sizes,
mtimes and change stamps from a plain ``os.stat``, with the stamp of a mask sidecar
(``<name>.msk``, else ``<name>.MSK``) folded in. The tree under test has everything that
has ever been a special case.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from normstats.errors import SkipKind
from normstats.maths.records import Skipped
from normstats.sources import walk as walk_module
from normstats.sources.decoding.policy import IMAGE_EXTENSIONS
from normstats.sources.decoding.sidecar import sidecar_stamp
from normstats.sources.file_list import FileList, change_stamp
from normstats.sources.walk import list_named_files, walk_images

INT64 = np.iinfo(np.int64)
FIFO = "not a regular file (a FIFO (named pipe)); only regular files are read"


def oracle_walk(root: str, confine_to: str | None = None) -> tuple[FileList, tuple, int]:
    """What `walk_images` must return, by os.walk and os.stat."""
    boundary = None if confine_to is None else os.path.realpath(confine_to)
    seen, named, skipped, ignored = set(), [], [], 0
    for folder, subfolders, names in os.walk(root, followlinks=True):
        info = os.stat(folder)
        if (info.st_dev, info.st_ino) in seen:
            subfolders.clear()  # a loop, or a folder already walked by another path
            continue
        seen.add((info.st_dev, info.st_ino))
        prefix = os.path.relpath(folder, root)
        rel = {name: os.path.normpath(os.path.join(prefix, name)) for name in subfolders + names}
        for name in list(subfolders) + list(names):
            path = os.path.join(folder, name)
            target = os.path.realpath(path)
            if boundary is not None and os.path.islink(path) and target != boundary and \
                    not target.startswith(boundary + os.sep):
                skipped.append(Skipped(rel[name], f"a link out of the dataset root "
                                                  f"{boundary} (to {target}); not followed",
                                       SkipKind.REFUSED))
                (subfolders if name in subfolders else names).remove(name)
        subfolders.sort()
        for name in names:
            if os.path.splitext(name)[1].lower() in IMAGE_EXTENSIONS:
                named.append((rel[name], os.path.join(folder, name)))
            else:
                ignored += 1
    files = oracle_stat(named, skipped)
    return files, tuple(sorted(skipped, key=lambda s: s.path)), ignored


def oracle_stat(named: list[tuple[str, str]], skipped: list[Skipped]) -> FileList:
    """The regular files among (relative path, path), each (device, inode) once."""
    first: dict[tuple[int, int], str] = {}
    rows = []
    for rel, path in sorted(named):
        try:
            info = os.stat(path)
        except OSError as error:
            skipped.append(Skipped(rel, f"cannot stat file: {error.strerror}",
                                   SkipKind.TRANSIENT))
            continue
        if not stat.S_ISREG(info.st_mode):
            skipped.append(Skipped(rel, FIFO, SkipKind.REFUSED))
        elif (info.st_dev, info.st_ino) in first:
            skipped.append(Skipped(rel, f"same file as {first[info.st_dev, info.st_ino]} "
                                        "(a hard or symbolic link); counted once",
                                   SkipKind.DUPLICATE))
        else:
            first[info.st_dev, info.st_ino] = rel
            mtime, ctime = (min(max(t, INT64.min), INT64.max)
                            for t in (info.st_mtime_ns, info.st_ctime_ns))
            rows.append((rel, info.st_size, mtime,
                         change_stamp(info.st_ino, ctime) ^ oracle_sidecar(path)))
    return FileList.from_columns(*zip(*rows))


def oracle_sidecar(path: str) -> int:
    """The stamp folded into a file's for its mask sidecar: 0 without one."""
    for suffix in (".msk", ".MSK"):
        if os.path.exists(path + suffix):  # a dangling link is none
            return sidecar_stamp(os.stat(path + suffix)) or 1
    return 0


def write(path: Path | bytes, size: int = 3) -> None:
    with open(path, "wb") as handle:
        handle.write(b"x" * size)


def tricky_tree(tmp_path: Path) -> Path:
    """Names that sort differently with '/', '.' and '-', cases, hidden and non-image
    names, links of every kind, a loop, a FIFO, undecodable bytes, a folder of more
    files than a stat batch, and dates outside int64 nanoseconds."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    for folder in ("a/b/c", "a-b", "a.b", "folder.png", "big", "Z"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    outside.mkdir()
    write(outside / "o.png")
    names = ["a.png", "a-b.png", "a.b.png", "a0.png", "UP.JPG", "mixed.JpEg", "t.TIFF",
             ".h.png", ".png", "..png", "notes.txt", "png", "x.png.txt", "é.png",
             "\u212a.png", "i.g\u0130f", "a/x.png", "a/b/c/d.png", "a-b/y.PNG",
             "a.b/z.png", "folder.png/inner.png", "Z/z.webp"]
    for size, name in enumerate(names):
        write(root / name, size)
    for i in range(600):  # more than a stat batch, with failures among them
        write(root / "big" / f"{i:04d}.png", i % 7)
    # mask sidecars: after a file whose stat fails and a FIFO, in upper case, both cases
    # (".msk" wins), of no image, dangling, on a link, in a folder with subfolders
    for name in ("big/0301.png.msk", "big/0401.png.msk", "a/b/c/d.png.MSK",
                 "a0.png.msk", "a0.png.MSK", "notes.msk", "0link.png.msk", "a.png.msk",
                 "Z/z.webp.msk"):
        write(root / name, len(name))
    os.symlink("nowhere.msk", root / "a-b.png.msk")
    links = {"0link.png": "a.png", "z-link.png": "a-b/y.PNG", "linked-dir": "a",
             "0dir": "a.b", "ghost.png": "nowhere.png", "a/loop": "..",
             "big/0300-ghost.png": "gone.png", "out.png": str(outside / "o.png"),
             "outdir": str(outside)}
    for name, target in links.items():
        os.symlink(target, root / name)
    os.link(root / "a" / "x.png", root / "hard.png")
    os.link(root / "a" / "x.png", root / "big" / "0500-hard.png")
    if hasattr(os, "mkfifo"):
        os.mkfifo(root / "pipe.png")
        os.mkfifo(root / "big" / "0400-pipe.png")
    if os.name == "posix":  # names that are not UTF-8: surrogate escapes
        write(os.path.join(os.fsencode(root), b"caf\xe9.png"))
        os.mkdir(os.path.join(os.fsencode(root), b"\xff"))
        write(os.path.join(os.fsencode(root), b"\xff", b"\xfe.png"))
    for name, ns in (("a0.png", -(10**18)), ("UP.JPG", 10**19), ("t.TIFF", -(10**19))):
        try:
            os.utime(root / name, ns=(0, ns))
        except (OSError, OverflowError):
            pass  # a file system that cannot keep that date: the walk sees what it keeps
    return root


@pytest.fixture
def tree(tmp_path) -> str:
    return str(tricky_tree(tmp_path))


def as_tuple(result) -> tuple[FileList, tuple, int]:
    return result.files, result.skipped, result.ignored


@pytest.mark.parametrize("stat_in_c", [True, False])
@pytest.mark.parametrize(("batch", "stat_batch", "threads"),
                         [(256, 4096, 2), (3, 4096, 1), (3, 200, 3), (256, 5, 1)])
@pytest.mark.parametrize("by_descriptor", [True, False])
def test_the_walk_is_the_oracles_walk(tree, monkeypatch, by_descriptor, batch, stat_batch,
                                      threads, stat_in_c):
    """Relative to open folders or by paths (Windows), in batches of any size, stat'ed by
    the C loop (built with normstats; batches of any size on 1 to 3 threads) or by
    Python."""
    monkeypatch.setattr(walk_module, "_BY_DESCRIPTOR", by_descriptor and
                        walk_module._BY_DESCRIPTOR)
    monkeypatch.setattr(walk_module, "_BATCH", batch)
    monkeypatch.setattr(walk_module, "_STAT_BATCH", stat_batch)
    monkeypatch.setattr(walk_module, "_STAT_THREADS", threads)
    assert walk_module._stat_names is not None  # built: the test is of both loops
    if not stat_in_c:
        monkeypatch.setattr(walk_module, "_stat_names", None)
    expected = oracle_walk(tree)
    assert as_tuple(walk_images(tree)) == expected
    files, skipped, ignored = expected  # the tree has what it is meant to have
    assert len(files) > 600 and ignored == 16
    assert walk_images(tree).sidecars == 7
    assert {s.reason for s in skipped} >= {FIFO, "cannot stat file: No such file or directory",
                                            "same file as 0link.png (a hard or symbolic "
                                            "link); counted once"}


def test_a_confined_walk_is_the_oracles_walk(tree):
    expected = oracle_walk(tree, confine_to=tree)
    assert as_tuple(walk_images(tree, confine_to=tree)) == expected
    assert sum("a link out of the dataset root" in s.reason for s in expected[1]) == 2


def test_named_files_are_the_oracles_stat_of_each(tree):
    walked = [f.path for f in walk_images(tree).files]
    names = walked + ["ghost.png", "pipe.png", "hard.png", "a.png", "a/../a.png", "nope.png"]
    skipped: list[Skipped] = []
    files = oracle_stat([(rel, os.path.join(tree, rel)) for rel in set(names)], skipped)
    result = list_named_files(tree, names)
    assert (result.files, result.skipped) == (files, tuple(sorted(skipped, key=lambda s: s.path)))
    assert "a/../a.png" in {s.path for s in result.skipped}


def test_a_relative_root_names_files_as_an_absolute_one_does(tree, monkeypatch):
    """'.' once lost the first characters of every name in a subfolder ('b/a.png' for
    'sub/a.png'), as paths of subfolders were normalized and the root's were not."""
    monkeypatch.chdir(tree)
    assert as_tuple(walk_images(".")) == as_tuple(walk_images(tree))
    monkeypatch.chdir(os.path.dirname(tree))
    assert as_tuple(walk_images("root/")) == as_tuple(walk_images(tree))


LETTERS = st.text(st.sampled_from(".pngPNGjJeEfFiIKtTwWbB\u0130\u212a\u0307x-é"), max_size=7)
SPELLINGS = st.builds(lambda extension, upper: "".join(c.upper() if u else c for c, u in
                                                       zip(extension, upper)),
                      st.sampled_from(sorted(IMAGE_EXTENSIONS)), st.lists(st.booleans(),
                                                                          min_size=5))


@given(st.lists(st.builds(str.__add__, LETTERS, SPELLINGS | LETTERS).filter(bool),
                max_size=20))
def test_image_names_are_those_whose_lowered_splitext_is_an_image_extension(names):
    expected = [n for n in names if os.path.splitext(n)[1].lower() in IMAGE_EXTENSIONS]
    assert walk_module._image_names(names) == expected


def test_every_image_extension_in_any_case_names_an_image():
    names = [stem + spelling for extension in sorted(IMAGE_EXTENSIONS) for stem in ("a", ".a")
             for spelling in (extension, extension.upper(), extension.title())]
    assert walk_module._image_names(names) == names


def test_files_of_a_folder_removed_before_their_stat_are_skipped_with_the_reason(tmp_path):
    """The walk stats a folder's files after listing it (files in path order): a folder
    gone in between costs its files, each named with the system's reason, nothing else."""
    walk = walk_module._Walk(None)
    walk.add(walk_module._Files(str(tmp_path / "gone"), "gone/", ["a.png", "b.png"]))
    assert len(walk.found.first_link_of_each_file(walk.skipped)) == 0
    assert [(s.path, s.reason) for s in walk.skipped] == [
        ("gone/a.png", "cannot stat file: No such file or directory"),
        ("gone/b.png", "cannot stat file: No such file or directory")]
