"""Folders of images behind s3:// URLs, against a real S3 protocol server (moto's, on
127.0.0.1): listing, reading bit for bit as the same files on disk, the record cache keyed
by the store's identity of each object, and every failure of a store as a one-line error
that says what to check."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from oracle import numbers
from s3_server import KEY, SECRET, png_bytes, upload, write_local

import normstats
from normstats.errors import AccessError, InvalidOptionError, NormstatsError
from normstats.sources import RemoteFolderSource, open_source
from normstats.sources.remote import filesystem
from normstats_cli import main


def cli_options(s3, key: str = KEY, secret: str = SECRET) -> list[str]:
    """The --storage-option flags of the test server, as a user types them."""
    return ["--storage-option", f"endpoint_url={s3.endpoint}", "--storage-option", f"key={key}",
            "--storage-option", f"secret={secret}",
            "--storage-option", "client_kwargs.region_name=us-east-1"]


def test_listing_names_the_image_files_and_counts_the_others(s3, bucket, photos):
    upload(s3, bucket, {**photos, "README.txt": b"not an image"}, prefix="train/")
    source = open_source(f"s3://{bucket}/train/", storage_options=s3.storage_options())
    assert isinstance(source, RemoteFolderSource)
    assert [f.path for f in source.walk.files] == sorted(photos) and source.ignored == 1
    assert all(f.stamp != 0 for f in source.walk.files)  # the ETag is part of each key


@pytest.mark.parametrize("workers", [1, 2])
def test_reading_gives_the_local_folder_s_numbers_bit_for_bit(s3, bucket, photos, tmp_path,
                                                              workers):
    upload(s3, bucket, photos, prefix="train/")
    local = normstats.compute(write_local(tmp_path / "train", photos), workers=1)
    remote = normstats.compute(f"s3://{bucket}/train", storage_options=s3.storage_options(),
                               workers=workers, task_size=3)
    assert numbers(remote) == numbers(local) and remote.images == len(photos)
    assert sorted(s3.object_reads(bucket)) == sorted(f"train/{name}" for name in photos)


def test_the_environment_variables_a_user_sets_reach_the_store(s3, bucket, photos, tmp_path,
                                                               monkeypatch):
    upload(s3, bucket, photos)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
    assert numbers(normstats.compute(f"s3://{bucket}", workers=1)) == \
        numbers(normstats.compute(write_local(tmp_path / "d", photos), workers=1))


def test_a_warm_rerun_reads_no_object_and_a_changed_object_is_decoded_again(
        s3, bucket, tmp_path, rng):
    # every image the same size, as PNGs of fixed size: a rewrite keeps size and key
    pixels = [rng.integers(0, 256, (6, 5, 3), dtype=np.uint8) for _ in range(12)]
    files = {f"{i:02d}.png": png_bytes(p, compress_level=0) for i, p in enumerate(pixels)}
    upload(s3, bucket, files)
    url, cache, options = f"s3://{bucket}", tmp_path / "cache", s3.storage_options()
    cold = normstats.compute(url, storage_options=options, cache=cache, workers=1)
    reads = len(s3.object_reads(bucket))
    warm = normstats.compute(url, storage_options=options, cache=cache, workers=1)
    assert (cold.images_decoded, warm.images_cached, warm.images_decoded) == (12, 12, 0)
    assert len(s3.object_reads(bucket)) == reads == 12  # the warm run fetched nothing
    assert numbers(warm) == numbers(cold)

    changed = png_bytes(255 - pixels[3], compress_level=0)
    assert len(changed) == len(files["03.png"])  # same size: only the store's tag tells
    upload(s3, bucket, {"03.png": changed})
    after = normstats.compute(url, storage_options=options, cache=cache, workers=1)
    assert (after.images_cached, after.images_decoded) == (11, 1)
    assert s3.object_reads(bucket)[reads:] == ["03.png"]
    local = write_local(tmp_path / "d", {**files, "03.png": changed})
    assert numbers(after) == numbers(normstats.compute(local, workers=1))
    # named one by one, the objects are keyed the same way: the store is asked, not a
    # listing this process kept from an earlier run
    named = f"s3://{bucket}/{{00..11}}.png"
    normstats.compute(named, storage_options=options, cache=cache, workers=1)
    upload(s3, bucket, {"03.png": files["03.png"]})
    again = normstats.compute(named, storage_options=options, cache=cache, workers=1)
    assert (again.images_cached, again.images_decoded) == (11, 1)
    assert numbers(again) == numbers(cold)


def test_the_command_line_caches_a_url_and_says_so(s3, bucket, photos, tmp_path):
    upload(s3, bucket, photos)
    args = ["compute", f"s3://{bucket}", "--cache", str(tmp_path / "c"), *cli_options(s3)]
    first, second = (CliRunner().invoke(main, args) for _ in range(2))
    assert first.exit_code == second.exit_code == 0, first.output
    assert f"0 files from the cache, {len(photos)} decoded" in first.output
    assert f"{len(photos)} files from the cache, 0 decoded" in second.output
    cache = ["--cache", str(tmp_path / "c")]
    listed = CliRunner().invoke(main, ["cache", "list", *cache])
    assert f"s3://{bucket}" in listed.output
    shown = CliRunner().invoke(main, ["cache", "show", f"s3://{bucket}/", *cache])
    assert f"root      s3://{bucket}\n" in shown.output, shown.output
    assert CliRunner().invoke(main, ["cache", "clear", f"s3://{bucket}", *cache]).exit_code == 0
    assert "no cached datasets" in CliRunner().invoke(main, ["cache", "list", *cache]).output


def test_a_missing_bucket_is_a_one_line_error(s3):
    with pytest.raises(NormstatsError, match=r"no such bucket 'no-such-bucket'"):
        normstats.compute("s3://no-such-bucket/train", storage_options=s3.storage_options())
    result = CliRunner().invoke(main, ["compute", "s3://no-such-bucket/train", *cli_options(s3)])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "no such bucket" in result.output and "bug" not in result.output


def test_a_url_naming_no_bucket_is_a_one_line_error(s3):
    """``s3://`` alone reached s3fs's ValueError "Cannot traverse all of S3", reported as a
    normstats bug; ``memory://`` would list the whole store."""
    for url in ("s3://", "s3:///", "memory://"):
        result = CliRunner().invoke(main, ["compute", url, "--no-cache", *(
            cli_options(s3) if url.startswith("s3") else [])])
        assert result.exit_code == 1 and len(result.output.splitlines()) == 1, result.output
        assert f"{url} names no bucket or folder" in result.output and \
            "BUCKET/train" in result.output and "bug" not in result.output, result.output


