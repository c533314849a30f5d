"""The readers, by the name a preset's session rule gives as its ``format``
(``presets.SessionFiles.format``, ``SessionTable.format``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Iterable

from . import claude, codex, gemini, hermes, opencode, openclaw, pi
from .model import Conversation, Lines

#: Transcripts: a session's records, one JSON object per line.
TRANSCRIPTS: dict[str, Callable[[Iterable[dict]], Conversation]] = {
    "codex": codex.read, "claude": claude.read, "gemini": gemini.read, "pi": pi.read,
}
#: Databases: the sessions of a rebuilt snapshot (only ``ids`` when given), by id.
DATABASES: dict[str, Callable[[sqlite3.Connection, Collection[str] | None], dict[str, Conversation]]] = {
    "opencode": opencode.read, "openclaw": openclaw.read, "hermes": hermes.read,
}


def read_transcript(fmt: str, pieces: Iterable[bytes]) -> Conversation:
    """The conversation of a transcript whose bytes come in ``pieces``."""
    lines = Lines(pieces)
    conversation = TRANSCRIPTS[fmt](lines)
    conversation.unreadable += lines.unreadable
    conversation.bytes = lines.bytes
    return conversation
