"""Capturing a live database as a snapshot entry (checkpoint); ``rebuild.py`` turns the
entry back into a database file (restore).

Checkpoint: snapshot (``sqlite/snapshot.py``), give every page of the validated copy
its id (a page equal to the base copy's, where the base copy is known to hold the full
map's page, has that page's id; every other page is hashed), and describe it with page
maps (``format/pagemap.py``): a new full map, or the previous full map plus a
cumulative delta map and, while it stays small, a recent one.
Only pages whose id the previous snapshot lacks are uploaded, in *page groups*: one
dbpage record of up to ``PAGE_GROUP_BYTES`` of pages back to back. In a delta map the new
pages go into *group deltas* of up to ``DELTA_GROUP_BYTES``, each compressed against
the full map's pages of the same page numbers (its members), read from the local base
copy (``sqlite/base_copy.py``); a page whose base cannot be read goes into a whole
group. A full map lists whole records only, so a delta is never based on another
delta. A map itself is stored as a delta of the previous entry's map in the same
place when that pays (``_put_map``).

Restore: rebuild the file from its verified records into a temp file
(``sqlite/rebuild.py``), run ``quick_check``, remove stale
``-wal``/``-shm``/``-journal`` companions, rename (``install_db``).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat as stat_mod
import struct
from collections import Counter, deque
from collections.abc import Callable, Iterator

from ..local.state import FileState
from ..format.model import KIND_SQLITE, BlobRef, Entry
from ..errors import CorruptObject, ObjectNotFound, RecordTooLarge
from .errors import SnapshotFailed
from ..format.codec import Codec
from ..format.objects import (DBPAGE_BYTES, KIND_DBPAGE, KIND_PAGEMAP, BaseAt, Members, blob_id, delta_pays, encode_record,
                              is_id)
from ..repository.pack import PackWriter
from ..format.pagemap import (DELTA_MIN, DELTA_SHARE, MAP_PACKS, MAP_PACKS_KEPT, RECENT_MIN, RECENT_SHARE, MapPlace,
                              PageLoc, Snapshot, decode_map, encode_map, load_snapshot)
from ..background import Background
from .base_copy import BaseCopy, SamePages, same_pages
from ..signatures import live_signature, mtime_ns
from .snapshot import page_size_of, remove_staging, snapshot_db

#: New pages whose base pages are fetched together (bounds memory to this many pages x 2).
BATCH = 256
#: A whole group holds up to this many bytes of pages: a restore decodes one record,
#: not one per page (per-record costs were most of a database's restore time). Readers
#: refuse a dbpage record over it.
PAGE_GROUP_BYTES = DBPAGE_BYTES
#: A group delta holds up to this many bytes of pages; its dictionary (their base
#: pages) is at most as large, so its strong level stays cheap.
DELTA_GROUP_BYTES = 128 << 10
#: The zstd level of a group delta. On the bench's active ticks (12 groups of 32-80
#: KiB against as many bytes of base pages) 15 wrote 58,941 bytes in 4.9-6.7 ms a tick
#: and 19 58,947 in 6.7-10 ms (17: 58,854 B, 10.3 ms; 12: 61,217 B; 9: 61,860 B): the
#: same bytes for about half the time. Loading the base pages as a dictionary is much
#: of a level's cost, which is why a strong level pays only on a group's small base.
GROUP_DELTA_LEVEL = 15
READ_BLOCK = 1 << 20
#: Pages ``_block_ids`` compares at once inside a block that differs from the base copy.
SPAN_PAGES = 16
#: A full map's page groups are compressed by this many threads (``zstandard`` and the hash
#: release the GIL), at most ``ENCODE_AHEAD`` groups ahead of the pack, which takes
#: their records in the order the groups were closed: the pack is the same bytes.
ENCODE_THREADS = 2
ENCODE_AHEAD = 4


def capture_sqlite(full_path: str, rel: str, prev: FileState | None, staging_dir: str,
                   writer: PackWriter, maps, ahead: Started | None = None,
                   seen: tuple[int, int] | None = None) -> FileState:
    """Snapshot one live database; raises SnapshotFailed and then publishes nothing.

    ``maps`` reads page maps by ref (``maps.read``) and keeps new ones (``maps.remember``);
    its ``repo`` (when it has one) supplies base pages the local base copy lacks.
    ``ahead``: its snapshot, started earlier for this very path and ``prev``
    (``sqlite/ahead.py``); else it is started here. ``seen``: the file's ``(st_dev,
    st_ino)`` as the walk saw it, the file the backup must have opened (``snapshot_db``).
    """
    started = ahead or Started(full_path, prev, staging_dir, writer.codec, seen=seen)
    state_dir = os.path.dirname(os.path.abspath(staging_dir))
    staging, (page_size, ids), snap = _snapshot_and_load(started, prev, maps)
    full_id = started.full_id
    try:
        mode = stat_mod.S_IMODE(_regular(full_path).st_mode)
        bases = BaseCopy(state_dir, full_id if snap is not None else None, page_size,
                         getattr(maps, "repo", None), writer.codec)
        with open(staging, "rb") as fh:
            _full_map_ids(ids, fh.fileno(), page_size, snap, writer.codec)
            cut = _Cut(fh.fileno(), page_size, ids, snap, writer, bases)
            try:
                refs = cut.describe(prev, maps)
            except RecordTooLarge as err:  # a page map past what readers accept
                raise SnapshotFailed(full_path, f"its page map would be {err.size:,} bytes, over the {err.limit:,} "
                                                "a page map may hold: the database is too large to snapshot") from None
        size = os.path.getsize(staging)
        try:
            bases.adopt(staging, refs[MapPlace.FULL].id, cut.changed)
        except OSError:
            pass  # only a cache: the next checkpoint reads its base pages from the store
    finally:
        remove_staging(staging)
    st = _regular(full_path)
    return FileState(started.sig, Entry(path=rel, kind=KIND_SQLITE, mode=mode, mtime_ns=mtime_ns(st),
                                        size=size, refs=refs))


def _regular(path: str) -> os.stat_result:
    """``lstat`` of the live database; ``FileNotFoundError`` when it is no longer a
    regular file (a symlink now: the next walk sees it as one)."""
    st = os.lstat(path)
    if not stat_mod.S_ISREG(st.st_mode):
        raise FileNotFoundError(errno.ENOENT, "no longer a regular file", path)
    return st


class Started:
    """The snapshot of ``full_path`` (whose last entry is ``prev``) into a new staging
    copy, under way: ``snapshot_db`` in a thread (``snapped``), with the copy's pages
    compared with the base copy and the others hashed while it is checked
    (``_page_ids``). ``sig`` is taken before the backup begins (a write after it shows
    as a new signature next time). ``FileNotFoundError`` when the database is gone
    (nothing is started then).

    ``reached`` (a snapshot made ahead, ``sqlite/ahead.py``): the file's identity
    ``(st_dev, st_ino)`` as reached without a symlink, or None when it is not; asked
    before the backup (nothing starts without it) and again once it is over
    (``before``, ``after``). The capture takes the copy only when both equal the
    identity its walk saw: a file swapped for a symlink meanwhile is never read
    through it, and a copy of another file is never published under this path.
    ``seen`` (the scan's own snapshot): the identity its walk saw. Either is the file the
    backup must find it opened (``snapshot_db(expect=...)``)."""

    def __init__(self, full_path: str, prev: FileState | None, staging_dir: str, codec: Codec,
                 reached: Callable[[], tuple[int, int] | None] | None = None, seen: tuple[int, int] | None = None):
        self.path, self.prev = full_path, prev
        self.before = self.after = None
        if reached is not None:
            self.before = reached()
            if self.before is None:
                raise FileNotFoundError(errno.ENOENT, "not a regular file reached without a symlink", full_path)
        self.sig = live_signature(full_path)
        state_dir = os.path.dirname(os.path.abspath(staging_dir))
        self.full_id = prev.entry.refs[MapPlace.FULL].id if prev is not None and prev.entry.kind == KIND_SQLITE \
            else None
        same = same_pages(state_dir, self.full_id) if self.full_id is not None else None

        def snapshot():
            got = snapshot_db(full_path, staging_dir, lambda staging: _page_ids(staging, codec, same),
                              expect=self.before or seen)
            if reached is not None:
                self.after = reached()
            return got

        self.snapped = Background(snapshot, name="journal-backup")

    def discard(self) -> None:
        """Wait for a snapshot no longer wanted and remove its staging copy."""
        try:
            staging, _ = self.snapped.result()
        except Exception:
            return  # it failed as well: snapshot_db removed its copy
        remove_staging(staging)


def _snapshot_and_load(started: Started, prev: FileState | None,
                       maps) -> tuple[str, tuple[int, list[str | None]], Snapshot | None]:
    """The snapshot ``started`` once done, and meanwhile, in this thread, the previous
    snapshot's page maps loaded and decoded: SQLite's backup and check release the
    GIL, so the decoding costs no wall time."""
    try:
        snap = load_snapshot(prev.entry.refs, maps.read) if prev is not None and prev.entry.kind == KIND_SQLITE \
            else None
        staging, hashed = started.snapped.result()
    except BaseException:
        started.discard()  # an interrupted wait too: the copy is not left being written
        raise
    return staging, hashed, snap


class _Group:
    """Pages waiting to become one record: whole, or a delta against their base pages."""

    def __init__(self, delta: bool):
        self.delta = delta
        self.pgnos: list[int] = []
        self.ids: list[str] = []
        self.pages: list[bytes] = []
        self.bases: list[bytes] = []
        self.loc: tuple[BlobRef, bool] | None = None   # (record, is a delta) once stored
        self.closed = False                            # handed to the pack (maybe still being encoded)


class _Cut:
    """One staging copy cut into pages against the previous snapshot."""

    def __init__(self, fd: int, page_size: int, ids: list[str], snap: Snapshot | None, writer: PackWriter,
                 bases: BaseCopy):
        self.fd, self.page_size, self.writer, self.bases = fd, page_size, writer, bases
        self.ids = ids
        self.base = snap.base if snap is not None and snap.page_size == page_size else None
        self.whole: dict[str, PageLoc] = {}                 # page id -> a slot of a whole record
        self.delta: dict[tuple[str, int], PageLoc] = {}     # (page id, pgno) -> a slot of a group delta
        self.group_pages = max(1, PAGE_GROUP_BYTES // page_size)
        self.delta_pages = max(1, DELTA_GROUP_BYTES // page_size)
        # What ``_store`` (run once) gathers: each page's location, or its group and slot
        # until the group is stored; whole pages not yet stored, by id; the open groups.
        self._slots: dict[int, PageLoc | tuple[_Group, int]] = {}
        self._pending: dict[str, tuple[_Group, int]] = {}
        self._whole_group = _Group(delta=False)
        self._delta_group = _Group(delta=True)
        self._encoding: deque = deque()   # (future record, group, payload size), in the order closed
        self._pool = None                 # a ThreadPoolExecutor once a whole group is closed
        if snap is not None:
            for loc in snap.base.values():
                self.whole.setdefault(loc.id, loc)
            for pgno, loc in enumerate(snap.pages):
                if not loc.delta:
                    self.whole.setdefault(loc.id, loc)
                elif not loc.legacy:  # a version 2 map's one-page delta is never reused: stored again, in a group
                    self.delta[(loc.id, pgno)] = loc
        count = len(self.ids)
        self.changed = list(range(count)) if self.base is None else \
            [p for p in range(count) if p not in self.base or self.base[p].id != self.ids[p]]
        self.full = self.base is None or len(self.changed) > max(DELTA_MIN, count // DELTA_SHARE)
        self._bound_packs(range(count) if self.full else self.changed)

    def _bound_packs(self, pgnos) -> None:
        """Keep the new map under ``MAP_PACKS`` packs: when the stored pages it would
        reuse lie in more, forget the slots in all but the ``MAP_PACKS_KEPT`` most-used
        packs, so those pages are stored again, in the open pack."""
        use: Counter[str] = Counter()
        for pgno in pgnos:
            loc = self.whole.get(self.ids[pgno]) or self.delta.get((self.ids[pgno], pgno))
            if loc is not None:
                use[loc.pack] += 1
        if len(use) <= MAP_PACKS:
            return
        kept = {pack for pack, _ in use.most_common(MAP_PACKS_KEPT)}
        self.whole = {pid: loc for pid, loc in self.whole.items() if loc.pack in kept}
        self.delta = {key: loc for key, loc in self.delta.items() if loc.pack in kept}

    def describe(self, prev: FileState | None, maps) -> tuple[BlobRef, ...]:
        """Store the pages the snapshot needs and return the entry's map refs."""
        count = len(self.ids)
        if self.full:
            pages = self._store(range(count), deltas=False)
            return (self._put_map(MapPlace.FULL, count, pages, prev, maps),)
        base_ref = prev.entry.refs[MapPlace.FULL]
        if not self.changed and len(self.base) == count:
            return (base_ref,)
        pages = self._store(self.changed, deltas=True)
        if len(prev.entry.refs) > MapPlace.CUMULATIVE:  # a small recent map over the cumulative one, if it pays
            mid_ref = prev.entry.refs[MapPlace.CUMULATIVE]
            mid_map, mid = decode_map(maps.read(mid_ref), mid_ref.pack, f"pagemap {mid_ref.id[:12]}")
            recent = {p: want for p in pages.keys() | mid.keys() if p < count
                      and mid.get(p) != (want := pages.get(p) or self.base[p])}
            if len(recent) <= max(RECENT_MIN, len(pages) // RECENT_SHARE):
                if not recent and mid_map.page_count == count:
                    return (base_ref, mid_ref)
                return (base_ref, mid_ref, self._put_map(MapPlace.RECENT, count, recent, prev, maps))
        return (base_ref, self._put_map(MapPlace.CUMULATIVE, count, pages, prev, maps))

    def _put_map(self, place: MapPlace, count: int, pages: dict[int, PageLoc], prev: FileState | None,
                 maps) -> BlobRef:
        """Store the map of ``pages`` (a snapshot of ``count`` pages) at ``place`` in the
        entry's refs, unless the previous entry has it already: as a delta against the
        whole map that the previous entry's map in the same place was or was a delta of,
        when that pays; else whole, and a base for later maps."""
        payload = encode_map(place == MapPlace.FULL, self.page_size, count, pages, self.writer.locate)
        mid = blob_id(payload, self.writer.codec)
        refs = prev.entry.refs if prev is not None and prev.entry.kind == KIND_SQLITE else ()
        for ref in refs:
            if ref.id == mid:
                return ref
        _, whole = encode_record(KIND_PAGEMAP, payload, codec=self.writer.codec)
        base = _map_base(refs, place, maps)
        # The map names pages of the open pack as "same pack": it must land in that pack.
        if base is not None:
            base_ref, base_payload = base
            _, delta = encode_record(KIND_PAGEMAP, payload, base=base_payload, codec=self.writer.codec,
                                     names=BaseAt(base_ref.pack, base_ref.offset, base_ref.length))
            if delta_pays(delta, whole):
                maps.remember(mid, payload, base_ref)
                return self.writer.add_record(mid, delta, len(payload), roll=False)
        maps.remember(mid, payload)
        return self.writer.add_record(mid, whole, len(payload), roll=False)

    def _store(self, pgnos, deltas: bool) -> dict[int, PageLoc]:
        """Locations for ``pgnos``: reused when stored before, else added in page order in
        groups (in a delta map, a group delta against the full map's pages where it can).
        Called once."""
        try:
            batch: list[int] = []
            for pgno in pgnos:
                loc = self._known(pgno, deltas)
                if loc is not None:
                    self._slots[pgno] = loc
                    continue
                batch.append(pgno)
                if len(batch) >= BATCH:
                    self._add(batch, deltas)
                    batch = []
            if batch:
                self._add(batch, deltas)
            for group in (self._whole_group, self._delta_group):
                self._flush(group)
            self._drain(0)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
        out = {}
        for pgno, where in self._slots.items():
            if not isinstance(where, PageLoc):
                group, slot = where
                rec, is_delta = group.loc
                where = PageLoc(self.ids[pgno], rec, slot, is_delta)
            out[pgno] = where
        return out

    def _add(self, batch: list[int], deltas: bool) -> None:
        want = [(p, self.base[p]) for p in batch if deltas and p in self.base]
        base_pages = self.bases.read(want) if want else {}
        for pgno in batch:
            pid = self.ids[pgno]
            # An earlier page of this call may have had the same content.
            where = self._known(pgno, deltas) or self._pending.get(pid)
            if where is not None:
                self._slots[pgno] = where
                continue
            page = os.pread(self.fd, self.page_size, pgno * self.page_size)
            # A page whose base the full map has but which could not be read is stored whole.
            as_delta = deltas and (pgno not in self.base or pgno in base_pages)
            group = self._open_group(as_delta)
            where = (group, len(group.pgnos))
            if as_delta and pgno in base_pages:
                group.bases.append(base_pages[pgno])
            elif not as_delta:
                self._pending[pid] = where
            self._slots[pgno] = where
            group.pgnos.append(pgno)
            group.ids.append(pid)
            group.pages.append(page)

    def _open_group(self, delta: bool) -> _Group:
        """The group the next page goes to (a group delta, or whole pages): the open one,
        or a new one once it is full (the full one is stored first)."""
        group = self._delta_group if delta else self._whole_group
        if len(group.pgnos) < (self.delta_pages if delta else self.group_pages):
            return group
        self._flush(group)
        group = _Group(delta=delta)
        if delta:
            self._delta_group = group
        else:
            self._whole_group = group
        return group

    def _flush(self, group: _Group) -> None:
        """Store a group as one record (a group delta when it has base pages): a whole
        group of a full map is encoded by the pool and stored once the groups closed
        before it are (a tick's delta map has a few groups: threads would cost more)."""
        if not group.pgnos or group.closed:
            return
        group.closed = True
        payload = b"".join(group.pages)
        group.pages = []
        if self.full and not group.bases:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor  # imported here: only a database needs it

                self._pool = ThreadPoolExecutor(max_workers=ENCODE_THREADS, thread_name_prefix="journal-dbpage")
            self._encoding.append((self._pool.submit(encode_record, KIND_DBPAGE, payload, codec=self.writer.codec),
                                   group, len(payload)))
            self._drain(ENCODE_AHEAD)
            return
        self._drain(0)  # the groups closed before this one go first
        if not group.bases:
            self._stored(group, self.writer.add(KIND_DBPAGE, payload))
            return
        base = b"".join(group.bases)
        members = struct.pack(f">{len(group.pgnos)}I", *group.pgnos)
        rid, record = encode_record(KIND_DBPAGE, payload, base=base, names=Members(members), level=GROUP_DELTA_LEVEL,
                                    codec=self.writer.codec)
        self._stored(group, self.writer.add_record(rid, record, len(payload)))

    def _drain(self, ahead: int) -> None:
        """Store encoded whole groups, in the order closed, until at most ``ahead`` wait."""
        while len(self._encoding) > ahead:
            encoding, group, size = self._encoding.popleft()
            rid, record = encoding.result()
            self._stored(group, self.writer.add_record(rid, record, size))

    def _stored(self, group: _Group, rec: BlobRef) -> None:
        """Where ``group``'s pages are, now that its record ``rec`` is in the pack."""
        is_delta = bool(group.bases)
        group.loc = (rec, is_delta)
        for slot, (pgno, pid) in enumerate(zip(group.pgnos, group.ids)):
            if is_delta:
                self.delta[(pid, pgno)] = PageLoc(pid, rec, slot, True)
            else:
                self.whole.setdefault(pid, PageLoc(pid, rec, slot))
                self._pending.pop(pid, None)
        group.pages = group.bases = []

    def _known(self, pgno: int, deltas: bool) -> PageLoc | None:
        """A stored slot of page ``pgno``'s content usable here: a whole record's, or (in
        a delta map) a group delta's of the same page number."""
        pid = self.ids[pgno]
        return self.whole.get(pid) or (self.delta.get((pid, pgno)) if deltas else None)


def _page_ids(staging: str, codec: Codec, same: SamePages | None) -> tuple[int, list[str | None]]:
    """The page size of the copy ``staging`` and each page's id (``codec``'s), in page
    order, None for a page whose bytes equal the base copy's page that ``same`` knows
    to be the full map's (``_full_map_ids`` names it); run by ``snapshot_db`` while it
    checks the copy. Both copies are mapped a ``READ_BLOCK`` of whole pages at a time
    (``_mapped``): a block equal to the base copy's costs one comparison, and in
    another block each page is compared (``_block_ids``). Nothing is copied out of the
    page cache (reading both copies into buffers was most of this function's time),
    and one block of each is mapped at a time."""
    page_size = page_size_of(staging)
    block = max(1, READ_BLOCK // page_size) * page_size
    ids: list[str | None] = []
    base = _open_same(same, page_size)
    try:
        with open(staging, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            base_size = os.fstat(base).st_size if base is not None else 0
            for at in range(0, size, block):
                n = min(block, size - at)
                with _mapped(fh.fileno(), at, n) as data, _mapped(base, at, min(n, base_size - at)) as other:
                    ids += _block_ids(data, other, at // page_size, page_size, same, codec)
    finally:
        if base is not None:
            os.close(base)
    return page_size, ids


def _block_ids(data: mmap.mmap, other: mmap.mmap | None, first: int, page_size: int,
               same: SamePages | None, codec: Codec) -> list[str | None]:
    """The ids of one block of pages of the copy, ``data``, from page ``first``, beside
    the same bytes of the base copy, ``other`` (None past its end); as ``_page_ids``.
    The block, then each ``SPAN_PAGES`` of it, then each page is compared: a tick's
    changed pages are few and clustered, and a comparison in C costs less than the
    Python around one page. The views of ``data`` end with this call, so the block
    can be unmapped after it."""
    count = -(-len(data) // page_size)
    whole = len(data) % page_size == 0   # a last page cut short is always hashed, never vouched for
    if whole and _known_same(data, other, 0, first, count, same):
        return [None] * count
    ids: list[str | None] = []
    with memoryview(data) as view:
        for span in range(0, count, SPAN_PAGES):
            pages = min(SPAN_PAGES, count - span)
            at = span * page_size
            if (whole or span + pages < count) \
                    and _known_same(view[at:at + pages * page_size], other, at, first + span, pages, same):
                ids += [None] * pages
                continue
            for k in range(span, span + pages):
                page = view[k * page_size:(k + 1) * page_size]
                same_page = len(page) == page_size and _known_same(page, other, k * page_size, first + k, 1, same)
                ids.append(None if same_page else codec.id(page))
                page.release()
    return ids


def _known_same(part, other: mmap.mmap | None, at: int, first: int, count: int, same: SamePages | None) -> bool:
    """Whether ``part`` (bytes of the copy: its ``count`` pages from ``first``, at ``at``)
    equals the base copy's bytes there, and ``same`` knows those pages to be the full
    map's."""
    return other is not None and _holds(other, at, part) and same.known(first, count)


@contextlib.contextmanager
def _mapped(fd: int | None, at: int, n: int) -> Iterator[mmap.mmap | None]:
    """``n`` bytes of the file ``fd`` from ``at`` (a multiple of the page size, so of
    mmap's granularity), mapped read-only for a block; None without a file or bytes.
    Both files mapped are private copies in the state directory that no other process
    writes (as ``snapshot.CHECK_MMAP`` maps the copy it checks)."""
    if fd is None or n <= 0:
        yield None
        return
    mapped = mmap.mmap(fd, n, access=mmap.ACCESS_READ, offset=at)
    try:
        yield mapped
    finally:
        try:
            mapped.close()
        except BufferError:
            pass  # a view outlives an error raised inside: unmapped once it is collected


def _holds(mapped: mmap.mmap, at: int, want) -> bool:
    """Whether ``mapped`` holds ``want``'s bytes at ``at``: ``find`` bounded to exactly
    that span compares the two buffers in C, copying neither (slicing either would
    copy it, and ``memoryview``'s ``==`` compares byte by byte in Python's loop)."""
    return at + len(want) <= len(mapped) and mapped.find(want, at, at + len(want)) == at


def _open_same(same: SamePages | None, page_size: int) -> int | None:
    """A descriptor of the base copy ``same`` when it has ``page_size`` pages, else None."""
    if same is None:
        return None
    try:
        fd = os.open(same.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if os.pread(fd, 100, 0)[16:18] == _header_page_size(page_size):
        return fd
    os.close(fd)
    return None


def _header_page_size(page_size: int) -> bytes:
    """A page size as the database header stores it."""
    return (1 if page_size == 65536 else page_size).to_bytes(2, "big")


def _full_map_ids(ids: list[str | None], fd: int, page_size: int, snap: Snapshot | None, codec: Codec) -> None:
    """Fill in the ids ``_page_ids`` left out: the full map's page of the same number
    (the bytes are equal); a page the full map lacks is hashed from the copy ``fd``."""
    base = snap.base if snap is not None and snap.page_size == page_size else {}
    for pgno, pid in enumerate(ids):
        if pid is None:
            loc = base.get(pgno)
            ids[pgno] = loc.id if loc is not None else codec.id(os.pread(fd, page_size, pgno * page_size))


def _map_base(refs: tuple[BlobRef, ...], place: MapPlace, maps) -> tuple[BlobRef, bytes] | None:
    """The whole map a new map in ``place`` of the entry may be a delta of: the previous entry's map there, or its base; None when there is
    none, it is not known to be whole, or its bytes cannot be read."""
    if place >= len(refs):
        return None
    known, base = maps.base_of(refs[place].id)
    target = refs[place] if base is None else base
    if not known or not is_id(target.pack):
        return None
    try:
        return target, maps.read(target, whole=True)
    except (CorruptObject, ObjectNotFound):
        return None

