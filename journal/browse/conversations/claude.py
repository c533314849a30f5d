"""Claude Code's transcript (``projects/<cwd with / as ->/<session>.jsonl``): one record
per line, each with ``type``, ``sessionId``, ``cwd``, ``timestamp``.

- ``user``: ``message.content`` a string (a prompt) or blocks: ``text``, ``image``,
  ``tool_result`` (``tool_use_id``, ``content``, ``is_error``). A record marked
  ``isMeta`` or ``isCompactSummary`` is the harness's own text (context);
- ``assistant``: blocks ``text``, ``thinking``, ``tool_use`` (``id``, ``name``, ``input``);
  one reply may span several records, one per block;
- ``system`` with ``content``: the harness's note (``Conversation compacted``);
- a record of a subagent's side chain (``isSidechain``), and ``queue-operation``,
  ``attachment``, ``progress``, ``summary``, ``last-prompt``, ``mode``,
  ``file-history-snapshot``: not read (bookkeeping, or repeated in the records above).
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Conversation, Item, Role, as_text, finish, iso_ns, said_by_user, string, text_of


def read(records: Iterable[dict]) -> Conversation:
    conversation = Conversation()
    for record in records:
        time_ns = iso_ns(record.get("timestamp"))
        conversation.id = conversation.id or string(record.get("sessionId"))
        conversation.cwd = conversation.cwd or string(record.get("cwd"))
        if time_ns is not None:
            conversation.updated_ns = time_ns
        if record.get("isSidechain") is True:
            continue
        kind, message = record.get("type"), record.get("message")
        if kind == "system" and isinstance(record.get("content"), str):
            conversation.items.append(Item(role=Role.INFO, text=record["content"], time_ns=time_ns))
        elif kind in ("user", "assistant") and isinstance(message, dict):
            meta = bool(record.get("isMeta") or record.get("isCompactSummary"))
            conversation.items.extend(_blocks(kind, message.get("content"), meta, time_ns))
    return finish(conversation)


def _blocks(kind: str, content, meta: bool, time_ns: int | None) -> list[Item]:
    """A message's items. A user's text and images are one prompt (one turn)."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return []
    out, said = [], []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        part = block.get("type")
        if part in ("text", "image", "document") and kind == "user":
            said.append(block)
        elif part == "text" and isinstance(block.get("text"), str):
            out.append(Item(role=Role.ASSISTANT, text=block["text"], time_ns=time_ns))
        elif part == "thinking" and block.get("thinking"):
            out.append(Item(role=Role.THINKING, text=as_text(block["thinking"]), time_ns=time_ns))
        elif part in ("tool_use", "server_tool_use"):
            out.append(Item(role=Role.TOOL_CALL, tool=string(block.get("name")), text=as_text(block.get("input")),
                            call=string(block.get("id")), time_ns=time_ns))
        elif part == "tool_result" or str(part).endswith("_tool_result"):
            out.append(Item(role=Role.TOOL_RESULT, text=text_of(block.get("content")),
                            call=string(block.get("tool_use_id")), error=block.get("is_error") is True,
                            time_ns=time_ns))
    if said:
        text = text_of(said)
        out.insert(0, Item(role=Role.CONTEXT if meta else said_by_user(text), text=text, time_ns=time_ns))
    return out
