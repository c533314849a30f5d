"""A mock model server on 127.0.0.1 for the real agent CLIs (``make e2e``).

It speaks the four wire formats the harnesses use, streamed (SSE) and plain:

- OpenAI Responses (``POST …/responses``: Codex);
- OpenAI chat completions (``POST …/chat/completions``: opencode, Hermes);
- Anthropic Messages (``POST …/messages``: Claude Code);
- Gemini (``POST …/models/M:generateContent`` and ``:streamGenerateContent``).

Every reply is a short text carrying a fresh marker (``MOCK-<n>-<token>``), so a test
can tell that a resumed turn's request holds an earlier turn's reply. A request that
asks for JSON (Gemini's router and next-speaker checks) gets an object made from its
schema instead. Every request is recorded (path and body) for the test to read.

``stall()`` makes the next streamed reply stop after its first text delta and hold the
connection open until ``release()`` (or the client goes away): the moment at which a
test kills the supervisor and the CLI "in the middle of a stream".

It serves nothing but 127.0.0.1 and calls nothing. Run it by hand with
``python tests/e2e/mockmodel.py [PORT]``.
"""

from __future__ import annotations

import itertools
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Request:
    """One request the server answered: its method, path and decoded JSON body."""

    def __init__(self, method: str, path: str, body: bytes):
        self.method = method
        self.path = path
        self.raw = body.decode("utf-8", "replace")
        self.marker: str | None = None      # the marker of the reply it got
        try:
            self.body = json.loads(body) if body else {}
        except ValueError:
            self.body = {}

    def __repr__(self) -> str:
        return f"Request({self.method} {self.path}, {len(self.raw)} bytes)"


class MockModel:
    """The server, run on a thread: ``with MockModel() as mock: mock.url``."""

    def __init__(self, port: int = 0):
        self.requests: list[Request] = []
        self.markers: list[str] = []
        self._count = itertools.count(1)
        self._lock = threading.Lock()
        self._stall_next = False
        self.stalled = threading.Event()         # set when a stalled reply has sent its first delta
        self._released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MockModel:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()

    def stall(self) -> None:
        """Make the next streamed model reply hang after its first text delta."""
        with self._lock:
            self._stall_next = True
            self.stalled.clear()
            self._released.clear()

    def release(self) -> None:
        self._released.set()

    def next_marker(self) -> str:
        marker = f"MOCK-{next(self._count)}-{secrets.token_hex(4)}"
        with self._lock:
            self.markers.append(marker)
        return marker

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def take_stall(self) -> bool:
        with self._lock:
            stall, self._stall_next = self._stall_next, False
            return stall

    def hold(self, alive) -> None:
        """Wait, as a stalled stream, until released or the client is gone."""
        self.stalled.set()
        while not self._released.wait(0.2):
            if not alive():
                return

    def carrying(self, marker: str) -> list[Request]:
        """The requests whose body holds ``marker``."""
        with self._lock:
            return [r for r in self.requests if marker in r.raw]

    def model_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if _route(r.path) is not None]


# -- the wire formats ----------------------------------------------------------------

def _route(path: str) -> str | None:
    path = path.split("?", 1)[0]
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/messages"):
        return "messages"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return None


def _sse(event: str | None, data: dict | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def _split(text: str) -> tuple[str, str]:
    cut = max(1, len(text) // 2)
    return text[:cut], text[cut:]


def _responses(reply: str, body: dict) -> tuple[list[bytes], dict]:
    rid, mid = f"resp_{secrets.token_hex(6)}", f"msg_{secrets.token_hex(6)}"
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
    item = {"type": "message", "role": "assistant", "id": mid, "status": "completed",
            "content": [{"type": "output_text", "text": reply, "annotations": []}]}
    model = body.get("model", "mock")
    head, tail = _split(reply)
    events = [
        _sse("response.created", {"type": "response.created", "response": {"id": rid, "model": model}}),
        _sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                            "item": {**item, "status": "in_progress", "content": []}}),
        _sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": mid,
                                            "output_index": 0, "content_index": 0, "delta": head}),
        _sse("response.output_text.delta", {"type": "response.output_text.delta", "item_id": mid,
                                            "output_index": 0, "content_index": 0, "delta": tail}),
        _sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        _sse("response.completed", {"type": "response.completed",
                                    "response": {"id": rid, "model": model, "status": "completed",
                                                 "output": [item], "usage": usage}}),
    ]
    whole = {"id": rid, "object": "response", "model": model, "status": "completed", "output": [item], "usage": usage}
    return events, whole


