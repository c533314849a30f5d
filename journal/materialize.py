"""Putting one entry on local disk: path safety, the keep-or-replace rule, the write.

The rule (seed invariant 5: a hot restart never goes backwards):

* a missing path is written;
* a local file with the checkpointed size and mtime, or the same bytes, is left alone;
* a JSONL file whose local bytes extend the checkpointed bytes is kept;
* a local path newer than the checkpoint is kept;
* anything else is replaced atomically (temp, fsync, rename).

Blobs are read and verified as they are written to a temp file, so a corrupt blob
aborts before any byte reaches the live path.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod

from .atomic import fsync_dir, write_file_atomic
from .errors import UnsafePath
from .fetch import fetch_in_order
from .model import KIND_DIR, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, Entry
from .presets import SQLITE_COMPANIONS
from .sqlite_capture import install_db, rebuild_db
from .sqlite_snapshot import check_live_db, remove_staging
from .walk import RESTORE_TMP

WRITE, REPLACE, SAME, KEEP_NEWER, KEEP_EXTENDS, KEEP_CONFLICT, KEEP_VALID_DB = (
    "write", "replace", "same", "keep-newer", "keep-extends", "keep-conflict", "keep-valid-db")
WRITES = (WRITE, REPLACE)



def check_paths(entries: list[Entry]) -> None:
    """Raise ``UnsafePath`` for an absolute path, a ``..``, or a path through a symlink entry."""
    links = {e.path for e in entries if e.kind == KIND_SYMLINK}
    for e in entries:
        p = e.path
        if not p or p.startswith("/") or "\\" in p or "\0" in p:
            raise UnsafePath(p, "absolute, empty or malformed path")
        parts = p.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise UnsafePath(p, "path has an empty, '.' or '..' component")
        if parts[0] == RESTORE_TMP:
            raise UnsafePath(p, "path is inside journal's restore temp directory")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in links:
                raise UnsafePath(p, f"path goes through the symlink {'/'.join(parts[:i])!r}")


def ensure_parents(root: str, path: str) -> None:
    """Create the parents of ``root/path``; refuse any existing parent that is a symlink."""
    current = root
    for part in path.split("/")[:-1]:
        current = os.path.join(current, part)
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o700)
            continue
        if stat_mod.S_ISLNK(st.st_mode) or not stat_mod.S_ISDIR(st.st_mode):
            raise UnsafePath(path, f"local parent {current} is not a directory (symlinks are never followed)")


_TMP_NAMES = (".part", "link-", "db-", "check-")


def restore_tmp_dir(root: str) -> str:
    """``root/.journal-tmp``, created if missing; refused unless it is a real directory.

    A symlink there would send temp files (and their cleanup) outside the tree.
    """
    path = os.path.join(root, RESTORE_TMP)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o700)
        return path
    if not stat_mod.S_ISDIR(st.st_mode):
        raise UnsafePath(RESTORE_TMP, f"{path} is not a real directory (symlinks are never followed); move it away")
    return path


def decide(root: str, entry: Entry) -> str:
    """What restore does with ``entry`` given what is on disk now."""
    full = os.path.join(root, entry.path)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return WRITE
    if entry.kind == KIND_DIR:
        return SAME if stat_mod.S_ISDIR(st.st_mode) else KEEP_CONFLICT
    if stat_mod.S_ISDIR(st.st_mode):
        return KEEP_CONFLICT  # never replace a directory (and what is in it) with a file
    if entry.kind == KIND_SQLITE and stat_mod.S_ISREG(st.st_mode):
        return KEEP_VALID_DB if check_live_db(full, restore_tmp_dir(root)) is None else REPLACE
    if entry.kind == KIND_SYMLINK:
        if stat_mod.S_ISLNK(st.st_mode) and os.readlink(full) == entry.target:
            return SAME
    elif stat_mod.S_ISREG(st.st_mode):
        if st.st_size == entry.size and (st.st_mtime_ns == entry.mtime_ns or _same_bytes(full, entry)):
            return SAME
        if entry.kind == KIND_JSONL and st.st_size > entry.size and _same_bytes(full, entry):
            return KEEP_EXTENDS
    if st.st_mtime_ns > entry.mtime_ns:
        return KEEP_NEWER
    return REPLACE


def _same_bytes(full: str, entry: Entry) -> bool:
    """True when the local file starts with exactly the entry's bytes (compared by blob ids)."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        offset = 0
        for ref in entry.refs:
            if hashlib.sha256(os.pread(fd, ref.size, offset)).hexdigest() != ref.id:
                return False
            offset += ref.size
        return True
    finally:
        os.close(fd)


def write_entry(root: str, entry: Entry, reader) -> int:
    """Write one entry under ``root`` from ``reader`` (a Repository); returns bytes written.

    Raises CorruptObject/ObjectNotFound on a bad blob, before the live path changes.
    """
    ensure_parents(root, entry.path)
    full = os.path.join(root, entry.path)
    if entry.kind == KIND_DIR:
        os.makedirs(full, mode=0o700, exist_ok=True)
        return 0
    tmp_dir = restore_tmp_dir(root)
    if entry.kind == KIND_SQLITE:
        tmp = os.path.join(tmp_dir, f"db-{os.getpid()}-{hashlib.sha256(full.encode()).hexdigest()[:16]}")
        try:
            rebuild_db(entry, reader, tmp)
            install_db(tmp, full, entry)
        finally:
            remove_staging(tmp)
        return entry.size
    if entry.kind == KIND_SYMLINK:
        tmp = os.path.join(tmp_dir, f"link-{os.getpid()}-{hashlib.sha256(full.encode()).hexdigest()[:16]}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(entry.target, tmp)
        os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)
        os.replace(tmp, full)
        fsync_dir(os.path.dirname(full))
        return 0
    return write_file_atomic(full, fetch_in_order(entry.refs, reader), tmp_dir, mode=entry.mode,
                             mtime_ns=entry.mtime_ns)


def move_aside(root: str, entry: Entry, aside_dir: str) -> str:
    """Move an invalid local database and its companions into ``aside_dir``; never delete."""
    full = os.path.join(root, entry.path)
    target = os.path.join(aside_dir, entry.path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    for suffix in ("",) + SQLITE_COMPANIONS:
        if os.path.lexists(full + suffix):
            os.replace(full + suffix, target + suffix)
    fsync_dir(os.path.dirname(full))
    return target


def finish_dirs(root: str, entries: list[Entry]) -> None:
    """Apply directory modes last (deepest first), so read-only dirs do not block writes."""
    for e in sorted((e for e in entries if e.kind == KIND_DIR), key=lambda e: e.path, reverse=True):
        try:
            os.chmod(os.path.join(root, e.path), e.mode, follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass


def remove_tmp(root: str) -> None:
    """Remove restore's own temp files and directory from a tree; anything else stays."""
    tmp = os.path.join(root, RESTORE_TMP)
    try:
        if not stat_mod.S_ISDIR(os.lstat(tmp).st_mode):
            return  # not ours (a symlink or a file): never follow it, never delete it
        for name in os.listdir(tmp):
            if name.endswith(_TMP_NAMES[0]) or name.startswith(_TMP_NAMES[1:]):
                os.unlink(os.path.join(tmp, name))
        os.rmdir(tmp)
    except FileNotFoundError:
        pass
    except OSError:
        pass  # something else is in there: leave the directory
