"""Dataset paths as users write them: brace notation and globs, expanded the same everywhere.

WebDataset names its shards ``shard-{000000..000099}.tar``; a quoted glob
(``'train/*.tar'``) reaches normstats unexpanded on every shell, and Python callers pass
such strings too. A path that exists is taken as it is; otherwise braces are expanded
(``{a,b}`` lists and ``{000..099}`` zero-padded ranges, as in bash) and each result is
globbed when it holds ``*``, ``?`` or ``[``. A pattern that matches nothing is an error
naming it. ``archive.npz:member`` names one array of an ``.npz`` archive (`split_member`).
A file named twice (``a.npy ./a.npy``, a link to it, a manifest listing it again) is read
once: `one_path_per_file` keeps its first path, by device and inode, and names the others.
"""

from __future__ import annotations

import errno
import glob
import os
import re

from normstats.errors import NormstatsError, RefusedInputError, SkipKind
from normstats.maths.records import Skipped
from normstats.sources.decoding.file_read import not_regular_reason

__all__ = ["expand_braces", "expand_paths", "is_pattern", "split_member", "one_path_per_file",
           "regular_files", "missing_reason", "describe_paths"]

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_GLOB = re.compile(r"[*?\[]")

#: A brace range larger than this is a typo, not a dataset.
MAX_EXPANSION = 1_000_000


def is_pattern(path: str) -> bool:
    """True when ``path`` holds braces or glob characters.

    Examples
    --------
    >>> is_pattern("shard-{000..009}.tar"), is_pattern("train/*.png"), is_pattern("a.png")
    (True, True, False)
    """
    return "{" in path or bool(_GLOB.search(path))


def expand_braces(text: str) -> list[str]:
    """Expand the first ``{...}`` group of ``text`` and then the rest, as bash does.

    Examples
    --------
    >>> expand_braces("shard-{08..11}.tar")
    ['shard-08.tar', 'shard-09.tar', 'shard-10.tar', 'shard-11.tar']
    >>> expand_braces("{train,val}/{a,b}.png")
    ['train/a.png', 'train/b.png', 'val/a.png', 'val/b.png']
    """
    start = text.find("{")
    if start < 0:
        return [text]
    depth, end = 0, -1
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            end = index
            break
    if end < 0:  # an unmatched brace is a literal character
        return [text]
    head, body, tail = text[:start], text[start + 1:end], text[end + 1:]
    choices = _range(body) or _alternatives(body)
    if choices is None:  # "{x}": no comma, no range, literal as in bash
        return [head + "{" + body + "}" + word for word in expand_braces(tail)]
    return [head + choice + word for choice in choices for word in expand_braces(tail)]


def _range(body: str) -> list[str] | None:
    match = _RANGE.match(body)
    if match is None:
        return None
    first, last = match.groups()
    low, high = int(first), int(last)
    if abs(high - low) >= MAX_EXPANSION:
        raise NormstatsError(f"the brace range {{{body}}} has more than {MAX_EXPANSION:,} "
                             "names")
    width = max(len(first), len(last)) if first.startswith("0") or last.startswith("0") else 0
    step = 1 if high >= low else -1
    return [f"{n:0{width}d}" for n in range(low, high + step, step)]


def _alternatives(body: str) -> list[str] | None:
    parts, depth, current = [], 0, ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current += char
    if not parts:
        return None
    parts.append(current)
    return [word for part in parts for word in expand_braces(part)]


def expand_paths(paths: str | os.PathLike | list | tuple) -> list[str]:
    """Every path named by ``paths`` (one or several, with braces and globs), in order.

    Raises
    ------
    NormstatsError
        When a pattern matches nothing, or a plain path does not exist.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> for name in ("s-0.tar", "s-1.tar"):
    ...     _ = open(os.path.join(d, name), "wb")
    >>> [os.path.basename(p) for p in expand_paths(os.path.join(d, "s-{0..1}.tar"))]
    ['s-0.tar', 's-1.tar']
    >>> [os.path.basename(p) for p in expand_paths(os.path.join(d, "*.tar"))]
    ['s-0.tar', 's-1.tar']
    """
    given = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    found: list[str] = []
    for path in map(os.fspath, given):
        if os.path.lexists(path) or not is_pattern(path):
            found.append(path)
            continue
        matched = []
        for name in expand_braces(path):
            if _GLOB.search(name):
                matched += sorted(glob.glob(name))
            elif os.path.lexists(name):
                matched.append(name)
            else:
                raise NormstatsError("no such file (from the brace pattern "
                                     f"{path})", path=name)
        if not matched:
            raise NormstatsError("no file matches this pattern", path=path)
        found += matched
    return found


def split_member(path: str) -> tuple[str, str | None]:
    """``"a.npz:x_train"`` -> ``("a.npz", "x_train")`` when ``a.npz`` exists.

    Examples
    --------
    >>> split_member("no/such.npz:x")
    ('no/such.npz:x', None)
    """
    head, sep, member = path.rpartition(":")
    if sep and head.lower().endswith(".npz") and os.path.isfile(head):
        return head, member
    return path, None


