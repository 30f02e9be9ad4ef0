"""Build normstats' C extensions with AddressSanitizer and UndefinedBehaviorSanitizer, and
run tests against those builds (docs/testing.md, "Sanitizer build")::

    python tests/sanitize/build_and_run.py                # the default tests, below
    python tests/sanitize/build_and_run.py tests/maths -x  # any pytest arguments

1. Every extension listed in pyproject.toml ([[tool.setuptools.ext-modules]]) is compiled
   by gcc (or ``$CC``, taking gcc's flags) with ``-fsanitize=address,undefined
   -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g`` into a temporary
   folder, never into the checkout, whose own ``.so`` files stay as they are.
2. pytest runs with ASan's runtime preloaded (``LD_PRELOAD``: Python itself is not built
   with it) and this folder on ``PYTHONPATH``, whose sitecustomize.py makes every Python
   process of the run import the extensions from the temporary folder, subprocesses and
   pool workers included. A first process checks that it does.
3. Sanitizer reports go to files of the temporary folder (every process writes its own,
   so a report from a child whose output a test captured, or from a pool worker whose
   task was run again, is still seen); the run fails when pytest fails or when any report
   was written, and prints them.

``detect_leaks=0``: CPython keeps objects alive until exit by design.
``allocator_may_return_null=1``: a huge allocation is a MemoryError, as without ASan.
Exit status: 0 clean, 1 a test failed or a sanitizer reported, 2 nothing could be built.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
DEFAULT_TESTS = ["tests/maths", "tests/sources/decoding", "tests/sources/test_stat_batch.py",
                 "tests/fuzz/test_fuzz_png_chunks.py"]
# -fno-math-errno as the release build (pyproject.toml): the same vectorised square roots.
FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-O1", "-g", "-shared", "-fPIC", "-fno-math-errno"]


def extensions() -> dict[str, list[Path]]:
    """Module name -> C sources of every extension pyproject.toml declares."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {ext["name"]: [ROOT / source for source in ext["sources"]]
            for ext in project["tool"]["setuptools"]["ext-modules"]}


def build(folder: Path, compiler: str) -> None:
    """Each extension as ``<folder>/<module name><EXT_SUFFIX>`` (what sitecustomize finds)."""
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, sources in extensions().items():
        target = folder / f"{name}{suffix}"
        subprocess.run([compiler, *FLAGS, f"-I{include}", *map(str, sources), "-o", str(target)],
                       check=True)


def runtime(compiler: str, library: str) -> str:
    """The compiler's shared runtime ``library`` (libasan.so, libubsan.so)."""
    found = subprocess.run([compiler, f"-print-file-name={library}"], capture_output=True,
                           text=True, check=True).stdout.strip()
    if not os.path.isabs(found) or not os.path.exists(found):
        raise SystemExit(f"sanitize: {compiler} has no {library} (install lib{library[3:7]})")
    return os.path.realpath(found)


def environment(folder: Path, reports: Path, compiler: str) -> dict[str, str]:
    """ASan's runtime loaded first (Python itself is not built with it), reports to files."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "LD_PRELOAD": runtime(compiler, "libasan.so"),
            "NORMSTATS_SANITIZED": str(folder), "PYTHONPATH": path,
            "NORMSTATS_UBSAN_RUNTIME": runtime(compiler, "libubsan.so"),
            "NORMSTATS_UBSAN_REPORTS": str(reports / "ubsan"),
            "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:allocator_may_return_null=1:"
                            f"log_path={reports / 'asan'}",
            "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:log_path={reports / 'ubsan'}"}


def check_imports(folder: Path, env: dict[str, str]) -> None:
    """Fail unless a process of the run imports every extension from ``folder``."""
    names = list(extensions())
    code = ("import importlib, sys\nfor name in sys.argv[1:]: "
            "print(importlib.import_module(name).__file__)")
    found = subprocess.run([sys.executable, "-c", code, *names], env=env, cwd=ROOT,
                           capture_output=True, text=True)
    files = found.stdout.split()
    if found.returncode or len(files) != len(names) or \
            not all(Path(f).parent == folder for f in files):
        raise SystemExit(f"sanitize: the sanitized builds are not the ones imported: "
                         f"{files} {found.stderr}")


def main(arguments: list[str]) -> int:
    compiler = os.environ.get("CC", "gcc")
    if shutil.which(compiler) is None:
        print(f"sanitize: no {compiler} on PATH", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="normstats-sanitize-") as temporary:
        folder, reports = Path(temporary) / "build", Path(temporary) / "reports"
        folder.mkdir()
        reports.mkdir()
        try:
            build(folder, compiler)
        except subprocess.CalledProcessError as error:
            print(f"sanitize: the build failed: {error}", file=sys.stderr)
            return 2
        env = environment(folder, reports, compiler)
        check_imports(folder, env)
        built = time.monotonic()
        tests = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                *(arguments or DEFAULT_TESTS)], env=env, cwd=ROOT)
        found = sorted(reports.iterdir())
        for report in found:
            print(f"--- {report.name}\n{report.read_text()}", file=sys.stderr)
    print(f"sanitize: built in {built - started:.1f} s, tests ran in "
          f"{time.monotonic() - built:.1f} s; pytest exit status {tests.returncode}, "
          f"{len(found)} sanitizer report(s)", file=sys.stderr)
    return 1 if tests.returncode or found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
