"""The SQLite adapter: live database -> snapshot entry, and snapshot entry -> database file.

Checkpoint: snapshot (``sqlite_snapshot``), hash every page of the validated copy,
and describe it with a full page map or a cumulative delta over the previous full
map. Only pages whose id the previous snapshot lacks are uploaded. In a delta map a
new page is stored as a *page delta* against the full map's page with the same
number (its base, read from the local base copy, ``sqlite_base``); a full map lists
whole pages only, so a delta is never based on another delta.

Restore: rebuild the file from its verified pages into a temp file (``sqlite_rebuild``),
run ``quick_check``, remove stale ``-wal``/``-shm``/``-journal`` companions, rename.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod

from .atomic import fsync_dir
from .localstate import FileState
from .model import KIND_SQLITE, BlobRef, Entry
from .objects import KIND_DBPAGE, KIND_PAGEMAP, blob_id
from .pack import PackWriter
from .pagemap import DELTA_MIN, DELTA_SHARE, Snapshot, encode_map, load_snapshot
from .presets import SQLITE_COMPANIONS
from .sqlite_base import BaseCopy
from .sqlite_rebuild import rebuild_db
from .sqlite_snapshot import live_signature, page_size_of, remove_staging, snapshot_db

#: New pages whose base pages are fetched together (bounds memory to this many pages x 2).
BATCH = 256

__all__ = ["capture_sqlite", "install_db", "rebuild_db"]


def capture_sqlite(full_path: str, rel: str, prev: FileState | None, staging_dir: str,
                   writer: PackWriter, maps) -> FileState:
    """Snapshot one live database; raises SnapshotFailed and then publishes nothing.

    ``maps`` reads page maps by ref (``maps.read``) and keeps new ones (``maps.remember``);
    its ``repo`` (when it has one) supplies base pages the local base copy lacks.
    """
    sig = live_signature(full_path)
    mode = stat_mod.S_IMODE(os.stat(full_path).st_mode)
    staging = snapshot_db(full_path, staging_dir)
    try:
        page_size = page_size_of(staging)
        snap = None
        if prev is not None and prev.entry.kind == KIND_SQLITE:
            snap = load_snapshot(prev.entry.refs, maps.read)
        state_dir = os.path.dirname(os.path.abspath(staging_dir))
        bases = BaseCopy(state_dir, prev.entry.refs[0].id if snap is not None else None, page_size,
                         getattr(maps, "repo", None))
        with open(staging, "rb") as fh:
            cut = _Cut(fh.fileno(), page_size, snap, writer, bases)
            refs = cut.describe(prev, maps)
        size = os.path.getsize(staging)
        try:
            bases.adopt(staging, refs[0].id)
        except OSError:
            pass  # only a cache: the next checkpoint reads its base pages from the store
    finally:
        remove_staging(staging)
    st = os.stat(full_path)
    return FileState(sig, Entry(path=rel, kind=KIND_SQLITE, mode=mode, mtime_ns=st.st_mtime_ns,
                                size=size, refs=refs))


class _Cut:
    """One staging copy cut into pages against the previous snapshot."""

    def __init__(self, fd: int, page_size: int, snap: Snapshot | None, writer: PackWriter, bases: BaseCopy):
        self.fd, self.page_size, self.writer, self.bases = fd, page_size, writer, bases
        self.ids = _page_ids(fd, page_size)
        self.base = snap.base if snap is not None and snap.page_size == page_size else None
        self.whole: dict[str, BlobRef] = {}                 # id -> a whole-page record
        self.delta: dict[tuple[str, int], BlobRef] = {}     # (id, pgno of its base) -> a page delta
        self.delta_at: set[tuple[str, int]] = set()          # (pack, offset) of every page delta
        if snap is not None:
            for ref in snap.base.values():
                self.whole[ref.id] = ref
            for pgno, ref in enumerate(snap.pages):
                if pgno in snap.deltas:
                    self.delta[(ref.id, pgno)] = ref
                    self.delta_at.add((ref.pack, ref.offset))
                else:
                    self.whole[ref.id] = ref
        count = len(self.ids)
        self.changed = list(range(count)) if self.base is None else \
            [p for p in range(count) if p not in self.base or self.base[p].id != self.ids[p]]
        self.full = self.base is None or len(self.changed) > max(DELTA_MIN, count // DELTA_SHARE)

    def describe(self, prev: FileState | None, maps) -> tuple[BlobRef, ...]:
        """Store the pages the snapshot needs and return the entry's map refs."""
        count = len(self.ids)
        if self.full:
            pages = self._store(range(count), deltas=False)
            return (_put_map(True, self.page_size, count, pages, set(), prev, self.writer, maps),)
        base_ref = prev.entry.refs[0]
        if not self.changed and len(self.base) == count:
            return (base_ref,)
        pages = self._store(self.changed, deltas=True)
        marked = {p for p, ref in pages.items() if (ref.pack, ref.offset) in self.delta_at}
        return (base_ref, _put_map(False, self.page_size, count, pages, marked, prev, self.writer, maps))

    def _store(self, pgnos, deltas: bool) -> dict[int, BlobRef]:
        """Refs for ``pgnos``: reused when stored before, else added in page order (as
        page deltas against the full map's page when ``deltas``)."""
        out: dict[int, BlobRef] = {}
        batch: list[int] = []
        for pgno in pgnos:
            ref = self._known(pgno, deltas)
            if ref is not None:
                out[pgno] = ref
                continue
            batch.append(pgno)
            if len(batch) >= BATCH:
                self._add(batch, deltas, out)
                batch = []
        if batch:
            self._add(batch, deltas, out)
        return out

    def _add(self, batch: list[int], deltas: bool, out: dict[int, BlobRef]) -> None:
        want = [(p, self.base[p]) for p in batch if deltas and p in self.base]
        base_pages = self.bases.read(want) if want else {}
        for pgno in batch:
            ref = self._known(pgno, deltas)  # an earlier page of this batch may have been the same
            if ref is None:
                page = os.pread(self.fd, self.page_size, pgno * self.page_size)
                base = base_pages.get(pgno)
                ref = self.writer.add(KIND_DBPAGE, page, base=base)
                if base is None:
                    self.whole[ref.id] = ref
                else:
                    self.delta[(ref.id, pgno)] = ref
                    self.delta_at.add((ref.pack, ref.offset))
            out[pgno] = ref

    def _known(self, pgno: int, deltas: bool) -> BlobRef | None:
        """A stored record of page ``pgno``'s content usable here: a whole page, or (in a
        delta map) a page delta against the same base."""
        pid = self.ids[pgno]
        return self.whole.get(pid) or (self.delta.get((pid, pgno)) if deltas else None)


