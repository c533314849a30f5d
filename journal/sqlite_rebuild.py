"""Rebuilding a database file from a snapshot's verified pages (restore, verify --full).

Two ordered streams are read with ranged reads of back-to-back records: the full
map's pages (all of them below the snapshot's page count, including pages the delta
map replaces, because those are the bases of its page deltas and they sit inside the
same runs), and the delta map's pages. Each page is written once, in order; a page
delta is decoded against its base page, itself verified first. Memory stays bounded
by the fetch windows of the two streams.
"""

from __future__ import annotations

import os

from .errors import CorruptObject
from .fetch import RawReader, fetch_in_order
from .model import BlobRef, Entry
from .objects import KIND_DBPAGE, decode_record
from .pagemap import load_snapshot
from .repository import blob_location
from .sqlite_snapshot import quick_check


def iter_db_pages(entry: Entry, reader):
    """Yield every page of the snapshot ``entry`` in order, verified (``reader``: a
    Repository). Raises CorruptObject/ObjectNotFound on a bad map, page or base page."""
    snap = load_snapshot(entry.refs, reader.read_blob)
    count = len(snap.pages)
    raw = RawReader(reader)
    changed = [p for p in range(count) if p not in snap.base or snap.pages[p] != snap.base[p]]
    changed_set = set(changed)
    full = fetch_in_order([snap.base[p] for p in range(count) if p in snap.base], raw)
    over = fetch_in_order([snap.pages[p] for p in changed], raw)

    def verified(data: bytes, ref: BlobRef, base: bytes | None = None) -> bytes:
        return decode_record(data, key=blob_location(ref), expect_id=ref.id, expect_kind=KIND_DBPAGE, base=base)

    try:
        for pgno in range(count):
            base_raw = next(full) if pgno in snap.base else None
            if pgno not in changed_set:
                yield verified(base_raw, snap.base[pgno])
            elif pgno in snap.deltas:
                yield verified(next(over), snap.pages[pgno], verified(base_raw, snap.base[pgno]))
            else:
                yield verified(next(over), snap.pages[pgno])
    finally:
        full.close()
        over.close()


def rebuild_db(entry: Entry, reader, tmp_path: str) -> None:
    """Write the snapshot to ``tmp_path`` from verified pages (``reader``: a Repository)
    and quick_check it. Raises CorruptObject when a page or map is bad or the result
    fails quick_check."""
    with open(tmp_path, "wb", buffering=1 << 20) as fh:
        os.fchmod(fh.fileno(), entry.mode & 0o7777 or 0o600)
        for page in iter_db_pages(entry, reader):
            fh.write(page)
        fh.flush()
        os.fsync(fh.fileno())
    problem = quick_check(tmp_path)
    if problem:
        raise CorruptObject(f"snapshot of {entry.path}", f"rebuilt database fails quick_check: {problem}")
