"""The command line is the library: every flag of ``normstats compute`` is an argument of
`normstats.compute` (or a field of `normstats.ReadOptions`) spelled with the same words,
apart from a short, named list of presentation flags; ``--scheduler`` is one option on
every command that computes."""

from __future__ import annotations

import inspect
import json

import numpy as np
from click.testing import CliRunner

import normstats
from normstats.sources.options import READ_FIELDS
from normstats_cli import main

#: Flags of ``compute`` that are not library arguments, and why.
CLI_ONLY = {
    "paths": "the PATH arguments: compute's data",
    "as_json": "--json prints stats.to_json()",
    "variant": "which std the report's Normalize line and --to print",
    "to": "prints stats.to(FORMAT)",
    "bgr": "prints stats.to(FORMAT, bgr=True)",
    "no_cache": "the command line's spelling of cache=False",
    "manifest": "a known dataset instead of PATH (normstats.analyses.manifests)",
    "root": "where the --manifest files are",
    "overwrite": "replace the --mean-image files if they exist",
}
#: Arguments of `normstats.compute` that no flag can carry.
LIBRARY_ONLY = {"data": "given as PATH", "options": "the flags build it",
                "on_result": "a Python callback",
                "batched": "iterables of batches, which only Python holds"}


def _library_arguments() -> set[str]:
    parameters = inspect.signature(normstats.compute).parameters
    named = {n for n, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    return named | set(READ_FIELDS)


def test_every_compute_flag_is_a_library_argument_of_the_same_name():
    command = main.commands["compute"]
    flags = {p.name: p for p in command.params}
    assert set(CLI_ONLY) <= set(flags)  # the list of exceptions does not go stale
    assert set(flags) - set(CLI_ONLY) == _library_arguments() - set(LIBRARY_ONLY)
    for name, param in flags.items():
        if name not in CLI_ONLY:  # the same words: image_key is --image-key
            # a repeatable flag names one item: --storage-option for storage_options
            flag = "--" + name.replace("_", "-").removesuffix("s" if param.multiple else "")
            assert param.opts == [flag], param.opts


def test_compare_reads_with_the_same_flags_as_compute():
    compute = {p.name: p.opts for p in main.commands["compute"].params}
    compare = {p.name: p.opts for p in main.commands["compare"].params}
    for name in (*(set(READ_FIELDS) - set(LIBRARY_ONLY)), "workers", "scheduler", "cache",
                 "no_cache"):
        assert compare[name] == compute[name]


def test_compare_caches_where_it_is_told(png_folder, tmp_path, user_cache_in_a_temporary_folder):
    """compare(cache=...) on the command line: --cache DIR holds the records of every
    dataset, --no-cache writes none (the default cache stays empty), and both at once are a
    usage error, as in compute."""
    root, _ = png_folder
    folders = [str(root / "cat"), str(root / "dog")]
    placed = CliRunner().invoke(main, ["compare", *folders, "--cache", str(tmp_path / "c")])
    assert placed.exit_code == 0, placed.output
    assert len(list((tmp_path / "c").iterdir())) == 2
    none = CliRunner().invoke(main, ["compare", *folders, "--no-cache", "--json"])
    assert none.exit_code == 0, none.output
    assert not user_cache_in_a_temporary_folder.exists()
    both = CliRunner().invoke(main, ["compare", *folders, "--no-cache", "--cache",
                                     str(tmp_path / "d")])
    assert both.exit_code == 2 and "and --no-cache neither: choose one" in both.output
    assert not (tmp_path / "d").exists()


def test_scheduler_means_the_same_on_every_command_that_computes():
    options = [next(p for p in main.commands[name].params if p.name == "scheduler")
               for name in ("compute", "verify", "compare")]
    assert len({(o.callback, o.metavar, o.help) for o in options}) == 1


def test_compare_runs_on_the_scheduler_it_is_given(tmp_path, rng):
    paths = []
    for name in ("a", "b"):
        paths.append(str(tmp_path / f"{name}.npy"))
        np.save(paths[-1], rng.integers(0, 256, (20, 4, 4, 3), dtype=np.uint8))
    runs = [CliRunner().invoke(main, ["compare", *paths, "--json", *extra])
            for extra in ([], ["--scheduler", "SYNC"], ["--scheduler", "threads"])]
    assert all(run.exit_code == 0 for run in runs), [run.output for run in runs]
    assert len({json.dumps(json.loads(run.stdout), sort_keys=True) for run in runs}) == 1
    refused = CliRunner().invoke(main, ["compare", *paths, "--scheduler", "bogus"])
    assert refused.exit_code == 2 and "none of sync, threads, processes" in refused.output


def test_the_old_spellings_are_gone():
    for args in (["--column", "x"], ["--export", "keras"], ["--to", "json"]):
        result = CliRunner().invoke(main, ["compute", "x.npy", *args])
        assert result.exit_code == 2, args


#: A manifest of the cat folder of `png_folder`, with one reference.
PETS = """name = "pets"
dataset = "Pets"
split = "train"
description = "the cat folder of a test's PNGs"

[source]
format = "folder"
files = ["cat"]

[[references]]
label = "any"
source = "this test"
tolerance = 1
mean = [0.5, 0.5, 0.5]
std = [0.3, 0.3, 0.3]
"""


def test_verify_caches_where_it_is_told(png_folder, tmp_path, user_cache_in_a_temporary_folder):
    """verify of a folder manifest: --cache DIR holds its records, --no-cache writes none,
    both are a usage error; the default caches, as compute --manifest does."""
    root, _ = png_folder
    manifest = tmp_path / "pets.toml"
    manifest.write_text(PETS)
    verify = ["verify", str(manifest), "--root", str(root)]
    none = CliRunner().invoke(main, [*verify, "--no-cache"])
    assert none.exit_code == 0, none.output
    assert not user_cache_in_a_temporary_folder.exists()
    placed = CliRunner().invoke(main, [*verify, "--cache", str(tmp_path / "c")])
    assert placed.exit_code == 0, placed.output
    assert len(list((tmp_path / "c").iterdir())) == 1
    both = CliRunner().invoke(main, [*verify, "--no-cache", "--cache", str(tmp_path / "d")])
    assert both.exit_code == 2 and "and --no-cache neither: choose one" in both.output
    default = CliRunner().invoke(main, verify)
    assert default.exit_code == 0 and user_cache_in_a_temporary_folder.exists()


def test_a_path_after_an_on_off_flag_is_read_when_it_exists(tmp_path, monkeypatch):
    """A folder named like a value (``2``) after ``--by-folder`` is a PATH: only a token
    that names nothing is taken for a value the flag cannot have."""
    from PIL import Image

    (tmp_path / "2").mkdir()
    Image.fromarray(np.full((4, 4, 3), 9, np.uint8)).save(tmp_path / "2" / "a.png")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["compute", "--by-folder", "2", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["images"] == 1
    refused = CliRunner().invoke(main, ["compute", "--by-folder", "3", "2"])
    assert refused.exit_code == 2
    assert "--by-folder is an on/off flag and takes no value: '3'" in refused.output
