"""WebDataset shards, brace ranges, Parquet files and zarr stores behind s3:// URLs, read
against a real S3 protocol server (moto's, on 127.0.0.1): each gives the numbers of the
same files on disk, bit for bit, also on a two-worker local cluster."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zarr
from click.testing import CliRunner
from oracle import numbers
from s3_server import upload, write_local

import normstats
from normstats.errors import AccessError, InvalidOptionError, NormstatsError
from normstats.sources import open_source
from normstats.sources.remote_formats import RemoteParquetSource, RemoteTarSource
from normstats_cli import main


def shards(photos: dict[str, bytes], count: int) -> dict[str, bytes]:
    """The photos as WebDataset shards ``shard-000.tar`` ...: a sample is an image and a
    class label."""
    names = sorted(photos)
    out = {}
    for number in range(count):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for index, name in enumerate(names[number::count]):
                key = f"{number:03d}{index:03d}"
                for member, data in ((f"{key}.png", photos[name]),
                                     (f"{key}.cls", name.split("/")[0].encode())):
                    info = tarfile.TarInfo(member)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        out[f"shard-{number:03d}.tar"] = buffer.getvalue()
    return out


def test_a_brace_range_of_tar_shards_reads_as_the_local_shards(s3, bucket, photos, tmp_path):
    files = shards(photos, 4)
    upload(s3, bucket, {**files, "README.md": b"# shards"}, prefix="wds/")
    local = normstats.compute(str(write_local(tmp_path, files) / "shard-{000..003}.tar"),
                              workers=1)
    url = f"s3://{bucket}/wds/shard-{{000..003}}.tar"
    source = open_source(url, storage_options=s3.storage_options())
    assert isinstance(source, RemoteTarSource) and len(source.tasks()) == 4
    remote = normstats.compute(url, storage_options=s3.storage_options(), workers=2)
    assert numbers(remote) == numbers(local) and remote.images == len(photos)
    assert remote.source == url
    assert sorted(s3.object_reads(bucket)) == [f"wds/{name}" for name in sorted(files)]
    # the range is looked up in one listing of its folder, not one request a shard
    assert not [path for method, path, _ in s3.counter.requests
                if method == "HEAD" and path.startswith(f"/{bucket}/wds/")]
    # the folder of shards, and a glob of them, are the same dataset
    for other in (f"s3://{bucket}/wds", f"s3://{bucket}/wds/*.tar"):
        assert numbers(normstats.compute(other, storage_options=s3.storage_options(),
                                         workers=1)) == numbers(local)


def test_a_missing_shard_of_a_brace_range_is_named(s3, bucket, photos):
    upload(s3, bucket, shards(photos, 2))
    with pytest.raises(NormstatsError, match=r"shard-002.tar: no such file or folder \(from the "
                                             r"brace pattern s3://.*shard-\{000\.\.002\}.tar\)"):
        normstats.compute(f"s3://{bucket}/shard-{{000..002}}.tar",
                          storage_options=s3.storage_options())


def test_a_truncated_shard_is_an_error_naming_its_url(s3, bucket, photos):
    whole = shards(photos, 1)["shard-000.tar"]
    end = -(-len(whole.rstrip(b"\0")) // 512) * 512  # after the last member's padding
    upload(s3, bucket, {"shard-000.tar": whole[:end]})  # cut at a member boundary
    with pytest.raises(NormstatsError, match=rf"^s3://{bucket}/shard-000.tar: ends without the "
                                             "end-of-archive blocks"):
        normstats.compute(f"s3://{bucket}/shard-000.tar", storage_options=s3.storage_options(),
                          workers=1)


def test_damaged_samples_are_skipped_and_named_by_the_shard_s_url(s3, bucket, photos):
    image = photos[sorted(photos)[0]]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for member, data in (("a.png", image), ("b.cls", b"1"), ("c.png", b"garbage")):
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    upload(s3, bucket, {"s.tar": buffer.getvalue()})
    url = f"s3://{bucket}/s.tar"
    for percentiles in (False, True):  # streamed, or decoded whole for the histogram
        stats = normstats.compute(url, storage_options=s3.storage_options(), workers=1,
                                  percentiles=percentiles)
        assert stats.images == 1
        assert [(s.path, s.reason.split(" (")[0]) for s in stats.skipped] == [
            (f"{url}:b", "sample has no image member"), (f"{url}:c.png", "not an image")]


def test_a_shard_the_store_refuses_fails_the_run(s3, bucket, photos):
    upload(s3, bucket, shards(photos, 3))
    reader = s3.reader(bucket, ["shard-001.tar"])
    with s3.authenticating():
        # listed with its folder, refused when fetched: the rest is read, then the run fails
        with pytest.raises(AccessError, match=rf"^s3://{bucket} \(3 tar files\): 1 listed "
                                              rf"file could not be read, e.g. "
                                              rf"s3://{bucket}/shard-001.tar: access denied"):
            normstats.compute(f"s3://{bucket}", storage_options=reader, workers=1)
        # named by a brace range: listed with their folder, refused alike
        pattern = f"s3://{bucket}/shard-{{000..002}}.tar"
        with pytest.raises(AccessError, match=r"shard-\{000\.\.002\}.tar: 1 listed file "
                                              rf"could not be read, e.g. s3://{bucket}/shard-001"):
            normstats.compute(pattern, storage_options=reader, workers=1)
        # named alone, a shard is looked up first: refused there
        with pytest.raises(NormstatsError, match=rf"^s3://{bucket}/shard-001.tar: reading: "
                                                 "access denied"):
            normstats.compute(f"s3://{bucket}/shard-001.tar", storage_options=reader)


def hf_parquet(photos: dict[str, bytes], path: Path | None = None) -> bytes:
    """The photos as a Hugging Face Parquet file: an ``image`` struct column of bytes and
    path, a ``label`` column, row groups of 6 rows."""
    names = sorted(photos)
    table = pa.table({"image": pa.array([{"bytes": photos[n], "path": n} for n in names]),
                      "label": [int(n.startswith("cat")) for n in names]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=6)
    return buffer.getvalue()


def test_a_parquet_file_reads_as_the_local_file(s3, bucket, photos, tmp_path):
    data = hf_parquet(photos)
    upload(s3, bucket, {"train-00000-of-00001.parquet": data}, prefix="hf/data/")
    local = write_local(tmp_path, {"train.parquet": data}) / "train.parquet"
    url = f"s3://{bucket}/hf/data/train-00000-of-00001.parquet"
    source = open_source(url, storage_options=s3.storage_options())
    assert isinstance(source, RemoteParquetSource) and len(source) == len(photos)
    assert numbers(normstats.compute(url, storage_options=s3.storage_options(), workers=2)) == \
        numbers(normstats.compute(local, workers=1))
    # a folder of Parquet files is the dataset of its files
    assert numbers(normstats.compute(f"s3://{bucket}/hf", storage_options=s3.storage_options(),
                                     workers=1)) == numbers(normstats.compute(local, workers=1))


def test_image_paths_in_a_parquet_file_are_read_from_its_folder_in_the_store(s3, bucket,
                                                                            photos, tmp_path):
    names = sorted(photos)
    table = pa.table({"image_path": [f"images/{n}" for n in names] + ["../escape.png"]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    upload(s3, bucket, {"index.parquet": buffer.getvalue(), "../escape.png": photos[names[0]]})
    upload(s3, bucket, photos, prefix="images/")
    stats = normstats.compute(f"s3://{bucket}/index.parquet", storage_options=s3.storage_options(),
                              workers=1)
    assert numbers(stats) | {"skipped": ()} == \
        numbers(normstats.compute(write_local(tmp_path, photos), workers=1))
    assert [(s.path, s.kind) for s in stats.skipped] == [(f"index.parquet:{len(names)}",
                                                          "refused")]
    assert "leads out of the Parquet file's folder" in stats.skipped[0].reason


def test_a_zarr_store_reads_as_the_local_store(s3, bucket, tmp_path, rng):
    pixels = rng.integers(0, 256, (30, 6, 5, 3), dtype=np.uint8)
    store = tmp_path / "train.zarr"
    zarr.create_array(store, shape=pixels.shape, chunks=(7, 6, 5, 3), dtype="uint8")[:] = pixels
    upload(s3, bucket, {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*")
                        if p.is_file()}, prefix="train.zarr/")
    url = f"s3://{bucket}/train.zarr"
    remote = normstats.compute(url, storage_options=s3.storage_options(), workers=2)
    assert numbers(remote) == numbers(normstats.compute(str(store), workers=1))
    assert remote.source == url and remote.images == 30


def test_a_zarr_group_behind_a_url_names_the_url_of_its_array(s3, bucket, tmp_path):
    store = tmp_path / "data.zarr"
    zarr.open_group(store, mode="w").create_array("train", shape=(2, 3, 3, 3), dtype="uint8")
    upload(s3, bucket, {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*")
                        if p.is_file()}, prefix="data.zarr/")
    with pytest.raises(NormstatsError, match=rf"its arrays \(train\), e\.g\. s3://{bucket}/"
                                             r"data\.zarr/train$"):
        normstats.compute(f"s3://{bucket}/data.zarr", storage_options=s3.storage_options())


def test_a_file_of_another_format_behind_a_url_says_what_is_read(s3, bucket):
    upload(s3, bucket, {"labels.csv": b"a,b\n1,2\n"})
    with pytest.raises(NormstatsError, match="cannot read this file behind a URL: normstats reads "
                                             "folders of images, image files, tar shards"):
        normstats.compute(f"s3://{bucket}/labels.csv", storage_options=s3.storage_options())
    with pytest.raises(InvalidOptionError, match="--format idx reads local files"):
        normstats.compute(f"s3://{bucket}/labels.csv", storage_options=s3.storage_options(),
                          format="idx")


def test_a_two_worker_local_cluster_reads_the_store_bit_for_bit(s3, bucket, photos, tmp_path):
    files = shards(photos, 3)
    upload(s3, bucket, photos, prefix="train/")
    upload(s3, bucket, files, prefix="wds/")
    local = normstats.compute([str(write_local(tmp_path / "train", photos)),
                               str(write_local(tmp_path / "wds", files) / "shard-*.tar")],
                              workers=1)
    flags = [f"--storage-option=endpoint_url={s3.endpoint}", "--storage-option=key=normstats-test",
             "--storage-option=secret=normstats-test-secret",
             "--storage-option=client_kwargs.region_name=us-east-1"]
    result = CliRunner().invoke(main, ["compute", f"s3://{bucket}/train",
                                       f"s3://{bucket}/wds/shard-{{000..002}}.tar",
                                       "--local-cluster", "--workers", "2", "--json", "--no-cache",
                                       *flags])
    assert result.exit_code == 0, result.output
    remote = normstats.DatasetStats.from_json(result.stdout)
    assert numbers(remote) == numbers(local) and remote.images == 2 * len(photos)
