"""pi's session entries, as OpenClaw keeps them: one JSON object per entry, in a JSONL
file (``agents/<agent>/sessions/<id>.jsonl``, before OpenClaw 2026.9, and pi's own) or
one per row of OpenClaw's database (``openclaw.py``).

- ``session``: the session's ``id`` and ``cwd``;
- ``message``: ``message.role`` ``user`` (``content`` a string or ``text``/``image``
  parts), ``assistant`` (parts ``text``, ``thinking``, ``toolCall``: ``id``, ``name``,
  ``arguments``; ``errorMessage`` when the request failed), ``toolResult``
  (``toolCallId``, ``toolName``, ``content``, ``isError``), ``bashExecution`` (a
  command the user ran: ``command``, ``output``, ``exitCode``), or another role (a
  harness's own message: context);
- ``compaction``: the history before it replaced by ``summary`` (context);
- ``model_change``, ``thinking_level_change``, ``custom``...: not read.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Conversation, Item, Role, as_text, finish, iso_ns, said_by_user, string, text_of


def read(records: Iterable[dict]) -> Conversation:
    conversation = Conversation()
    for record in records:
        time_ns = iso_ns(record.get("timestamp"))
        if time_ns is not None:
            conversation.updated_ns = time_ns
        kind = record.get("type")
        if kind == "session":
            conversation.id = conversation.id or string(record.get("id"))
            conversation.cwd = conversation.cwd or string(record.get("cwd"))
        elif kind == "compaction" and isinstance(record.get("summary"), str):
            conversation.items.append(Item(role=Role.CONTEXT, text=record["summary"], time_ns=time_ns))
        elif kind == "message" and isinstance(record.get("message"), dict):
            conversation.items.extend(_message(record["message"], time_ns))
    return finish(conversation)


def _message(message: dict, time_ns: int | None) -> list[Item]:
    role, content = message.get("role"), message.get("content")
    if role == "user":
        text = text_of(content)
        return [Item(role=said_by_user(text), text=text, time_ns=time_ns)]
    if role == "toolResult":
        return [Item(role=Role.TOOL_RESULT, tool=string(message.get("toolName")), text=text_of(content),
                     call=string(message.get("toolCallId")), error=message.get("isError") is True, time_ns=time_ns)]
    if role == "bashExecution":
        return [Item(role=Role.TOOL_CALL, tool="bash", text=as_text(message.get("command")), time_ns=time_ns),
                Item(role=Role.TOOL_RESULT, tool="bash", text=as_text(message.get("output")), time_ns=time_ns,
                     error=message.get("exitCode") not in (0, None))]
    if role != "assistant":
        return [Item(role=Role.CONTEXT, text=text_of(content), time_ns=time_ns)]
    out = []
    for part in content if isinstance(content, list) else [{"type": "text", "text": content}]:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
            out.append(Item(role=Role.ASSISTANT, text=part["text"], time_ns=time_ns))
        elif kind == "thinking" and part.get("thinking"):
            out.append(Item(role=Role.THINKING, text=as_text(part["thinking"]), time_ns=time_ns))
        elif kind == "toolCall":
            out.append(Item(role=Role.TOOL_CALL, tool=string(part.get("name")), text=as_text(part.get("arguments")),
                            call=string(part.get("id")), time_ns=time_ns))
    if isinstance(message.get("errorMessage"), str):
        out.append(Item(role=Role.INFO, text=f"error: {message['errorMessage']}", time_ns=time_ns))
    return out