def test_an_http_client_s_failures_are_the_store_s_not_normstats_bugs():
    """hf:// (huggingface_hub) fails through httpx, whose errors were reported as a
    normstats bug ("unexpected ConnectError") when the Hub could not be reached."""
    from normstats.sources.remote import is_store_failure, store_error

    errors = {name: type(name, (Exception,), {"__module__": module})
              for name, module in (("NetworkError", "httpx"), ("TimeoutException", "httpx2"),
                                   ("HfHubHTTPError", "huggingface_hub.errors"))}
    connect = type("ConnectError", (errors["NetworkError"],), {"__module__": "httpx"})
    assert all(is_store_failure(cls("x")) for cls in (*errors.values(), connect))
    assert not is_store_failure(KeyError("x"))
    message = str(store_error(connect("[Errno -2] Name or service not known"),
                              "hf://datasets/someone/photos"))
    assert message == ("hf://datasets/someone/photos: listing: cannot reach the store ([Errno -2] "
                       "Name or service not known); check the URL and the network")


def test_bad_credentials_are_a_user_error_naming_what_to_check(s3, bucket, photos):
    upload(s3, bucket, photos)
    with s3.authenticating():
        result = CliRunner().invoke(main, ["compute", f"s3://{bucket}",
                                           *cli_options(s3, "AKIAUNKNOWN", "wrong")])
    assert result.exit_code == 1, result.output
    message = result.output.strip()
    assert len(message.splitlines()) == 1 and "bug" not in message
    assert "access denied" in message and "AWS_ACCESS_KEY_ID" in message


