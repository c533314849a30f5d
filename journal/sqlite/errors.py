"""The error of a live SQLite database that could not be snapshotted."""

from __future__ import annotations

from ..errors import JournalError
from ..paths import shown


class SnapshotFailed(JournalError):
    """A live SQLite database could not be snapshotted; its previous snapshot stays."""

    def __init__(self, path: str, detail: str):
        self.path = path
        self.detail = detail
        super().__init__(f"snapshot database: {shown(path)}: {detail}; nothing was published for it "
                         "(its previous snapshot, if any, stays authoritative)")
