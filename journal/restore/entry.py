"""Putting one entry on local disk: path safety, the keep-or-replace rule, the write.

The rule (docs/design.md §1, requirement 5: a hot restart never restores older over newer):

* a missing path is written;
* a local file with the checkpointed size and mtime, or the same bytes, is left alone;
* a JSONL file whose local bytes extend the checkpointed bytes is kept;
* a JSONL file whose local bytes are a strict prefix of the checkpointed bytes is
  completed from the checkpoint, whatever its mtime (it loses no local byte);
* a local path newer than the checkpoint is kept;
* anything else is replaced atomically: staged in full to a temp file, made durable,
  then renamed (``restore/publish.py``).

Blobs are read and verified as they are written to the temp file, so a corrupt blob
aborts before any byte reaches the live path. A file's whole chunks of zeros are not
read and not written: they are holes in the new file (``local/sparse.py``).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat as stat_mod
from collections.abc import Iterable

import msgspec

from ..atomic import Writeback, fsync_dir, makedirs, start_writeback
from .publish import Staged
from ..errors import CorruptObject, LocalWriteError, ObjectNotFound, SnapshotFailed, UnsafePath, naming
from ..format.codec import PLAIN, Codec
from ..format.segments import anchor_refs
from ..repository.segments import chunk_reader, decode_blobs, read_blobs, read_segment
from ..format.model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, Entry
from ..format.objects import CHUNK_BYTES
from ..presets import SQLITE_COMPANIONS
from ..local.sparse import zero_chunk_id
from ..local.tree_tmp import TreeTmp
from ..local.under import dir_under, make_under, sync
from ..local.treepath import path_problem, target_problem
from ..paths import PRIVATE_DIR, shown
from ..signatures import live_signature, mtime_ns

WRITE, REPLACE, COMPLETE, SAME, KEEP_NEWER, KEEP_EXTENDS, KEEP_CONFLICT, KEEP_VALID_DB, KEEP_UNREADABLE = (
    "write", "replace", "complete-prefix", "same", "keep-newer", "keep-extends", "keep-conflict", "keep-valid-db",
    "keep-unreadable")
#: A path that is not on disk and that restore cannot create (past the path length
#: limits): it is lost, and the restore incomplete.
CANNOT_CREATE = "cannot-create"
#: An entry restore refuses (``refused_paths``, a local parent that is a symlink): lost.
REFUSED = "refused"
WRITES = (WRITE, REPLACE, COMPLETE)
#: The most pieces one ``writev`` takes (Linux's ``IOV_MAX``).
IOV_MAX = 1024


def refused_paths(entries: list[Entry]) -> dict[str, str]:
    """The entries restore refuses, each with why: a path the path rule refuses
    (``local/treepath.py``), a path through a symlink entry or inside another entry that is
    not a directory, a symlink target that cannot be made. Every other entry is fine,
    whatever these are. (A path too long under this tree's root is found by ``decide``:
    lost when nothing is there, else kept.)"""
    others = {e.path: e.kind for e in entries if e.kind != KIND_DIR}
    refused = {}
    for e in entries:
        p = e.path
        problem = own_problem(e)
        if problem is None and others:
            parts = p.split("/")
            for i in range(1, len(parts)):
                parent = "/".join(parts[:i])
                kind = others.get(parent)
                if kind is not None:
                    problem = inside_problem(parent, kind)
                    break
        if problem is not None:
            refused[p] = problem
    return refused


def own_problem(entry: Entry) -> str | None:
    """Why restore refuses ``entry`` whatever else the tree holds (the path rule, a
    symlink target it cannot make), or None. It comes before ``inside_problem``."""
    problem = path_problem(entry.path)
    if problem is None and entry.kind == KIND_SYMLINK:
        problem = target_problem(entry.target or "")
    return problem


def inside_problem(parent: str, kind: str) -> str:
    """Why restore refuses an entry under ``parent``, an entry of ``kind`` (not a
    directory); the shortest such parent of a path is the one named."""
    if kind == KIND_SYMLINK:
        return f"it goes through the symlink {parent!r}"
    return f"it is inside the {kind} entry {parent!r}, not a directory"


def ensure_parents(root: str, path: str, known: set[str] | None = None, created: list[str] | None = None) -> None:
    """Create the parents of ``root/path``; refuse any existing parent that is a symlink.

    ``known`` holds directories already checked (or made) by this caller, so each is
    looked at once per tree; ``created`` receives each directory this call made. The
    missing ones are made through descriptors from the root (``local/under.py``): a
    directory on the way swapped for a symlink after it was looked at is refused, and
    nothing is made outside the tree.
    """
    parts = path.split("/")[:-1]
    current = root
    for i, part in enumerate(parts):
        current = os.path.join(current, part)
        if known is not None and current in known:
            continue
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            make_under(root, "/".join(parts), created)
            if known is not None:
                known.update(os.path.join(root, *parts[:j + 1]) for j in range(i, len(parts)))
            return
        if stat_mod.S_ISLNK(st.st_mode) or not stat_mod.S_ISDIR(st.st_mode):
            raise UnsafePath(path, f"local parent {current} is not a directory (symlinks are never followed)")
        if known is not None:
            known.add(current)


#: ``parent_kind``'s answers.
MISSING, DIRECTORY, SYMLINK, OTHER, UNKNOWN = "missing", "directory", "symlink", "other", "unknown"


def parent_kind(root: str, path: str, seen: dict[str, str]) -> str:
    """What stands where ``path``'s parents belong, looked at without following any
    link: ``SYMLINK`` or ``OTHER`` for the first parent that is not a directory, else
    ``MISSING`` (some parent is missing), ``UNKNOWN`` (one cannot be looked at: a path
    too long, a directory that cannot be searched) or ``DIRECTORY``. ``seen`` caches
    answers per parent for one tree."""
    parent = path.rpartition("/")[0]
    if not parent:
        return DIRECTORY
    kind = seen.get(parent)
    if kind is None:
        kind = parent_kind(root, parent, seen)
        if kind == DIRECTORY:
            try:
                mode = os.lstat(os.path.join(root, parent)).st_mode
            except FileNotFoundError:
                kind = MISSING
            except OSError:
                kind = UNKNOWN  # the entry's own lookup says what it can (``decide``)
            else:
                kind = DIRECTORY if stat_mod.S_ISDIR(mode) else SYMLINK if stat_mod.S_ISLNK(mode) else OTHER
        seen[parent] = kind
    return kind


class CheckDir:
    """The private directory a restore copies live databases into to check them
    (``check_live_db``), outside every tree: made (mode 0700, a new name) under
    ``parent`` the first time a database needs it, never when none does (a restore
    into an empty directory); ``parent`` None is the system's temp directory (a dry
    run creates nothing in the state directory). ``cleanup`` removes it and what it
    holds."""

    def __init__(self, parent: str | None):
        self.parent = parent
        self._path: str | None = None

    def path(self) -> str:
        """The directory, made now if it is not yet; ``LocalWriteError`` when it cannot
        be (never taken for a local database that cannot be read)."""
        if self._path is None:
            import tempfile   # only once a local database is to be checked: not on every restore's path

            where = self.parent
            try:
                if where is not None:
                    makedirs(where, PRIVATE_DIR)
                made = tempfile.mkdtemp(prefix="journal-check-", dir=where)   # mode 0700, a new name
            except OSError as err:
                raise LocalWriteError("restore: cannot make the directory local databases are checked in",
                                      err, where or "the system's temp directory") from err
            self._path = made
        return self._path

    def cleanup(self) -> None:
        if self._path is not None:
            import shutil   # the copies were made with it (``snapshot._copy_private``)

            path, self._path = self._path, None
            try:
                shutil.rmtree(path)
            except FileNotFoundError:
                pass   # removed meanwhile: nothing left to clean


def decide(root: str, entry: Entry, check_dir: CheckDir, parents: dict[str, str] | None = None,
           reader=None, known=None) -> str:
    """What restore does with ``entry`` given what is on disk now. A live database is
    checked through a private copy in ``check_dir`` (``CheckDir``, outside the tree), unless the local
    state's ``known`` view of it (a ``FileState``) is this very entry and its live
    signature is unchanged since: then it is the checkpoint's copy (``SAME``). ``parents``
    caches ``parent_kind`` for the tree; ``reader`` (a Repository) reads the one segment
    a shorter local transcript ends in, and its codec makes the ids local bytes are
    compared by. Raises ``UnsafePath`` when a local parent of the
    entry is a symlink: nothing is read, moved or written through one. A path too long
    to look at or create is ``CANNOT_CREATE`` when nothing is there. Raises ``OSError``
    when the local path exists, or may, but cannot be looked at (permissions, an I/O
    error, a path too long): the caller keeps it (``KEEP_UNREADABLE``)."""
    kind = parent_kind(root, entry.path, {} if parents is None else parents)
    if kind == SYMLINK:
        parts = entry.path.split("/")
        link = next((p for p in ("/".join(parts[:i]) for i in range(1, len(parts)))
                     if os.path.islink(os.path.join(root, p))), entry.path.rpartition("/")[0])
        raise UnsafePath(entry.path, f"the local parent {link!r} is a symlink (symlinks are never followed)")
    if kind == OTHER:
        return KEEP_CONFLICT  # a local file where the entry's parent directory belongs
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
        if known is not None and known.entry == entry and known.sig is not None \
                and tuple(known.sig) == live_signature(full):
            return SAME
        return _judge_live_db(full, entry, check_dir, reader)
    if entry.kind == KIND_SYMLINK:
        if stat_mod.S_ISLNK(st.st_mode) and os.readlink(full) == entry.target:
            return SAME
    elif stat_mod.S_ISREG(st.st_mode):
        codec = PLAIN if reader is None else reader.codec
        if st.st_size == entry.size and (mtime_ns(st) == entry.mtime_ns or _same_bytes(full, entry, codec)):
            return SAME
        if entry.kind == KIND_JSONL and st.st_size > entry.size and _same_bytes(full, entry, codec):
            return KEEP_EXTENDS
        if entry.kind == KIND_JSONL and st.st_size < entry.size and reader is not None \
                and _is_prefix(full, entry, reader):
            return COMPLETE  # an append-only transcript: its content, not its mtime, decides
    if st.st_mtime_ns > entry.mtime_ns:
        return KEEP_NEWER
    return REPLACE


def _judge_live_db(full: str, entry: Entry, check_dir: CheckDir, reader) -> str:
    """A live database the local state does not vouch for: ``REPLACE`` when it is invalid;
    ``SAME`` when it is valid and its pages are the checkpoint's (its file changed, not its
    content: an application that closed it after the checkpoint wrote its WAL back);
    else ``KEEP_VALID_DB``, which restore says (design §7)."""
    from ..sqlite.snapshot import check_live_copy

    same = None if reader is None else (lambda copy: _holds_snapshot(copy, entry, reader, check_dir.path()))
    problem, held = check_live_copy(full, check_dir.path(), same)
    if problem is not None:
        return REPLACE
    return SAME if held else KEEP_VALID_DB


def _holds_snapshot(copy: str, entry: Entry, reader, tmp_dir: str) -> bool:
    """Whether the checked copy of a live database holds the pages of ``entry``'s
    snapshot: backed up as a checkpoint backs a database up (``snapshot_db``), each page
    hashed as a checkpoint hashes it, compared with the ids the snapshot's page maps
    give (a few small records; no page is read from the store). Any doubt is a no."""
    from ..format.objects import KIND_PAGEMAP
    from ..format.pagemap import load_snapshot
    from ..sqlite.snapshot import remove_staging, snapshot_db

    try:
        snap = load_snapshot(entry.refs, lambda ref: reader.read_blob(ref, KIND_PAGEMAP))
        staging, ids = snapshot_db(copy, tmp_dir, lambda path: _page_ids(path, snap.page_size, reader.codec))
    except (CorruptObject, ObjectNotFound, SnapshotFailed, OSError):
        return False
    remove_staging(staging)
    return ids == [loc.id for loc in snap.pages]


def _page_ids(path: str, page_size: int, codec: Codec) -> list[str]:
    """The id of every page of the database file at ``path`` (``page_size`` bytes each)."""
    with open(path, "rb") as fh:
        return [codec.id(page) for page in iter(lambda: fh.read(page_size), b"")]


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


def _same_bytes(full: str, entry: Entry, codec: Codec) -> bool:
    """True when the local file starts with exactly the entry's bytes (compared by blob
    ids). A file that cannot be read raises ``OSError`` (``decide`` keeps it)."""
    fd = _open_local(full)
    if fd is None:
        return False
    try:
        offset = 0
        for ref in entry.refs:
            if codec.id(os.pread(fd, ref.size, offset)) != ref.id:
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
            if reader.codec.id(os.pread(fd, ref.size, offset)) != ref.id:
                return False
            offset += ref.size
        return offset >= size
    finally:
        os.close(fd)


def stage_entry(root: str, tmp: TreeTmp, entry: Entry, reader, records: Iterable[bytes] | None = None) -> Staged:
    """Write ``entry`` (not a directory) in full to a new file in the tree's temp
    directory ``tmp``, from ``reader`` (a Repository), or from ``records``: its blobs as
    stored, already read (each is verified here, segment deltas against their anchor).
    Its live path is not touched (see ``restore/publish.py``).

    Raises CorruptObject/ObjectNotFound on a bad blob, after removing the temp file.
    Safe to call from several threads at once.
    """
    full = os.path.join(root, entry.path)
    if entry.kind == KIND_SQLITE:
        return _stage_db(full, tmp, entry, reader)
    if entry.kind == KIND_SYMLINK:
        name = tmp.new_symlink(entry.target, entry.mtime_ns)
        return Staged(full, tmp, name, None, 0, link=True)
    name, fd = tmp.new_file()
    pacer = Writeback(fd, entry.size)   # a large file: keep its dirty pages, and its clean ones, few
    try:
        holes = _holes(entry, reader.codec)
        written = entry
        if holes is not None:   # whole chunks of zeros: left holes (design §6, "Holes")
            _verify_zero_chunks(entry, holes, reader)
            written = msgspec.structs.replace(entry, refs=_kept(entry.refs, holes), bases=_kept(entry.bases, holes))
            records = None if records is None else _kept(tuple(records), holes)
        blobs = read_blobs(written, reader, pieces=True) if records is None else decode_blobs(
            written, records, chunk_reader(reader), codec=reader.codec)
        with naming(full):  # a full disk: the error names the file being restored
            for payload, gap in zip(blobs, _gaps(holes, len(written.refs))):
                if gap:
                    os.lseek(fd, gap, os.SEEK_CUR)
                    pacer.skipped(gap)
                pacer.wrote(_write_all(fd, payload))
            if holes is not None:
                os.ftruncate(fd, entry.size)   # a hole at the end too
                pacer.skipped(entry.size - pacer.size)
            os.fchmod(fd, entry.mode & FILE_MODE_BITS)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
            start_writeback(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(name)
        raise
    return Staged(full, tmp, name, fd, pacer.size)


def _holes(entry: Entry, codec: Codec) -> list[bool] | None:
    """Which chunks of a file are whole chunks of zeros (``local/sparse.py``), left holes
    by a restore; None when none is (or it is no ordinary file)."""
    if entry.kind != KIND_FILE or entry.size < CHUNK_BYTES:
        return None
    zero = zero_chunk_id(codec)
    holes = [ref.id == zero and ref.size == CHUNK_BYTES for ref in entry.refs]
    return holes if any(holes) else None


def _verify_zero_chunks(entry: Entry, holes: list[bool], reader) -> None:
    """Read and verify each stored copy of the zero chunk ``entry`` names (once each,
    however many holes name it): a hole is written from the chunk's id, but every object
    a restore relies on is verified on read (a damaged or crafted copy is refused)."""
    copies = {ref for ref, hole in zip(entry.refs, holes) if hole}
    for ref in copies:
        one = msgspec.structs.replace(entry, refs=(ref,), bases=(), size=ref.size)
        for _ in read_blobs(one, reader, pieces=True):
            pass


def _kept(items: tuple, holes: list[bool]) -> tuple:
    """``items`` (a file's refs, bases or records: one per chunk, or none) but the holes'."""
    return tuple(item for item, hole in zip(items, holes) if not hole) if items else items


def _gaps(holes: list[bool] | None, chunks: int) -> list[int]:
    """For each of the ``chunks`` chunks written, the bytes of holes just before it."""
    if holes is None:
        return [0] * chunks
    out, gap = [], 0
    for hole in holes:
        if hole:
            gap += CHUNK_BYTES
        else:
            out.append(gap)
            gap = 0
    return out


def _stage_db(full: str, tmp: TreeTmp, entry: Entry, reader) -> Staged:
    """Rebuild a database into a new temp file, with its mode and mtime, durable and
    quick_checked (``build_db``)."""
    from ..sqlite.rebuild import build_db, install_db  # sqlite3 is imported only when needed

    name, fd = tmp.new_file(os.O_RDWR)
    try:
        build_db(entry, reader, fd, tmp.where(name), tmp.anonymous, meta=True, shown_as=os.path.join(tmp.path, name))
        if not tmp.same_file(name, fd):
            raise UnsafePath(entry.path, f"its temp file in {tmp.path} was replaced while it was rebuilt; "
                             "another process is writing the tree")
    except BaseException:
        os.close(fd)
        tmp.unlink(name)
        raise
    os.close(fd)

    def install() -> None:
        try:
            install_db(tmp, name, full)
        finally:
            tmp.unlink(name)

    return Staged(full, tmp, name, None, entry.size, install=install)


def _write_all(fd: int, payload: bytes | list) -> int:
    """Write a payload, or the list of its pieces (``read_blobs(pieces=True)``), in full."""
    if not isinstance(payload, list):
        payload = [payload]
    views = [memoryview(p) for p in payload]
    total = sum(map(len, views))
    while views:
        done = os.writev(fd, views[:IOV_MAX])
        while views and done >= len(views[0]):
            done -= len(views.pop(0))
        if done:
            views[0] = views[0][done:]
    return total


def move_aside(root: str, entry: Entry, aside_dir: str) -> str:
    """Move an invalid local database and its companions into ``aside_dir``; never
    delete. They are taken from their directory as reached from the root without a
    symlink (``local/under.py``), so nothing outside the tree is ever moved. The first
    name there is renamed; where that crosses filesystems (``EXDEV``: another
    filesystem, or a bind mount of the same one) every name is copied instead, and a
    companion that is neither a file, a symlink nor a FIFO then refuses the move
    before anything moves. ``UnsafePath`` when something changes under the move
    (another process); what was moved so far stays in ``aside_dir``."""
    directory, name = os.path.split(entry.path)
    target = os.path.join(aside_dir, entry.path)
    made = makedirs(os.path.dirname(target), 0o700)
    with dir_under(root, directory) as parent:
        there = []
        for suffix in ("",) + SQLITE_COMPANIONS:
            try:
                there.append((suffix, os.stat(name + suffix, dir_fd=parent, follow_symlinks=False)))
            except FileNotFoundError:
                continue
        copy = False
        for i, (suffix, st) in enumerate(there):
            if not copy:
                try:
                    os.replace(name + suffix, target + suffix, src_dir_fd=parent)
                    continue
                except FileNotFoundError:
                    continue  # gone meanwhile (SQLite's last close removes its -wal and -shm)
                except OSError as err:
                    if err.errno != errno.EXDEV:
                        raise
                copy = True
                odd = [(s, t) for s, t in there[i:] if not _copyable(t.st_mode)]
                if odd:
                    moved = " (nothing was)" if i == 0 else f" (the rest is in {shown(os.path.dirname(target))})"
                    raise UnsafePath(entry.path + odd[0][0], f"it is {_kind(odd[0][1].st_mode)}, and moving aside "
                                                            f"to {shown(aside_dir)} is a copy here: not moved{moved}")
            _copy_aside(parent, name + suffix, st, target + suffix, entry.path + suffix)
        fsync_dir(os.path.dirname(target))  # the names' new place first, then their old one
        for path in made:
            fsync_dir(os.path.dirname(path))
        sync(parent)
    return target


def _copyable(mode: int) -> bool:
    return stat_mod.S_ISREG(mode) or stat_mod.S_ISLNK(mode) or stat_mod.S_ISFIFO(mode)


def _kind(mode: int) -> str:
    return "a directory" if stat_mod.S_ISDIR(mode) else "a socket" if stat_mod.S_ISSOCK(mode) else \
        "a device" if stat_mod.S_ISCHR(mode) or stat_mod.S_ISBLK(mode) else "a special file"


def _copy_aside(parent: int, name: str, st: os.stat_result, dst: str, shown_path: str) -> None:
    """Copy ``name`` (in the directory ``parent``, as ``st`` saw it) to ``dst`` on
    another filesystem, fsync, then unlink it: a symlink as a symlink, a FIFO as a new
    FIFO (never opened: it would block), a file's bytes read through a descriptor
    opened without blocking and checked to be that file, and unlinked only if nothing
    changed it while it was copied (a writer's new bytes are never deleted). A name
    gone meanwhile is skipped; anything else changing under the copy is ``UnsafePath``
    (the name is left in place)."""
    def changed(why: str) -> UnsafePath:
        return UnsafePath(shown_path, f"{why}: another process is writing the tree; it is left in place, and "
                                      f"what was moved aside so far is in {shown(os.path.dirname(dst))}")
    try:
        if stat_mod.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=parent), dst)
        elif stat_mod.S_ISFIFO(st.st_mode):
            os.mkfifo(dst, stat_mod.S_IMODE(st.st_mode))
        elif stat_mod.S_ISREG(st.st_mode):
            if not _copy_file(parent, name, st, dst):
                raise changed("it changed while it was copied aside")
        else:
            raise changed(f"it became {_kind(st.st_mode)}")
        now = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise changed(f"it changed while it was moved aside ({err.strerror})") from err
        raise
    if _stamp(now) != _stamp(st):
        raise changed("it changed while it was copied aside")
    os.unlink(name, dir_fd=parent)


def _stamp(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _copy_file(parent: int, name: str, st: os.stat_result, dst: str) -> bool:
    """Copy the regular file ``name`` to ``dst``; False when it is not the file ``st``
    saw, before or after the copy."""
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    try:
        if not stat_mod.S_ISREG(os.fstat(src).st_mode) or _stamp(os.fstat(src)) != _stamp(st):
            return False
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                      stat_mod.S_IMODE(st.st_mode))
        try:
            while chunk := os.read(src, 1 << 20):
                os.write(out, chunk)  # (a regular file: writes are whole)
            os.fsync(out)
        finally:
            os.close(out)
        if _stamp(os.fstat(src)) != _stamp(st):
            return False
    finally:
        os.close(src)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    return True


#: The mode bits a restored file gets: never setuid or setgid. A store's bytes are only
#: as trusted as whoever could write it, and a restore run as root would otherwise make
#: any file it names a setuid-root program (``cp`` and ``tar`` drop them the same way).
FILE_MODE_BITS = 0o1777


def finish_dirs(root: str, entries: list[Entry]) -> list[str]:
    """Apply directory modes last (deepest first), so read-only dirs do not block writes.

    Returns the directories whose mode changed. A path that is not a directory on disk
    (a kept conflict, a symlink) is left alone: each directory is reached from the root
    one name at a time without following a link (``local/under.py``), and its mode set
    through its own descriptor (for a directory its owner may not read, an ``O_PATH``
    one, through ``/proc/self/fd``).
    """
    changed = []
    for e in sorted((e for e in entries if e.kind == KIND_DIR), key=lambda e: e.path, reverse=True):
        try:
            with dir_under(root, e.path) as fd:
                mode = e.mode & 0o7777
                if stat_mod.S_IMODE(os.fstat(fd).st_mode) != mode:
                    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_PATH:
                        os.chmod(f"/proc/self/fd/{fd}", mode)  # the directory the descriptor holds, never a link
                    else:
                        os.fchmod(fd, mode)
                    changed.append(os.path.join(root, e.path))
        except (OSError, UnsafePath):  # not a directory reached without a link: left alone
            continue
    return changed
