"""Reading a harness's database, rebuilt from its snapshot: rows as dicts, whichever
columns this version of the harness has, and only the sessions asked for."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator


def rows(con: sqlite3.Connection, sql: str, column: str, ids: Collection[str] | None) -> Iterator[dict]:
    """The rows of ``sql`` (a SELECT holding ``{where}`` where its WHERE clause goes)
    whose ``column`` is one of ``ids`` (every row for None), each as a dict by column name."""
    where, params = "", ()
    if ids is not None:
        where, params = f"WHERE {column} IN ({','.join('?' * len(ids))})", tuple(ids)
    cursor = con.execute(sql.format(where=where), params)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row))


def has_table(con: sqlite3.Connection, name: str) -> bool:
    return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def size(*values) -> int:
    """The bytes of a row's stored values (text as UTF-8)."""
    return sum(len(v.encode()) if isinstance(v, str) else len(v) for v in values if isinstance(v, (str, bytes)))
