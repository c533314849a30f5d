"""Codex's rollout (``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``): one record per
line, ``{"timestamp", "type", "payload"}``.

- ``session_meta``: the session's ``id`` and ``cwd``;
- ``response_item``: what the model saw and said, as the Responses API has it: a
  ``message`` (role ``user``, ``assistant``, or ``developer``/``system``: context), a
  ``reasoning`` (its readable summary), a ``*_call`` (``function_call``,
  ``custom_tool_call``, ``local_shell_call``, ``web_search_call``...) and its
  ``*_call_output``;
- ``compacted``: the history was replaced by a summary;
- ``event_msg``, ``turn_context``, ``world_state``, ``token_usage_record``: the same
  turn as the UI shows it, and bookkeeping; not read (they repeat the items).
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Conversation, Item, Role, as_text, finish, iso_ns, said_by_user, string, text_of


def read(records: Iterable[dict]) -> Conversation:
    conversation = Conversation()
    for record in records:
        kind, payload, time_ns = record.get("type"), record.get("payload"), iso_ns(record.get("timestamp"))
        if not isinstance(payload, dict):
            continue
        if kind == "session_meta":
            conversation.id = conversation.id or string(payload.get("id"))
            conversation.cwd = conversation.cwd or string(payload.get("cwd"))
        elif kind == "response_item":
            conversation.items.extend(_items(payload, time_ns))
        elif kind == "compacted":
            conversation.items.append(Item(role=Role.INFO, text="history compacted: " + as_text(payload.get("message")),
                                           time_ns=time_ns))
        if time_ns is not None:
            conversation.updated_ns = time_ns
    return finish(conversation)


def _items(payload: dict, time_ns: int | None) -> list[Item]:
    kind = str(payload.get("type", ""))
    call = string(payload.get("call_id"))
    if kind == "message":
        text = text_of(payload.get("content"))
        role = payload.get("role")
        if role == "user":
            return [Item(role=said_by_user(text), text=text, time_ns=time_ns)]
        if role == "assistant":
            return [Item(role=Role.ASSISTANT, text=text, time_ns=time_ns)]
        return [Item(role=Role.CONTEXT, text=text, time_ns=time_ns)]
    if kind == "reasoning":
        text = text_of(payload.get("summary")) or text_of(payload.get("content"))
        return [Item(role=Role.THINKING, text=text, time_ns=time_ns)] if text else []
    if kind.endswith("_call_output"):
        output = payload.get("output")
        text = text_of(output.get("content")) if isinstance(output, dict) else as_text(output)
        failed = isinstance(output, dict) and output.get("success") is False
        return [Item(role=Role.TOOL_RESULT, text=text, call=call, time_ns=time_ns, error=failed)]
    if kind.endswith("_call"):
        args = payload.get("arguments", payload.get("input", payload.get("action")))
        tool = string(payload.get("name")) or kind.removesuffix("_call")
        return [Item(role=Role.TOOL_CALL, tool=tool, text=as_text(args), call=call, time_ns=time_ns)]
    return []
