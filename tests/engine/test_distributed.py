"""normstats on dask.distributed: a real scheduler and two worker processes on 127.0.0.1.

The cluster (tests/distributed_cluster.py) is started once for the module. Every
cluster result is compared bit for bit with the local run of the same data.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import distributed  # in the test extra: fail, never skip
import fsspec  # in the test extra: fail, never skip
import numpy as np
import pytest
from click.testing import CliRunner
from distributed_cluster import running_cluster
from PIL import Image

import normstats
from normstats.engine.cluster import is_distributed
from normstats.engine.distributed import CRASH_REASON
from normstats.sources import FolderSource, RemoteFolderSource, open_source
from normstats_cli import main

IMAGES = 60


def numbers(stats: normstats.DatasetStats) -> dict:
    """Everything a run computes, without where the data came from or the cache's share."""
    data = stats.to_dict()
    for name in ("source", "images_cached", "images_decoded"):
        data.pop(name, None)
    return data


def png_bytes(rng: np.random.Generator, index: int) -> bytes:
    """An integer RGB image of one of three sizes, with a per-image brightness."""
    h, w = ((5, 7), (8, 8), (12, 3))[index % 3]
    centre = int(rng.integers(20, 236))
    pixels = rng.integers(centre - 20, centre + 20, size=(h, w, 3)).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG")
    return buffer.getvalue()


def dataset(count: int = IMAGES) -> dict[str, bytes]:
    """Relative path -> PNG bytes, in two class folders, generated deterministically."""
    rng = np.random.default_rng(7)
    return {f"{'cat' if i % 2 else 'dog'}/{i:03d}.png": png_bytes(rng, i) for i in range(count)}


def write_folder(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("cluster")) as running:
        yield running


@pytest.fixture
def client(cluster):
    """A client of the test cluster with both workers up (a previous test may kill one)."""
    with distributed.Client(cluster.address, set_as_default=False, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        yield client


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / "data", dataset())


def local(path, cache=False, **options) -> normstats.DatasetStats:
    return normstats.compute(path, workers=1, cache=cache, **options)


# -- without a cluster ----------------------------------------------------------------


def test_is_distributed_tells_addresses_from_local_schedulers():
    assert all(map(is_distributed, ("tcp://127.0.0.1:8786", "127.0.0.1:8786", "sched.json",
                                    "tls://host:8786")))
    assert not any(map(is_distributed, ("sync", "threads", "processes", None, "nonsense")))


@pytest.mark.parametrize("args, message", [
    (["--threads-per-worker", "2"], "needs --local-cluster"),
    (["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"], "the cluster's workers decide"),
    (["--local-cluster", "--scheduler", "threads"], "drop --scheduler"),
    (["--scheduler", "nonsense"], "none of sync, threads, processes"),
    (["--scheduler", "missing.json"], "does not exist"),
])
def test_cli_refuses_incoherent_cluster_options(folder, args, message):
    result = CliRunner().invoke(main, ["compute", str(folder), *args])
    assert result.exit_code == 2 and message in result.output


def test_memory_url_folder_matches_the_local_folder(folder):
    fs = fsspec.filesystem("memory")
    fs.pipe({f"/local-url/{name}": data for name, data in dataset().items()})
    fs.pipe("/local-url/README.txt", b"not an image")
    source = open_source("memory://local-url")
    assert isinstance(source, RemoteFolderSource) and source.ignored == 1
    expected = numbers(local(folder))
    assert numbers(local("memory://local-url", task_size=7)) == expected
    assert numbers(normstats.compute("memory://local-url", workers=2, task_size=5)) == expected


def test_memory_url_names_unreadable_files():
    fs = fsspec.filesystem("memory")
    fs.pipe({"/bad-url/a.png": dataset(1)["dog/000.png"], "/bad-url/b.png": b"",
             "/bad-url/c.jpg": b"garbage"})
    stats = local("memory://bad-url")
    assert stats.images == 1
    assert [(s.path, s.reason.split(" (")[0]) for s in stats.skipped] == [
        ("b.png", "zero-byte file"), ("c.jpg", "not an image")]


