"""Putting one entry on local disk: path safety, the keep-or-replace rule, the write.

The rule (docs/design.md §1, requirement 5: a hot restart never restores older over newer);
each case is a ``Verdict``:

* a missing path is written (``WRITE``);
* a local file with the checkpointed size and mtime, or the same bytes, is left alone (``SAME``);
* a JSONL file whose local bytes extend the checkpointed bytes is kept (``KEEP_EXTENDS``);
* a JSONL file whose local bytes are a strict prefix of the checkpointed bytes is
  completed from the checkpoint, whatever its mtime (``COMPLETE``: no local byte is lost);
* a local path newer than the checkpoint is kept (``KEEP_NEWER``);
* anything else is replaced atomically (``REPLACE``): staged in full to a temp file,
  made durable, then renamed (``restore/publish.py``).

Blobs are read and verified as they are written to the temp file, so a corrupt blob
aborts before any byte reaches the live path. A file's whole chunks of zeros are not
read and not written: they are holes in the new file (``local/sparse.py``).
"""

from __future__ import annotations

import enum
import errno
import fcntl
import os
import stat as stat_mod
from collections.abc import Iterable

import msgspec

from ..atomic import Writeback, makedirs, start_writeback
from .publish import Staged
from .reads import BlobReads, StagingReads
from ..errors import CorruptObject, ObjectNotFound, StoreError
from ..local.errors import LocalWriteError, UnsafePath
from ..os_errors import naming
from ..sqlite.errors import SnapshotFailed
from ..format.codec import PLAIN, Codec
from ..format.segments import anchor_refs
from ..repository.segments import chunk_reader, decode_blobs, read_blobs, read_segment
from ..format.model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SQLITE, KIND_SYMLINK, Entry
from ..format.objects import CHUNK_BYTES
from ..local.sparse import zero_chunk_id
from ..local.tree_tmp import TreeTmp
from ..local.under import dir_under, make_under
from ..local.treepath import path_problem, target_problem
from ..paths import PRIVATE_DIR
from ..signatures import live_signature, mtime_ns

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..local.state import FileState



class Verdict(enum.StrEnum):
    """What restore does with one path. ``TreeRestore.actions`` counts paths by
    verdict, and ``--json`` shows these values: users' scripts read them, so a value
    never changes."""

    #: Nothing is there: written.
    WRITE = "write"
    #: Older local content: replaced atomically.
    REPLACE = "replace"
    #: A local transcript that is a strict prefix of the checkpoint's: completed.
    COMPLETE = "complete-prefix"
    #: The checkpoint's content is there already: left alone.
    SAME = "same"
    #: A local path newer than the checkpoint: kept.
    KEEP_NEWER = "keep-newer"
    #: A local transcript that extends the checkpoint's bytes: kept.
    KEEP_EXTENDS = "keep-extends"
    #: A file where a directory belongs, or a directory where a file belongs: kept.
    KEEP_CONFLICT = "keep-conflict"
    #: A valid local database that is not the checkpoint's: kept (design §7).
    KEEP_VALID_DB = "keep-valid-db"
    #: A local path that cannot be read: kept, never written over.
    KEEP_UNREADABLE = "keep-unreadable"
    #: Not on disk, and past the path length limits here: lost (the restore is incomplete).
    CANNOT_CREATE = "cannot-create"
    #: Refused (``refused_paths``, a local parent that is a symlink): lost.
    REFUSED = "refused"
    #: Adopting a checkpoint: a local path it does not hold, taken out (``restore/adopt.py``).
    REMOVE = "remove"
    #: A rolled-back tree whose checkpoint gc deleted since: left as it is (``restore/run.py``).
    KEEP_ROLLED_BACK = "keep-rolled-back"


#: The verdicts that write the entry.
WRITES = frozenset({Verdict.WRITE, Verdict.REPLACE, Verdict.COMPLETE})
#: The most pieces one ``writev`` takes (Linux's ``IOV_MAX``).
IOV_MAX = 1024