def test_an_unreachable_endpoint_is_a_user_error_naming_the_endpoint(bucket, s3):
    options = {**s3.storage_options(), "endpoint_url": "http://127.0.0.1:9",
               "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2}}
    with pytest.raises(NormstatsError, match="cannot reach the store .* check the endpoint "
                                             r"\(--storage-option endpoint_url="):
        normstats.compute(f"s3://{bucket}", storage_options=options)


def test_access_denied_after_listing_fails_the_run_naming_how_many(s3, bucket, photos, tmp_path):
    upload(s3, bucket, photos)
    names = sorted(photos)
    denied = names[:7] + names[-7:]  # 14 of 20, spread over the tasks
    reader, cache = s3.reader(bucket, denied), tmp_path / "cache"
    with s3.authenticating():
        with pytest.raises(AccessError) as caught:
            normstats.compute(f"s3://{bucket}", storage_options=reader, cache=cache,
                              workers=1, task_size=4)
        flags = [f"--storage-option={k}={v}" for k, v in reader.items() if k != "client_kwargs"]
        result = CliRunner().invoke(main, ["compute", f"s3://{bucket}", *flags, "--no-cache"])
    assert str(caught.value).startswith(f"s3://{bucket}: 14 of 20 listed files could not be "
                                        f"read, e.g. {denied[0]}: access denied")
    assert result.exit_code == 1 and "14 of 20 listed files" in result.output
    assert len(result.output.strip().splitlines()) == 1
    # a refusal is no verdict on the image: the next run, allowed, reads the 14 again
    allowed = normstats.compute(f"s3://{bucket}", storage_options=s3.storage_options(),
                                cache=cache, workers=1)
    assert (allowed.images_cached, allowed.images_decoded) == (6, 14)
    assert numbers(allowed) == numbers(normstats.compute(write_local(tmp_path / "d", photos)))


def test_on_error_fail_stops_at_the_first_denied_object(s3, bucket, photos):
    upload(s3, bucket, photos)
    reader = s3.reader(bucket, [sorted(photos)[2]])
    with s3.authenticating(), pytest.raises(AccessError, match="access denied"):
        normstats.compute(f"s3://{bucket}", storage_options=reader, on_error="fail", workers=1)


def test_storage_options_from_the_command_line_are_typed_and_nested():
    options = normstats.ReadOptions(storage_options=[
        "anon=false", "client_kwargs.endpoint_url=http://127.0.0.1:9000",
        "config_kwargs.retries.max_attempts=3", "key=\"0123\""])
    assert options.storage_options == {
        "anon": False, "client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"},
        "config_kwargs": {"retries": {"max_attempts": 3}}, "key": "0123"}
    with pytest.raises(InvalidOptionError, match="storage option 1 is not KEY=VALUE"):
        normstats.ReadOptions(storage_options=["my-secret"])  # never echoed: may be a secret


def test_storage_options_are_refused_beside_local_data(tmp_path):
    with pytest.raises(InvalidOptionError, match="storage_options are for URLs"):
        normstats.compute(np.zeros((2, 2, 2, 1), np.uint8), storage_options={"anon": True})
    result = CliRunner().invoke(main, ["compute", str(tmp_path), "--storage-option", "anon=true"])
    assert result.exit_code == 1 and "storage_options are for URLs" in result.output


def test_a_misspelt_storage_option_is_refused_rather_than_dropped():
    # s3fs keeps unknown keywords silently: endpoint= would read from AWS itself
    with pytest.raises(InvalidOptionError, match="takes no storage option 'endpoint'; it takes "
                                                 ".*endpoint_url"):
        filesystem("s3://bucket/x", {"endpoint": "http://127.0.0.1:9000"})


def test_without_s3fs_an_s3_url_says_what_to_install():
    code = ("import sys; sys.modules['s3fs'] = None\n"
            "from normstats_cli import main\n"
            "main(['compute', 's3://bucket/train'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        "normstats: error: s3://bucket/train: reading s3:// URLs needs s3fs: pip install s3fs"]


def test_importing_normstats_and_reading_a_local_folder_load_no_s3fs(photos, tmp_path):
    folder = write_local(tmp_path / "d", photos)
    code = ("import sys, normstats\n"
            f"normstats.compute({str(folder)!r}, workers=1)\n"
            "print('s3fs' in sys.modules, 'fsspec' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.split() == ["False", "False"], result.stderr
