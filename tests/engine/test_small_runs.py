"""A handful of images is read in the calling process: no worker processes, no
`distributed`; the answer is the one the pool gives."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from PIL import Image

import normstats
from normstats.engine import pipeline
from normstats.sources import open_source


def test_a_small_folder_runs_in_process_without_a_pool_or_distributed(png_folder):
    root, _ = png_folder
    script = (f"import json, sys, normstats; s = normstats.compute({str(root)!r}); "
              "print(json.dumps([s.to_dict(), 'concurrent.futures.process' in sys.modules, "
              "'distributed' in sys.modules]))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    stats, pool_loaded, distributed_loaded = json.loads(run.stdout)
    assert not pool_loaded and not distributed_loaded
    pooled = normstats.compute(root, scheduler="processes", workers=2)
    assert normstats.DatasetStats.from_dict(stats) == pooled


def test_what_counts_as_small(tmp_path, rng, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(folder / "a.png")
    assert pipeline.is_small(open_source(folder))
    monkeypatch.setattr(pipeline, "SMALL_RUN_BYTES", 10)
    assert not pipeline.is_small(open_source(folder))
    assert not pipeline.is_small(open_source(np.zeros((4, 4, 4, 3), np.uint8)))
    monkeypatch.setattr(pipeline, "SMALL_RUN_BYTES", 4 << 20)
    # allowed more pixels than Pillow in this process: the pool's workers lift the limit
    assert not pipeline.is_small(open_source(folder, max_pixels=10**12))
