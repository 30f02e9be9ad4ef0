"""The decode-only ceiling as a whole process: list a folder, read and decode every file.

    python benchmarks/decode_only.py jpeg|png|tiff|jpeg+kernel FOLDER [--workers 2]

The least any tool can do with the same files, decoder and parallelism: a sorted walk, a
fork ``Pool`` of ``--workers`` processes fed one chunk at a time, each reading its files
and decoding them with the decoder normstats uses for them (simplejpeg's libjpeg-turbo for
JPEG, libpng through imagecodecs for PNG, tifffile for TIFF rasters), keeping nothing.
Only the standard library, numpy and the decoder are imported, so start-up is as small as
such a script's can be. ``jpeg+kernel`` also reduces each decoded image with normstats'
compiled kernel (`normstats.maths.fused`, the only normstats module it imports), and
nothing else: what any exact reduction on top of the decoder costs with that kernel.
"""

from __future__ import annotations

import time

_STARTED = time.perf_counter()  # imports are counted from here (--phases)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from multiprocessing import get_context  # noqa: E402


def _files(root: str, suffix: str) -> list[str]:
    found = []
    for folder, subfolders, names in os.walk(root):
        subfolders.sort()
        found += [os.path.join(folder, n) for n in sorted(names) if n.lower().endswith(suffix)]
    return found


def _jpeg(paths: list[str]) -> int:
    import simplejpeg

    for path in paths:
        with open(path, "rb") as handle:
            simplejpeg.decode_jpeg(handle.read(), colorspace="RGB")
    return len(paths)


def _png(paths: list[str]) -> int:
    import imagecodecs

    for path in paths:
        with open(path, "rb") as handle:
            imagecodecs.png_decode(handle.read())
    return len(paths)


def _jpeg_and_kernel(paths: list[str]) -> int:
    import simplejpeg

    from normstats.maths import fused

    outputs = fused.outputs(1, 3)
    for path in paths:
        with open(path, "rb") as handle:
            image = simplejpeg.decode_jpeg(handle.read(), colorspace="RGB")
        fused.uint8_moments_into(image, 0, *outputs)
    return len(paths)


def _tiff(paths: list[str]) -> int:
    import tifffile

    for path in paths:
        tifffile.imread(path, maxworkers=1)
    return len(paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("jpeg", "png", "tiff", "jpeg+kernel"))
    parser.add_argument("folder")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--phases", action="store_true",
                        help="print the seconds of each phase and the CPU time of the process "
                             "and its workers (JSON) instead of the count")
    args = parser.parse_args()
    listing = time.perf_counter()
    suffix, chunk, work = {"jpeg": (".jpg", 200, _jpeg), "png": (".png", 1000, _png),
                           "tiff": (".tif", 200, _tiff),
                           "jpeg+kernel": (".jpg", 200, _jpeg_and_kernel)}[args.kind]
    files = _files(args.folder, suffix)
    chunks = [files[i:i + chunk] for i in range(0, len(files), chunk)]
    listed = time.perf_counter()
    with get_context("fork").Pool(args.workers) as pool:
        # one chunk at a time, to whichever worker is free: Pool.map's default batching
        # (len/4·workers chunks a batch) left a worker idle at the end of the run
        decoded = sum(pool.imap_unordered(work, chunks))
    done = time.perf_counter()
    if args.phases:
        import resource

        own, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                            resource.RUSAGE_CHILDREN))
        print(json.dumps({"imports": listing - _STARTED, "walk": listed - listing,
                          "run": done - listed, "cpu_parent": own.ru_utime + own.ru_stime,
                          "cpu_workers": workers.ru_utime + workers.ru_stime}))
    else:
        print(decoded)


if __name__ == "__main__":
    main()