def _chat(reply: str, body: dict) -> tuple[list[bytes], dict]:
    cid, model, now = f"chatcmpl-{secrets.token_hex(6)}", body.get("model", "mock"), int(time.time())
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def chunk(delta: dict, finish: str | None, **extra) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})

    head, tail = _split(reply)
    events = [chunk({"role": "assistant", "content": head}, None), chunk({"content": tail}, None),
              chunk({}, "stop", usage=usage), b"data: [DONE]\n\n"]
    whole = {"id": cid, "object": "chat.completion", "created": now, "model": model, "usage": usage,
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": reply}}]}
    return events, whole


def _messages(reply: str, body: dict) -> tuple[list[bytes], dict]:
    mid, model = f"msg_{secrets.token_hex(6)}", body.get("model", "mock")
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    head, tail = _split(reply)
    start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    events = [
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": {"type": "text", "text": ""}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": head}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": tail}}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    whole = {**start, "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn", "usage": usage}
    return events, whole


def _gemini(reply: str, body: dict) -> tuple[list[bytes], dict]:
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}

    def part(text: str, finish: str | None) -> dict:
        candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "mock"}

    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        text = json.dumps(_from_schema(config.get("responseJsonSchema") or config.get("responseSchema") or {}, reply))
        return [_sse(None, part(text, "STOP"))], part(text, "STOP")
    head, tail = _split(reply)
    return [_sse(None, part(head, None)), _sse(None, part(tail, "STOP"))], part(reply, "STOP")


def _from_schema(schema: dict, reply: str):
    """A value that fits ``schema``: the reply for strings, "user" where an enum offers it
    (Gemini's next-speaker check: the model never keeps the turn), else the first choice;
    a number is its minimum, else 1."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        choices = schema["enum"]
        return "user" if "user" in choices else choices[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _from_schema(sub, reply) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 1)         # Gemini's router wants a complexity score of 1-100
    if kind == "boolean":
        return False
    return reply


FORMATS = {"responses": _responses, "chat": _chat, "messages": _messages, "gemini": _gemini}


def _streamed(route: str, path: str, body: dict) -> bool:
    if route == "gemini":
        return ":streamGenerateContent" in path
    return bool(body.get("stream"))


def _handler(mock: MockModel):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def _send_json(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            mock.record(Request("GET", self.path, b""))
            if self.path.split("?", 1)[0].endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "mock", "object": "model"}],
                                      "models": [{"name": "models/mock"}]})
            else:
                self._send_json(404, {"error": {"message": f"mock model server: no {self.path}"}})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            request = Request("POST", self.path, raw)
            mock.record(request)
            route = _route(self.path)
            if route is None:
                if self.path.split("?", 1)[0].endswith(":countTokens") or "count_tokens" in self.path:
                    self._send_json(200, {"totalTokens": 10, "input_tokens": 10})
                else:
                    self._send_json(404, {"error": {"message": f"mock model server: no {self.path}"}})
                return
            request.marker = mock.next_marker()
            reply = f"Noted. {request.marker}"
            events, whole = FORMATS[route](reply, request.body)
            if not _streamed(route, self.path, request.body):
                self._send_json(200, whole)
                return
            self._stream(events, _split(reply)[0].encode() if mock.take_stall() else None)

        def _stream(self, events: list[bytes], stall_after: bytes | None) -> None:
            """Send ``events``; with ``stall_after``, hang after the event carrying it."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            try:
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                    if stall_after is not None and stall_after in event:
                        mock.hold(self._alive)
                        return
            except (BrokenPipeError, ConnectionResetError):
                return

        def _alive(self) -> bool:
            try:
                self.wfile.write(b": keep-alive\n\n")
                self.wfile.flush()
                return True
            except OSError:
                return False

    return Handler


def main(argv: list[str]) -> int:
    port = int(argv[1]) if len(argv) > 1 else 0
    with MockModel(port) as mock:
        print(mock.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
