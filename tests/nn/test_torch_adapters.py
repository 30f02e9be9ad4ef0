"""The optional PyTorch adapters: the module agrees with the numpy Normalize bit for bit."""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pytest
import torch  # the test extra installs torch: a broken install fails here, never skips

import normstats.nn.torch as adapters
from normstats.errors import NormstatsError
from normstats.nn import Normalize as ArrayNormalize

STATS = SimpleNamespace(channels=("R", "G", "B"), mean=(0.4914, 0.4822, 0.4465),
                        std=(0.2470, 0.2435, 0.2616), per_image_std=(0.2023, 0.1994, 0.2010),
                        scale=255.0)


def test_uint8_module_equals_numpy_normalize_exactly() -> None:
    batch = np.random.default_rng(0).integers(0, 256, (3, 6, 5, 3), dtype=np.uint8)
    module = adapters.Normalize.from_stats(STATS)
    out = module(torch.from_numpy(batch).permute(0, 3, 1, 2))
    assert out.dtype == torch.float32 and tuple(out.shape) == (3, 3, 6, 5)
    assert np.array_equal(out.numpy(), ArrayNormalize.from_stats(STATS)(batch))
    single = module(torch.from_numpy(batch[0]).permute(2, 0, 1))
    assert np.array_equal(single.numpy(), out[0].numpy())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int16])
def test_other_dtypes_match_the_float64_formula_rounded(dtype: torch.dtype) -> None:
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.uniform(0, 255, (2, 3, 4, 4))).to(dtype)
    out = adapters.Normalize(STATS.mean, STATS.std, 255.0)(x)
    mean, std = np.array(STATS.mean)[:, None, None], np.array(STATS.std)[:, None, None]
    expected = ((x.double().numpy() / 255.0 - mean) / std).astype(np.float32)
    assert out.dtype == torch.float32
    assert np.array_equal(out.numpy(), expected)


def test_module_is_a_transform_with_buffers() -> None:
    module = adapters.Normalize.from_stats(STATS, "per_image_std")
    assert isinstance(module, torch.nn.Module)
    assert {"mean", "std", "lut8"} <= set(dict(module.named_buffers()))
    assert torch.allclose(module.std, torch.tensor(STATS.per_image_std, dtype=torch.float64))
    assert "variant=" in repr(module) and "channels=('R', 'G', 'B')" in repr(module)


def checkpoint_bytes(module: torch.nn.Module) -> int:
    saved = io.BytesIO()
    torch.save(module.state_dict(), saved)
    return saved.tell()


def test_the_tables_stay_out_of_a_checkpoint() -> None:
    """The 16-bit table (786 KB for three channels) is rebuilt from mean and std: a tiny model
    saved 793,173 bytes with it, 3,293 without (measured with torch 2.13)."""
    model = torch.nn.Sequential(adapters.Normalize.from_stats(STATS), torch.nn.Conv2d(3, 8, 3))
    assert set(model.state_dict()) == {"0.mean", "0.std", "1.weight", "1.bias"}
    assert checkpoint_bytes(model) < checkpoint_bytes(model[1]) + 2_000


def test_a_loaded_checkpoint_rebuilds_the_tables() -> None:
    saved = adapters.Normalize.from_stats(STATS, "per_image_std").state_dict()
    for dtype in (torch.float32, torch.float16):
        loaded = adapters.Normalize((0.5, 0.5, 0.5), (1.0, 1.0, 1.0)).to(dtype)
        loaded.load_state_dict(saved)
        expected = adapters.Normalize.from_stats(STATS, "per_image_std").to(dtype)
        assert loaded.mean.dtype == torch.float64
        assert torch.equal(loaded.lut8, expected.lut8) and torch.equal(loaded.lut16, expected.lut16)


def test_checkpoints_that_hold_the_tables_still_load() -> None:
    """Checkpoints written while the tables were saved: they are rebuilt, not read."""
    module = adapters.Normalize.from_stats(STATS)
    old = dict(module.state_dict(), lut8=torch.zeros(3, 256), lut16=torch.zeros(3, 65536))
    fresh = adapters.Normalize((0.5, 0.5, 0.5), (1.0, 1.0, 1.0))
    fresh.load_state_dict(old)  # strict: no unexpected key
    assert torch.equal(fresh.lut8, module.lut8) and torch.equal(fresh.lut16, module.lut16)


def test_module_rejects_bad_input() -> None:
    module = adapters.Normalize.from_stats(STATS)
    with pytest.raises(NormstatsError, match=r"expected \(\.\.\., C, H, W\)"):
        module(torch.zeros(4, 4, 3, dtype=torch.uint8))
    with pytest.raises(TypeError, match="torch.bool"):
        module(torch.zeros(3, 2, 2, dtype=torch.bool))
    with pytest.raises(NormstatsError, match="no variant"):
        adapters.Normalize.from_stats(STATS, "median")


def test_torchvision_arguments_are_the_stats_vectors() -> None:
    kwargs = adapters.torchvision_normalize_kwargs(STATS, "per_image_std")
    assert kwargs == {"mean": list(STATS.mean), "std": list(STATS.per_image_std)}
    # torchvision's Normalize computes (x - mean) / std on a [0, 1] tensor: the same numbers.
    x = torch.rand(3, 4, 4, dtype=torch.float64)
    mean = torch.tensor(kwargs["mean"], dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(kwargs["std"], dtype=torch.float64).view(3, 1, 1)
    ours = adapters.Normalize.from_stats(STATS, "per_image_std")(x)  # after ToTensor
    assert torch.allclose(ours.double(), (x - mean) / std, rtol=1e-6, atol=1e-6)


def test_torchvision_transform_or_a_clear_import_error() -> None:
    try:
        import torchvision  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="torchvision is not installed"):
            adapters.torchvision_normalize(STATS)
        return
    transform = adapters.torchvision_normalize(STATS)
    assert list(transform.mean) == list(STATS.mean)


def test_a_drop_in_for_torchvision_normalize_after_and_before_to_tensor() -> None:
    """torchvision's Normalize on a ToTensor output is (x - mean) / std in float32."""
    rng = np.random.default_rng(5)
    image = torch.from_numpy(rng.integers(0, 256, (3, 7, 6), dtype=np.uint8))
    to_tensor = image.float().div(255)  # ToTensor: CHW float32 in [0, 1]
    mean = torch.tensor(STATS.mean, dtype=torch.float32).view(3, 1, 1)
    std = torch.tensor(STATS.std, dtype=torch.float32).view(3, 1, 1)
    torchvision_style = (to_tensor - mean) / std
    ours = adapters.Normalize.from_stats(STATS)
    assert torch.allclose(ours(to_tensor), torchvision_style, atol=1e-6, rtol=0)
    assert torch.allclose(ours(image), torchvision_style, atol=1e-6, rtol=0)  # uint8 input
    batch = torch.stack([to_tensor, to_tensor])  # (N, C, H, W) as a DataLoader gives
    assert torch.equal(ours(batch)[1], ours(to_tensor))


def test_uint16_tensors_are_divided_by_65535() -> None:
    norm = adapters.Normalize((0.5,), (0.25,))
    x = torch.tensor([0, 65535, 32768], dtype=torch.uint16).view(1, 1, 3)
    expected = (np.array([0, 65535, 32768]) / 65535 - 0.5) / 0.25
    np.testing.assert_allclose(norm(x).flatten().numpy(), expected, rtol=1e-7)
