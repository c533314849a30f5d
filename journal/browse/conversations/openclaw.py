"""OpenClaw's sessions (2026.9 on), in each agent's database
(``agents/<agent>/agent/openclaw-agent.sqlite``): a ``session_windows`` row each
(``session_id``, ``updated_at`` in ms) and its ``transcript_events`` (``seq``; the
event, a pi session entry (``pi.py``), as JSON in ``event_json``, or compressed with
zstd in ``event_zstd``, ``event_utf8_bytes`` long, at most 4 MiB). Every event the
database holds for the session is read, in ``seq`` order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

import zstandard

from . import pi
from .model import Conversation, decoded, epoch_ns
from .tables import has_table, rows, size

MS = 1_000_000
#: The most bytes an event decompresses to (OpenClaw's own CHECK bound).
EVENT_BYTES = 4 << 20


def read(con: sqlite3.Connection, ids: Collection[str] | None) -> dict[str, Conversation]:
    events: dict[str, list[dict]] = {}
    counts: dict[str, list[int]] = {}            # session -> [bytes, unreadable]
    updated = {row["session_id"]: row.get("updated_at")
               for row in rows(con, "SELECT * FROM session_windows {where}", "session_id", ids)}
    if has_table(con, "transcript_events"):
        sql = "SELECT * FROM transcript_events {where} ORDER BY session_id, seq"
        for row in rows(con, sql, "session_id", ids):
            session = row["session_id"]
            if session not in updated:
                continue
            tally = counts.setdefault(session, [0, 0])
            tally[0] += size(row.get("event_json"), row.get("event_zstd"))
            event = decoded(row.get("event_json")) if row.get("event_json") is not None else _inflated(row)
            if event is None:
                tally[1] += 1
            else:
                events.setdefault(session, []).append(event)
    out = {}
    for session, updated_ms in updated.items():
        conversation = pi.read(events.get(session, []))
        conversation.id = session
        conversation.bytes, conversation.unreadable = counts.get(session, (0, 0))
        conversation.updated_ns = max(filter(None, (conversation.updated_ns, epoch_ns(updated_ms, MS))), default=None)
        out[session] = conversation
    return out


def _inflated(row: dict) -> dict | None:
    """A compressed event, decompressed (no more than ``EVENT_BYTES``); None if it is not one."""
    blob = row.get("event_zstd")
    if not isinstance(blob, bytes):
        return None
    try:
        return decoded(zstandard.ZstdDecompressor().decompress(blob, max_output_size=EVENT_BYTES))
    except zstandard.ZstdError:
        return None
