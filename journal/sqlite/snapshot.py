"""SQLite snapshots: SQLite's online backup API into a local staging file, validated.

A copied db + WAL + SHM trio is not a snapshot (each file can be observed at a
different transaction boundary). Instead a separate connection opens a read
transaction on the live database (bounded wait), copies it with one-step
``backup(pages=-1)`` into a staging file on local disk, and the copy must pass
``PRAGMA quick_check``. The copy is switched to rollback-journal mode first, so a
restored database needs no WAL. Writers are blocked no longer than SQLite's own
read transaction blocks them (in WAL mode: not at all).

The staging copy is written with ``synchronous=OFF`` and no journal: it is private,
read back at once and never published itself (a crash leaves only a file that
``clear_staging`` removes), so the backup need not wait for 256 MiB to reach the disk;
what is uploaded is made durable by the store. A caller that reads the whole copy
anyway (the checkpoint compares or hashes every page) passes ``while_checking``, which
runs in a second thread during ``quick_check``: both are read-only over the same
finished copy, and SQLite's check releases the GIL.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import time
import uuid
from collections.abc import Callable
from typing import TypeVar

from ..atomic import makedirs
from ..background import Background
from ..os_errors import os_error_hint
from .errors import SnapshotFailed
from ..localfs import clear_dir, observe, open_regular
from ..paths import PRIVATE_DIR, PRIVATE_FILE
from ..signatures import Stamp

BUSY_TIMEOUT = 2.0
RETRIES = 3
T = TypeVar("T")


#: The bytes a ``file:`` URI's path keeps as they are (RFC 3986's unreserved, and ``/``).
_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")


def _uri(path: str, mode: str) -> str:
    """SQLite's URI of ``path``: every other byte of its name percent-encoded (as
    ``urllib.parse.quote``, which is not imported for it: ~1.5 ms of a busy tick)."""
    quoted = "".join(chr(b) if b in _URI_SAFE else f"%{b:02X}" for b in os.fsencode(os.path.abspath(path)))
    return f"file:{quoted}?mode={mode}"


def snapshot_db(path: str, staging_dir: str, while_checking: Callable[[str], T] | None = None,
                expect: tuple[int, int] | None = None) -> tuple[str, T | None]:
    """Back up ``path`` into a new staging file and validate it; returns the staging
    path and what ``while_checking(staging)`` returned (None without it).

    ``while_checking`` reads the finished copy (in rollback-journal mode, as it will be
    published) in a second thread while ``quick_check`` runs; what it returned is only
    used once the check has passed. Raises ``SnapshotFailed`` when the database cannot
    be opened, is not a database, stays busy after a bounded retry, or the copy fails
    quick_check. The staging file is removed on failure.

    ``expect``: the file's identity ``(st_dev, st_ino)`` as the caller reached it (without
    a symlink). SQLite opens ``path`` by name, following a symlink, and a rename can put
    another file there and back meanwhile: once the backup's read transaction holds the
    file open, this process must hold a descriptor on that identity, else
    ``SnapshotFailed`` (another database is never copied under this path).
    """
    makedirs(staging_dir, PRIVATE_DIR)
    staging = os.path.join(staging_dir, f"{uuid.uuid4().hex}.db")
    last = ""
    for attempt in range(RETRIES):
        try:
            _backup_once(path, staging, expect)
            problem, got = _check_while(staging, while_checking)
            if problem:
                raise SnapshotFailed(path, f"quick_check of the copy failed: {problem}")
            return staging, got
        except sqlite3.OperationalError as err:
            remove_staging(staging)
            last = str(err)
            if "is full" in last:  # SQLITE_FULL: the staging copy's disk
                full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), staging_dir)
                raise SnapshotFailed(path, f"SQLite says: {last} (copying it into {staging_dir}); "
                                           f"{os_error_hint(full)}") from err
            if "locked" not in last and "busy" not in last:
                raise SnapshotFailed(path, f"SQLite says: {last}") from err
            time.sleep(0.1 * (attempt + 1))
        except sqlite3.DatabaseError as err:
            remove_staging(staging)
            raise SnapshotFailed(path, f"SQLite says: {err}") from err
        except BaseException:
            remove_staging(staging)
            raise
    raise SnapshotFailed(path, f"still busy after {RETRIES} attempts (SQLite says: {last}); skipped this tick")


#: Pages a connection that reads each page about once keeps in its cache: the backup's
#: two (each page of the live database is read once and written once) and
#: ``quick_check``'s (a walk of each b-tree, indexes not looked up). SQLite's default
#: cache (2 MiB a connection) only fills new memory there: to back up a 20 MiB database
#: from a fresh process, 1,044 minor page faults and 30-33 ms of CPU against 58 and
#: 27-28 ms with 16; its quick_check 14.5-18 ms against 12-15 ms.
STREAM_CACHE_PAGES = 16


#: The files SQLite opens beside a database, by name and following symlinks.
COMPANIONS = ("-wal", "-shm", "-journal")


def _companions_regular(path: str) -> None:
    """``SnapshotFailed`` unless each companion of ``path`` is absent or a regular file:
    SQLite would block for ever reading a FIFO planted there, and write through a
    symlink (its -shm is mapped read-write)."""
    for suffix in COMPANIONS:
        try:
            st = os.lstat(path + suffix)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise SnapshotFailed(path, f"its {suffix} is not a regular file (SQLite would block on it or write "
                                       "through it); not copied this time, its last checkpoint stays")


def _backup_once(path: str, staging: str, expect: tuple[int, int] | None = None) -> None:
    _companions_regular(path)
    src = sqlite3.connect(_uri(path, "rw"), uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
    try:
        # Take the read transaction ourselves, with a bounded busy wait, so the
        # one-step backup below never loops on SQLITE_BUSY.
        src.execute("BEGIN")
        src.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if expect is not None and not _holds_open(expect):
            raise SnapshotFailed(path, "it was replaced while SQLite opened it (by a symlink or another file); "
                                       "not copied this time, its last checkpoint stays")
        src.execute(f"PRAGMA cache_size={STREAM_CACHE_PAGES}")
        # Made here, mode 0600, for SQLite to open: it would make it 0644 less the umask
        # (and its companions take the database's mode).
        os.close(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE))
        dst = sqlite3.connect(staging, isolation_level=None)
        try:
            _private(dst)
            dst.execute(f"PRAGMA cache_size={STREAM_CACHE_PAGES}")
            src.backup(dst, pages=-1)
            _to_rollback_journal(dst)
        finally:
            dst.close()
        src.execute("COMMIT")
    finally:
        src.close()


def _holds_open(identity: tuple[int, int]) -> bool:
    """Whether this process holds a descriptor on the file ``identity`` ``(st_dev,
    st_ino)``: the one the backup's connection opened, when the path still led there.
    True where ``/proc/self/fd`` cannot be listed (nothing to check it with)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return True
    for fd in fds:
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile, or not a file
        if (st.st_dev, st.st_ino) == identity:
            return True
    return False