def test_an_unreachable_scheduler_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr("normstats.engine.cluster.CONNECT_TIMEOUT", 1)
    with pytest.raises(normstats.NormstatsError, match="cannot connect to the Dask scheduler"):
        normstats.compute(np.zeros((3, 2, 2, 1), np.uint8), scheduler="tcp://127.0.0.1:9")


class _NotDask:
    """A TCP service on 127.0.0.1 that is no Dask scheduler: to each connection it sends
    ``reply`` (maybe nothing) and closes it."""

    def __init__(self, reply: bytes) -> None:
        self.reply, self.server = reply, socket.create_server(("127.0.0.1", 0))
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:  # closed by the test
                return
            with connection:
                with contextlib.suppress(OSError):
                    connection.sendall(self.reply)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("reply", "answered"), [
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "sent b'HTTP/1.1 400 Bad Request\\r\\n\\r\\n'"),
    (b"", "closed the connection without a word"),
], ids=["http", "closes"])
def test_a_scheduler_address_of_another_service_says_so(tmp_path, reply, answered):
    """Garbage read as a Dask frame length made the client allocate exabytes: the run
    ended in "out of memory". It says what answered at the address instead."""
    service = _NotDask(reply)
    write_folder(tmp_path / "data", dataset(3))
    try:
        run = subprocess.run([sys.executable, "-m", "normstats", "compute",
                              str(tmp_path / "data"), "--scheduler", service.address],
                             capture_output=True, text=True, timeout=100)
    finally:
        service.server.close()
    assert run.returncode == 1 and "out of memory" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"normstats: error: cannot talk to a Dask scheduler at {service.address}: the service "
        f"there {answered}, which is not a Dask scheduler's handshake; check the address (a "
        "scheduler listens on port 8786 unless told otherwise)"]


def test_file_url_is_the_local_folder(folder):
    assert isinstance(open_source(f"file://{folder}"), FolderSource)
    with pytest.raises(normstats.NormstatsError, match="no such file or folder"):
        open_source("memory://no-such-folder")


# -- on the cluster -------------------------------------------------------------------


def test_cluster_run_is_bit_identical_to_the_local_run(client, cluster, folder, tmp_path):
    assert set(client.run(os.getenv, "MALLOC_TRIM_THRESHOLD_").values()) == {None}
    expected = numbers(local(folder))
    assert numbers(normstats.compute(folder, scheduler=client, task_size=7,
                                     cache=False)) == expected
    # the cache lives with the client: it gathers the records and writes them
    cache = tmp_path / "cache"
    first = normstats.compute(folder, scheduler=cluster.address, cache=cache)
    again = local(folder, cache=cache)
    assert (first.images_decoded, again.images_cached, again.images_decoded) == (IMAGES,
                                                                               IMAGES, 0)
    assert numbers(first) == numbers(again) == expected


def test_a_cluster_run_cuts_fewer_larger_tasks_than_a_local_run(client, folder, caplog):
    """A task costs a round trip through the scheduler: on a cluster, the default tasks are
    4 times larger, at least 4 a worker thread (10 for a local pool), same numbers."""
    threads = sum(client.nthreads().values())
    local_tasks = len(FolderSource(folder).tasks(None, threads))
    cluster_size = math.ceil(IMAGES / (4 * threads))  # 60 small PNGs: the per-worker floor
    with caplog.at_level(logging.INFO, logger="normstats.engine.distributed"):
        stats = normstats.compute(folder, scheduler=client, cache=False)
    assert f"normstats: {math.ceil(IMAGES / cluster_size)} tasks," in caplog.text
    assert math.ceil(IMAGES / cluster_size) < local_tasks
    assert numbers(stats) == numbers(local(folder))


