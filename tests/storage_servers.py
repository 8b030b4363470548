"""Real storage services for the tests, on 127.0.0.1: an S3-compatible endpoint (moto's
``ThreadedMotoServer``) and an HTTP server that answers byte ranges, each on a free port.

Credentials and the endpoint reach capaudit the way they reach it on a user's machine:
through the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``), set for one test only (``monkeypatch``), and in the
environment of the subprocesses a test starts (:attr:`S3.env`). Import the fixtures into a
test module: ``from storage_servers import s3, moto_endpoint, http_files  # noqa: F401``.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import secrets
import socket
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

KEY_ID, SECRET = "AKIAMOTOTESTKEY12345", "moto-secret-value-0123456789abcdef"


class QuietHTTPServer(http.server.ThreadingHTTPServer):
    """A test's HTTP server whose handler threads die with the process and never print.

    A client that goes away mid-answer (a test's timeout, a killed worker, a stalled reply
    released at the end) is the test's point, not an error; socketserver would print its
    traceback from a thread that outlives the test, into whatever test runs next in that
    process (a test asserting "Traceback" not in its own stderr then fails for another's)."""

    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def moto_endpoint():
    """The endpoint, for one test module: its server thread ends with the module (a later
    test that forks the test process never copies a process with it)."""
    import logging

    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)   # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(),
                                            verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@dataclass
class S3:
    """A fresh bucket on the local endpoint; ``env`` holds what a subprocess needs."""

    endpoint: str
    bucket: str
    env: dict = field(default_factory=dict)

    def url(self, key: str = "") -> str:
        return f"s3://{self.bucket}/{key}"

    @property
    def fs(self):
        import s3fs

        return s3fs.S3FileSystem()

    def put(self, key: str, data: bytes) -> str:
        self.fs.pipe_file(f"{self.bucket}/{key}", data)
        return self.url(key)

    def put_file(self, key: str, path: Path) -> str:
        return self.put(key, Path(path).read_bytes())

    def keys(self, prefix: str = "") -> list[str]:
        fs = self.fs
        fs.invalidate_cache()
        return sorted(k[len(self.bucket) + 1:] for k in fs.find(f"{self.bucket}/{prefix}"))

    def cat(self, key: str) -> bytes:
        return self.fs.cat_file(f"{self.bucket}/{key}")


def _clear_s3fs() -> None:
    with contextlib.suppress(ImportError):
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3(moto_endpoint, monkeypatch):
    """A new bucket; the test's environment points every S3 client at the local endpoint."""
    pytest.importorskip("s3fs")
    env = {"AWS_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": KEY_ID,
           "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_DEFAULT_REGION": "us-east-1"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    _clear_s3fs()
    store = S3(moto_endpoint, f"capaudit-{secrets.token_hex(4)}", env)
    store.fs.mkdir(store.bucket)
    yield store
    _clear_s3fs()


SERVED: list[tuple[str, int]] = []   # (path, bytes) of each answered GET, for the tests


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with ``Range: bytes=a-b`` answered 206 (as any CDN or object store's
    HTTP front does); quiet; every GET's bytes counted in :data:`SERVED`."""

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not rng or not path.is_file():
            if path.is_file() and self.command == "GET":
                SERVED.append((path.name, path.stat().st_size))
            return super().send_head()
        size = path.stat().st_size
        start, _, end = rng.removeprefix("bytes=").partition("-")
        start, end = int(start or 0), min(int(end) if end else size - 1, size - 1)
        fh = open(path, "rb")
        fh.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "GET":
            SERVED.append((path.name, end - start + 1))
        return _Limited(fh, end - start + 1)


class _Limited:
    def __init__(self, fh, n: int):
        self.fh, self.left = fh, n

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.fh.read(n)
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.fh.close()


@pytest.fixture
def http_files(tmp_path):
    """``(base URL, folder)``: the files of ``folder`` served read-only on 127.0.0.1."""
    pytest.importorskip("aiohttp")
    folder = tmp_path / "www"
    folder.mkdir()
    SERVED.clear()
    server = QuietHTTPServer(("127.0.0.1", 0), partial(_RangeHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", folder
    server.shutdown()
    server.server_close()


def die_once(flag: str) -> str:
    """A task that loses its worker process the first time it runs (as when its node goes
    away) and returns the second time: for the Ray executor's retry test."""
    if not os.path.exists(flag):
        Path(flag).write_text("died")
        os._exit(1)
    return "second try"


def subprocess_env(extra: dict | None = None) -> dict:
    """This process's environment plus ``extra``, with the sources first on the path."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env
