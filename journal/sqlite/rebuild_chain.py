"""Rebuilding many snapshots in turn for an audit (``verify --full``): each full map's
pages are written once, and a snapshot costs only the pages it does not share with
the one rebuilt before it.

``ChainRebuild`` keeps two files in a private directory that nothing else writes:

* ``base``: the pages of one full map, every record of it read, decoded and verified
  once (``rebuild.write_full``). A bad record fails every snapshot over that map, as
  ``build_db(strict=True)`` fails each of them.
* ``snapshot.db``: the snapshot rebuilt last, and where each of its pages came from
  (its ``PageLoc``).

The next snapshot is made from the file as it is: each page whose location differs
is copied from ``base`` when it is the full map's page, else taken from its delta-map
record (read, verified, a group delta decoded against ``base``'s pages, as
``rebuild.decode_delta_record`` does for a restore); then the file is cut to the
snapshot's size. The file is then the one ``build_db`` writes for the snapshot, byte
for byte: a page's bytes depend only on its location and, for a group delta, on the
full map's pages, and a group delta is reused only over its own full map (design §7).
A rebuild that fails leaves the file unknown: the next one writes every page again.

Snapshots met in manifest order over one full map differ in a few pages each, so a
history of them costs each full map's records once, each delta record once per
snapshot that newly needs it, and an integrity check each (the caller's).
"""

from __future__ import annotations

import os
from collections import OrderedDict

from ..errors import CorruptObject, ObjectNotFound
from ..format.model import BlobRef, Entry
from ..format.pagemap import Maps, PageLoc, PageMap, Snapshot, decode_map, resolve_maps
from ..format.objects import KIND_PAGEMAP
from ..os_errors import naming
from ..paths import shown
from ..repository.fetch import RawReader, fetch_in_order
from .rebuild import by_record, decode_delta_record, page_reader, write_full, write_runs

#: Decoded page maps kept (a full map is named by every snapshot until the next one).
MAPS_KEPT = 8
#: Bytes copied from ``base`` at a time.
COPY_BYTES = 1 << 20
#: SQLite's companion files a check may leave beside the file.
COMPANIONS = ("-journal", "-wal", "-shm")


