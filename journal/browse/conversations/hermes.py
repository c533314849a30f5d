"""Hermes's sessions, in its database (``state.db``): a ``sessions`` row each (``id``,
``cwd``, ``started_at``/``ended_at`` in seconds) and its ``messages`` rows in ``id``
order, as the Chat Completions API has them: ``role`` ``user``, ``assistant``
(``content``, ``reasoning``, ``tool_calls``: JSON, each ``id`` and ``function``'s
``name`` and ``arguments``), ``tool`` (``tool_call_id``, ``tool_name``, ``content``) or
``system``; ``timestamp`` in seconds. A message Hermes rewound is ``active = 0``: not
read. Content holding images is stored as ``\\x00json:`` and the parts' JSON.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

import msgspec

from .model import Conversation, Item, Role, as_text, epoch_ns, finish, said_by_user, string, text_of
from .tables import rows, size

SECONDS = 1_000_000_000
#: How Hermes marks a content column that holds JSON parts.
JSON_CONTENT = "\x00json:"


def read(con: sqlite3.Connection, ids: Collection[str] | None) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for row in rows(con, "SELECT * FROM sessions {where}", "id", ids):
        out[row["id"]] = Conversation(id=row["id"], cwd=string(row.get("cwd")),
                                      updated_ns=epoch_ns(row.get("ended_at") or row.get("started_at"), SECONDS))
    for row in rows(con, "SELECT * FROM messages {where} ORDER BY session_id, id", "session_id", ids):
        conversation = out.get(row["session_id"])
        if conversation is None or row.get("active") == 0:
            continue
        conversation.bytes += size(*(v for k, v in row.items() if k not in ("session_id", "id")))
        items, bad = _message(row, epoch_ns(row.get("timestamp"), SECONDS))
        conversation.items.extend(items)
        conversation.unreadable += bad
    return {key: finish(c) for key, c in out.items()}


def _message(row: dict, time_ns: int | None) -> tuple[list[Item], int]:
    """A message's items, and 1 when a JSON column of it could not be read."""
    role, (text, bad) = row.get("role"), _content(row.get("content"))
    if role == "user":
        return [Item(role=said_by_user(text), text=text, time_ns=time_ns)], bad
    if role == "tool":
        return [Item(role=Role.TOOL_RESULT, tool=string(row.get("tool_name")), text=text,
                     call=string(row.get("tool_call_id")), time_ns=time_ns)], bad
    if role != "assistant":
        return [Item(role=Role.CONTEXT, text=text, time_ns=time_ns)], bad
    out = []
    if string(row.get("reasoning")):
        out.append(Item(role=Role.THINKING, text=row["reasoning"], time_ns=time_ns))
    if text:
        out.append(Item(role=Role.ASSISTANT, text=text, time_ns=time_ns))
    calls, worse = _json(row.get("tool_calls"))
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            out.append(Item(role=Role.TOOL_CALL, tool=string(function.get("name")),
                            text=as_text(function.get("arguments")), call=string(call.get("id")), time_ns=time_ns))
    return out, bad or worse


def _content(value) -> tuple[str, int]:
    if isinstance(value, str) and value.startswith(JSON_CONTENT):
        parts, bad = _json(value[len(JSON_CONTENT):])
        return text_of(parts), bad
    return (value if isinstance(value, str) else ""), 0


def _json(value) -> tuple[object, int]:
    if not isinstance(value, str) or not value:
        return None, 0
    try:
        return msgspec.json.decode(value), 0
    except msgspec.DecodeError:
        return None, 1
