"""Gemini CLI's chat (``tmp/<project>/chats/session-<minute>-<id8>.jsonl``): a log of
records replayed as Gemini's own loader replays them (``loadConversationRecord``):

- an object with ``sessionId`` and no ``id``: the session's metadata (again at each resume);
- a message (``id``, ``type``: ``user``, ``gemini``, ``info``, ``error``, ``warning``;
  ``content``: a string or parts): kept by id, a later record of the same id replacing
  the earlier in its place (a reply is written again as its tool calls complete);
- ``{"$set": {...}}``: metadata; with ``messages``, the whole list replaced (at each
  resume, and at compression);
- ``{"$rewindTo": id}``: that message and every later one dropped (all of them when
  the id is unknown).

A ``gemini`` message may carry ``thoughts`` (``subject``, ``description``) and
``toolCalls`` (``name``, ``args``, ``result``: parts holding a ``functionResponse``,
``status``); in a replaced list the same call is a ``functionCall`` part and its result
a ``functionResponse`` part of the next user message.
"""

from __future__ import annotations

from collections.abc import Iterable

from .model import Conversation, Item, Role, as_text, finish, iso_ns, said_by_user, string


def read(records: Iterable[dict]) -> Conversation:
    conversation = Conversation()
    messages: dict[str, dict] = {}
    for record in records:
        rewind = record.get("$rewindTo")
        if isinstance(rewind, str):
            ids = list(messages)
            for key in ids[ids.index(rewind):] if rewind in messages else ids:
                del messages[key]
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = record
        else:
            meta = record.get("$set") if isinstance(record.get("$set"), dict) else record
            conversation.id = conversation.id or string(meta.get("sessionId"))
            conversation.updated_ns = iso_ns(meta.get("lastUpdated")) or conversation.updated_ns
            if isinstance(meta.get("messages"), list):
                messages = {m["id"]: m for m in meta["messages"] if isinstance(m, dict) and isinstance(m.get("id"), str)}
    for message in messages.values():
        conversation.items.extend(_message(message, iso_ns(message.get("timestamp"))))
    return finish(conversation)


def _message(message: dict, time_ns: int | None) -> list[Item]:
    kind, content = message.get("type"), message.get("content")
    parts = [{"text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    if kind not in ("user", "gemini"):
        text = "\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))
        return [Item(role=Role.INFO, text=f"{kind}: {text}", time_ns=time_ns)] if text else []
    out = [Item(role=Role.THINKING, text=_thought(t), time_ns=time_ns)
           for t in message.get("thoughts") or [] if isinstance(t, dict)]
    out.extend(_parts(kind, parts, time_ns))
    for call in message.get("toolCalls") or []:
        if isinstance(call, dict):
            out.extend(_tool_call(call, time_ns))
    return out


def _parts(kind: str, parts: list, time_ns: int | None) -> list[Item]:
    out, texts = [], []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str) and not part.get("thought"):
            texts.append(part["text"])
        elif isinstance(part.get("functionCall"), dict):
            call = part["functionCall"]
            out.append(Item(role=Role.TOOL_CALL, tool=string(call.get("name")), text=as_text(call.get("args")),
                            call=string(call.get("id")), time_ns=time_ns))
        elif isinstance(part.get("functionResponse"), dict):
            out.append(_response(part["functionResponse"], time_ns))
    text = "\n".join(texts)
    if text.strip():
        role = Role.ASSISTANT if kind == "gemini" else said_by_user(text)
        out.insert(0, Item(role=role, text=text, time_ns=time_ns))
    return out


def _tool_call(call: dict, time_ns: int | None) -> list[Item]:
    ident, tool = string(call.get("id")), string(call.get("name"))
    out = [Item(role=Role.TOOL_CALL, tool=tool, text=as_text(call.get("args")), call=ident, time_ns=time_ns)]
    result = call.get("result")
    failed = call.get("status") in ("error", "cancelled")
    if isinstance(result, list):
        responses = [p["functionResponse"] for p in result if isinstance(p, dict)
                     and isinstance(p.get("functionResponse"), dict)]
        out.extend(_response(r, time_ns, failed) for r in responses)
    elif result is not None:
        out.append(Item(role=Role.TOOL_RESULT, tool=tool, text=as_text(result), call=ident, time_ns=time_ns,
                        error=failed))
    return out


def _response(response: dict, time_ns: int | None, failed: bool = False) -> Item:
    body = response.get("response")
    text = body.get("output", body.get("error")) if isinstance(body, dict) else body
    failed = failed or (isinstance(body, dict) and "error" in body)
    return Item(role=Role.TOOL_RESULT, tool=string(response.get("name")), text=as_text(text),
                call=string(response.get("id")), time_ns=time_ns, error=failed)


def _thought(thought: dict) -> str:
    return "\n".join(s for s in (thought.get("subject"), thought.get("description")) if isinstance(s, str) and s)
