"""Real session samples laid out as under ``$AM_LOCAL`` (``tests/fixtures/sessions``,
``tests/fixtures/conversations``; SOURCES.md in each), their databases built from the
dumps kept in place of them."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONVERSATIONS = FIXTURES / "conversations"


def octet_length(value):
    """SQLite's ``octet_length`` (3.43 on), which OpenClaw's CHECK constraints call,
    for an older SQLite."""
    return None if value is None else len(value.encode() if isinstance(value, str) else value)


def build_db(dump: Path, db: Path) -> Path:
    """The database of ``dump`` (a ``.sql`` file) at ``db``, in WAL mode as the harnesses run theirs."""
    with sqlite3.connect(db) as con:
        con.create_function("octet_length", 1, octet_length, deterministic=True)
        con.execute("PRAGMA journal_mode=WAL")
        con.executescript(dump.read_text())
    con.close()
    return db


def lay_out(samples: Path, local: Path) -> None:
    """``samples`` copied under ``local``, each dump made into its database."""
    shutil.copytree(samples, local, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md"))
    for dump in local.rglob("*.sql"):
        build_db(dump, dump.with_suffix(""))
        dump.unlink()
