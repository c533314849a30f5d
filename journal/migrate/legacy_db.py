"""Legacy SQLite copies for ``journal migrate``: the candidates of one database, and
recovering one privately (``recover_db``). A legacy database is only ever opened by
SQLite as a private copy; the legacy files are read, never written.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import sqlite3
import stat

import msgspec

from ..sqlite.errors import SnapshotFailed
from ..localfs import open_regular
from ..sqlite.snapshot import snapshot_db

CHECKPOINT_COPY, RAW_TRIO = "checkpoint-copy", "raw-trio"


class DbCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """A legacy copy of one database: a ``checkpoints/`` copy or a raw db+wal+shm trio."""

    path: str
    kind: str


def recover_db(cand: DbCandidate, private: str) -> str:
    """Recover a legacy database from a private copy. Returns the verified copy, in
    rollback-journal mode. SQLite never opens the legacy files themselves.

    The candidate is copied into the empty directory ``private``; SQLite recovers the
    copy there; the copy is backed up and the backup quick_checked.

    * A ``checkpoints/`` copy is a closed backup: it is copied alone.
    * A raw trio is copied whole: the database, then its ``-wal`` and ``-shm``. SQLite
      rebuilds the copy's wal-index from the WAL, since no process holds that ``-shm``.
    * A ``-wal`` older than its database may be stale (an rsync without ``--delete``
      keeps an old one), and replaying it would overwrite newer pages. So the database
      is recovered without it too; if the two results differ, the candidate is refused.

    Every source must be a regular file, never reached through a symlink. A copy with
    no tables (an empty file) is refused. Raises ``SnapshotFailed`` naming the legacy path.
    """
    try:
        wal = _regular(cand.path + "-wal") if cand.kind == RAW_TRIO else None
        db = _regular(cand.path)
        if db is None:
            raise SnapshotFailed(cand.path, "not a regular file")
        verified = _recover_copy(cand.path, os.path.join(private, "with-wal"), wal is not None)
        if wal is not None and wal.st_mtime_ns < db.st_mtime_ns:
            alone = _recover_copy(cand.path, os.path.join(private, "alone"), False)
            if not filecmp.cmp(verified, alone, shallow=False):
                raise SnapshotFailed(cand.path, "its -wal is older than the database and replaying it changes "
                                     "the database; if that -wal is stale (an rsync without --delete), move it "
                                     "away and migrate again")
        return verified
    except SnapshotFailed as err:
        if err.path == cand.path:
            raise
        raise SnapshotFailed(cand.path, _short(err.detail)) from err
    except OSError as err:
        raise SnapshotFailed(cand.path, f"copy it: {err.strerror}") from err


def _regular(path: str) -> os.stat_result | None:
    """lstat of ``path`` when it is a regular file (a symlink is not), else None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


def _recover_copy(path: str, private: str, with_wal: bool) -> str:
    os.makedirs(private)
    copy = os.path.join(private, "candidate.db")
    _copy_regular(path, copy)
    if with_wal:
        _copy_regular(path + "-wal", copy + "-wal")
        if _regular(path + "-shm") is not None:
            _copy_regular(path + "-shm", copy + "-shm")
    verified, _ = snapshot_db(copy, os.path.join(private, "verified"))
    con = sqlite3.connect(verified)
    try:
        tables = con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    finally:
        con.close()
    if not tables:
        raise SnapshotFailed(path, "holds no tables (an empty database)")
    return verified


def _copy_regular(src: str, dst: str) -> None:
    """Copy ``src`` only if it is a regular file when opened (``open_regular``)."""
    fh = open_regular(src)
    if fh is None:
        raise SnapshotFailed(src, "not a regular file")
    with fh, open(dst, "xb") as out:
        shutil.copyfileobj(fh, out, 1 << 20)


def _short(detail: str, limit: int = 240) -> str:
    return detail if len(detail) <= limit else detail[:limit] + " ..."