def refused_paths(entries: list[Entry]) -> dict[str, str]:
    """The entries restore refuses, each with why. Every other entry is restored.

    Restore refuses a path the path rule refuses (``local/treepath.py``), a symlink
    whose target it cannot make, and a path under another entry that is not a
    directory (a symlink, a file). A path too long for this tree's root is not refused
    here: ``decide`` finds it."""
    parents: set[str] = set()   # every directory a path is under (a few hundred where the paths are 200,000)
    for e in entries:
        d = e.path.rpartition("/")[0]
        while d and d not in parents:
            parents.add(d)
            d = d.rpartition("/")[0]
    others = {e.path: e.kind for e in entries if e.kind != KIND_DIR and e.path in parents}
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
    """Create the missing parents of ``root/path``. Raise ``UnsafePath`` when an
    existing parent is a symlink or not a directory.

    ``known`` holds the directories this caller already checked or made: each is
    looked at once per tree. ``created`` receives each directory this call made.
    Missing directories are made through descriptors from the root (``local/under.py``),
    so nothing is made outside the tree, even when a directory is swapped for a symlink
    meanwhile.
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


class Parents(enum.Enum):
    """What stands where a path's parents belong (``parent_kind``)."""

    #: Every parent is a directory.
    DIRECTORY = "directory"
    #: The first parent that is not a directory is a symlink.
    SYMLINK = "symlink"
    #: The first parent that is not a directory is something else (a file).
    OTHER = "other"
    #: Some parent is missing.
    MISSING = "missing"
    #: Some parent cannot be looked at (a path too long, a directory that cannot be searched).
    UNKNOWN = "unknown"


def parent_kind(root: str, path: str, seen: dict[str, Parents]) -> Parents:
    """What stands where ``path``'s parents belong, looked at without following a link.
    ``seen`` caches the answer for each parent, for one tree."""
    parent = path.rpartition("/")[0]
    if not parent:
        return Parents.DIRECTORY
    kind = seen.get(parent)
    if kind is None:
        kind = parent_kind(root, parent, seen)
        if kind is Parents.DIRECTORY:
            try:
                mode = os.lstat(os.path.join(root, parent)).st_mode
            except FileNotFoundError:
                kind = Parents.MISSING
            except OSError:
                kind = Parents.UNKNOWN  # the entry's own lookup says what it can (``decide``)
            else:
                kind = Parents.DIRECTORY if stat_mod.S_ISDIR(mode) else \
                    Parents.SYMLINK if stat_mod.S_ISLNK(mode) else Parents.OTHER
        seen[parent] = kind
    return kind


