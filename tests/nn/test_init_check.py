"""Xavier's forward variance vanishes through deep ReLU nets, Kaiming's does not: reproduced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from normstats.nn.init_check import CONFIGS, format_table, run_init_check
from normstats_cli.nn import init_check_command


@pytest.fixture(scope="module")
def default_run():
    return run_init_check()  # depth 30, width 256, batch 512, seed 0: the CLI defaults


def test_xavier_forward_variance_vanishes_by_about_half_per_layer(default_run) -> None:
    v = default_run.curves["xavier"]
    assert v.forward[-1] / default_run.input_var < 1e-6
    per_layer = (v.forward[1:] / v.forward[:-1])
    assert 0.4 < np.exp(np.log(per_layer).mean()) < 0.6  # geometric mean: Var halves per ReLU layer
    assert v.backward[0] / default_run.top_grad_var < 1e-6  # and so do its gradients


def test_kaiming_forward_and_backward_stay_within_a_small_factor(default_run) -> None:
    v = default_run.curves["kaiming"]
    forward = v.forward / default_run.input_var
    backward = v.backward / default_run.top_grad_var
    assert 0.25 <= forward[-1] <= 4
    assert np.all((forward >= 0.25) & (forward <= 4))
    assert np.all((backward >= 0.25) & (backward <= 4))


def test_batchnorm_rescues_xavier_forward(default_run) -> None:
    # BN output has variance 1, ReLU halves its second moment, Xavier keeps it: ~0.5.
    v = default_run.curves["xavier+bn"]
    assert np.all((v.forward[1:] > 0.25) & (v.forward[1:] < 1.0))


def test_same_seed_same_numbers_and_configs() -> None:
    a, b = run_init_check(6, 32, 64, seed=3), run_init_check(6, 32, 64, seed=3)
    assert set(a.curves) == set(CONFIGS)
    for name in CONFIGS:
        assert np.array_equal(a.curves[name].forward, b.curves[name].forward)
        assert np.array_equal(a.curves[name].backward, b.curves[name].backward)


def test_cli_prints_one_row_per_layer_and_the_summary() -> None:
    result = CliRunner().invoke(init_check_command, ["--depth", "8", "--width", "64"])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line[:5].strip().isdigit()]
    assert [int(r.split()[0]) for r in rows] == list(range(1, 9))
    assert "kaiming: Var f^8 / Var x" in result.output
    assert result.output.startswith(format_table(run_init_check(8, 64)).splitlines()[0])


def test_cli_rejects_bad_options() -> None:
    result = CliRunner().invoke(init_check_command, ["--depth", "1"])
    assert result.exit_code == 2 and "--depth" in result.output


def test_cli_plot_writes_a_png(tmp_path) -> None:
    import matplotlib  # noqa: F401 - in the test extra: fail, never skip
    target = tmp_path / "fig.png"
    result = CliRunner().invoke(init_check_command, ["--depth", "4", "--width", "16",
                                                     "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_without_matplotlib_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes the import fail
    result = CliRunner().invoke(init_check_command, ["--depth", "4", "--width", "16",
                                                     "--plot", str(tmp_path / "f.png")])
    assert result.exit_code == 1  # one line, before the run: nothing computed in vain
    assert "pip install 'normstats[plot]'" in result.output
    assert "Xavier" not in result.output and not (tmp_path / "f.png").exists()


def test_importing_nn_and_its_cli_loads_neither_torch_nor_matplotlib() -> None:
    code = ("import sys, normstats.nn, normstats_cli.nn; "
            "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=root)
    assert out.stdout.strip() == "[]"


def test_sizes_over_the_memory_limit_are_refused_before_any_allocation(monkeypatch) -> None:
    from normstats.errors import InvalidOptionError
    from normstats.nn import init_check

    monkeypatch.setattr(np.random, "default_rng", None)  # nothing may be drawn, or built
    with pytest.raises(InvalidOptionError) as refused:
        run_init_check(depth=100_000)
    needed = 8 * 100_000 * (256 * 256 + 2 * 512 * 256)  # the weights, then what backward keeps
    assert init_check.memory_needed(100_000, 256, 512) == needed
    assert str(refused.value) == (
        "--depth 100000 --width 256 --batch 512 would hold about 262.1 GB (every layer's weights "
        "and activations, kept for the backward pass), over init-check's limit of 4.0 GB; "
        "lower --depth (at most 1525 at this width and batch)")
    assert 1525 == init_check.MEMORY_LIMIT // init_check.memory_needed(1, 256, 512)
    with pytest.raises(InvalidOptionError, match="lower --width or --batch$"):
        run_init_check(depth=2, width=100_000)
    with pytest.raises(InvalidOptionError, match="seed must be a non-negative integer, got -1"):
        run_init_check(depth=2, width=4, batch=4, seed=-1)


def test_the_memory_estimate_bounds_what_a_run_holds() -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        run_init_check(depth=20, width=64, batch=256, seed=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    from normstats.nn.init_check import memory_needed

    estimate = memory_needed(20, 64, 256)
    assert 0.8 * estimate < peak < 1.5 * estimate, (peak, estimate)