def test_the_mean_image_on_the_cluster_is_the_local_one(client, tmp_path):
    """Folder tasks on the workers send their per-position totals back with their
    records; a Dask array's mean image is a reduction on the cluster."""
    import dask.array as da

    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (30, 6, 4, 3), dtype=np.uint8)
    folder = tmp_path / "same-size"
    folder.mkdir()
    for i, image in enumerate(pixels):
        Image.fromarray(image).save(folder / f"{i:02d}.png")
    expected = local(folder, mean_image_std=True)
    for data in (folder, da.from_array(pixels, chunks=(7, 3, 4, 3))):
        found = normstats.compute(data, scheduler=client, task_size=4, mean_image_std=True)
        assert np.array_equal(found.mean_image, expected.mean_image)
        assert np.array_equal(found.mean_image_std, expected.mean_image_std)


def test_the_covariance_on_the_cluster_is_the_local_one(client, folder, tmp_path):
    """Workers make the cross sums the client's run asked for (a worker does not share the
    client's context): the cluster's covariance is the local run's, bit for bit, also
    when the cache (written by the client) answers a run that asks for it again."""
    expected = local(folder, covariance=True)
    found = normstats.compute(folder, scheduler=client, task_size=7, cache=tmp_path / "c",
                              covariance=True)
    again = local(folder, cache=tmp_path / "c", covariance=True)
    assert found.covariance == again.covariance == expected.covariance is not None
    assert found.correlation == expected.correlation and again.images_decoded == 0


def test_cli_scheduler_address_and_scheduler_file(cluster, folder):
    runner = CliRunner()
    local_json = runner.invoke(main, ["compute", str(folder), "--json", "--no-cache",
                                      "--workers", "1"])
    for scheduler in (cluster.address, str(cluster.scheduler_file)):
        remote = runner.invoke(main, ["compute", str(folder), "--json", "--no-cache",
                                      "--scheduler", scheduler, "--progress"])
        assert remote.exit_code == 0, remote.output
        assert remote.stdout == local_json.stdout
        assert "normstats: stages:" in remote.stderr and "100%" in remote.stderr


def test_memory_url_on_the_cluster(client, folder):
    """memory:// lives in each process: the files are written in this one and in every
    worker (a bound ``pipe`` of the memory filesystem pickles as that filesystem)."""
    fs = fsspec.filesystem("memory")
    files = {f"/cluster-url/{name}": data for name, data in dataset().items()}
    fs.pipe(files)
    client.run(fs.pipe, files)
    stats = normstats.compute("memory://cluster-url", scheduler=client, task_size=6)
    assert numbers(stats) == numbers(local(folder))


def test_killing_a_worker_mid_run_changes_nothing(client, folder, tmp_path):
    """The worker killed is the one decoding a chosen file, in the middle of its task:
    never an idle worker, whatever the scheduling."""
    # defined here, so that they travel to the workers by value
    def _arm(marker: str, victim: str) -> None:
        """On a worker: the first worker of all to decode ``victim`` SIGKILLs itself while
        decoding it (once: the marker file, created exclusively, records its pid)."""
        import os
        import signal

        from normstats.sources import folder
        from normstats.sources.decoding import decode

        real = getattr(decode, "_unarmed_decode_bytes", decode.decode_bytes)
        decode._unarmed_decode_bytes = real

        def decode_bytes(data, name, *rest):
            if name.endswith(victim):
                try:
                    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                except FileExistsError:
                    return real(data, name, *rest)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                os.kill(os.getpid(), signal.SIGKILL)
            return real(data, name, *rest)

        decode.decode_bytes = decode_bytes
        # every file through decode_file (`FolderTask.run` takes plain ones straight)
        folder._unarmed_run = getattr(folder, "_unarmed_run", folder.FolderTask.run)
        folder.FolderTask.run = folder.DecodingTask.run

    def _disarm() -> None:
        from normstats.sources import folder
        from normstats.sources.decoding import decode

        decode.decode_bytes = getattr(decode, "_unarmed_decode_bytes", decode.decode_bytes)
        folder.FolderTask.run = getattr(folder, "_unarmed_run", folder.FolderTask.run)

    marker = tmp_path / "killed"
    client.run(_arm, str(marker), os.path.join("cat", "031.png"))
    try:
        cache = tmp_path / "cache"
        stats = normstats.compute(folder, scheduler=client, task_size=2, cache=cache)
    finally:
        client.run(_disarm)
    killed = int(marker.read_text())
    assert killed not in client.run(os.getpid).values()
    assert numbers(stats) == numbers(local(folder))
    again = local(folder, cache=cache)  # what the cache holds is exact too
    assert again.images_cached == IMAGES and numbers(again) == numbers(stats)


