"""Installing normstats: the wheel, and an installation built where no C compiler exists.

Wheels are built offline (``--no-build-isolation`` takes the test environment's setuptools;
no package index is asked) from a copy of the sources in a temporary folder, with HOME
there too, so neither the checkout nor the user's home gets a file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from normstats.maths import fused
from normstats_cli.demo import write_demo_dataset

ROOT = Path(__file__).resolve().parents[1]
#: What a wheel is built from: the project's files, without kernels compiled in place.
SOURCES = ("pyproject.toml", "setup.py", "README.md", "normstats", "cli", "data_manifests")


def copy_sources(folder: Path) -> Path:
    """A copy of the project's sources in ``folder``, without kernels compiled in place."""
    source = folder / "source"
    source.mkdir(parents=True)
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
        else:
            shutil.copy2(ROOT / name, source / name)
    return source


def pip_wheel(source: Path, **environ: str) -> subprocess.CompletedProcess:
    """``pip wheel`` of ``source`` into ``source/../wheel``, offline, HOME beside it."""
    folder = source.parent
    return subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(folder / "wheel"), str(source)],
        capture_output=True, text=True, cwd=folder,
        env={**os.environ, "HOME": str(folder), "PIP_NO_INDEX": "1",
             "PIP_DISABLE_PIP_VERSION_CHECK": "1", **environ})


def build_wheel(folder: Path, **environ: str) -> Path:
    """The wheel of a copy of the sources, built in ``folder``; its path."""
    built = pip_wheel(copy_sources(folder), **environ)
    assert built.returncode == 0, built.stderr
    (wheel,) = (folder / "wheel").glob("normstats-*.whl")
    return wheel


def declared_kernels() -> set[str]:
    """The extension modules pyproject.toml declares, as paths without a suffix."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {ext["name"].replace(".", "/")
            for ext in project["tool"]["setuptools"]["ext-modules"]}


def compiled_kernels(names: set[str]) -> set[str]:
    return {name for name in names if name.endswith((".so", ".pyd"))}


@pytest.fixture(scope="module")
def with_compiler(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("compiler"))


@pytest.fixture(scope="module")
def without_compiler(tmp_path_factory) -> Path:
    """The wheel built with ``CC=false``: every compiler call fails."""
    return build_wheel(tmp_path_factory.mktemp("no-compiler"), CC="false")


@pytest.fixture(scope="module")
def installed_without_compiler(without_compiler: Path) -> Path:
    """That wheel unpacked as an installation: a folder to put on PYTHONPATH."""
    site = without_compiler.parent.parent / "site"
    zipfile.ZipFile(without_compiler).extractall(site)
    return site


def run_normstats(*args: str, site: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m normstats ARGS`` away from the checkout (``-m`` looks in the working
    folder first): the test environment's installation, or the one in ``site``, found on
    the path ahead of the editable install."""
    environ = {**os.environ, "NORMSTATS_DEBUG": "1"}
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "normstats", *args], capture_output=True,
                          text=True, env=environ, cwd=site or ROOT.parent, timeout=240)


@pytest.mark.slow
def test_the_wheel_carries_the_command_line_the_kernel_and_every_manifest(with_compiler):
    wheel = with_compiler
    names = set(zipfile.ZipFile(wheel).namelist())
    cli_modules = {f"normstats_cli/{p.name}" for p in (ROOT / "cli").glob("*.py")}
    manifests = {f"normstats_manifests/{p.name}" for p in (ROOT / "data_manifests").glob("*")
                 if p.suffix in (".toml", ".py")}
    assert cli_modules and cli_modules <= names
    assert len(manifests) > 8 and manifests <= names
    assert not any(name.startswith("cli/") or name.startswith("data_manifests/")
                   for name in names)
    # every kernel pyproject.toml declares, compiled as the wheel is built (the copy held none)
    assert {name.split(".")[0] for name in compiled_kernels(names)} == declared_kernels()
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "normstats = normstats_cli:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_a_build_without_a_compiler_leaves_out_only_the_kernels(without_compiler, with_compiler):
    without = set(zipfile.ZipFile(without_compiler).namelist())
    with_kernels = set(zipfile.ZipFile(with_compiler).namelist())
    assert compiled_kernels(without) == set()
    assert len(compiled_kernels(with_kernels)) == len(declared_kernels())
    assert with_kernels - compiled_kernels(with_kernels) == without


@pytest.mark.slow
def test_a_compiler_that_fails_on_normstats_own_source_fails_the_build(tmp_path):
    """Only a compiler that cannot build any extension means "leave the kernels out": a
    broken kernel must not install as a silent fallback."""
    source = copy_sources(tmp_path)
    kernel = source / "normstats" / "maths" / "_moments.c"
    kernel.write_text("#error a broken kernel\n" + kernel.read_text())
    built = pip_wheel(source)
    assert built.returncode != 0 and "a broken kernel" in built.stderr
    assert not (tmp_path / "wheel").exists() or not any((tmp_path / "wheel").iterdir())


@pytest.mark.slow
def test_without_kernels_the_version_says_numpy(installed_without_compiler):
    result = run_normstats("--version", site=installed_without_compiler)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        "kernel: numpy (no compiled kernel in this installation: exact, slower)")


@pytest.mark.slow
def test_without_kernels_a_cluster_run_says_so_once_and_gives_the_same_bits(
        installed_without_compiler, tmp_path):
    """Two cluster workers reduce the demo photos (8-bit PNG and JPEG) with numpy's
    passes; the run the user started says it once, and prints the compiled run's bytes."""
    data = write_demo_dataset(tmp_path / "demo", images=40)
    compiled = run_normstats("compute", str(data), "--json", "--no-cache")
    fallback = run_normstats("compute", str(data), "--json", "--no-cache", "--local-cluster",
                             "--workers", "2", site=installed_without_compiler)
    assert compiled.returncode == 0 and fallback.returncode == 0, fallback.stderr
    assert fused.MISSING_NOTICE not in compiled.stderr
    assert fallback.stderr.count(fused.MISSING_NOTICE) == 1, fallback.stderr
    assert json.loads(compiled.stdout)["images"] == 40
    assert fallback.stdout == compiled.stdout