def _to_rollback_journal(dst: sqlite3.Connection) -> None:
    """Switch the finished copy to rollback-journal mode (on the connection that wrote it:
    one connection less than a new one, which would read the schema again)."""
    mode = dst.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
    if str(mode).lower() != "delete":
        raise sqlite3.DatabaseError(f"could not switch the copy to rollback-journal mode (got {mode})")


def _private(con: sqlite3.Connection) -> None:
    """A staging copy is written without fsyncs or a rollback journal (module docstring)."""
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA journal_mode=OFF")


def _check_while(staging: str, work: Callable[[str], T] | None) -> tuple[str | None, T | None]:
    """``quick_check(staging)``, with ``work(staging)`` run meanwhile in a second thread."""
    if work is None:
        return quick_check(staging), None
    got = Background(work, staging, name="journal-snapshot")
    try:
        problem = quick_check(staging)
    except BaseException:
        got.join()  # the copy is removed by the caller: nothing may still read it
        raise
    return problem, got.result()


#: Copies of a live database ``check_live_db`` takes before it decides the database
#: is in use (its files changed under every copy), and the pause between them.
CHECK_TRIES = 3
CHECK_PAUSE = 0.05


def check_live_db(path: str, tmp_dir: str) -> str | None:
    """quick_check a live database without touching its files; None when it is valid,
    or in use (a writer changed it under every copy, so it is live state, never to be
    replaced), else SQLite's complaint (``check_live_copy``)."""
    return check_live_copy(path, tmp_dir)[0]


def check_live_copy(path: str, tmp_dir: str, then: Callable[[str], T] | None = None) -> tuple[str | None, T | None]:
    """``check_live_db``'s answer, and what ``then(copy)`` returns, run on the private
    copy once it passed the check (None when it did not run: the database is invalid,
    or in use, or there is no ``then``).

    A private copy (in ``tmp_dir``, outside the tree) of the db with its -wal and
    -journal is opened read-write, so SQLite recovers the WAL or rolls back a hot
    journal *in the copy* (opening the live files, even read-only, would rewrite their
    -shm), then checked read-only (``_recover``). Copies of several files are only consistent when no writer commits while
    they are taken: the files' inode, size and mtime are compared before and after, and
    a copy they changed under is taken again.
    """
    makedirs(tmp_dir, PRIVATE_DIR)
    copy = os.path.join(tmp_dir, f"check-{uuid.uuid4().hex}.db")
    for attempt in range(CHECK_TRIES):
        if attempt:
            time.sleep(CHECK_PAUSE * attempt)
        try:
            before = _files_now(path)
            if before[""] is None:
                return "the database file is gone", None
            if before[""].size == 0:
                return "the database file is empty (0 bytes)", None
            odd = _odd_companion(path)
            if odd is not None:
                return odd, None
            _copy_private(path, copy)
            for suffix in ("-wal", "-journal"):
                if before[suffix] is not None:
                    _copy_private(path + suffix, copy + suffix)
            if _files_now(path) == before:
                problem = _recover(copy) or _check(copy, "quick_check")
                return problem, (then(copy) if problem is None and then is not None else None)
        except FileNotFoundError:
            pass  # a companion went away while it was copied: a writer is at work
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise  # else a file was swapped for a symlink: never read through it
        finally:
            remove_staging(copy)
    return None, None


