"""The build's one hook: normstats' C kernels are compiled where a C compiler and Python's
headers work, and left out, with a warning, where they do not.

Everything else about the build is in pyproject.toml, the extensions included. Without the
kernels normstats runs numpy's passes, which give the same bits more slowly, and says so once
per run. A compiler that works but fails on normstats' own C sources still fails the build:
a broken kernel must neither install as a silent fallback nor leave an old build in place.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

#: The smallest extension-like library: it needs the compiler, Python.h and the linker.
PROBE = "#include <Python.h>\nint normstats_probe(void) { return Py_IsInitialized(); }\n"

MISSING = ("normstats: `{compiler}` cannot build a Python extension here (no C compiler, or no "
           "Python headers): the compiled kernels are left out, and normstats will run numpy's "
           "slower passes (the same results). Install a C compiler and the Python headers "
           "(e.g. `apt install build-essential python3-dev`), then run "
           "`pip install --force-reinstall --no-deps .` here again.")


class BuildKernelsWhereACompilerWorks(build_ext):
    """`build_ext`, skipped (with a warning) when the compiler cannot build `PROBE`."""

    def build_extensions(self) -> None:
        if self.compiler_works():
            super().build_extensions()
        else:  # the compiler's own message, above this one, says what failed
            compiler = " ".join(getattr(self.compiler, "compiler_so", ["the C compiler"])[:1])
            self.warn(MISSING.format(compiler=compiler))
            for extension in self.extensions:
                extension.optional = True  # so an editable install copies only what exists

    def compiler_works(self) -> bool:
        """True when the compiler builds `PROBE` into a shared library."""
        with tempfile.TemporaryDirectory() as folder:
            probe = Path(folder) / "probe.c"
            probe.write_text(PROBE)
            try:
                objects = self.compiler.compile([str(probe)], output_dir=folder)
                self.compiler.link_shared_object(objects, str(Path(folder) / "probe.so"))
            except (CCompilerError, ExecError, PlatformError):
                return False
        return True


setup(cmdclass={"build_ext": BuildKernelsWhereACompilerWorks})
