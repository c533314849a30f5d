"""Sets that grow with the garbage, kept out of memory for gc (``gc/run.py``).

A private temporary SQLite database holds them (on disk, deleted when closed; its
page cache is bounded); they are read back in ascending order and merged in step
with an ascending store listing, or looked up by index, so membership costs no set
in memory.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import sqlite3
from collections.abc import Callable, Iterable

from ..local.errors import LocalWriteError

#: Rows a ``Batch`` holds before it writes them.
BATCH_ROWS = 4096


class Ascending:
    """Membership in an ascending stream, asked in ascending order: a merge, not a set.

    ``missed`` (optional) is called with each value of the stream that no question
    matched, in order, as the merge passes it (``finish`` passes the rest): with the
    questions being an ascending listing, these are the values the listing lacks.

    Were the pack listing ever out of order, a member could be missed, never invented:
    a pack some manifest uploaded would be marked an orphan (which waits longer), a
    pack already tombstoned would be named again (harmless), or one present would be
    taken as gone (not deleted this time).
    """

    def __init__(self, values: Iterable, missed: Callable[[object], None] | None = None):
        self._values = iter(values)
        self._head = next(self._values, None)
        self._missed = missed
        self._matched = None

    def __contains__(self, value) -> bool:
        while self._head is not None and self._head < value:
            self._advance()
        if self._head is not None and self._head == value:
            self._matched = value
            return True
        return False

    def finish(self) -> None:
        """Pass the rest of the stream (to ``missed``)."""
        while self._head is not None:
            self._advance()

    def _advance(self) -> None:
        if self._missed is not None and self._head != self._matched:
            self._missed(self._head)
        self._head = next(self._values, None)


class Table(enum.StrEnum):
    """The sets a ``Spill`` holds, one table each."""

    UPLOADED = "uploaded"   # the packs some manifest present uploaded
    MARKED = "marked"       # the packs some tombstone names already
    GONE = "gone"           # ... and that the mark's pack listing lacks
    INPUTS_MARKED = "inputs_marked"     # the input keys some tombstone names already
    INPUTS_EXPIRED = "inputs_expired"   # the input keys this run's input policy lets go


class Spill:
    """Sets of pack ids (and of input keys) that grow with the garbage: a private
    temporary SQLite database (on disk, deleted when closed; its page cache is
    bounded), read back in order."""

    def __init__(self) -> None:
        self.db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        for table in Table:
            self.db.execute(f"CREATE TABLE {table} (id TEXT NOT NULL)")
        self.db.execute("BEGIN")
        self._sealed = False

    def add(self, table: Table, ids: Iterable[str]) -> None:
        """Add ``ids`` (before ``seal``: unindexed, in one transaction; after: indexed, in one of its own)."""
        with _space():
            if self._sealed:
                self.db.execute("BEGIN")
            self.db.executemany(f"INSERT INTO {table} VALUES (?)", zip(ids))
            if self._sealed:
                self.db.execute("COMMIT")

    def seal(self) -> None:
        """Done with the bulk adds: index the tables (an external sort, in bounded memory)."""
        with _space():
            self.db.execute("COMMIT")
            for table in Table:
                self.db.execute(f"CREATE INDEX {table}_id ON {table} (id)")
        self._sealed = True

    def ascending(self, table: Table, missed: Callable[[str], None] | None = None) -> Ascending:
        assert self._sealed
        return Ascending((row[0] for row in self.db.execute(f"SELECT id FROM {table} ORDER BY id")), missed)

    def has(self, table: Table, value: str) -> bool:
        """Whether ``table`` holds ``value``: one indexed lookup."""
        assert self._sealed
        return self.db.execute(f"SELECT 1 FROM {table} WHERE id = ? LIMIT 1", (value,)).fetchone() is not None

    def clear(self, table: Table) -> None:
        self.db.execute(f"DELETE FROM {table}")

    def batch(self, table: Table) -> "Batch":
        """A writer adding to ``table`` ``BATCH_ROWS`` ids at a time (``flush`` writes the rest)."""
        return Batch(self, table)

    def close(self) -> None:
        self.db.close()


@contextlib.contextmanager
def _space():
    """A full temporary directory is ``LocalWriteError`` naming it (SQLite only says
    "database or disk is full")."""
    try:
        yield
    except sqlite3.OperationalError as err:
        if "is full" not in str(err):
            raise
        where = sqlite_temp_dir()
        raise LocalWriteError("gc: write its temporary database",
                              OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), where), where) from err


def sqlite_temp_dir() -> str:
    """Where SQLite keeps a temporary database: the first usable of ``$SQLITE_TMPDIR``,
    ``$TMPDIR``, ``/var/tmp``, ``/usr/tmp``, ``/tmp`` (its unix VFS's order), else "."."""
    for path in (os.environ.get("SQLITE_TMPDIR"), os.environ.get("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"):
        if path and os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK):
            return path
    return "."


class Batch:
    """Ids added to a sealed ``Spill`` table one at a time, written ``BATCH_ROWS`` at a time."""

    def __init__(self, spill: Spill, table: Table):
        self.spill, self.table = spill, table
        self.rows: list[str] = []

    def __call__(self, value: str) -> None:
        self.rows.append(value)
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the ids held."""
        if self.rows:
            self.spill.add(self.table, self.rows)
            self.rows = []