def _recover(copy: str) -> str | None:
    """Let SQLite recover the private copy read-write (a first read replays its WAL or
    rolls back a hot journal; the close folds the WAL in), so that it is then checked
    read-only like every other check: a read-write ``quick_check`` also evaluates CHECK
    constraints, and one that calls a function this SQLite lacks (OpenClaw's schema
    needs 3.43's ``octet_length``) would fail a valid database. The copy's pages stay
    what the live database holds (its journal mode too). None, or SQLite's complaint."""
    try:
        con = sqlite3.connect(_uri(copy, "rw"), uri=True, timeout=BUSY_TIMEOUT, isolation_level=None)
        try:
            con.execute("PRAGMA user_version").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        return str(err)
    return None


def _odd_companion(path: str) -> str | None:
    """What is wrong with a database's -wal, -journal or -shm that is there but is not a
    regular file (a FIFO, a symlink, a directory): never SQLite's, and a database
    beside one is no valid live state (SQLite would block on it or follow it). Without
    this, its copy failed as if a writer were at work, and the database was kept."""
    for suffix in ("-wal", "-journal", "-shm"):
        try:
            mode = os.lstat(path + suffix).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            kind = "a symlink" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a directory" if stat.S_ISDIR(mode) else "a special file"
            return f"its {suffix} is {kind}, not a regular file"
    return None


def _copy_private(src: str, dst: str) -> None:
    """Copy the regular file ``src`` (never through a symlink: ``ELOOP``) to the new
    file ``dst`` (refused if anything is there)."""
    import shutil  # imported here: only the check of a live database (restore) copies files

    fin = open_regular(src)
    if fin is None:
        raise FileNotFoundError(errno.ENOENT, "no longer a regular file", src)
    with fin, open(os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE),
                   "wb") as out:
        shutil.copyfileobj(fin, out, 1 << 20)


def _files_now(path: str) -> dict[str, Stamp | None]:
    """``observe`` of a database and its -wal and -journal."""
    return {suffix: observe(path + suffix) for suffix in ("", "-wal", "-journal")}


def quick_check(path: str) -> str | None:
    """None when ``PRAGMA quick_check`` says ok; else SQLite's complaint, on one line."""
    return _check(path, "quick_check")


def integrity_check(path: str) -> str | None:
    """None when ``PRAGMA integrity_check`` says ok; else SQLite's complaint, on one line."""
    return _check(path, "integrity_check")


#: Checks read the first ``CHECK_MMAP`` bytes of the file through a memory map rather
#: than one pread per page: quick_check of a 21 MB database takes 11 ms instead of 18.
#: Every file checked is a private copy or a staged rebuild that nothing else writes,
#: so the map is never cut short under SQLite. The cap bounds the resident pages a
#: check adds to the process (mapped file pages count in its RSS).
CHECK_MMAP = 32 << 20
CHECK_ROWS = 5        # problems a failed check reports, and at most this many characters of them:
CHECK_TEXT = 400      # the complaint ends up in one error line


def _check(path: str, pragma: str, mode: str = "ro") -> str | None:
    try:
        con = sqlite3.connect(_uri(path, mode), uri=True, timeout=BUSY_TIMEOUT)
        try:
            con.execute(f"PRAGMA mmap_size={CHECK_MMAP}")
            if pragma == "quick_check":
                con.execute(f"PRAGMA cache_size={STREAM_CACHE_PAGES}")
            rows = [r[0] for r in con.execute(f"PRAGMA {pragma}({CHECK_ROWS})").fetchall()]
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        return str(err)
    if rows == ["ok"]:
        return None
    text = "; ".join(" ".join(str(r).split()) for r in rows)
    return text if len(text) <= CHECK_TEXT else text[:CHECK_TEXT] + f"... (run PRAGMA {pragma} for the rest)"


def page_size_of(path: str) -> int:
    """The page size from a database file's header."""
    with open(path, "rb") as fh:
        header = fh.read(100)
    size = int.from_bytes(header[16:18], "big")
    return 65536 if size == 1 else size


def remove_staging(path: str) -> None:
    """Remove a private database copy and its companions; missing files are fine."""
    for suffix in ("", "-journal", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass


def clear_staging(staging_dir: str) -> None:
    """Remove every staging file (after a crash, and at each start)."""
    clear_dir(staging_dir)
