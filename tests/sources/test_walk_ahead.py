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
receive, stop, start = walk_ahead._Child.__call__, walk_ahead._Child.stop, walk_ahead.start
def receiving(child):
    walk = receive(child)
    print("walked ahead" if walk is not None else "walked here", file=sys.stderr)
    return walk
def stopping(child):
    print("stopped a walk", file=sys.stderr)
    stop(child)
def starting(root):
    started = start(root)
    print(f"started {started}, click loaded {'click' in sys.modules}", file=sys.stderr)
    return started
walk_ahead._Child.__call__, walk_ahead._Child.stop = receiving, stopping
walk_ahead.start = starting
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
    # started before click loads (`normstats_cli.run`), not again by the command
    assert done.stderr.splitlines()[:2] == ["started True, click loaded False",
                                            "started False, click loaded True"]
    assert "stopped a walk" not in done.stderr
    in_process = CliRunner().invoke(main, arguments)  # `main`: no walk ahead
    assert in_process.exit_code == 0, in_process.output
    assert json.loads(done.stdout) == json.loads(in_process.stdout)
    assert [s["kind"] for s in json.loads(done.stdout)["skipped"]] == ["duplicate"]


@pytest.mark.skipif(sys.platform != "linux", reason="pipe sizes are Linux's (F_GETPIPE_SZ)")
def test_the_walk_crosses_a_wide_pipe(tree):
    """The child's pipe holds `PIPE_BYTES` where the system allows it (Linux lets a user
    have 1 MiB): fewer waits for the other side while the listing crosses."""
    import fcntl

    assert walk_ahead.start(tree)
    child = walk_module.walks_ahead[os.path.abspath(tree)]
    limit = int(open("/proc/sys/fs/pipe-max-size").read())
    assert fcntl.fcntl(child.read, fcntl.F_GETPIPE_SZ) == min(walk_ahead.PIPE_BYTES, limit)
    assert as_tuple(walk_images(tree)) == oracle_walk(tree)


@pytest.mark.parametrize("command", [
    ["compute", "{tree}", "--help"],  # the command never runs
    ["compute", "{tree}", "--no-such-option"],  # an error before it runs
    ["compute", "{tree}", "{tree}/a", "--json", "--no-cache"],  # several PATHs: not walked
    ["compute", "{tree}", "--manifest", "mnist", "--root", "{tree}"],  # nor with a manifest
])
def test_a_walk_the_command_does_not_take_is_stopped(tree, command):
    """`normstats_cli.run` starts the walk of ``compute FOLDER`` before click loads; where
    the command does not take it, it is stopped (and its child reaped) as the command
    starts or, if it never starts, as the process ends."""
    arguments = [argument.format(tree=tree) for argument in command]
    done = subprocess.run([sys.executable, "-c", _COMMAND, *arguments], capture_output=True,
                          text=True)
    assert done.stderr.splitlines()[0] == "started True, click loaded False"
    assert done.stderr.count("stopped a walk") == 1, done.stderr
    assert "walked" not in done.stderr


def test_a_walk_for_another_folder_is_stopped_as_the_block_starts(tree):
    """`walking(root)`: a walk started before for another folder (the command line's
    guess) is stopped at once, the block's own is kept until it ends."""
    other = os.path.join(tree, "a")
    assert walk_ahead.start(other)
    other_child = walk_module.walks_ahead[os.path.abspath(other)]
    with walk_ahead.walking(tree):
        assert list(walk_module.walks_ahead) == [os.path.abspath(tree)]
        with pytest.raises(ChildProcessError):  # reaped
            os.waitpid(other_child.pid, os.WNOHANG)
        assert as_tuple(walk_images(tree)) == oracle_walk(tree)
    assert not walk_module.walks_ahead
    assert walk_ahead.start(tree)
    with walk_ahead.walking(tree + os.sep):  # the same folder, spelled otherwise: kept
        assert list(walk_module.walks_ahead) == [os.path.abspath(tree)]
    assert not walk_module.walks_ahead


def test_the_walk_in_the_command_is_the_walk_module_s(monkeypatch, tree):
    """The child runs `list_images` itself, so a walk changed there is changed ahead too."""
    calls = []
    monkeypatch.setattr(walk_module, "list_images",
                        lambda root, confine_to=None: calls.append(root) or
                        walk_module._Walk(None))
    assert walk_ahead.start(tree)
    assert len(walk_ahead.take(tree).result().files) == 0  # the child's (empty) walk
