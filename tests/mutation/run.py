"""Mutation testing of normstats' pure packages with mutmut (docs/testing.md, "Mutation
testing")::

    nice -n 15 python tests/mutation/run.py          # maths, results, sources/decoding, analyses
    nice -n 15 python tests/mutation/run.py maths             # one package
    nice -n 15 python tests/mutation/run.py maths --rerun-survivors   # after adding tests

For each package the script

1. copies the checkout's library, tests, command line and manifests into a work folder
   outside the checkout (``$TMPDIR/normstats-mutation/<package>``, or ``--workdir``), so
   that mutmut's ``mutants/`` folder and everything the tests write stay out of the
   checkout, and a concurrent edit of the checkout cannot change a run half-way;
2. writes mutmut's configuration into the copy's pyproject.toml: mutate only the package,
   select the package's own tests (its mirror under ``tests/``);
3. runs ``mutmut run``, which runs, for each mutant, the tests that call the mutated
   function; ``PYTHONPATH`` names the mutated copy, so subprocesses and pool workers of a
   test run the mutant too;
4. prints the score (killed and timed out over all mutants; a mutant that no test reaches
   counts as a survivor) and writes the diff of every survivor to ``survivors.diff`` in
   the work folder.

``--rerun-survivors`` copies the checkout into the kept work folder again and runs the
mutants of the functions changed since and the last run's survivors and time-outs (the
kills stand), for the loop of reading a survivor and writing the test that kills it;
``--report-only`` reports the last run again. Exit status: 0 every package reached
``--min-score``, 1 one did not, 2 mutmut failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# package -> the tests that speak for it: its mirror under tests/. The decoding fuzz target
# is left out: its 400 damaged files through `normstats.compute` take ~12 s for each mutant
# of every function they reach (the suite and docs/testing.md's "Fuzzing" still run it).
PACKAGES = {
    "maths": ["tests/maths"],
    "results": ["tests/results"],
    "sources/decoding": ["tests/sources/decoding",
                         "--ignore=tests/sources/decoding/test_fuzz_decode.py"],
    "analyses": ["tests/analyses"],
}
DETECTED = {"killed", "timeout", "segfault"}
IGNORE = shutil.ignore_patterns("__pycache__", ".hypothesis", ".pytest_cache", "mutants")


def status(exit_code: int | None) -> str:
    """mutmut's verdict for a mutant's test exit code (mutmut.stats.status_by_exit_code)."""
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code[exit_code]


def mutmut_config(package: str) -> str:
    """The [tool.mutmut] table of one package's run.

    Each mutant's tests run in a process forked from a server that has only imported the
    tests (``forkserver``), not from mutmut's own process, which ran the whole suite first:
    a fork of that inherits Dask's thread pool without its threads, and a test that
    computes on it waits for the timeout, which would count the mutant as killed.
    """
    tests = ", ".join(json.dumps(t) for t in PACKAGES[package])
    return ("\n[tool.mutmut]\n"
            'source_paths = ["normstats"]\n'
            f'only_mutate = ["normstats/{package}/*"]\n'
            f"pytest_add_cli_args_test_selection = [{tests}]\n"
            'pytest_add_cli_args = ["-p", "no:cacheprovider"]\n'
            'process_isolation = "forkserver"\n'
            "use_git_change_detection = false\n")


def copy_checkout(work: Path, package: str) -> None:
    """The checkout's library, tests, command line and manifests into the work folder.

    Files keep their modification times: mutmut makes the mutants of a library file
    again only when it is newer than its mutants, and runs again only the functions whose
    source changed. The command line and the manifests sit beside the mutated library on
    the import path, so the tests never import them from the checkout.
    """
    copies = [("normstats", work / "normstats"), ("tests", work / "tests"),
              ("cli", work / "mutants" / "normstats_cli"),
              ("data_manifests", work / "mutants" / "normstats_manifests")]
    if (work / "mutants" / "tests").exists():  # mutmut's own copy, from an earlier run
        copies.append(("tests", work / "mutants" / "tests"))
    for source, target in copies:
        if source != "normstats":  # a test file removed from the checkout goes here too
            shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(ROOT / source, target, ignore=IGNORE, dirs_exist_ok=True)
    mutated = work / "mutants" / "normstats"
    if mutated.exists():  # mutmut copies Python files again, not the compiled kernels
        for path in (ROOT / "normstats").rglob("*"):
            if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts:
                target = mutated / path.relative_to(ROOT / "normstats")
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    text = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(text + mutmut_config(package))


def verdicts(work: Path, package: str) -> dict[str, tuple[str, str]]:
    """Mutant name -> (verdict, mutated file), from the .meta files mutmut writes beside
    each mutated file."""
    out = {}
    mutants = work / "mutants"
    for meta in sorted((mutants / "normstats" / package).rglob("*.py.meta")):
        source = str(meta.relative_to(mutants)).removesuffix(".meta")
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        out.update({name: (status(code), source) for name, code in codes.items()})
    return out


def mutmut(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(work / "mutants")}
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    return subprocess.run(command, cwd=work, env=env, text=True, capture_output=True)


def write_survivors(work: Path, survivors: dict[str, str]) -> Path:
    """Each survivor's diff, one after the other, in ``survivors.diff``."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    here = Path.cwd()
    os.chdir(work)  # mutmut reads its files relative to the working folder
    try:
        diffs = [f"# {name}\n{get_diff_for_mutant(name, path=path)}\n"
                 for name, path in sorted(survivors.items())]
    finally:
        os.chdir(here)
    (work / "survivors.diff").write_text("".join(diffs))
    return work / "survivors.diff"


