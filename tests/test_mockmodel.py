"""The e2e suite's mock model server (tests/e2e/mockmodel.py) speaks each wire format:
streamed replies are well-formed SSE whose text carries the marker, plain replies are
the format's JSON, JSON-mode requests get an object from their schema, and a stalled
stream holds after its first delta until released. The real CLIs are its real test
(``make e2e``); this keeps it honest in ``make test``."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

from tests.e2e.mockmodel import MockModel


def post(url: str, body: dict) -> tuple[str, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.headers["Content-Type"], resp.read()


def sse(data: bytes) -> list[tuple[str | None, object]]:
    events = []
    for block in data.decode().split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        event = next((line[7:] for line in lines if line.startswith("event: ")), None)
        payload = "".join(line[6:] for line in lines if line.startswith("data: "))
        events.append((event, payload if payload == "[DONE]" else json.loads(payload)))
    return events


def text_of(route: str, events) -> str:
    if route == "responses":
        return "".join(e["delta"] for _, e in events if e["type"] == "response.output_text.delta")
    if route == "chat":
        return "".join(e["choices"][0]["delta"].get("content", "") for _, e in events if e != "[DONE]")
    if route == "messages":
        return "".join(e["delta"]["text"] for name, e in events if name == "content_block_delta")
    return "".join(p["text"] for _, e in events for p in e["candidates"][0]["content"]["parts"])


ROUTES = {"responses": ("/v1/responses", {"model": "m", "stream": True, "input": "hi"}),
          "chat": ("/v1/chat/completions", {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}),
          "messages": ("/v1/messages", {"model": "m", "stream": True, "max_tokens": 10,
                                        "messages": [{"role": "user", "content": "hi"}]}),
          "gemini": ("/v1beta/models/m:streamGenerateContent?alt=sse", {"contents": [{"parts": [{"text": "hi"}]}]})}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_streamed_format_carries_the_replys_marker(route):
    path, body = ROUTES[route]
    with MockModel() as mock:
        kind, data = post(mock.url + path, body)
        events = sse(data)
        assert kind == "text/event-stream"
        assert text_of(route, events) == f"Noted. {mock.markers[-1]}"
        assert mock.requests[-1].marker == mock.markers[-1] and mock.requests[-1].body == body
    if route == "responses":
        assert [e["type"] for _, e in events][0::5] == ["response.created", "response.completed"]
    if route == "chat":
        assert events[-1][1] == "[DONE]"
    if route == "messages":
        assert [name for name, _ in events][-1] == "message_stop"


def test_plain_replies_and_json_mode():
    with MockModel() as mock:
        _, data = post(mock.url + "/v1/messages", {"model": "m", "max_tokens": 5, "messages": []})
        assert json.loads(data)["content"][0]["text"] == f"Noted. {mock.markers[-1]}"
        schema = {"type": "object", "properties": {"reasoning": {"type": "string"},
                                                   "next_speaker": {"type": "string", "enum": ["model", "user"]}}}
        _, data = post(mock.url + "/v1beta/models/m:generateContent",
                       {"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema}})
        answer = json.loads(json.loads(data)["candidates"][0]["content"]["parts"][0]["text"])
        assert answer == {"reasoning": f"Noted. {mock.markers[-1]}", "next_speaker": "user"}


def test_a_stalled_stream_holds_after_its_first_delta_until_released():
    with MockModel() as mock:
        mock.stall()
        got: list[bytes] = []
        path, body = ROUTES["chat"]
        reader = threading.Thread(target=lambda: got.append(post(mock.url + path, body)[1]))
        reader.start()
        assert mock.stalled.wait(30)
        assert not got                                    # the reply is not over
        mock.release()
        reader.join(30)
        events = sse(got[0])
        assert text_of("chat", events) == f"Noted. {mock.markers[-1]}"[: len(f"Noted. {mock.markers[-1]}") // 2]
        assert "[DONE]" not in [e for _, e in events]     # cut off, never finished
