"""Hugging Face datasets against the same images as a folder, whole processes (issue 27).

    python benchmarks/section_hf.py KIND PATH      # one process, as its user runs it

The dataset is the benchmark's photo-like JPEGs written by ``save_to_disk`` (their bytes
embedded, as a dataset from the Hub holds them). Each KIND is a fresh Python process that
imports datasets and normstats, opens its data and runs ``normstats.compute(data,
workers=2)``: ``folder`` (the JPEG folder), ``dataset`` (``load_from_disk``: memory-mapped),
``in-memory`` (``load_from_disk(keep_in_memory=True)``) and ``items`` (the same dataset with
an identity transform, so read item by item through datasets' own PIL decoding: how every
dataset was read before its Arrow table was). Beside them, the command line on the folder
and on the ``save_to_disk`` folder (no datasets import). The processes alternate round by
round; each prints its image count and mean, which must agree.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("folder", "dataset", "in-memory", "items")


def make_hf_dataset(count: int, size: int) -> tuple[Path, Path]:
    """The JPEG folder and the same files as a ``save_to_disk`` dataset (made once, by a
    process of its own: here ``datasets`` is this folder's module of benchmark data)."""
    from synthetic import DATA, make_jpeg_folder

    folder = make_jpeg_folder(count, size)[0].parent
    saved = DATA / f"hf_photo_{size}_{count}"
    subprocess.run([sys.executable, str(HERE / "section_hf.py"), "make", str(saved),
                    str(folder)], check=True)
    return folder, saved


def _make(saved: str, folder: str) -> None:
    import datasets
    from datasets import Dataset, Features, Image

    files = sorted(Path(folder).glob("*.jpg"))
    if Path(saved, "state.json").exists() and \
            datasets.load_from_disk(saved).num_rows == len(files):
        return
    cells = [{"bytes": file.read_bytes(), "path": file.name} for file in files]
    Dataset.from_dict({"image": cells}, features=Features({"image": Image()})).save_to_disk(
        saved)


def _timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - start, out.strip()


def bench_hf(quick: bool) -> dict:
    """``compute(dataset)`` and the ``save_to_disk`` folder against the folder."""
    from timing import goal

    count = 1_000 if quick else 10_000
    rounds = 2 if quick else 5
    folder, saved = make_hf_dataset(count, 256)
    me = [sys.executable, str(HERE / "section_hf.py")]
    cli = [str(Path(sys.executable).with_name("normstats")), "compute"]
    names = {"folder": f"compute(folder): {count:,} JPEGs 256²",
             "dataset": "compute(load_from_disk(...)): the same as a Dataset (memory-mapped)",
             "in-memory": "compute(load_from_disk(..., keep_in_memory=True))",
             "items": "the same Dataset read item by item (datasets' PIL decoding)",
             "cli-folder": "normstats compute FOLDER",
             "cli-saved": "normstats compute SAVE_TO_DISK_FOLDER"}
    commands = {**{names[k]: [*me, k, str(saved if k != "folder" else folder)] for k in KINDS},
                names["cli-folder"]: [*cli, str(folder), "--no-cache", "--workers", "2"],
                names["cli-saved"]: [*cli, str(saved), "--no-cache", "--workers", "2"]}
    for command in commands.values():  # warm the file cache; every run must agree
        _timed(command)
    times: dict[str, list[float]] = {name: [] for name in commands}
    answers = set()
    for _ in range(rounds):
        for name, command in commands.items():
            seconds, out = _timed(command)
            times[name].append(seconds)
            if command[0] == sys.executable:
                answers.add(out)
    if len(answers) != 1:
        raise RuntimeError(f"the processes disagree: {answers}")
    med = {name: statistics.median(values) for name, values in times.items()}
    def against(name: str) -> float:  # each against the folder read the same way
        return med[name] / med[names["cli-folder" if name.startswith("normstats") else "folder"]]

    rows = [[name, med[name], [min(times[name]), max(times[name])], count / med[name],
             against(name)] for name in commands]
    values = {"images": count, "rounds": rounds,
              "dataset_vs_folder": med[names["dataset"]] / med[names["folder"]],
              "in_memory_vs_folder": med[names["in-memory"]] / med[names["folder"]],
              "items_vs_folder": med[names["items"]] / med[names["folder"]],
              "saved_vs_folder_cli": med[names["cli-saved"]] / med[names["cli-folder"]]}
    table = {"columns": [["whole process", ""], ["median s", "{:.3f}"], ["min–max s", "{:.3f}"],
                         ["images/s", "{:,.0f}"], ["time vs the folder, same command", "{:.2f}×"]],
             "rows": rows}
    return {"title": "Hugging Face datasets against the same images as a folder",
            "tables": {"main": table}, "values": values,
            "goals": [goal(f"compute(Dataset) of {count:,} JPEGs 256², whole processes: within "
                           "15% of compute(folder)", values["dataset_vs_folder"], "<=", 1.15,
                           "{:.2f}×")]}


def main() -> None:
    kind, path = sys.argv[1], sys.argv[2]
    if kind not in (*KINDS, "make"):
        raise SystemExit(f"KIND is one of {', '.join(KINDS)}, not {kind!r}")
    sys.path = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # the real datasets
    import datasets

    import normstats

    datasets.disable_progress_bars()
    if kind == "make":
        _make(path, sys.argv[3])
        return
    data: object = path
    if kind != "folder":
        data = datasets.load_from_disk(path, keep_in_memory=kind == "in-memory")
    if kind == "items":
        data = data.with_transform(lambda batch: batch)
    stats = normstats.compute(data, workers=2)
    print(stats.images, " ".join(f"{value:.17g}" for value in stats.mean))


if __name__ == "__main__":
    main()