class CheckDir:
    """The private directory where restore copies live databases to check them
    (``check_live_db``). It is outside every tree.

    It is made (mode 0700, a new name) under ``parent`` when the first database needs
    it, and never when none does. ``parent`` None means the system's temp directory: a
    dry run creates nothing in the state directory. ``cleanup`` removes it and what it
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


def decide(root: str, entry: Entry, check_dir: CheckDir, parents: dict[str, Parents] | None = None,
           reader: BlobReads | None = None, known: FileState | None = None) -> Verdict:
    """What restore does with ``entry``, given what is on disk now (see the module docstring).

    ``reader`` reads the last segment of a shorter local transcript; its codec makes
    the ids that local bytes are compared by. Without it, no transcript is completed
    and a live database is only checked for validity. ``parents`` caches
    ``parent_kind`` for the tree.

    A live database is checked through a private copy in ``check_dir``. When ``known``
    (the local state's view of the path) is this very entry, and the live signature
    has not changed since, the database is the checkpoint's copy: ``SAME``.

    A path too long to look at or create is ``CANNOT_CREATE`` when nothing is there.
    Raises ``UnsafePath`` when a local parent is a symlink: nothing is read, moved or
    written through one. Raises ``OSError`` when the local path may exist but cannot
    be looked at; the caller keeps it (``KEEP_UNREADABLE``).
    """
    kind = parent_kind(root, entry.path, {} if parents is None else parents)
    if kind is Parents.SYMLINK:
        parts = entry.path.split("/")
        link = next((p for p in ("/".join(parts[:i]) for i in range(1, len(parts)))
                     if os.path.islink(os.path.join(root, p))), entry.path.rpartition("/")[0])
        raise UnsafePath(entry.path, f"the local parent {link!r} is a symlink (symlinks are never followed)")
    if kind is Parents.OTHER:
        return Verdict.KEEP_CONFLICT  # a local file where the entry's parent directory belongs
    full = os.path.join(root, entry.path)
    if kind is Parents.MISSING and len(full) < _SHORT:
        return Verdict.WRITE  # no parent, so nothing there (a new tree: not one lstat per file)
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return Verdict.WRITE
    except NotADirectoryError:
        return Verdict.KEEP_CONFLICT  # a local file where the entry's parent directory belongs
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG and _absent(root, entry.path):
            return Verdict.CANNOT_CREATE
        raise
    if entry.kind == KIND_DIR:
        return Verdict.SAME if stat_mod.S_ISDIR(st.st_mode) else Verdict.KEEP_CONFLICT
    if stat_mod.S_ISDIR(st.st_mode):
        return Verdict.KEEP_CONFLICT  # never replace a directory (and what is in it) with a file
    if entry.kind == KIND_SQLITE and stat_mod.S_ISREG(st.st_mode):
        if known is not None and known.entry == entry and known.sig is not None \
                and tuple(known.sig) == live_signature(full):
            return Verdict.SAME
        return _judge_live_db(full, entry, check_dir, reader)
    if entry.kind == KIND_SYMLINK:
        if stat_mod.S_ISLNK(st.st_mode) and os.readlink(full) == entry.target:
            return Verdict.SAME
    elif stat_mod.S_ISREG(st.st_mode):
        codec = PLAIN if reader is None else reader.codec
        if st.st_size == entry.size and (mtime_ns(st) == entry.mtime_ns or _same_bytes(full, entry, codec)):
            return Verdict.SAME
        if entry.kind == KIND_JSONL and st.st_size > entry.size and _same_bytes(full, entry, codec):
            return Verdict.KEEP_EXTENDS
        if entry.kind == KIND_JSONL and st.st_size < entry.size and reader is not None \
                and _is_prefix(full, entry, reader):
            return Verdict.COMPLETE  # an append-only transcript: its content, not its mtime, decides
    if st.st_mtime_ns > entry.mtime_ns:
        return Verdict.KEEP_NEWER
    return Verdict.REPLACE


def _judge_live_db(full: str, entry: Entry, check_dir: CheckDir, reader: BlobReads | None) -> Verdict:
    """A live database the local state does not vouch for. ``REPLACE`` when it is
    invalid. ``SAME`` when it is valid and holds the checkpoint's pages: its file
    changed, not its content (an application closed it after the checkpoint and wrote
    its WAL back). Else ``KEEP_VALID_DB``, which restore reports (design §7)."""
    from ..sqlite.snapshot import check_live_copy

    same = None if reader is None else (lambda copy: _holds_snapshot(copy, entry, reader, check_dir.path()))
    problem, held = check_live_copy(full, check_dir.path(), same)
    if problem is not None:
        return Verdict.REPLACE
    return Verdict.SAME if held else Verdict.KEEP_VALID_DB


def _holds_snapshot(copy: str, entry: Entry, reader: BlobReads, tmp_dir: str) -> bool:
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
    except (CorruptObject, ObjectNotFound, StoreError, SnapshotFailed, OSError):
        return False
    remove_staging(staging)
    return ids == [loc.id for loc in snap.pages]


def _page_ids(path: str, page_size: int, codec: Codec) -> list[str]:
    """The id of every page of the database file at ``path`` (``page_size`` bytes each)."""
    with open(path, "rb") as fh:
        return [codec.id(page) for page in iter(lambda: fh.read(page_size), b"")]


def _absent(root: str, path: str) -> bool:
    """Whether ``root/path`` is certainly not on disk: a name on the way is missing, or
    longer than any file system holds. False when it is there, and when that cannot be
    told (a directory that cannot be searched, a symlink or a file on the way).

    It is looked up one name at a time from ``root``, so a path past ``PATH_MAX`` can be
    looked at."""
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


def _is_prefix(full: str, entry: Entry, reader: BlobReads) -> bool:
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


def stage_entry(root: str, tmp: TreeTmp, entry: Entry, reader: StagingReads,
                records: Iterable[bytes] | None = None, close: bool = False) -> Staged:
    """Write ``entry`` (not a directory) in full to a new file in the tree's temp
    directory ``tmp``. Its live path is not touched (``restore/publish.py`` renames it).

    The blobs come from ``reader``, or from ``records``: the entry's blobs as stored,
    already read together with other files'. Each blob is verified here, a segment
    delta against its anchor. ``close``: the file is closed once written, its writeback
    not started (one ``syncfs`` makes its batch durable, ``PublishBatch``); else it is
    left open, its writeback started, for the batch to fsync.

    Raises CorruptObject or ObjectNotFound on a bad blob, after removing the temp
    file. Safe to call from several threads at once.
    """
    full = os.path.join(root, entry.path)
    if entry.kind == KIND_SQLITE:
        return _stage_db(full, tmp, entry, reader)
    if entry.kind == KIND_SYMLINK:
        name = tmp.new_symlink(entry.target, entry.mtime_ns)
        return Staged(full, tmp, name, None, 0, link=True)
    mode = entry.mode & RESTORED_MODE_BITS
    made = mode if mode == mode & 0o777 & ~_umask() else None   # the mode it is created with, when it is the one
    name, fd = tmp.new_file(mode=0o600 if made is None else made)
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
            if made is None:
                os.fchmod(fd, mode)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
            if close:
                fd, open_fd = None, fd
                os.close(open_fd)
            else:
                start_writeback(fd)
    except BaseException:
        if fd is not None:
            os.close(fd)
        tmp.unlink(name)
        raise
    return Staged(full, tmp, name, fd, pacer.size)


#: A path of fewer characters is within ``PATH_MAX`` (4,096 bytes, at most 4 a character):
#: one that can be created.
_SHORT = 1024
_UMASK: list[int] = []


def _umask() -> int:
    """This process's umask, read once (``/proc/self/status``; never set, which would race
    with other threads); all bits when it cannot be read (every file is then chmodded)."""
    if not _UMASK:
        try:
            with open("/proc/self/status", "rb") as fh:
                line = next(ln for ln in fh if ln.startswith(b"Umask:"))
            _UMASK.append(int(line.split()[1], 8))
        except (OSError, StopIteration, ValueError, IndexError):
            _UMASK.append(0o777)
    return _UMASK[0]


def _holes(entry: Entry, codec: Codec) -> list[bool] | None:
    """Which chunks of a file are whole chunks of zeros (``local/sparse.py``), left holes
    by a restore; None when none is (or it is no ordinary file)."""
    if entry.kind != KIND_FILE or entry.size < CHUNK_BYTES:
        return None
    zero = zero_chunk_id(codec)
    holes = [ref.id == zero and ref.size == CHUNK_BYTES for ref in entry.refs]
    return holes if any(holes) else None


def _verify_zero_chunks(entry: Entry, holes: list[bool], reader: StagingReads) -> None:
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


def _stage_db(full: str, tmp: TreeTmp, entry: Entry, reader: StagingReads) -> Staged:
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


#: The mode bits restore sets, on a file it writes or a directory it changes: never
#: setuid or setgid. A store is only as trusted as whoever could write it: a restore
#: run as root would otherwise make any file it names a setuid-root program (``cp``
#: and ``tar`` drop these bits the same way). The sticky bit stays (design §12).
RESTORED_MODE_BITS = 0o1777


def finish_dirs(root: str, entries: list[Entry]) -> list[str]:
    """Apply directory modes last, deepest first, so a read-only directory does not
    block the writes into it. Returns the directories whose mode changed.

    A directory already at its entry's mode is left alone. Any other gets the entry's
    mode without setuid and setgid (``RESTORED_MODE_BITS``), as a restored file does.

    Each directory is reached from the root one name at a time, never through a link
    (``local/under.py``), and its mode is set through its own descriptor. A path that
    is not a directory on disk (a kept conflict, a symlink) is left alone.
    """
    changed = []
    for e in sorted((e for e in entries if e.kind == KIND_DIR), key=lambda e: e.path, reverse=True):
        try:
            with dir_under(root, e.path) as fd:
                mode = e.mode & RESTORED_MODE_BITS
                if stat_mod.S_IMODE(os.fstat(fd).st_mode) not in (mode, e.mode & 0o7777):
                    if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_PATH:
                        os.chmod(f"/proc/self/fd/{fd}", mode)  # the directory the descriptor holds, never a link
                    else:
                        os.fchmod(fd, mode)
                    changed.append(os.path.join(root, e.path))
        except (OSError, UnsafePath):  # not a directory reached without a link: left alone
            continue
    return changed
