"""A conversation as ``journal show`` prints it: the items a harness's records hold,
in the order it wrote them, grouped into turns.

An item is one thing said or done: a prompt, a reply, a tool call and its result,
the model's reasoning, text the harness put into the conversation (``CONTEXT``:
instructions, the environment, a compaction's summary) or the harness's own note
(``INFO``). A turn is a prompt and everything after it until the next prompt; what
comes before the first prompt is turn 0.

The readers (one module per format) turn records into items; what every format
shares is here: records read from JSONL (a line that is not a JSON object is counted
as unreadable, never raised), text out of a message's parts, times as nanoseconds.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import re
from collections.abc import Iterable, Iterator

import msgspec

#: The most characters of a first prompt a listing keeps (its first line).
PROMPT_CHARS = 200


class Role(str, enum.Enum):
    USER = "user"                   # a prompt the user typed
    ASSISTANT = "assistant"         # the model's reply text
    THINKING = "thinking"           # the model's reasoning, where the harness keeps it readable
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    CONTEXT = "context"             # text the harness put in: instructions, environment, summaries
    INFO = "info"                   # the harness's own note: an error, a compaction


class Item(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: Role
    text: str = ""
    tool: str | None = None         # a tool call's or result's tool
    call: str | None = None         # the id tying a result to its call
    time_ns: int | None = None
    error: bool = False             # a tool result that reports a failure


class Turn(msgspec.Struct, kw_only=True):
    number: int                     # 1 for the first prompt's; 0 for what precedes it
    items: list[Item]


class Conversation(msgspec.Struct, kw_only=True):
    """What one session's records say."""

    items: list[Item] = []
    unreadable: int = 0             # records skipped: not JSON, or not an object
    bytes: int = 0                  # the bytes of its records
    id: str | None = None           # the session id its records name, when they do
    cwd: str | None = None          # its working directory, when its records say
    updated_ns: int | None = None   # when the harness last wrote it, when its records say

    def turns(self) -> list[Turn]:
        """Its items by turn: each prompt opens one; what precedes the first is turn 0."""
        opening = 1 if self.items and self.items[0].role is Role.USER else 0
        out: list[Turn] = []
        for item in self.items:
            if item.role is Role.USER or not out:
                out.append(Turn(number=len(out) + opening, items=[]))
            out[-1].items.append(item)
        return out

    @property
    def prompts(self) -> int:
        return sum(item.role is Role.USER for item in self.items)

    @property
    def first_prompt(self) -> str | None:
        """The first prompt's first line that is not blank, cut to ``PROMPT_CHARS``."""
        for item in self.items:
            if item.role is Role.USER:
                line = next((ln.strip() for ln in item.text.splitlines() if ln.strip()), "")
                return line[:PROMPT_CHARS]
        return None

    @property
    def last_ns(self) -> int | None:
        times = [item.time_ns for item in self.items if item.time_ns is not None]
        if self.updated_ns is not None:
            times.append(self.updated_ns)
        return max(times, default=None)

    def digest(self) -> bytes:
        """What identifies its content: two versions with one digest show the same."""
        return hashlib.sha256(msgspec.msgpack.encode((self.items, self.unreadable))).digest()


def finish(conversation: Conversation) -> Conversation:
    """Give each tool result its call's tool name, where only the call named it, and
    drop a result written twice (Gemini keeps one on its reply and again as a message)."""
    tools = {item.call: item.tool for item in conversation.items if item.role is Role.TOOL_CALL and item.call}
    seen: set[tuple[str, str]] = set()
    kept = []
    for item in conversation.items:
        if item.role is Role.TOOL_RESULT and item.call:
            if (item.call, item.text) in seen:
                continue
            seen.add((item.call, item.text))
            item.tool = item.tool or tools.get(item.call)
        kept.append(item)
    conversation.items = kept
    return conversation


class Lines:
    """The JSON objects of a JSONL stream (its bytes in pieces), one per line: a line
    that is not one is counted in ``unreadable`` and skipped; a blank line is neither."""

    def __init__(self, pieces: Iterable[bytes]):
        self.pieces = pieces
        self.unreadable = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[dict]:
        held: list[bytes] = []
        for piece in self.pieces:
            self.bytes += len(piece)
            lines = piece.split(b"\n")
            for line in lines[:-1]:
                if held:
                    held.append(line)
                    line, held = b"".join(held), []
                yield from self._record(line)
            if lines[-1]:
                held.append(lines[-1])
        if held:
            yield from self._record(b"".join(held))

    def _record(self, line: bytes) -> Iterator[dict]:
        if not line.strip():
            return
        record = decoded(line)
        if record is None:
            self.unreadable += 1
        else:
            yield record


def decoded(text) -> dict | None:
    """A record stored as JSON text (a database's column): the object, or None."""
    if not isinstance(text, (str, bytes)):
        return None
    try:
        record = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None
    return record if isinstance(record, dict) else None


#: Text a harness puts in a user message itself: a leading ``<tag>`` (Codex's
#: ``<environment_context>``, Gemini's ``<session_context>``, Claude's
#: ``<system-reminder>`` and ``<command-name>``) or Codex's AGENTS.md preamble.
_CONTEXT = re.compile(r"\s*(?:<[a-z][a-z0-9_-]*>|# AGENTS\.md instructions)")


def said_by_user(text: str) -> Role:
    """``USER`` for a prompt, ``CONTEXT`` for text the harness wrote in the user's name."""
    return Role.CONTEXT if _CONTEXT.match(text) else Role.USER


def text_of(content) -> str:
    """The text of a message's content: a string, or the text of its parts (``text``,
    ``input_text``, ``output_text`` or any part with a string ``text``), one per line;
    an image or a file part as ``[image]``/``[file]``."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    out = []
    for part in content:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif str(part.get("type", "")).endswith(("image", "file", "document")):
                out.append(f"[{part['type'].rpartition('_')[2]}]")
    return "\n".join(out)


def as_text(value) -> str:
    """A tool call's arguments or a result's payload as text: a string as it is, any
    other value as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def iso_ns(value) -> int | None:
    """An ISO-8601 time (``2026-12-07T17:03:11.833Z``) as nanoseconds; None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return int(moment.timestamp() * 1_000_000) * 1000


def epoch_ns(value, unit: int) -> int | None:
    """A number of seconds (``unit`` 10**9) or milliseconds (10**6) since the epoch as nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value * unit)


def dig(record, *keys: str):
    """``record[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(record, dict):
            return None
        record = record.get(key)
    return record


def string(value) -> str | None:
    return value if isinstance(value, str) and value else None