class ChainRebuild:
    """Snapshots rebuilt one after another into ``path`` (see the module docstring);
    ``reader`` is a Repository. Counts what it did: ``bases`` (full maps written),
    ``records`` (records read and decoded, the full maps' and the deltas'), ``pages``
    (pages written into ``path``)."""

    def __init__(self, reader, workdir: str):
        self.reader = reader
        self.path = os.path.join(workdir, "snapshot.db")
        self.bases = self.records = self.pages = 0
        self._fd = _create(self.path)
        self._base_fd = _create(os.path.join(workdir, "base"))
        self._full: BlobRef | None = None       # the full map ``base`` holds
        self._failed: CorruptObject | ObjectNotFound | None = None   # ... or why it could not be written
        # the pages of ``path`` a delta map gave and its pages, the rest the full map's (None: unknown)
        self._held: tuple[dict[int, PageLoc], int] | None = None
        self._maps: OrderedDict[BlobRef, tuple[PageMap, dict[int, PageLoc]]] = OrderedDict()

    def __enter__(self) -> "ChainRebuild":
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._fd)
        os.close(self._base_fd)

    def rebuild(self, entry: Entry) -> None:
        """Make ``path`` the snapshot of ``entry``, neither synced nor checked. Raises
        ``CorruptObject`` or ``ObjectNotFound`` as ``build_db(strict=True)`` does:
        a bad map, a bad or missing record of its full map or its deltas, or a size
        that is not its pages'."""
        maps = resolve_maps(entry.refs, self._decoded)
        if maps.count * maps.page_size != entry.size:
            raise CorruptObject(f"snapshot of {shown(entry.path)}", f"the entry says {entry.size:,} bytes, its "
                                f"page maps {maps.count:,} pages of {maps.page_size:,}")
        with naming(self.path):   # a full disk names the file the snapshot is rebuilt into
            self._use_base(entry.refs[0], maps)
            held, self._held = self._held, None   # unknown until the file is whole
            self._apply(maps, held)
        self._held = (maps.changed, maps.count)

    def clear_companions(self) -> None:
        """Remove what a check left beside ``path`` (the file itself stays)."""
        for suffix in COMPANIONS:
            try:
                os.unlink(self.path + suffix)
            except FileNotFoundError:
                pass

    def _decoded(self, ref: BlobRef, key: str) -> tuple[PageMap, dict[int, PageLoc]]:
        got = self._maps.get(ref)
        if got is None:
            got = decode_map(self.reader.read_blob(ref, KIND_PAGEMAP), ref.pack, key)
            self._maps[ref] = got
            if len(self._maps) > MAPS_KEPT:
                self._maps.popitem(last=False)
        else:
            self._maps.move_to_end(ref)
        return got

    def _use_base(self, full: BlobRef, maps: Maps) -> None:
        """Write the full map's pages into ``base`` unless it holds them already."""
        if full != self._full:
            self._full, self._failed, self._held = full, None, None
            os.ftruncate(self._base_fd, 0)
            pages = Snapshot(maps.page_size, [], maps.base)
            try:
                write_full(self._base_fd, pages, self.reader, maps.base.items())
            except (CorruptObject, ObjectNotFound) as err:
                self._failed = err
            else:
                self.bases += 1
                self.records += len(by_record(maps.base.items())[0])
        if self._failed is not None:
            raise self._failed

    def _apply(self, maps: Maps, held: tuple[dict[int, PageLoc], int] | None) -> None:
        """Write the pages of ``maps`` that differ from what the file ``held`` (None:
        every page), then cut the file to size. Only pages a delta map names, now or
        in the file, and pages past the file's end can differ."""
        size, count, base, changed = maps.page_size, maps.count, maps.base, maps.changed
        if held is None:
            whole = min(count, len(base)) if len(base) == max(base, default=-1) + 1 else 0
            copy = list(range(whole))
            was, had = {}, 0
            pgnos = sorted({p for p in changed if p < count} | set(range(whole, count)))
        else:
            was, had = held
            copy = []
            pgnos = sorted({p for p in (*changed, *was) if p < count} | set(range(min(had, count), count)))
        decode = []
        for pgno in pgnos:
            loc = changed.get(pgno) or base[pgno]
            if pgno < had and loc == (was.get(pgno) or base.get(pgno)):
                continue
            if loc == base.get(pgno):
                copy.append(pgno)
            else:
                decode.append((pgno, loc))
        self._copy_base(sorted(copy), size)
        recs, uses = by_record(decode)
        for rec, data in zip(recs, fetch_in_order(recs, RawReader(self.reader))):
            slot_uses = uses[(rec.pack, rec.offset)]
            payload = decode_delta_record(data, rec, slot_uses, base, page_reader(self._base_fd, size),
                                          self.reader.codec)
            write_runs(self._fd, payload, slot_uses, size)
        os.ftruncate(self._fd, count * size)
        self.records += len(recs)
        self.pages += len(copy) + len(decode)

    def _copy_base(self, pgnos: list[int], size: int) -> None:
        """Copy pages ``pgnos`` (ascending) from ``base`` into the file, by runs."""
        for start, count in _runs(pgnos):
            for at in range(start * size, (start + count) * size, COPY_BYTES):
                data = os.pread(self._base_fd, min(COPY_BYTES, (start + count) * size - at), at)
                if not data:
                    raise CorruptObject(f"page {at // size}", "base page missing from the rebuilt file")
                os.pwrite(self._fd, data, at)


def _create(path: str) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _runs(pgnos) -> list[tuple[int, int]]:
    """Ascending page numbers as (first, count) runs of consecutive ones."""
    out: list[tuple[int, int]] = []
    for pgno in pgnos:
        if out and out[-1][0] + out[-1][1] == pgno:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((pgno, 1))
    return out
