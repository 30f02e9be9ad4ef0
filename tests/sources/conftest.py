"""Fixtures of the readers behind URLs: a real S3 protocol server (moto's, on 127.0.0.1),
a bucket of its own for every test, and the images it holds, also written on disk."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from s3_server import S3Server, png_bytes, running_s3

_BUCKETS = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> S3Server:
    with running_s3() as server:
        yield server


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> S3Server:
    """The S3 server, seen from an environment without any AWS configuration: no
    credentials or endpoint from the environment or ``~/.aws``, no instance-metadata
    lookup, no proxy: nothing a test does leaves 127.0.0.1."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "FSSPEC_")) or name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    return s3_server


@pytest.fixture
def bucket(s3: S3Server, request: pytest.FixtureRequest) -> str:
    """A new, empty bucket named after the test."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"t{next(_BUCKETS):03d}-{slug}"[:63].rstrip("-")
    s3.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def photos(rng: np.random.Generator) -> dict[str, bytes]:
    """20 RGB PNGs of three sizes in two class folders: relative path -> bytes."""
    files = {}
    for i in range(20):
        h, w = ((5, 7), (8, 8), (12, 3))[i % 3]
        centre = int(rng.integers(20, 236))
        pixels = rng.integers(centre - 20, centre + 20, size=(h, w, 3)).astype(np.uint8)
        files[f"{'cat' if i % 2 else 'dog'}/{i:03d}.png"] = png_bytes(pixels)
    return files