def one_path_per_file(paths: list[str], skipped: list[Skipped], how: str = "named twice"
                      ) -> list[str]:
    """``paths`` with each file (folder, ``.npz`` member) once, at its first path, by
    (device, inode): another spelling, a hard or symbolic link, or the same path again
    goes to ``skipped`` as a duplicate (read once, not an error), saying ``how`` it came
    twice. A path that cannot be stat'ed is kept: its reader names why it cannot be read.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); a = os.path.join(d, "a.npy"); _ = open(a, "wb")
    >>> os.symlink(a, os.path.join(d, "b.npy"))
    >>> skipped = []
    >>> one_path_per_file([a, os.path.join(d, ".", "a.npy"), os.path.join(d, "b.npy")],
    ...                   skipped) == [a]
    True
    >>> skipped[1].reason == f"same file as {a} (named twice); read once"
    True
    """
    first: dict[tuple[int, int, str | None], str] = {}
    kept = []
    for path in paths:
        file, member = split_member(path)  # two members of one .npz are two datasets
        try:
            info = os.stat(file)
        except (OSError, ValueError):  # missing, a link loop, a NUL byte: its reader says
            kept.append(path)
            continue
        identity = (info.st_dev, info.st_ino, member)
        if identity in first:
            skipped.append(Skipped(path, f"same file as {first[identity]} ({how}); read once",
                                   SkipKind.DUPLICATE))
            continue
        first[identity] = path
        kept.append(path)
    return kept


def missing_reason(path: str) -> str:
    """Why ``path``, which `os.path.exists` denies, cannot be read: a link loop or a
    dangling link is no typo, and saying "no such file" of it sends the user astray.

    Examples
    --------
    >>> import tempfile, os
    >>> loop = os.path.join(tempfile.mkdtemp(), "loop")
    >>> os.symlink(loop, loop)
    >>> missing_reason(loop)
    'a symbolic link loop (ELOOP): following its links never reaches a file or folder'
    """
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link loop (ELOOP): following its links never reaches a " \
                "file or folder"
        if error.errno not in (errno.ENOENT, errno.ENOTDIR):
            return f"cannot read it: {error.strerror or error}"
    except ValueError:  # a NUL byte in the path
        pass
    try:
        return f"a symbolic link to {os.readlink(path)}, which does not exist"
    except (OSError, ValueError):  # not a link: plainly missing
        return "no such file or folder" + _unexpanded(path)


def _unexpanded(path: str) -> str:
    """What a missing ``path`` has that a shell would have changed: a ``~`` or a
    ``$VARIABLE`` (Python leaves both as they are, where a path typed at a prompt had them
    expanded), white space around it (pasted). Nothing for a plain typo.

    Examples
    --------
    >>> os.environ["NORMSTATS_DOC_DATA"] = "/data"
    >>> _unexpanded("$NORMSTATS_DOC_DATA/train").split(";")[0]
    ' (a shell would read /data/train, which does not exist either'
    >>> _unexpanded("train ")
    ' (the path ends with white space)'
    """
    expanded = os.path.expanduser(os.path.expandvars(path))
    if expanded != path:
        there = "which exists" if os.path.exists(expanded) else "which does not exist either"
        return (f" (a shell would read {expanded}, {there}; Python expands no ~ or $VARIABLE: "
                "os.path.expanduser, os.path.expandvars)")
    if path != path.strip():
        return f" (the path {'ends' if path[-1:].isspace() else 'begins'} with white space)"
    return ""


def regular_files(paths: list[str], skipped: list[Skipped], fail_fast: bool) -> list[str]:
    """The regular files of ``paths`` (a folder's shards), each once: a FIFO or a device
    named like a shard goes to ``skipped`` unopened, as a folder's walk skips it (with
    ``fail_fast``, it is an error), and so does a second link to a shard.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); a = os.path.join(d, "s-0.tar"); _ = open(a, "wb")
    >>> os.mkfifo(os.path.join(d, "s-1.tar"))
    >>> skipped = []
    >>> regular_files([a, os.path.join(d, "s-1.tar")], skipped, False) == [a]
    True
    >>> skipped[0].reason
    'not a regular file (a FIFO (named pipe)); only regular files are read'
    """
    regular = []
    for path in paths:
        try:
            reason = not_regular_reason(os.stat(path).st_mode)
        except OSError:  # gone or a dangling link: its reader names the system's reason
            reason = None
        if reason is None:
            regular.append(path)
        elif fail_fast:
            raise RefusedInputError(reason, path)
        else:
            skipped.append(Skipped(path, reason, SkipKind.REFUSED))
    return one_path_per_file(regular, skipped, "a hard or symbolic link")


def describe_paths(paths: list[str]) -> str:
    """How a report names a dataset of several PATHs: each, or the first, last and count.

    Examples
    --------
    >>> describe_paths(["a.tar", "b.tar"])
    'a.tar + b.tar'
    >>> describe_paths([f"s-{i}.tar" for i in range(100)])
    's-0.tar + s-1.tar + ... + s-99.tar (100 paths)'
    """
    if len(paths) <= 6:
        return " + ".join(paths)
    return f"{paths[0]} + {paths[1]} + ... + {paths[-1]} ({len(paths)} paths)"