def _page_ids(fd: int, page_size: int) -> list[str]:
    ids = []
    with os.fdopen(os.dup(fd), "rb") as fh:
        while page := fh.read(page_size):
            ids.append(hashlib.sha256(page).hexdigest())
    return ids


def _put_map(full: bool, page_size: int, count: int, pages: dict[int, BlobRef], deltas: set[int],
             prev: FileState | None, writer: PackWriter, maps) -> BlobRef:
    payload = encode_map(full, page_size, count, pages, writer.locate, deltas)
    mid = blob_id(payload)
    for ref in (prev.entry.refs if prev is not None and prev.entry.kind == KIND_SQLITE else ()):
        if ref.id == mid:
            return ref
    maps.remember(mid, payload)
    # The map names pages of the open pack as "same pack": it must land in that pack.
    return writer.add(KIND_PAGEMAP, payload, roll=False)


def install_db(tmp_path: str, full_path: str, entry: Entry) -> None:
    """Remove stale companions, then rename the rebuilt database into place."""
    for suffix in SQLITE_COMPANIONS:
        try:
            os.unlink(full_path + suffix)
        except FileNotFoundError:
            pass
    os.chmod(tmp_path, entry.mode & 0o7777)
    os.utime(tmp_path, ns=(entry.mtime_ns, entry.mtime_ns))
    os.replace(tmp_path, full_path)
    fsync_dir(os.path.dirname(full_path))