def test_relative_paths_are_the_clients_files_on_the_workers(client, folder, tmp_path,
                                                             monkeypatch):
    """Workers run in their own folder (here the one pytest started in). Paths given
    relative to the client's folder used to be resolved there: a folder's files all
    "disappeared", a tar, Parquet, Arrow or IDX path raised FileNotFoundError, and a zarr
    store was read as made of its fill value, zeros, without a word. Tasks now carry
    absolute paths; a zarr store opened by a relative path is reopened by its absolute
    one, and a Dask array over one is refused before the cluster reads it."""
    import tarfile

    import dask.array as da
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zarr

    pixels = np.random.default_rng(5).integers(0, 256, (12, 6, 5, 3), dtype=np.uint8)
    files = dataset(12)
    with tarfile.open(tmp_path / "s.tar", "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    cells = [{"bytes": data, "path": name} for name, data in files.items()]
    pq.write_table(pa.table({"image": cells}), tmp_path / "p.parquet")
    with pa.OSFile(str(tmp_path / "a.arrow"), "wb") as sink, \
            pa.ipc.new_stream(sink, pa.table({"image": cells}).schema) as writer:
        writer.write_table(pa.table({"image": cells}))
    zarr.create_array(tmp_path / "z.zarr", data=pixels, chunks=(4, 6, 5, 3))
    np.save(tmp_path / "x.npy", pixels)
    header = bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (12, 6, 15))
    (tmp_path / "images-idx3-ubyte").write_bytes(header + pixels.tobytes())
    monkeypatch.chdir(tmp_path)
    assert tmp_path.name not in set(client.run(os.getcwd).values()).pop()
    for name in ("data", "s.tar", "p.parquet", "a.arrow", "z.zarr", "x.npy",
                 "images-idx3-ubyte"):
        expected = numbers(local(tmp_path / name))
        assert numbers(normstats.compute(name, scheduler=client, cache=False)) == expected
    opened = zarr.open_array("z.zarr", mode="r")
    assert numbers(normstats.compute(opened, scheduler=client)) == numbers(local(pixels))
    with pytest.raises(normstats.NormstatsError, match=r"^z.zarr: a zarr store opened by a "
                       r"relative path, which a cluster's workers would look for in their "
                       r"own folders"):
        normstats.compute(da.from_array(opened, chunks=4), scheduler=client)
    with client.as_current(), pytest.raises(normstats.NormstatsError, match="relative path"):
        normstats.compute(da.from_array(opened, chunks=4))  # Dask's default: the client
    assert numbers(normstats.compute(da.from_array(opened, chunks=4))) == numbers(local(pixels))
    assert numbers(normstats.compute(da.from_array(zarr.open_array(tmp_path / "z.zarr"),
                                                   chunks=4), scheduler=client)) == \
        numbers(local(pixels))


