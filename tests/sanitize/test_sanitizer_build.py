"""The sanitizer build runs in the suite on a cheap selection of tests (the raster kernel's
own tests among them: exact results and refused sizes).

The whole command (``python tests/sanitize/build_and_run.py``: tests/maths,
tests/sources/decoding and the PNG chunk fuzz target) takes about 2 minutes on a busy
2-core machine, most of it the portable loop at -O1 with ASan: it is the documented
command of docs/testing.md. Here the same build (ASan + UBSan, gcc) runs the kernels'
size checks, the chunk walk's fuzz target, every vector kernel at each flush of its
32-bit lanes, where the sanitizer once found a signed overflow (gcc's
``_mm512_reduce_add_epi32`` adds in ``int``), the three-channel register path at its
bound, the compiled spreads and the mean image's running sums (each loop at odd sizes and
tile ends, and a run filled to 65,535): ~9 s of CPU.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SELECTION = ["tests/maths/test_kernel_sizes.py", "tests/fuzz/test_fuzz_png_chunks.py",
             "tests/maths/test_fused.py", "tests/maths/test_masked.py",
             "tests/sources/decoding/test_file_read.py", "tests/sources/test_stat_batch.py",
             "-q",
             "-k", "not test_fused or (flush_boundary and not portable) "
             "or (register_bound and avx512) or spreads or running"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the build preloads gcc's libasan.so")
def test_the_kernels_under_address_and_undefined_behaviour_sanitizers():
    """Fails (never skips) on Linux without gcc: CI machines have it, and so does any
    machine that built normstats' extensions."""
    script = ROOT / "tests" / "sanitize" / "build_and_run.py"
    run = subprocess.run([sys.executable, str(script), *SELECTION], cwd=ROOT,
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-6000:])
    assert "pytest exit status 0, 0 sanitizer report(s)" in run.stderr
