"""Sets that grow with the garbage, kept out of memory for gc (``gc.py``).

A private temporary SQLite database holds them (on disk, deleted when closed; its
page cache is bounded); they are read back in ascending order and merged in step
with an ascending store listing, so membership costs no set in memory.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


class Ascending:
    """Membership in an ascending stream, asked in ascending order: a merge, not a set.

    Were the pack listing ever out of order, a member could be missed, never invented:
    a pack some manifest uploaded would be marked an orphan (which waits longer), or a
    pack already tombstoned would be named again (harmless).
    """

    def __init__(self, values: Iterable):
        self._values = iter(values)
        self._head = next(self._values, None)

    def __contains__(self, value) -> bool:
        while self._head is not None and self._head < value:
            self._head = next(self._values, None)
        return self._head == value


class Spill:
    """Sets of pack ids that grow with the garbage: a private temporary SQLite database
    (on disk, deleted when closed; its page cache is bounded), read back in order."""

    TABLES = ("uploaded", "marked")

    def __init__(self) -> None:
        self.db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        for table in self.TABLES:
            self.db.execute(f"CREATE TABLE {table} (id TEXT NOT NULL)")
        self.db.execute("BEGIN")
        self._sealed = False

    def add(self, table: str, ids: Iterable[str]) -> None:
        self.db.executemany(f"INSERT INTO {table} VALUES (?)", zip(ids))

    def seal(self) -> None:
        """Done adding: index the tables (an external sort, in bounded memory)."""
        self.db.execute("COMMIT")
        for table in self.TABLES:
            self.db.execute(f"CREATE INDEX {table}_id ON {table} (id)")
        self._sealed = True

    def ascending(self, table: str) -> Ascending:
        assert self._sealed
        return Ascending(row[0] for row in self.db.execute(f"SELECT id FROM {table} ORDER BY id"))

    def close(self) -> None:
        self.db.close()
