import json

import numpy as np
from click.testing import CliRunner
from oracle import assert_matches_oracle

import normstats
from normstats_cli import main


def test_compute_prints_the_table_explanation_and_normalize_line(png_folder):
    root, images = png_folder
    result = CliRunner().invoke(main, ["compute", str(root), "--workers", "1"])
    assert result.exit_code == 0, result.output
    stats = normstats.compute(root)
    assert f"{len(images)} images" in result.output
    for channel, mean in zip("RGB", stats.mean):
        assert any(line.split()[:2] == [channel, f"{mean:.4f}"]
                   for line in result.output.splitlines())
    assert "pooled std" in result.output and "per-image std" in result.output
    assert "torchvision.transforms.Normalize(mean=(" in result.output


def test_json_output_has_every_key_and_round_trips(png_folder):
    root, images = png_folder
    (root / "bad.jpg").write_bytes(b"not a jpeg")
    result = CliRunner().invoke(main, ["compute", str(root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("channels", "mean", "std", "std_ddof1", "per_image_std", "per_image_std_ddof1",
                "rms_per_image_std", "min", "max", "images", "pixels_per_channel", "dtype",
                "scale", "mode", "skipped"):
        assert key in data, key
    assert data["skipped"] == [{"path": "bad.jpg", "reason": data["skipped"][0]["reason"],
                                "kind": "unreadable"}]
    stats = normstats.DatasetStats.from_dict(data)
    assert_matches_oracle(stats, images, 255)


def test_failures_exit_non_zero_with_one_line(tmp_path, png_folder):
    root, _ = png_folder
    (root / "zero.png").write_bytes(b"")
    result = CliRunner().invoke(main, ["compute", str(root), "--on-error", "fail"])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "normstats: error: zero.png: zero-byte file"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["compute", str(empty)])
    assert result.exit_code == 1 and "an empty folder" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_usage_errors_exit_2_and_a_missing_path_exits_1(tmp_path):
    assert CliRunner().invoke(main, ["compute", str(tmp_path), "--mode", "XYZ"]).exit_code == 2
    missing = CliRunner().invoke(main, ["compute", str(tmp_path / "missing")])
    assert missing.exit_code == 1
    assert missing.output.strip().endswith("missing: no such file or folder")


def test_npy_layout_and_channels_options(tmp_path, rng):
    array = rng.integers(0, 256, size=(6, 3, 4, 4), dtype=np.uint8)
    np.save(tmp_path / "x.npy", array)
    result = CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy"), "--layout", "NCHW",
                                       "--channels", "R,G,B", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["channels"] == ["R", "G", "B"]


def test_demo_runs_offline_and_shows_both_variants(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "demo"), "--images", "30"])
    assert result.exit_code == 0, result.output
    assert "pooled std" in result.output and "per-image std" in result.output
    assert "broken.jpg" in result.output
    stats = normstats.compute(tmp_path / "demo")
    assert stats.images == 30 and all(p < s for p, s in zip(stats.per_image_std, stats.std))


def test_python_dash_m_entry_point():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "normstats", "--help"], capture_output=True,
                         text=True, check=True)
    assert "compute" in out.stdout


def test_version_says_the_version_and_the_kernel_in_use():
    from importlib.metadata import version

    from normstats.maths import _moments

    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"normstats {version('normstats')}", f"kernel: compiled C ({_moments._variants()[0]})"]
    assert normstats.__version__ == version("normstats")


#: A ``normstats`` process (the console script's `normstats_cli.run`) that then prints what
#: it loaded of ``sys.argv[1]`` (comma-separated module names), its BLAS threads and its
#: collector's threshold of the youngest generation: from an `atexit` handler, since the
#: command ends its process (`normstats_cli.end_process`).
_COMMAND = """
import atexit, gc, json, sys
import normstats_cli
watched, sys.argv = sys.argv[1].split(","), ["normstats", *sys.argv[2:]]
def report():
    from threadpoolctl import threadpool_info
    blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    print(json.dumps([sorted(m for m in watched if m in sys.modules), blas,
                      gc.get_threshold()[0]]))
atexit.register(report)
normstats_cli.run()
"""


def _command(arguments: list[str], watched: list[str], **env: str) -> tuple[list, list, int]:
    import os
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", _COMMAND, ",".join(watched), *arguments],
                          capture_output=True, text=True, check=True,
                          env={**environment, **env})
    return json.loads(done.stdout.splitlines()[-1])


def test_a_warm_cached_run_loads_no_decoder_executor_or_report(tmp_path):
    """Re-run on its record cache, the command reads records: it loads neither Pillow's
    image module, the executors, the cluster module, the reports of estimates, outliers and
    folders, nor the file removal a compaction uses (each cost milliseconds of a run that
    takes ~2.5x a bare walk of the folder)."""
    from PIL import Image

    data = tmp_path / "data"
    data.mkdir()
    for i in range(5):
        Image.new("RGB", (4, 4), (i, 2 * i, 3 * i)).save(data / f"{i}.png")
    unneeded = ["PIL.Image", "concurrent.futures", "normstats.engine.cluster",
                "normstats.engine.local_run", "normstats.results.findings",
                "normstats.analyses.record_reports", "normstats.analyses.sampling", "shutil"]
    arguments = ["compute", str(data), "--cache", str(tmp_path / "cache")]
    cold = _command(arguments, unneeded)[0]
    assert "PIL.Image" in cold  # it decoded: the watch list is of modules a run can load
    warm = _command(arguments, unneeded)[0]
    assert warm == []


