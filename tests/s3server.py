"""An S3 endpoint for tests: moto's server on a free local port, and a fresh bucket per test.

Load it as a plugin from a test module (``pytest_plugins = ["tests.s3server"]``; the
repository root is on ``sys.path`` through pyproject's ``pythonpath``). Fixtures:

- ``s3_server`` (session): the running ``ThreadedMotoServer``. Its credentials and
  region are put in ``os.environ`` for the session (restored at the end), since
  ``CloudStore`` reads them from there; ``s3_server.env`` holds them for subprocesses.
- ``s3_bucket`` (function): a new, empty bucket and a unique prefix in it, with its
  store URL and a boto3 client for looking at the objects behind the store's back.
- ``s3_url``: just ``s3_bucket.url``.

moto keeps its S3 state in process-wide backends, not in the server object, so a
``MotoEndpoint`` that is stopped and started again on the same port serves the same
buckets and objects (``test_fencing.py`` relies on this to simulate an outage).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
import weakref
from dataclasses import dataclass, field

import pytest

#: What a process needs to reach the test endpoint (merged into subprocess environments).
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _recording_server(log: list, connections: weakref.WeakSet, port: int):
    """A ``ThreadedMotoServer`` whose WSGI app appends ``(method, path, query)`` of every
    request to ``log``, and which adds every accepted socket to ``connections``."""
    from moto.server import ThreadedMotoServer
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    class RecordingMotoServer(ThreadedMotoServer):
        def _server_entry(self) -> None:
            app = DomainDispatcherApplication(create_backend_app)
            conditional = threading.Lock()

            def recording_app(environ, start_response):
                log.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""), environ.get("QUERY_STRING", "")))
                if environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH"):
                    # moto checks a condition, then writes: two concurrent put-if-absent
                    # requests for one key can both succeed. S3 does both as one step;
                    # one at a time, the test server keeps that guarantee.
                    with conditional:
                        return list(app(environ, start_response))
                return app(environ, start_response)

            server = make_server(self._ip_address, self._port, recording_app, True,
                                 request_handler=MotoRequestHandler)
            accept = server.get_request

            def get_request():
                sock, addr = accept()
                connections.add(sock)
                return sock, addr

            server.get_request = get_request
            self._server = server
            self._server_ready_event.set()
            self._server.serve_forever()

    return RecordingMotoServer(ip_address="127.0.0.1", port=port, verbose=False)


class MotoEndpoint:
    """A ``ThreadedMotoServer`` on 127.0.0.1 that can be stopped and started again.

    ``requests`` logs ``(method, path, query)`` of every request it served, across restarts.
    """

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.requests: list[tuple[str, str, str]] = []
        self.env = dict(S3_ENV)
        self._connections: weakref.WeakSet = weakref.WeakSet()
        self._server = None

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> "MotoEndpoint":
        self._server = _recording_server(self.requests, self._connections, self.port)
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut every open connection, as an outage would.

        Werkzeug's ``shutdown`` only stops accepting: handler threads of in-flight
        requests and keep-alive connections would go on serving without the cut.
        """
        if self._server is not None:
            self._server.stop()
            self._server = None
        for sock in list(self._connections):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="test", aws_secret_access_key="test")

    def url(self, bucket: str, prefix: str, **options: str) -> str:
        """The store URL of ``bucket``/``prefix`` on this endpoint (extra query options appended)."""
        query = {"endpoint": self.endpoint, "allow_http": "true", "region": "us-east-1", **options}
        return f"s3://{bucket}/{prefix}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def new_bucket(self, prefix: str | None = None, **options: str) -> "Bucket":
        name = f"jt-{uuid.uuid4().hex[:20]}"
        client = self.client()
        client.create_bucket(Bucket=name)
        prefix = prefix or f"journal-{uuid.uuid4().hex[:8]}"
        return Bucket(name=name, prefix=prefix, url=self.url(name, prefix, **options), client=client, server=self)


@dataclass
class Bucket:
    """One test's bucket, the store prefix in it and the store URL."""

    name: str
    prefix: str
    url: str
    client: object = field(repr=False)
    server: MotoEndpoint = field(repr=False)

    def objects(self) -> dict[str, str]:
        """Every key under the prefix (relative to it) with its ETag."""
        found = {}
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.name, Prefix=self.prefix + "/"):
            for obj in page.get("Contents", []):
                found[obj["Key"][len(self.prefix) + 1:]] = obj["ETag"]
        return found

    def mark(self) -> int:
        """A position in the server's request log, for ``writes(since=...)``."""
        return len(self.server.requests)

    def writes(self, since: int = 0) -> list[tuple[str, str, str]]:
        """Requests since ``since`` that could change this bucket: PUT, POST, DELETE
        (a bulk delete is a POST to the bucket itself, ``/<bucket>?delete``)."""
        return [r for r in self.server.requests[since:]
                if r[0] in ("PUT", "POST", "DELETE") and (r[1] == f"/{self.name}" or r[1].startswith(f"/{self.name}/"))]

    def etag(self, key: str) -> str:
        return self.client.head_object(Bucket=self.name, Key=f"{self.prefix}/{key}")["ETag"]


@contextlib.contextmanager
def moto_endpoint():
    """A running ``MotoEndpoint``, with its test credentials in ``os.environ`` until it
    stops (``CloudStore`` reads them from there); the benchmark uses it too."""
    saved = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = MotoEndpoint().start()
    try:
        yield server
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server for the whole session, with test credentials in ``os.environ``."""
    with moto_endpoint() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server) -> Bucket:
    """A fresh bucket with a unique prefix on the session server."""
    return s3_server.new_bucket()


@pytest.fixture
def s3_url(s3_bucket) -> str:
    """The store URL of a fresh bucket and prefix."""
    return s3_bucket.url
