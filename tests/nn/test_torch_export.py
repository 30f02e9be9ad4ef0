"""normstats.nn.torch.Normalize through what a deployment runs: torch.compile(fullgraph=True)
with the default inductor backend, torch.export, torch.jit.script (saved and loaded) and
ONNX (dynamo=True) run by onnxruntime.

Every output is compared with eager execution bit for bit (``torch.equal``), no tolerance:
uint8 and uint16 input is a gather from the same table, and other input is the same
float64 arithmetic rounded once to the module's dtype, which IEEE operations make
identical wherever they run. The float64 pixels are chosen so that float32 lands on
float16 and bfloat16 ties: a path that rounded twice would differ (checked below).
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from torch.export import Dim

from normstats.nn.torch import Normalize

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def pixels(kind: str, batch: int = 2) -> torch.Tensor:
    """(batch, 3, H, W) input of a kind: every 8-bit value, 16-bit extremes, float64 ties."""
    rng = torch.Generator().manual_seed(batch)
    if kind == "uint8":
        return torch.arange(256 * batch * 3).remainder(256).view(batch, 3, 16, 16).to(torch.uint8)
    if kind == "uint16":
        x = torch.randint(0, 65536, (batch, 3, 16, 16), generator=rng, dtype=torch.int32)
        x[:, :, 0, :2] = torch.tensor([0, 65535], dtype=torch.int32)
        return x.to(torch.uint16)
    if kind == "int16":
        return torch.randint(-32768, 32768, (batch, 3, 16, 16), generator=rng, dtype=torch.int16)
    dtype = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}[kind]
    return torch.rand(batch, 3, 128, 128, generator=rng, dtype=torch.float64).to(dtype)


def module(dtype: torch.dtype) -> Normalize:
    return Normalize(MEAN, STD).to(dtype).eval()


@pytest.fixture(scope="module", autouse=True)
def inductor_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Inductor writes into a temporary folder: its cache (the variable), what it keeps
    beside it under the system's temporary folder (``tempfile.tempdir``), and precompiled
    headers, whose folder is fixed when inductor is imported (patched: torch is pinned)."""
    folder = tmp_path_factory.mktemp("inductor")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
        patch.setattr(tempfile, "tempdir", str(folder))
        from torch._inductor import codecache  # importing it makes the cache folder

        patch.setattr(codecache, "_HEADER_DIR", str(folder / "precompiled_headers"))
        patch.setattr(codecache, "_HEADER_LOCK_DIR", str(folder / "precompiled_headers" / "locks"))
        yield


@pytest.fixture(autouse=True)
def fresh_dynamo() -> None:
    """No test runs code another test compiled."""
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_float_pixels_tell_one_rounding_from_two(dtype: torch.dtype) -> None:
    x = pixels("float64")
    mean, std = (torch.tensor(v, dtype=torch.float64).view(3, 1, 1) for v in (MEAN, STD))
    assert not torch.equal(((x - mean) / std).to(dtype), module(dtype)(x))


COMPILED = [(torch.float32, "uint8"), (torch.float32, "uint16"), (torch.float32, "float32"),
            (torch.float16, "float64"), (torch.bfloat16, "float64")]


@pytest.mark.slow  # ~12 s for inductor's first compile in a process on 2 cores, ~1-2 s after
@pytest.mark.parametrize("dtype, kind", COMPILED)
def test_compile_fullgraph_with_inductor(dtype: torch.dtype, kind: str) -> None:
    norm, x = module(dtype), pixels(kind)
    compiled = torch.compile(norm, fullgraph=True)  # the default backend, inductor
    assert torch.equal(compiled(x), norm(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("kind", ["uint8", "uint16", "int16", "float32", "float64"])
def test_export_with_a_dynamic_batch(dtype: torch.dtype, kind: str) -> None:
    norm = module(dtype)
    program = torch.export.export(norm, (pixels(kind, 2),),
                                  dynamic_shapes={"x": {0: Dim("batch")}})
    x = pixels(kind, 3)  # another batch size than the one exported
    assert torch.equal(program.module()(x), norm(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_script_saved_and_loaded(dtype: torch.dtype) -> None:
    norm = module(dtype)
    saved = io.BytesIO()
    torch.jit.save(torch.jit.script(norm), saved)
    loaded = torch.jit.load(io.BytesIO(saved.getvalue()))
    for kind in ("uint8", "uint16", "int16", "float16", "float32", "float64"):
        x = pixels(kind)
        assert torch.equal(loaded(x), norm(x)), kind
    # TorchScript raises its own error class, with normstats' message in it
    with pytest.raises(torch.jit.Error, match=r"expected \(\.\.\., C, H, W\) with C=3"):
        loaded(torch.zeros(4, 4, 3, dtype=torch.uint8))


ONNX = [(torch.float32, "uint8"), (torch.float32, "uint16"), (torch.float32, "int16"),
        (torch.float32, "float32"), (torch.float16, "uint8"), (torch.float16, "float64")]


@pytest.mark.parametrize("dtype, kind", ONNX)
def test_onnx_export_run_by_onnxruntime(tmp_path: Path, dtype: torch.dtype, kind: str) -> None:
    norm, path = module(dtype), tmp_path / "normalize.onnx"
    torch.onnx.export(norm, (pixels(kind, 2),), str(path), dynamo=True, verbose=False,
                      dynamic_shapes={"x": {0: Dim("batch")}})
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = pixels(kind, 3)
    (out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    expected = norm(x).numpy()
    assert out.dtype == expected.dtype and np.array_equal(out, expected)
