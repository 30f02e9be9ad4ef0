"""The same JPEGs in the layouts datasets are shipped in: a folder, Parquet, WebDataset shards.

The Parquet copy is laid out as Hugging Face writes image datasets (``data/train-0000N-of-
0000M.parquet``, an ``Image`` struct column of bytes and path, 100 rows a row group); the
WebDataset copy as shards of 1,000 samples (``.jpg`` and ``.cls`` members). Every layout
holds the very same JPEG bytes, so the answers must be identical and the times show what
each layout costs on top of decoding. Runs alternate, round after round.
"""

from __future__ import annotations

import io
import statistics
import tarfile
import time
from pathlib import Path

from synthetic import DATA, make_jpeg_folder
from timing import goal

import normstats

_PARQUET_FILES = 4
_ROWS_PER_GROUP = 100
_SHARD_SAMPLES = 1_000


def make_parquet_copy(files: list[Path]) -> Path:
    """``files`` as a Hugging Face Parquet dataset (written once, reused)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = DATA / f"parquet_{files[0].parent.name}"
    data = root / "data"
    if len(list(data.glob("*.parquet"))) == _PARQUET_FILES:
        return root
    data.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(files) // _PARQUET_FILES)
    for index in range(_PARQUET_FILES):
        part = files[index * per_file:(index + 1) * per_file]
        cells = pa.array([{"bytes": f.read_bytes(), "path": f.name} for f in part])
        table = pa.table({"image": cells, "label": [i % 10 for i in range(len(part))]})
        pq.write_table(table, data / f"train-{index:05d}-of-{_PARQUET_FILES:05d}.parquet",
                       row_group_size=_ROWS_PER_GROUP)
    return root


def make_shard_copy(files: list[Path]) -> Path:
    """``files`` as WebDataset shards (written once, reused)."""
    root = DATA / f"wds_{files[0].parent.name}"
    shards = -(-len(files) // _SHARD_SAMPLES)
    if len(list(root.glob("*.tar"))) == shards:
        return root
    root.mkdir(parents=True, exist_ok=True)
    for shard in range(shards):
        with tarfile.open(root / f"shard-{shard:06d}.tar", "w") as tar:
            for i, path in enumerate(files[shard * _SHARD_SAMPLES:(shard + 1) * _SHARD_SAMPLES]):
                key = f"{shard * _SHARD_SAMPLES + i:06d}"
                tar.add(path, arcname=f"{key}.jpg")
                label = tarfile.TarInfo(f"{key}.cls")
                label.size = 1
                tar.addfile(label, io.BytesIO(b"0"))
    return root


def bench_layouts(quick: bool) -> dict:
    """compute() of one set of JPEGs as a folder, as Parquet and as WebDataset shards."""
    count = 1_000 if quick else 10_000
    files = make_jpeg_folder(count, 256)
    parquet, shards = make_parquet_copy(files), make_shard_copy(files)
    runs = {
        "folder": lambda: normstats.compute(files[0].parent, workers=2, cache=False),
        "Parquet (Hugging Face layout)": lambda: normstats.compute(parquet, workers=2),
        "WebDataset shards (folder of .tar)": lambda: normstats.compute(shards, workers=2),
    }
    rounds = 2 if quick else 5
    times: dict[str, list[float]] = {name: [] for name in runs}
    answers = {}
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            answers[name] = run()
            times[name].append(time.perf_counter() - start)
    reference = answers["folder"]
    med = {name: statistics.median(values) for name, values in times.items()}
    rows = [[name, med[name], [min(times[name]), max(times[name])], count / med[name],
             med[name] / med["folder"],
             "identical" if _same(answers[name], reference) else "DIFFERENT"]
            for name in runs]
    values = {"images": count, "rounds": rounds,
              "parquet_vs_folder": med["Parquet (Hugging Face layout)"] / med["folder"],
              "shards_vs_folder": med["WebDataset shards (folder of .tar)"] / med["folder"],
              "rows_per_group": _ROWS_PER_GROUP, "shard_samples": _SHARD_SAMPLES}
    table = {"columns": [["layout", ""], ["median s", "{:.3f}"], ["min–max s", "{:.3f}"],
                         ["images/s", "{:,.0f}"], ["time vs folder", "{:.2f}×"],
                         ["answer vs folder", ""]], "rows": rows}
    return {"title": f"{count:,} JPEGs 256² in three layouts", "tables": {"main": table},
            "values": values,
            "goals": [goal(f"Parquet of {count:,} JPEGs 256² within 15% of the same JPEGs as "
                           "a folder", values["parquet_vs_folder"], "<=", 1.15, "{:.2f}×")]}


def _same(a: normstats.DatasetStats, b: normstats.DatasetStats) -> bool:
    keys = ("mean", "std", "per_image_std", "per_image_std_ddof1", "min", "max", "images")
    return all(getattr(a, k) == getattr(b, k) for k in keys)
