"""One HTTP POST with a deadline for each phase, abortable from another thread.

Why not ``urlopen(timeout=...)`` alone: that timeout bounds each socket read, so a server
that drips one byte every few seconds keeps a request (and the run, and a Ctrl-C waiting
for its worker threads) alive for ever. Here every request has three limits:

- ``connect_s``: opening the connection;
- ``read_s``: the longest silence between two reads;
- ``total_s``: the whole exchange, enforced by a timer that shuts the socket down.

:meth:`Connections.abort_all` shuts every open socket of a backend down at once: the
worker threads blocked on them wake within milliseconds, so Ctrl-C (which cannot reach a
worker thread) ends a run at once instead of when the slowest server answers.
"""

from __future__ import annotations

import functools
import http.client
import socket
import threading
import time
import urllib.request


class DeadlineExceeded(TimeoutError):
    """The server did not finish its reply within the request's total deadline."""


class Connections:
    """The open sockets of one backend, so that all of them can be aborted together."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: set = set()
        self.aborted = threading.Event()

    def add(self, sock) -> None:
        with self._lock:
            self._open.add(sock)
        if self.aborted.is_set():
            _shut(sock)

    def discard(self, sock) -> None:
        with self._lock:
            self._open.discard(sock)

    def abort_all(self) -> None:
        """Wake every thread blocked on this backend's sockets (Ctrl-C)."""
        self.aborted.set()
        with self._lock:
            socks = list(self._open)
        for sock in socks:
            _shut(sock)


def _shut(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _Sink(list):
    """The sockets of one request, each also registered with the backend's
    :class:`Connections` the moment it is connected (before the headers arrive)."""

    def __init__(self, connections: Connections):
        super().__init__()
        self.connections = connections

    def append(self, sock) -> None:
        super().append(sock)
        self.connections.add(sock)


class _Tracking:
    """Mixin for ``HTTPConnection``: connect within ``connect_s``, then read with
    ``read_s`` per read, and report the socket to ``sink`` (a list) so it can be shut."""

    def __init__(self, *args, sink: list, connect_s: float, read_s: float, **kwargs):
        kwargs["timeout"] = connect_s
        super().__init__(*args, **kwargs)
        self._sink, self._read_s = sink, read_s

    def connect(self):
        super().connect()
        self.sock.settimeout(self._read_s)
        self._sink.append(self.sock)


class _HTTP(_Tracking, http.client.HTTPConnection):
    pass


class _HTTPS(_Tracking, http.client.HTTPSConnection):
    pass


class _Handler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    def __init__(self, **conn):
        urllib.request.HTTPHandler.__init__(self)
        urllib.request.HTTPSHandler.__init__(self)
        self._conn = conn

    def http_open(self, req):
        return self.do_open(functools.partial(_HTTP, **self._conn), req)

    def https_open(self, req):
        return self.do_open(functools.partial(_HTTPS, **self._conn), req,
                            context=self._context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is answered as what it is, never followed: urllib would resend the request
    (as a GET) with its ``Authorization`` header to whatever host ``Location`` names, and
    take that host's reply as the judge's."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def post(request: urllib.request.Request, *, proxies: dict | None, connections: Connections,
         connect_s: float, read_s: float, total_s: float, max_bytes: int):
    """``(status, body bytes or None when over max_bytes, headers)``; HTTP errors raise
    ``HTTPError`` as with ``urlopen``, the deadline :class:`DeadlineExceeded`, an abort
    ``OSError``."""
    if connections.aborted.is_set():
        raise InterruptedError("interrupted")
    sink = _Sink(connections)
    handlers = [_Handler(sink=sink, connect_s=connect_s, read_s=read_s), _NoRedirect()]
    if proxies is not None:
        handlers.append(urllib.request.ProxyHandler(proxies))
    opener = urllib.request.build_opener(*handlers)
    expired = threading.Event()

    def expire():
        expired.set()
        for sock in sink:
            _shut(sock)
    timer = threading.Timer(total_s, expire)
    timer.daemon = True
    timer.start()
    t0 = time.monotonic()
    try:
        try:
            with opener.open(request) as resp:
                chunks, size = [], 0
                while size <= max_bytes:
                    chunk = resp.read1(1 << 16)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                if expired.is_set():
                    raise DeadlineExceeded
                return resp.status, (b"".join(chunks) if size <= max_bytes else None)
        except (OSError, http.client.HTTPException):
            if expired.is_set() or time.monotonic() - t0 >= total_s:
                raise DeadlineExceeded(f"no complete reply within the {total_s:g} s "
                                       "deadline") from None
            if connections.aborted.is_set():
                raise InterruptedError("interrupted") from None
            raise
    finally:
        timer.cancel()
        for sock in sink:
            connections.discard(sock)
