"""Write small datasets in the official layouts of MNIST, CIFAR, WebDataset, .npz and
Hugging Face datasets.

Imported by the format tests with `load_writers()` (tests have no packages here).
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image


def images(seed: int, count: int, height: int, width: int, channels: int) -> np.ndarray:
    """uint8 images with a per-image brightness, so per-image and pooled stds differ."""
    rng = np.random.default_rng(seed)
    centre = rng.integers(20, 236, size=(count, 1, 1, 1))
    noise = rng.integers(-20, 21, size=(count, height, width, channels))
    out = np.clip(centre + noise, 0, 255).astype(np.uint8)
    return out[..., 0] if channels == 0 else out


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    header = bytes([0, 0, type_code, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    return header + array.tobytes()


def write_idx(path: Path, gray: np.ndarray, compressed: bool = False) -> Path:
    """An MNIST ``*-idx3-ubyte`` file of (N, H, W) uint8 images."""
    data = idx_bytes(gray)
    path.write_bytes(gzip.compress(data) if compressed else data)
    return path


def cifar_records(rgb: np.ndarray, labels_per_record: int) -> bytes:
    """CIFAR binary records: label byte(s), then the R, G, B planes of 32 x 32."""
    planes = rgb.transpose(0, 3, 1, 2).reshape(len(rgb), -1)
    labels = np.arange(len(rgb) * labels_per_record, dtype=np.uint8).reshape(len(rgb), -1) % 10
    return np.concatenate([labels, planes], axis=1).astype(np.uint8).tobytes()


def write_cifar_bin(path: Path, rgb: np.ndarray, labels_per_record: int = 1) -> Path:
    path.write_bytes(cifar_records(rgb, labels_per_record))
    return path


def write_cifar_python(path: Path, rgb: np.ndarray, python2_names: bool = False) -> Path:
    """A python batch as the CIFAR site ships it: a pickled dict of bytes keys."""
    batch = {b"batch_label": b"training batch 1 of 5",
             b"labels": [i % 10 for i in range(len(rgb))],
             b"data": rgb.transpose(0, 3, 1, 2).reshape(len(rgb), -1).copy(),
             b"filenames": [f"img_{i}.png".encode() for i in range(len(rgb))]}
    data = pickle.dumps(batch, protocol=2)
    if python2_names:  # the module name numpy < 2 (and the official files) use
        data = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")
    path.write_bytes(data)
    return path


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def hf_dataset(rgb: np.ndarray):
    """A Hugging Face ``Dataset`` (in memory) of the images as PNG bytes in an ``Image``
    column, beside a label column."""
    import datasets

    cells = [{"bytes": png_bytes(pixels), "path": None} for pixels in rgb]
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    return datasets.Dataset.from_dict({"image": cells, "label": [i % 3 for i in range(len(rgb))]},
                                      features=features)


def write_arrow(path: Path, rgb: np.ndarray) -> Path:
    """A Hugging Face ``.arrow`` file (an Arrow IPC stream, record batches of 5 rows)."""
    import pyarrow as pa

    table = hf_dataset(rgb).data.table
    with pa.ipc.new_stream(str(path), table.schema) as writer:
        writer.write_table(table, max_chunksize=5)
    return path


def write_tar(path: Path, rgb: np.ndarray, compressed: bool = False) -> Path:
    """A WebDataset shard: ``{key}.png`` with a ``{key}.cls`` label for every sample."""
    with tarfile.open(path, "w:gz" if compressed else "w") as tar:
        for i, pixels in enumerate(rgb):
            for ext, data in (("png", png_bytes(pixels)), ("cls", str(i % 10).encode())):
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def write_index(path: Path, shards: dict[str, int]) -> Path:
    entries = [{"url": name, "nsamples": count} for name, count in shards.items()]
    path.write_text(json.dumps({"__kind__": "wids-shard-index-v1", "shardlist": entries}))
    return path


def write_npz(path: Path, array: np.ndarray, compressed: bool = False) -> Path:
    (np.savez_compressed if compressed else np.savez)(path, x_train=array,
                                                     y_train=np.arange(len(array)))
    return path


def write_npz_claiming(path: Path, shape: tuple[int, ...]) -> Path:
    """A .npz whose member header claims ``shape`` uint8 but holds 16 bytes of data."""
    header = {"descr": "|u1", "fortran_order": False, "shape": shape}
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("images.npy", buffer.getvalue() + bytes(16))
    return path


def write_folder(root: Path, rgb: np.ndarray) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i, pixels in enumerate(rgb):
        Image.fromarray(pixels).save(root / f"{i:04d}.png")
    return root
