"""A folder walked in a forked child while the command loads normstats (walk_ahead)."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from normstats.sources import walk as walk_module
from normstats.sources import walk_ahead
from normstats.sources.walk import walk_images
from normstats_cli import main
from tests.sources.test_walk import as_tuple, oracle_walk, tricky_tree


@pytest.fixture
def tree(tmp_path) -> str:
    return str(tricky_tree(tmp_path))


def test_a_walk_made_ahead_is_the_walk(tree):
    """Links, loops, FIFOs, sidecars, names that are not UTF-8: the child's walk, finished
    here, is the oracle's, and `walk_images` takes it (under another spelling of the
    folder) instead of walking again."""
    expected = oracle_walk(tree)
    assert walk_ahead.start(tree + os.sep)
    taken = walk_images(tree)
    assert not walk_module.walks_ahead  # taken, not walked again
    assert as_tuple(taken) == expected
    assert taken.sidecars == walk_images(tree).sidecars > 0


@pytest.mark.parametrize("sent", [0, 0.5])
def test_a_child_that_fails_leaves_the_walk_to_this_process(tree, monkeypatch, sent):
    """A child that sends nothing, or half of its walk, then fails."""
    dumps = walk_ahead.pickle.dumps

    def cannot_send(walk, pipe, **kwargs):
        data = dumps(walk, **kwargs)
        pipe.write(data[:int(len(data) * sent)])
        raise RuntimeError("the child cannot send its walk")

    monkeypatch.setattr(walk_ahead.pickle, "dump", cannot_send)  # the child inherits it
    assert walk_ahead.start(tree)
    assert walk_ahead.take(tree) is None  # the child exited with status 1, sending nothing
    assert walk_ahead.start(tree)
    assert as_tuple(walk_images(tree)) == oracle_walk(tree)


def test_a_walk_nobody_takes_is_stopped_and_reaped(tree):
    assert walk_ahead.start(tree)
    assert not walk_ahead.start(tree)  # one walk a folder
    walk_images(tree, confine_to=tree)  # a confined walk never takes one made ahead
    pid = walk_module.walks_ahead[os.path.abspath(tree)].pid
    walk_ahead.discard()
    assert not walk_module.walks_ahead
    with pytest.raises(ChildProcessError):  # no zombie left behind
        os.waitpid(pid, os.WNOHANG)


def test_only_folders_are_walked_ahead(tmp_path):
    (tmp_path / "a.npy").write_bytes(b"x")
    assert not walk_ahead.start(str(tmp_path / "a.npy"))
    assert not walk_ahead.start(str(tmp_path / "missing"))
    assert not walk_module.walks_ahead


def test_the_walk_loads_no_numpy():
    """What the child imports before it walks: the walk's modules, never numpy (whose
    import, ~0.06 s, is what the child runs beside)."""
    code = ("import sys, normstats.sources.walk_ahead, normstats.sources.walk; "
            "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "False"


_COMMAND = """
import sys
import normstats.sources.walk_ahead as walk_ahead
receive = walk_ahead._Child.__call__
def receiving(child):
    walk = receive(child)
    print("walked ahead" if walk is not None else "walked here", file=sys.stderr)
    return walk
walk_ahead._Child.__call__ = receiving
import normstats_cli
sys.argv = ["normstats", *sys.argv[1:]]
normstats_cli.run()
"""


def test_the_command_walks_ahead_and_prints_what_the_library_computes(tmp_path, rng):
    from tests.reliability_helpers import encode, photo

    for i in range(12):
        folder = tmp_path / f"class_{i % 3}"
        folder.mkdir(exist_ok=True)
        (folder / f"{i}.png").write_bytes(encode(photo(rng, 9, 7), "PNG" if i % 2 else "JPEG"))
    os.link(tmp_path / "class_0" / "0.png", tmp_path / "class_1" / "again.png")
    (tmp_path / "notes.txt").write_text("not an image")
    arguments = ["compute", str(tmp_path), "--json", "--no-cache", "--workers", "2"]
    done = subprocess.run([sys.executable, "-c", _COMMAND, *arguments], check=True,
                          capture_output=True, text=True)
    assert "walked ahead" in done.stderr and "walked here" not in done.stderr
    in_process = CliRunner().invoke(main, arguments)  # `main`: no walk ahead
    assert in_process.exit_code == 0, in_process.output
    assert json.loads(done.stdout) == json.loads(in_process.stdout)
    assert [s["kind"] for s in json.loads(done.stdout)["skipped"]] == ["duplicate"]


def test_the_walk_in_the_command_is_the_walk_module_s(monkeypatch, tree):
    """The child runs `list_images` itself, so a walk changed there is changed ahead too."""
    calls = []
    monkeypatch.setattr(walk_module, "list_images",
                        lambda root, confine_to=None: calls.append(root) or
                        walk_module._Walk(None))
    assert walk_ahead.start(tree)
    assert len(walk_ahead.take(tree).result().files) == 0  # the child's (empty) walk
