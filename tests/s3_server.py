"""A real S3 protocol server for tests: moto's server on 127.0.0.1, counting its requests.

The server runs in a thread of the test process on a port the system chose. Every request
it serves is recorded (method, path, query) by a WSGI layer around moto's application, so
a test can count the objects a run fetched (``GET /bucket/key``), whichever process
(the test's, a pool worker, a cluster worker) sent it. Authentication is off unless a test
turns it on (`S3Server.authenticating`): moto then checks signatures and IAM user
policies, as a store does.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from moto.server import ThreadedMotoServer
from PIL import Image

#: The credentials every test uses while authentication is off (moto accepts any).
KEY, SECRET, REGION = "normstats-test", "normstats-test-secret", "us-east-1"


class CountingApp:
    """A WSGI application that records each request before moto answers it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Any) -> Any:
        with self.lock:
            self.requests.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                                  environ.get("QUERY_STRING", "")))
        return self.app(environ, start_response)


@dataclass
class S3Server:
    """A running moto server: its endpoint and every request it has served."""

    endpoint: str
    counter: CountingApp
    buckets: list[str] = field(default_factory=list)

    def client(self, key: str = KEY, secret: str = SECRET, service: str = "s3") -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint, aws_access_key_id=key,
                            aws_secret_access_key=secret, region_name=REGION)

    def storage_options(self, key: str = KEY, secret: str = SECRET) -> dict:
        """What ``compute(url, storage_options=...)`` needs to reach this server."""
        return {"endpoint_url": self.endpoint, "key": key, "secret": secret,
                "client_kwargs": {"region_name": REGION}}

    def object_reads(self, bucket: str) -> list[str]:
        """The object keys of ``bucket`` fetched so far (``GET /bucket/key``), in order."""
        prefix = f"/{bucket}/"
        return [path[len(prefix):] for method, path, _ in self.counter.requests
                if method == "GET" and path.startswith(prefix) and len(path) > len(prefix)]

    def reader(self, bucket: str, denied: list[str]) -> dict:
        """The storage options of a new IAM user who may list ``bucket`` and read every
        object of it but the keys ``denied`` (moto checks them while `authenticating`)."""
        iam = self.client(service="iam")
        user = f"reader-{bucket}"[:64]
        iam.create_user(UserName=user)
        key = iam.create_access_key(UserName=user)["AccessKey"]
        arn = f"arn:aws:s3:::{bucket}"
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"],
             "Resource": [arn, f"{arn}/*"]},
            {"Effect": "Deny", "Action": "s3:GetObject",
             "Resource": [f"{arn}/{name}" for name in denied]}]}
        iam.put_user_policy(UserName=user, PolicyName="some-denied",
                            PolicyDocument=json.dumps(policy))
        return self.storage_options(key["AccessKeyId"], key["SecretAccessKey"])

    @contextlib.contextmanager
    def authenticating(self) -> Iterator[None]:
        """Check every request's signature and its user's IAM policies (moto's switch)."""
        self._post("/moto-api/reset-auth", b"0")
        try:
            yield
        finally:
            self._post("/moto-api/reset-auth", b"inf")

    def _post(self, path: str, data: bytes) -> dict:
        request = urllib.request.Request(self.endpoint + path, data=data, method="POST",
                                         headers={"Content-Type": "text/plain"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


@contextlib.contextmanager
def running_s3() -> Iterator[S3Server]:
    """Start moto's S3 server on 127.0.0.1 (a free port) and stop it afterwards."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        counter = CountingApp(server._server.app)  # noqa: SLF001 - its one WSGI app
        server._server.app = counter  # noqa: SLF001
        yield S3Server(f"http://{host}:{port}", counter)
    finally:
        server.stop()


def png_bytes(pixels: np.ndarray, compress_level: int = 6) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG", compress_level=compress_level)
    return buffer.getvalue()


def upload(s3: S3Server, bucket: str, files: dict[str, bytes], prefix: str = "") -> None:
    client = s3.client()
    for name, data in files.items():
        client.put_object(Bucket=bucket, Key=prefix + name, Body=data)


def write_local(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return root