def test_a_dataset_class_the_cluster_cannot_import_is_one_line(client, folder, tmp_path,
                                                               monkeypatch):
    """A map-style dataset of the user's own module ships by reference: the scheduler
    cannot import it and said only "Error during deserialization of the task graph". The
    message names the module and the two ways out; the second of them then runs."""
    import cloudpickle

    (tmp_path / "users_own_datasets.py").write_text(
        "import numpy as np\n"
        "from PIL import Image\n\n"
        "class Photos:\n"
        "    def __init__(self, paths):\n"
        "        self.paths = paths\n\n"
        "    def __len__(self):\n"
        "        return len(self.paths)\n\n"
        "    def __getitem__(self, index):\n"
        "        return np.asarray(Image.open(self.paths[index]).convert('RGB'))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import users_own_datasets

    photos = users_own_datasets.Photos(sorted(str(p) for p in folder.rglob("*.png")))
    with pytest.raises(normstats.NormstatsError, match=r"^the cluster cannot load this run's "
                       r"tasks: no module named 'users_own_datasets' where they are unpickled "
                       r".*cloudpickle.register_pickle_by_value\(users_own_datasets\)"):
        normstats.compute(photos, scheduler=client)
    cloudpickle.register_pickle_by_value(users_own_datasets)
    try:
        found = normstats.compute(photos, scheduler=client)
    finally:
        cloudpickle.unregister_pickle_by_value(users_own_datasets)
    assert numbers(found) == numbers(local(photos))


def test_on_error_fail_stops_the_cluster_run_naming_the_file(client, folder):
    (folder / "dog" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(normstats.NormstatsError, match="broken.png: not an image"):
        normstats.compute(folder, scheduler=client, on_error="fail", cache=False)


@pytest.mark.slow
@pytest.mark.parametrize("task_size", [4, 1])
def test_an_image_that_kills_its_worker_every_time_is_skipped(client, folder, tmp_path,
                                                             caplog, task_size):
    expected = numbers(local(folder))
    # in the middle of the listing, so its task holds healthy files too
    shutil.copy(folder / "dog" / "000.png", folder / "cat" / "POISON.png")
    cache = tmp_path / "cache"
    with caplog.at_level(logging.INFO, logger="normstats.engine.distributed"):
        stats = normstats.compute(folder, scheduler=client, task_size=task_size, cache=cache)
    assert f"a task of {task_size} files killed its workers" in caplog.text
    assert [s.path for s in stats.skipped] == [os.path.join("cat", "POISON.png")]
    assert stats.skipped[0].reason.startswith(f"{CRASH_REASON} 2 times")
    assert stats.skipped[0].kind is normstats.SkipKind.TRANSIENT
    assert {**numbers(stats), "skipped": []} == expected
    # a crash may be the machine's fault, so it is not cached: the next run retries it
    again = local(folder, cache=cache)
    assert (again.images_cached, again.images_decoded) == (IMAGES, 1)


@pytest.mark.slow
def test_cli_local_cluster(folder):
    result = CliRunner().invoke(main, ["compute", str(folder), "--json", "--no-cache",
                                       "--local-cluster", "--workers", "1",
                                       "--threads-per-worker", "1"])
    assert result.exit_code == 0, result.output
    assert normstats.DatasetStats.from_json(result.stdout).images == IMAGES


def test_the_malloc_warning_is_for_runs_that_decode(client, folder, caplog):
    """Workers started with dask's malloc setting decode at half speed: a folder run says
    so once; an array run, which decodes nothing, does not."""
    import logging

    # exec, a builtin, travels to the workers by name (a test function would not)
    client.run(exec, "import os; os.environ['MALLOC_TRIM_THRESHOLD_'] = '65536'")
    try:
        with caplog.at_level(logging.WARNING):
            normstats.compute(np.zeros((4, 2, 2, 3), np.uint8), scheduler=client)
            assert "MALLOC_TRIM_THRESHOLD_" not in caplog.text
            normstats.compute(folder, scheduler=client, cache=False)
        assert caplog.text.count("which slows the decoding of images Pillow decodes") == 1
    finally:
        client.run(exec, "import os; os.environ.pop('MALLOC_TRIM_THRESHOLD_', None)")
