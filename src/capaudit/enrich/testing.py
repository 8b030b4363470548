"""A loopback OpenAI-compatible server for tests, benchmarks and demos.

Why in the package: the protocol tests, the resume test (a real subprocess
killed with SIGKILL) and the overhead benchmark all need the same server,
and users can smoke-test a pipeline offline with it. It binds 127.0.0.1
only, answers ``POST /v1/chat/completions`` deterministically (the answer
is derived from the prompt, so caching and resumes are checkable), can fail
the first N calls with a chosen status, and can sleep per call. Hostile servers too:
one that echoes the request's headers (its Authorization included) in an error body,
one that drips its reply a byte at a time, one that reports absurd usage.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def answer_for(messages: list) -> str:
    user = messages[-1]["content"]
    has_image = isinstance(user, list) and any(p.get("type") == "image_url" for p in user)
    text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user
                                                         if p.get("type") == "text")
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]
    line = next((ln for ln in text.splitlines() if ln.lower().startswith(("original caption",
                                                                          "caption a"))), "")
    base = line.split(":", 1)[1].strip() if ":" in line else "a photo"
    kind = "seen" if has_image else "fused"
    return f"{base} ({kind} {digest})"


class _Handler(BaseHTTPRequestHandler):
    """One request to a :class:`FakeOpenAIServer` (``self.server.fake``): counted, answered
    as scripted, and out of the in-flight count before its reply is written."""

    # headers and body are two writes: without this, Nagle + delayed ACK add ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, *args):  # keep test output quiet
        pass

    def do_POST(self):
        server = self.server.fake
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        with server._lock:
            server.calls += 1
            n = server.calls
            server.bodies.append(body)
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        self._counted = True
        try:
            self._answer(n, body)
        finally:
            self._leave()

    def _leave(self):
        # before the reply is written: the client may send its next request the
        # moment it has read this one, and must not find it still "in flight"
        if self._counted:
            self._counted = False
            server = self.server.fake
            with server._lock:
                server.in_flight -= 1

    def _answer(self, n, body):
        server = self.server.fake
        if server.delay_s:
            time.sleep(server.delay_s)
        if not self.path.endswith("/chat/completions"):
            return self._send(404, {"error": "not found"})
        if n <= server.fail_first:
            headers = {"Retry-After": str(server.retry_after)} \
                if server.retry_after is not None else {}
            return self._send(server.fail_status, {"error": "try later"}, headers)
        reply = server.answer(body) if server.answer else answer_for(body["messages"])
        reply = {"content": reply} if isinstance(reply, str) else reply
        if reply.get("delay"):
            time.sleep(reply["delay"])
        if "raw" in reply:
            return self._send(reply.get("status", 200), None, raw=reply["raw"],
                              drip=reply.get("drip"))
        if reply.get("echo_headers"):  # a server that quotes the request in its error
            auth = self.headers.get("Authorization")
            return self._send(reply.get("status", 401), {
                "error": f"invalid credentials: Authorization: {auth}",
                "request_headers": dict(self.headers)})
        if reply.get("status", 200) != 200:
            return self._send(reply["status"], {"error": "scripted failure"})
        text = reply["content"]
        choice = {"index": 0, "finish_reason": "stop",
                  "message": {"role": "assistant", "content": text}}
        if reply.get("logprobs") is not None:
            choice["logprobs"] = {"content": reply["logprobs"]}
        self._send(200, {"id": f"c{n}", "object": "chat.completion", "model": body["model"],
                         "choices": [choice],
                         "usage": reply.get("usage") or {
                             "prompt_tokens": len(json.dumps(body)) // 4,
                             "completion_tokens": len(text.split())}},
                   drip=reply.get("drip"))

    def _send(self, status, payload, headers=None, raw=None, drip=None):
        self._leave()
        data = raw if raw is not None else json.dumps(payload).encode()
        if drip:
            return self._drip(status, data, drip)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _drip(self, status, data, every_s):
        """Headers at once, then the body one byte every ``every_s`` seconds (a stalled
        proxy): each read of the client succeeds, so only an overall deadline ends it."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.flush()
        try:
            for i in range(len(data)):
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()
                if self.server.fake.stopping.wait(every_s):
                    return
        except OSError:  # the client gave up: what a deadline is for
            return


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default 5 drops SYNs under concurrency: 1 s stalls
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Silent: a client gone mid-answer (a timeout under test) is not the server's error,
        and its traceback would land in the stderr of whatever runs next in the process."""


class FakeOpenAIServer:
    def __init__(self, delay_s: float = 0.0, fail_first: int = 0, fail_status: int = 429,
                 retry_after: float | None = None, answer=None):
        """``answer(body) -> str | dict`` scripts the replies (default :func:`answer_for`);
        a dict may set ``status``, ``content``, ``logprobs`` (the choice's ``content``
        list), ``raw`` (bytes sent as is: malformed replies), ``delay``, ``usage`` (the
        reply's usage object), ``drip`` (seconds between the body's bytes) and
        ``echo_headers`` (answer ``status``, default 401, quoting the request headers)."""
        self.answer = answer
        self.delay_s, self.fail_first, self.fail_status = delay_s, fail_first, fail_status
        self.retry_after = retry_after
        self.calls = 0          # all POSTs, including failed ones
        self.bodies: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        self.stopping = threading.Event()  # ends dripping replies at shutdown
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:  # pragma: no cover - manual smoke runs
    import argparse

    ap = argparse.ArgumentParser(description="loopback OpenAI-compatible test server")
    ap.add_argument("--delay", type=float, default=0.0)
    args = ap.parse_args()
    with FakeOpenAIServer(delay_s=args.delay) as srv:
        print(srv.base_url, flush=True)
        srv.thread.join()


if __name__ == "__main__":  # pragma: no cover
    main()
