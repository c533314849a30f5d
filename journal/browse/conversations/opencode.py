"""opencode's sessions, in its database (``opencode.db``): a ``session`` row each
(``id``, ``directory``, ``time_updated`` in ms), its ``message`` rows (``data``: JSON,
``role`` ``user`` or ``assistant``, ``error``), and each message's ``part`` rows
(``data``: JSON by ``type``):

- ``text``: what was said (``synthetic``: the harness's own text);
- ``reasoning``: the model's reasoning;
- ``tool``: a call (``tool``, ``callID``) with its ``state`` (``input``; ``output`` when
  ``completed``, ``error`` when failed);
- ``file``: an attachment; ``compaction``: the history was compacted;
- ``step-start``, ``step-finish``, ``snapshot``, ``patch``...: bookkeeping, not read.

Messages and parts are in id order (their ids are made in time order), as opencode
lists them.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from .model import Conversation, Item, Role, as_text, decoded, epoch_ns, finish, said_by_user, string, text_of
from .tables import rows, size

MS = 1_000_000


def read(con: sqlite3.Connection, ids: Collection[str] | None) -> dict[str, Conversation]:
    out: dict[str, Conversation] = {}
    for row in rows(con, "SELECT * FROM session {where}", "id", ids):
        out[row["id"]] = Conversation(id=row["id"], cwd=string(row.get("directory")),
                                      updated_ns=epoch_ns(row.get("time_updated"), MS))
    sql = ("SELECT m.session_id AS session_id, m.id AS id, m.time_created AS time, m.data AS message, p.data AS part "
           "FROM message m LEFT JOIN part p ON p.message_id = m.id {where} ORDER BY m.session_id, m.id, p.id")
    last = None
    for row in rows(con, sql, "m.session_id", ids):
        conversation = out.get(row["session_id"])
        if conversation is None:
            continue
        message, part = decoded(row["message"]), decoded(row["part"])
        if row["id"] != last:          # a message's first row: the message itself counts once
            last = row["id"]
            conversation.bytes += size(row["message"])
            conversation.unreadable += message is None
            if message is not None and message.get("error"):
                conversation.items.append(Item(role=Role.INFO, text=f"error: {_error(message['error'])}",
                                               time_ns=epoch_ns(row["time"], MS)))
        conversation.bytes += size(row["part"])
        conversation.unreadable += row["part"] is not None and part is None
        if message is not None and part is not None:
            conversation.items.extend(_part(message.get("role"), part, epoch_ns(row["time"], MS)))
    return {key: finish(c) for key, c in out.items()}


def _part(role, part: dict, time_ns: int | None) -> list[Item]:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        text = part["text"]
        if role != "user":
            return [Item(role=Role.ASSISTANT, text=text, time_ns=time_ns)]
        return [Item(role=Role.CONTEXT if part.get("synthetic") else said_by_user(text), text=text, time_ns=time_ns)]
    if kind == "reasoning" and part.get("text"):
        return [Item(role=Role.THINKING, text=as_text(part["text"]), time_ns=time_ns)]
    if kind == "tool":
        return _tool(part, time_ns)
    if kind == "file":
        return [Item(role=Role.CONTEXT, text=f"[file] {as_text(part.get('filename') or part.get('url'))}",
                     time_ns=time_ns)]
    if kind == "compaction":
        return [Item(role=Role.INFO, text="history compacted", time_ns=time_ns)]
    return []


def _tool(part: dict, time_ns: int | None) -> list[Item]:
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    tool, call = string(part.get("tool")), string(part.get("callID"))
    out = [Item(role=Role.TOOL_CALL, tool=tool, text=as_text(state.get("input")), call=call, time_ns=time_ns)]
    if state.get("status") == "completed":
        out.append(Item(role=Role.TOOL_RESULT, tool=tool, text=as_text(state.get("output")), call=call,
                        time_ns=time_ns))
    elif state.get("status") == "error":
        out.append(Item(role=Role.TOOL_RESULT, tool=tool, text=as_text(state.get("error")), call=call,
                        time_ns=time_ns, error=True))
    return out


def _error(error) -> str:
    """An assistant message's error: ``{"name", "data": {"message"}}``."""
    if isinstance(error, dict):
        message = error.get("data", {}).get("message") if isinstance(error.get("data"), dict) else None
        return as_text(message or error.get("name") or error)
    return text_of(error) or as_text(error)
