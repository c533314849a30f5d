"""Database snapshots started ahead of the scan that captures them (``checkpoint/run.py``).

A database's snapshot (the online backup, ``quick_check`` and its page ids) costs a
checkpoint's scan a wait of 10-30 ms per database when the scan reaches it: its own
thread works, the scan's does not. The databases the last checkpoint captured and
whose live signature has changed since are known before the walk, and a tree not
captured yet is walked for its databases (``checkpoint/scan.py``,
``databases_ahead``). Their snapshots are made here, one at a time and in the scan's
order, while the scan captures the transcripts and files before them.

At most two staging copies exist at once: the one the scan is cutting and the next
one being made; the next starts when the scan takes the one before. A snapshot is
only used by the capture of that very path with that very previous entry, of the
very file (device and inode) the walk saw, reached without a symlink just before
and just after the backup (``take``); anything else is discarded, its staging copy
removed (``close``). Only the scan decides what is captured: a database the walk no
longer reaches (gone, excluded, a symlink now) is never published from here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

Reached = Callable[[], "tuple[int, int] | None"]


class Wanted(NamedTuple):
    """A database whose snapshot may start before the walk reaches it."""

    full_path: str
    prev: Any               # its last ``FileState``, or None on a tree's first checkpoint
    reached: Reached        # its ``(st_dev, st_ino)`` as reached without a symlink, or None


class Ahead:
    """Snapshots of the databases ``want``ed, made one at a time in that order."""

    def __init__(self, staging_dir: str, codec):
        self.staging_dir, self.codec = staging_dir, codec
        self._queue: deque[Wanted] = deque()   # not started yet
        self._running = None           # the ``Started`` snapshot not taken yet

    def want(self, wanted: Wanted) -> None:
        """Make ``wanted``'s snapshot after those wanted before it; the first one
        starts now."""
        self._queue.append(wanted)
        if self._running is None:
            self._start_next()

    def take(self, full_path: str, prev, seen: tuple[int, int]):
        """The snapshot of ``full_path`` made ahead for ``prev``, once the capture needs
        it (``capture_sqlite(ahead=...)``), when the file it copied is the one the
        walk saw (``seen``: its ``(st_dev, st_ino)``) before and after the backup; the
        next one starts. None when there is none (the capture then snapshots it
        itself). Waits for the snapshot to end."""
        self._queue = deque(w for w in self._queue if w.full_path != full_path)
        running = self._running
        if running is None or running.path != full_path:
            return None
        self._running = None
        try:
            running.snapped.result()
            same = running.before == running.after == seen
        except Exception:  # its error is the capture's to report, if it copied this very file
            same = running.before == seen
        finally:
            self._start_next()
        if running.prev is not prev or not same:  # re-read without its previous entry, or another file
            running.discard()
            return None
        return running

    def close(self) -> None:
        """Drop what was not taken: wait for a snapshot under way and remove its copy."""
        self._queue.clear()
        running, self._running = self._running, None
        if running is not None:
            running.discard()

    def _start_next(self) -> None:
        from .capture import Started  # here: sqlite3 and the page maps only when a database changed

        while self._queue and self._running is None:
            full_path, prev, reached = self._queue.popleft()
            try:
                self._running = Started(full_path, prev, self.staging_dir, self.codec, reached)
            except OSError:
                continue  # gone, unreadable or a symlink now: the scan finds out and says so