def test_a_cached_run_does_not_map_openssl(tmp_path):
    """The record cache digests its segments with CPython's own BLAKE2: importing hashlib
    maps OpenSSL's libcrypto, 3.6 MB of the resident memory of the process that runs the
    pipeline (a third of what the cache added to a cold run of 100,000 small PNGs)."""
    from PIL import Image

    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        Image.new("RGB", (4, 4), (i, 2 * i, 3 * i)).save(data / f"{i}.png")
    arguments = ["compute", str(data), "--cache", str(tmp_path / "cache")]
    watched = ["_hashlib", "hashlib", "normstats.engine.cache.segment"]
    filling, warm = (_command(arguments, watched)[0] for _ in range(2))
    assert filling == warm == ["normstats.engine.cache.segment"]


def test_the_command_runs_numpys_blas_on_one_thread_unless_told(tmp_path):
    """OpenBLAS would start a thread per core that spins beside the run as numpy loads; the
    command's parallelism is its workers. A user's OPENBLAS_NUM_THREADS is kept."""
    np.save(tmp_path / "x.npy", np.zeros((2, 4, 4, 3), np.uint8))
    arguments = ["compute", str(tmp_path / "x.npy")]
    assert _command(arguments, [])[1] == [1]
    assert _command(arguments, [], OPENBLAS_NUM_THREADS="2")[1] == [2]


#: A ``normstats`` process that says on stderr when its `atexit` handlers run and when the
#: interpreter tears its modules down (an object of ``__main__`` freed then); with
#: ``--thread``, a thread that is not a daemon is still running when the command ends.
_ENDING = """
import atexit, sys, threading, time
class Teardown:
    def __del__(self, write=sys.stderr.write):
        write("torn down\\n")
kept = Teardown()
atexit.register(lambda: sys.stderr.write("atexit handlers ran\\n"))
if sys.argv[1] == "--thread":
    threading.Thread(target=time.sleep, args=(0.3,)).start()
import normstats_cli
sys.argv = ["normstats", *sys.argv[2:]]
normstats_cli.run()
"""


def _ending(*arguments: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", _ENDING, *arguments], capture_output=True,
                          text=True)


def test_the_command_ends_its_process_without_the_teardown_and_loses_nothing(tmp_path):
    """`normstats_cli.end_process`: the exit handlers run, every line written arrives, the
    exit status is the command's (0, 1 for an error, 2 for a usage error), and the
    interpreter's teardown of modules and objects is skipped."""
    np.save(tmp_path / "x.npy", np.arange(2 * 4 * 4 * 3, dtype=np.uint8).reshape(2, 4, 4, 3))
    arguments = ["compute", str(tmp_path / "x.npy"), "--json"]
    done = _ending("-", *arguments)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "atexit handlers ran\n"
    in_process = CliRunner().invoke(main, arguments)
    assert json.loads(done.stdout) == json.loads(in_process.stdout)
    failed = _ending("-", "compute", str(tmp_path / "missing.npy"))
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[0].startswith("normstats: error:")
    assert failed.stderr.splitlines()[1:] == ["atexit handlers ran"]
    misused = _ending("-", "compute", "--no-such-flag")
    assert misused.returncode == 2 and "torn down" not in misused.stderr
    assert misused.stderr.endswith("atexit handlers ran\n")


def test_the_command_ends_as_python_does_while_a_thread_still_runs(tmp_path):
    """A thread that is not a daemon is waited for, as the interpreter waits: the process
    then ends the usual way, teardown and all."""
    np.save(tmp_path / "x.npy", np.zeros((2, 4, 4, 3), np.uint8))
    done = _ending("--thread", "compute", str(tmp_path / "x.npy"), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["atexit handlers ran", "torn down"]
    assert json.loads(done.stdout)["images"] == 2


def test_the_command_collects_garbage_less_often_than_a_library_caller(tmp_path):
    """A ``normstats`` process makes ~10⁵ objects as it loads numpy and normstats, all of
    which live as long as it: the collector runs every `GC_YOUNG_THRESHOLD` new objects
    there (the default 700 walked them ~70 times, ~11 ms of a warm re-run). A library
    caller's collector is left as it was."""
    import gc

    from normstats_cli import GC_YOUNG_THRESHOLD

    np.save(tmp_path / "x.npy", np.zeros((2, 4, 4, 3), np.uint8))
    assert _command(["compute", str(tmp_path / "x.npy")], [])[2] == GC_YOUNG_THRESHOLD > 700
    threshold = gc.get_threshold()
    result = CliRunner().invoke(main, ["compute", str(tmp_path / "x.npy")])
    assert result.exit_code == 0, result.output
    assert gc.get_threshold() == threshold


def test_the_command_line_loads_no_numpy_before_a_command_runs():
    """`normstats --help` stays instant, the walk of a folder is forked before numpy loads
    (`normstats.sources.walk_ahead`) and numpy's BLAS is told its threads first: all need
    the command line's own modules to load without numpy. A report module once imported
    the records' module at its top for two strings, and numpy came with it."""
    import subprocess
    import sys

    code = "import sys, normstats_cli; print(sorted({'numpy', 'PIL'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "[]"