def run(package: str, work: Path, rerun_survivors: bool) -> dict[str, tuple[str, str]] | None:
    """Run mutmut on ``package``: afresh, or on the last run's survivors and on the
    functions changed since, with the checkout as it is now."""
    survivors: list[str] = []
    if rerun_survivors:
        # time-outs too: one is a kill only if it happens again under these settings
        survivors = [n for n, (v, _) in verdicts(work, package).items()
                     if v not in {"killed", "segfault", "not checked"}]
    else:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    copy_checkout(work, package)
    done = mutmut(work, "run")  # every mutant without a verdict (after a change: its function's)
    if done.returncode == 0 and survivors:
        done = mutmut(work, "run", *survivors)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
        return None
    return verdicts(work, package)


def report(package: str, work: Path, found: dict[str, tuple[str, str]]) -> float:
    counts: dict[str, int] = {}
    for verdict, _ in found.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    detected = sum(n for v, n in counts.items() if v in DETECTED)
    score = detected / max(len(found), 1)
    diff = write_survivors(work, {n: path for n, (v, path) in found.items()
                                  if v not in DETECTED})
    print(f"normstats/{package}: {detected} of {len(found)} mutants killed "
          f"({100 * score:.1f}%); {dict(sorted(counts.items()))}; survivors: {diff}")
    return score


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packages", nargs="*", metavar="PACKAGE",
                        help=f"any of {', '.join(PACKAGES)} (default: all)")
    parser.add_argument("--workdir", type=Path,
                        default=Path(tempfile.gettempdir()) / "normstats-mutation")
    parser.add_argument("--rerun-survivors", action="store_true",
                        help="run the last run's survivors, time-outs and changed "
                             "functions again")
    parser.add_argument("--report-only", action="store_true",
                        help="report the verdicts of the last run without running anything")
    parser.add_argument("--min-score", type=float, default=0.85)
    args = parser.parse_args(argv)
    unknown = set(args.packages) - set(PACKAGES)
    if unknown:
        parser.error(f"unknown package {', '.join(sorted(unknown))}")
    if args.workdir.resolve().is_relative_to(ROOT):
        parser.error("the work folder must lie outside the checkout")
    worst = 1.0
    for package in args.packages or PACKAGES:
        work = args.workdir / package.replace("/", "-")
        found = (verdicts(work, package) if args.report_only
                 else run(package, work, args.rerun_survivors))
        if found is None:
            return 2
        worst = min(worst, report(package, work, found))
    return 0 if worst >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
