"""Putting one entry on local disk: path safety, the keep-or-replace rule, the write.

The rule (seed invariant 5: a hot restart never goes backwards):

* a missing path is written;
* a local file with the checkpointed size and mtime, or the same bytes, is left alone;
* a JSONL file whose local bytes extend the checkpointed bytes is kept;
* a JSONL file whose local bytes are a strict prefix of the checkpointed bytes is
  completed from the checkpoint, whatever its mtime (it loses no local byte);
* a local path newer than the checkpoint is kept;
* anything else is replaced atomically: staged in full to a temp file, made durable,
  then renamed (``batch.py``).

Blobs are read and verified as they are written to the temp file, so a corrupt blob
aborts before any byte reaches the live path.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import os
import stat as stat_mod
import uuid
from collections.abc import Iterable

from .atomic import fsync_dir, start_writeback
from .batch import Staged
from .errors import CorruptObject, ObjectNotFound, UnsafePath, naming
from .segments import anchor_refs, chunk_reader, decode_blobs, read_blobs, read_segment
from .model import KIND_DIR, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, Entry
from .presets import SQLITE_COMPANIONS
from .walk import RESTORE_TMP

WRITE, REPLACE, COMPLETE, SAME, KEEP_NEWER, KEEP_EXTENDS, KEEP_CONFLICT, KEEP_VALID_DB, KEEP_UNREADABLE = (
    "write", "replace", "complete-prefix", "same", "keep-newer", "keep-extends", "keep-conflict", "keep-valid-db",
    "keep-unreadable")
#: A path that is not on disk and that restore cannot create (past the path length
#: limits): it is lost, and the restore incomplete.
CANNOT_CREATE = "cannot-create"
WRITES = (WRITE, REPLACE, COMPLETE)
#: Writeback of a staged file is started at its end and after every this many bytes.
WRITEBACK_BYTES = 8 << 20
#: Staged temp files are named <random per process>-<counter>.part (and created O_EXCL).
_TMP_PREFIX = uuid.uuid4().hex[:16]
_tmp_seq = itertools.count()



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


def ensure_parents(root: str, path: str, known: set[str] | None = None, created: list[str] | None = None) -> None:
    """Create the parents of ``root/path``; refuse any existing parent that is a symlink.

    ``known`` holds directories already checked (or made) by this caller, so each is
    looked at once per tree; ``created`` receives each directory this call made.
    """
    current = root
    for part in path.split("/")[:-1]:
        current = os.path.join(current, part)
        if known is not None and current in known:
            continue
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current, 0o700)
            if created is not None:
                created.append(current)
        else:
            if stat_mod.S_ISLNK(st.st_mode) or not stat_mod.S_ISDIR(st.st_mode):
                raise UnsafePath(path, f"local parent {current} is not a directory (symlinks are never followed)")
        if known is not None:
            known.add(current)


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


def decide(root: str, entry: Entry, check_dir: str | None = None, reader=None) -> str:
    """What restore does with ``entry`` given what is on disk now. A live database is
    checked through a private copy in ``check_dir`` (default: the tree's temp dir);
    ``reader`` (a Repository) reads the one segment a shorter local transcript ends in.
    A path too long to look at or create is ``CANNOT_CREATE`` when nothing is there.
    Raises ``OSError`` when the local path exists, or may, but cannot be looked at
    (permissions, an I/O error, a path too long): the caller keeps it (``KEEP_UNREADABLE``)."""
    full = os.path.join(root, entry.path)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return WRITE
    except NotADirectoryError:
        return KEEP_CONFLICT  # a local file where the entry's parent directory belongs
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG and _absent(root, entry.path):
            return CANNOT_CREATE
        raise
    if entry.kind == KIND_DIR:
        return SAME if stat_mod.S_ISDIR(st.st_mode) else KEEP_CONFLICT
    if stat_mod.S_ISDIR(st.st_mode):
        return KEEP_CONFLICT  # never replace a directory (and what is in it) with a file
    if entry.kind == KIND_SQLITE and stat_mod.S_ISREG(st.st_mode):
        from .sqlite_snapshot import check_live_db

        return KEEP_VALID_DB if check_live_db(full, check_dir or restore_tmp_dir(root)) is None else REPLACE
    if entry.kind == KIND_SYMLINK:
        if stat_mod.S_ISLNK(st.st_mode) and os.readlink(full) == entry.target:
            return SAME
    elif stat_mod.S_ISREG(st.st_mode):
        if st.st_size == entry.size and (st.st_mtime_ns == entry.mtime_ns or _same_bytes(full, entry)):
            return SAME
        if entry.kind == KIND_JSONL and st.st_size > entry.size and _same_bytes(full, entry):
            return KEEP_EXTENDS
        if entry.kind == KIND_JSONL and st.st_size < entry.size and reader is not None \
                and _is_prefix(full, entry, reader):
            return COMPLETE  # an append-only transcript: its content, not its mtime, decides
    if st.st_mtime_ns > entry.mtime_ns:
        return KEEP_NEWER
    return REPLACE


def _absent(root: str, path: str) -> bool:
    """Whether ``root/path`` is certainly not on disk, looked up one name at a time from
    ``root`` (so a path past ``PATH_MAX`` can be looked at): a name on the way is missing,
    or longer than any file system holds. False when it is there, or when that cannot be
    told (a directory that cannot be searched, a symlink or a file on the way)."""
    *parents, name = path.split("/")
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        for part in parents:
            parent, fd = fd, -1
            try:
                fd = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            finally:
                os.close(parent)
        os.lstat(name, dir_fd=fd)
        return False
    except FileNotFoundError:
        return True
    except OSError as err:
        return err.errno == errno.ENAMETOOLONG
    finally:
        if fd >= 0:
            os.close(fd)


def _same_bytes(full: str, entry: Entry) -> bool:
    """True when the local file starts with exactly the entry's bytes (compared by blob
    ids). A file that cannot be read raises ``OSError`` (``decide`` keeps it)."""
    fd = _open_local(full)
    if fd is None:
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


def _open_local(full: str) -> int | None:
    """A descriptor on the local file ``decide`` looked at, or None when it is no longer
    there or no longer a regular file; any other error (it cannot be read) is raised."""
    try:
        return os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None  # gone meanwhile
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO):
            return None  # swapped for a symlink or a socket meanwhile
        raise


def _is_prefix(full: str, entry: Entry, reader) -> bool:
    """True when the local file's bytes are the first bytes of the entry's: segments the
    file holds whole are compared by id, the one it ends inside by its bytes, read from
    the store and verified. A segment that cannot be read proves nothing (False); a
    file that cannot be read raises ``OSError`` (``decide`` keeps it)."""
    fd = _open_local(full)
    if fd is None:
        return False
    try:
        size = os.fstat(fd).st_size
        offset = 0
        for ref, anchor in zip(entry.refs, anchor_refs(entry.refs)):
            if offset >= size:
                return True
            if offset + ref.size > size:
                try:
                    payload = read_segment(reader, ref, anchor)
                except (CorruptObject, ObjectNotFound):
                    return False
                return os.pread(fd, size - offset, offset) == payload[:size - offset]
            if hashlib.sha256(os.pread(fd, ref.size, offset)).hexdigest() != ref.id:
                return False
            offset += ref.size
        return offset >= size
    finally:
        os.close(fd)


def stage_entry(root: str, tmp_dir: str, entry: Entry, reader, records: Iterable[bytes] | None = None) -> Staged:
    """Write ``entry`` (not a directory) in full to a temp file in ``tmp_dir``, from
    ``reader`` (a Repository), or from ``records``: its blobs as stored, already read
    (each is verified here, segment deltas against their anchor).
    Its live path is not touched (see ``batch.py``).

    Raises CorruptObject/ObjectNotFound on a bad blob, after removing the temp file.
    Safe to call from several threads at once.
    """
    full = os.path.join(root, entry.path)
    if entry.kind == KIND_SQLITE:
        return _stage_db(full, tmp_dir, entry, reader)
    if entry.kind == KIND_SYMLINK:
        tmp = os.path.join(tmp_dir, f"link-{os.getpid()}-{_path_tag(full)}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(entry.target, tmp)
        os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns), follow_symlinks=False)
        return Staged(full, tmp, None, 0, link=True)
    tmp = os.path.join(tmp_dir, f"{_TMP_PREFIX}-{next(_tmp_seq)}.part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    size = unsynced = 0
    try:
        blobs = read_blobs(entry, reader) if records is None else decode_blobs(entry, records, chunk_reader(reader))
        with naming(full):  # a full disk: the error names the file being restored
            for payload in blobs:
                size += _write_all(fd, payload)
                unsynced += len(payload)
                if unsynced >= WRITEBACK_BYTES:  # a large file: keep its dirty pages few
                    start_writeback(fd)
                    unsynced = 0
            os.fchmod(fd, entry.mode & 0o7777)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
            start_writeback(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return Staged(full, tmp, fd, size)


def _stage_db(full: str, tmp_dir: str, entry: Entry, reader) -> Staged:
    """Rebuild a database into a temp file (fsynced and quick_checked by ``rebuild_db``)."""
    from .sqlite_capture import install_db, rebuild_db  # sqlite3 is imported only when needed
    from .sqlite_snapshot import remove_staging

    tmp = os.path.join(tmp_dir, f"db-{os.getpid()}-{_path_tag(full)}")
    try:
        rebuild_db(entry, reader, tmp)
    except BaseException:
        remove_staging(tmp)
        raise

    def install() -> None:
        try:
            install_db(tmp, full, entry)
        finally:
            remove_staging(tmp)

    return Staged(full, tmp, None, entry.size, install=install)


def _path_tag(full: str) -> str:
    return hashlib.sha256(full.encode()).hexdigest()[:16]


def _write_all(fd: int, payload: bytes) -> int:
    view = memoryview(payload)
    while view:
        view = view[os.write(fd, view):]
    return len(payload)


def move_aside(root: str, entry: Entry, aside_dir: str) -> str:
    """Move an invalid local database and its companions into ``aside_dir``; never delete."""
    full = os.path.join(root, entry.path)
    target = os.path.join(aside_dir, entry.path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    for suffix in ("",) + SQLITE_COMPANIONS:
        if os.path.lexists(full + suffix):
            _move(full + suffix, target + suffix)
    fsync_dir(os.path.dirname(full))
    return target


def _move(src: str, dst: str) -> None:
    """Rename; across filesystems (a tree on its own volume), copy, fsync, then unlink."""
    try:
        os.replace(src, dst)
        return
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
    import shutil

    shutil.copy2(src, dst, follow_symlinks=False)
    if not os.path.islink(dst):
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(os.path.dirname(dst))
    os.unlink(src)


def finish_dirs(root: str, entries: list[Entry]) -> list[str]:
    """Apply directory modes last (deepest first), so read-only dirs do not block writes.

    Returns the directories whose mode changed. A path that is not a directory on disk
    (a kept conflict) is left alone.
    """
    changed = []
    for e in sorted((e for e in entries if e.kind == KIND_DIR), key=lambda e: e.path, reverse=True):
        full = os.path.join(root, e.path)
        try:
            st = os.lstat(full)
            if stat_mod.S_ISDIR(st.st_mode) and stat_mod.S_IMODE(st.st_mode) != e.mode & 0o7777:
                os.chmod(full, e.mode & 0o7777, follow_symlinks=False)
                changed.append(full)
        except (OSError, NotImplementedError):
            pass
    return changed


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
