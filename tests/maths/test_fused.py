import numpy as np
import pytest

from normstats.maths import fused
from normstats.maths.image_moments import extrema, integer_sums


def test_numba_a_hard_dependency_compiles_the_kernel():
    """numba is a dependency: a broken install fails here (and below) instead of skipping."""
    import numba  # noqa: F401 - the import itself is the check

    assert fused.available()


@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 33, 31, 4), (2, 9, 11, 2),
                                   (1, 1100, 1000, 3), (4, 300, 300, 1), (2, 257, 256, 3),
                                   (5, 3, 3, 1)])
def test_compiled_kernel_equals_the_numpy_kernels(shape, rng):
    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    expected_sums, expected_squares = integer_sums(stack)
    expected_low, expected_high = extrema(stack)
    assert sums.tolist() == expected_sums.tolist()
    assert squares.tolist() == expected_squares.tolist()
    assert low.tolist() == expected_low.tolist() and high.tolist() == expected_high.tolist()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_accumulators_never_overflow_at_the_maximum(channels):
    # 1.1 M values of 255 per channel: int32 lanes and the uint32 sums of squares of the
    # grey and RGB kernels (2**32 / 255² ≈ 66,000 pixels) must be flushed in time.
    stack = np.full((1, 1100, 1000, channels), 255, dtype=np.uint8)
    sums, squares, low, high = fused.uint8_moments(stack)
    assert squares.tolist() == [[255**2 * 1100 * 1000] * channels]
    assert sums.tolist() == [[255 * 1100 * 1000] * channels]
    assert low.tolist() == high.tolist() == [[255.0] * channels]


def test_rows_filled_one_image_at_a_time_equal_the_stack(rng):
    stack = rng.integers(0, 256, size=(3, 7, 5, 3), dtype=np.uint8)
    out = fused.outputs(3, 3)
    for row in range(3):
        fused.uint8_moments_into(stack[row], row, *out)
    expected = fused.uint8_moments(stack)
    assert [a.tolist() for a in out[:2]] == [a.tolist() for a in expected[:2]]
    assert out[2].tolist() == expected[2].tolist() and out[3].tolist() == expected[3].tolist()


def test_strided_input_is_handled():
    stack = np.arange(2 * 4 * 6 * 3, dtype=np.uint8).reshape(2, 4, 6, 3)[:, ::2, ::3]
    assert fused.uint8_moments(stack)[0].tolist() == integer_sums(stack)[0].tolist()


def test_a_slow_kernel_load_says_it_is_compiling_once(monkeypatch, caplog):
    """The first run after an install compiles: one line says so; a load from numba's
    cache, well under the notice delay, says nothing."""
    import logging
    import time

    from normstats.maths import fused as fused_module

    real_warm = fused_module._warm
    monkeypatch.setattr(fused_module, "COMPILE_NOTICE_SECONDS", 0.05)
    monkeypatch.setattr(fused_module, "_warm",
                        lambda name, kernel: time.sleep(0.5) or real_warm(name, kernel))
    fused_module._compiled.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="normstats.maths.fused"):
            assert fused_module.warm(3)
            assert fused_module.warm(3)  # cached: no second load, no line
        assert [r.getMessage() for r in caplog.records] == [fused_module.COMPILE_NOTICE]
        caplog.clear()
        monkeypatch.setattr(fused_module, "_warm", real_warm)
        monkeypatch.setattr(fused_module, "COMPILE_NOTICE_SECONDS", 5.0)
        fused_module._compiled.cache_clear()
        with caplog.at_level(logging.WARNING, logger="normstats.maths.fused"):
            fused_module.warm(3)
        assert caplog.records == []
    finally:
        fused_module._compiled.cache_clear()


def test_only_the_kernel_a_run_needs_is_loaded(monkeypatch):
    """An RGB run loads the RGB kernel only: the grey and lanes kernels cost nothing."""
    from normstats.maths import fused as fused_module

    fused_module._compiled.cache_clear()
    try:
        fused.uint8_moments(np.zeros((1, 2, 2, 3), np.uint8))
        assert fused_module._compiled.cache_info().currsize == 1
        fused.uint8_moments(np.zeros((1, 2, 2, 2), np.uint8))  # lanes
        assert fused_module._compiled.cache_info().currsize == 2
    finally:
        fused_module._compiled.cache_clear()


@pytest.mark.parametrize("shape", [(3, 5, 7, 3), (2, 1, 1, 1), (1, 9, 11, 2)])
def test_numpy_fallback_kernel_keeps_the_kernels_contract(shape, rng):
    """Used when numba cannot compile a kernel: same accumulate-into-outputs contract."""
    from normstats.maths import fused as fused_module

    stack = rng.integers(0, 256, size=shape, dtype=np.uint8)
    n, c = shape[0], shape[3]
    out = fused.outputs(n, c)
    out[0][:] = 7  # accumulates onto what is there
    fused_module._numpy_kernel(stack.reshape(n, -1), *out)
    sums, squares = integer_sums(stack)
    low, high = extrema(stack)
    assert out[0].tolist() == (sums + 7).tolist() and out[1].tolist() == squares.tolist()
    assert out[2].tolist() == low.tolist() and out[3].tolist() == high.tolist()


_LOAD = """
import sys
from normstats import process_role
process_role.OWN_PROCESS = sys.argv[1] == "own"
from normstats.maths import fused
assert fused.warm(3)
print("scipy.linalg" in sys.modules)
import scipy.linalg  # importable again whatever happened during the load
print(scipy.linalg.__name__)
"""


def test_the_command_line_loads_the_kernel_without_numbas_blas_probe():
    """In normstats' own process numba's first load skips importing scipy.linalg (~0.2 s);
    a library caller's process keeps numba's full initialisation."""
    import subprocess
    import sys

    outputs = {role: subprocess.run([sys.executable, "-c", _LOAD, role], check=True,
                                    capture_output=True, text=True).stdout.split()
               for role in ("own", "library")}
    assert outputs["own"] == ["False", "scipy.linalg"]
    assert outputs["library"] == ["True", "scipy.linalg"]
