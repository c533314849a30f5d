"""Rebuilding a database file from a snapshot's verified records (restore, verify --full),
and installing it in place of the live one (restore).

1. Every page of the full map is written at its place, from its record: each record
   is read once (ranged reads of back-to-back records), verified, and its pages
   written with one ``pwrite`` per run of consecutive page numbers. This includes
   pages the delta map replaces and pages past the snapshot's end: they are the bases
   of group deltas. If a full-map record is bad, only the pages the snapshot reads
   are written again (its unchanged pages and its group deltas' members, read from
   the delta records): a damaged record this snapshot does not need costs nothing.
2. Each record of the delta map is read and verified; a group delta is decoded
   against its members' pages from step 1 (``pagemap.group_base``), read back from
   the file being built. The pages it provides go to an anonymous overlay file, so no
   base page is overwritten while a later record may still need it.
3. The overlay is copied into place, the file cut to the snapshot's size, fsynced, and
   ``quick_check`` run on it.

Memory stays bounded by the fetch window and one record at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import BinaryIO

from ..errors import CorruptObject, ObjectNotFound
from ..local.errors import UnsafePath
from ..os_errors import naming
from ..local.under import sync
from ..paths import shown
from ..repository.fetch import RawReader, fetch_in_order
from ..format.model import BlobRef, Entry
from ..format.objects import FLAG_DELTA, KIND_DBPAGE, decode_record, embedded_members, parse_header
from ..format.pagemap import PageLoc, Snapshot, group_base, load_snapshot
from ..presets import SQLITE_COMPANIONS
from ..repository.repository import blob_location
from .snapshot import quick_check


def rebuild_db(entry: Entry, reader, tmp_path: str, *, strict: bool = False) -> None:
    """Write the snapshot to the new file ``tmp_path`` (refused if anything is there,
    even a symlink) from verified records (``reader``: a Repository) and quick_check it
    (``build_db``); the overlay goes to an anonymous file beside it."""
    import tempfile  # imported here: a restore's build_db takes its overlay from the tree's temp directory

    fd = os.open(tmp_path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        workdir = os.path.dirname(os.path.abspath(tmp_path))
        build_db(entry, reader, fd, tmp_path, lambda: tempfile.TemporaryFile(dir=workdir, prefix=".journal-overlay-"),
                 strict=strict)
    finally:
        os.close(fd)


def build_db(entry: Entry, reader, fd: int, check_path: str, overlay: Callable[[], BinaryIO], *,
             strict: bool = False, meta: bool = False, shown_as: str | None = None) -> None:
    """Write the snapshot into the new, empty file open as ``fd`` (read-write) from
    verified records, with ``meta`` give it the entry's mode and mtime (through ``fd``),
    make it durable and ``quick_check`` it through ``check_path`` (SQLite opens it by
    name, read-only: nothing changes its bytes or mtime). ``overlay`` makes the
    anonymous file that holds the delta's pages meanwhile; an ``OSError`` (a full disk)
    names the file as ``shown_as`` (default ``check_path``).

    Raises CorruptObject/ObjectNotFound when a map or a record it needs is bad or
    missing, the entry's size is not its pages', or the result fails quick_check;
    ``strict`` (an audit): when any record of its full map is."""
    snap = load_snapshot(entry.refs, reader.read_blob)
    if len(snap.pages) * snap.page_size != entry.size:
        raise CorruptObject(f"snapshot of {shown(entry.path)}", f"the entry says {entry.size:,} bytes, its page "
                                                                f"maps {len(snap.pages):,} pages of {snap.page_size:,}")
    with naming(shown_as or check_path):
        try:
            write_full(fd, snap, reader, snap.base.items())
        except (CorruptObject, ObjectNotFound):
            if strict:
                raise
            # A damaged full-map record may hold only pages this snapshot no longer
            # uses (a changed page whose base could not be read was stored whole):
            # write just the pages it needs, which fails only if one of those is bad.
            needed = _needed_base_pages(snap, reader)
            write_full(fd, snap, reader, [(p, snap.base[p]) for p in sorted(needed)])
        _apply_delta(fd, snap, reader, overlay)
        os.ftruncate(fd, len(snap.pages) * snap.page_size)
        if meta:
            os.fchmod(fd, entry.mode & 0o7777)
            os.utime(fd, ns=(entry.mtime_ns, entry.mtime_ns))
        os.fsync(fd)
    problem = quick_check(check_path)
    if problem:
        raise CorruptObject(f"snapshot of {shown(entry.path)}", f"rebuilt database fails quick_check: {problem}")


def by_record(pages) -> tuple[list[BlobRef], dict[tuple[str, int], list[tuple[int, int]]]]:
    """The records ``pages`` ((pgno, PageLoc) pairs) use, in pack order, and each
    record's (slot, pgno) uses."""
    uses: dict[tuple[str, int], list[tuple[int, int]]] = {}
    recs: dict[tuple[str, int], BlobRef] = {}
    for pgno, loc in pages:
        key = (loc.rec.pack, loc.rec.offset)
        recs.setdefault(key, loc.rec)
        uses.setdefault(key, []).append((loc.slot, pgno))
    order = sorted(recs)
    return [recs[k] for k in order], uses


def write_runs(fd: int, payload, uses: list[tuple[int, int]], size: int) -> None:
    """pwrite each use (slot, pgno) of a record's payload, one call per run of slots
    that land on consecutive pages."""
    uses = sorted(uses, key=lambda u: u[1])
    i = 0
    while i < len(uses):
        slot, pgno = uses[i]
        j = i + 1
        while j < len(uses) and uses[j] == (slot + j - i, pgno + j - i):
            j += 1
        chunk = payload[slot * size:(slot + j - i) * size]
        if len(chunk) != (j - i) * size:
            raise CorruptObject(f"page {pgno}", "record is shorter than the slots the map names")
        os.pwrite(fd, chunk, pgno * size)
        i = j


def write_full(fd: int, snap: Snapshot, reader, pages) -> None:
    recs, uses = by_record(pages)
    for rec, payload in zip(recs, fetch_in_order(recs, reader)):
        write_runs(fd, payload, uses[(rec.pack, rec.offset)], snap.page_size)


def _changed(snap: Snapshot) -> list[tuple[int, PageLoc]]:
    """The pages whose location is not the full map's: the delta map's."""
    return [(p, loc) for p, loc in enumerate(snap.pages) if p not in snap.base or loc != snap.base[p]]


def _members(data, key: str, slot_uses: list[tuple[int, int]], full: dict[int, PageLoc]) -> list[int] | None:
    """The base pages a delta map record decodes against (``full``: the full map's
    pages); None for a whole record."""
    if not parse_header(data, key=key).flags & FLAG_DELTA:
        return None
    members = embedded_members(data, key=key)
    if members is None:  # a version 2 map's one-page delta: its base has its page number
        members = [slot_uses[0][1]]
        if len({p for _, p in slot_uses}) != 1 or members[0] not in full:
            raise CorruptObject(key, "a page delta without its base page")
    return members


def _needed_base_pages(snap: Snapshot, reader) -> set[int]:
    """The full map's pages this snapshot reads: its unchanged pages, and the members
    of its group deltas (read from the delta records' headers)."""
    needed = {p for p, loc in enumerate(snap.pages) if snap.base.get(p) == loc}
    recs, uses = by_record(_changed(snap))
    for rec, data in zip(recs, fetch_in_order(recs, RawReader(reader))):
        members = _members(data, blob_location(rec), uses[(rec.pack, rec.offset)], snap.base)
        needed.update(m for m in members or () if m in snap.base)
    return needed


def decode_delta_record(data, rec: BlobRef, slot_uses: list[tuple[int, int]], full: dict[int, PageLoc],
                        base_page: Callable[[int], bytes], codec) -> bytes:
    """The payload of a delta map's record ``rec`` (``data`` as stored, its (slot, pgno)
    uses ``slot_uses``), verified; a group delta decodes against its members' pages of
    the full map (``full``), ``base_page(pgno)``."""
    key = blob_location(rec)
    members = _members(data, key, slot_uses, full)
    base = None
    if members is not None:
        base = group_base(members, full, base_page)
        if not base:
            raise CorruptObject(key, "a group delta none of whose members has a base page")
    return decode_record(data, key=key, expect_id=rec.id, expect_kind=KIND_DBPAGE, base=base, codec=codec)


def page_reader(fd: int, size: int) -> Callable[[int], bytes]:
    """``read(pgno)``: page ``pgno`` of the file open as ``fd``, which must hold it whole."""
    def read(pgno: int) -> bytes:
        page = os.pread(fd, size, pgno * size)
        if len(page) != size:
            raise CorruptObject(f"page {pgno}", "base page missing from the rebuilt file")
        return page
    return read


def _apply_delta(fd: int, snap: Snapshot, reader, overlay_file: Callable[[], BinaryIO]) -> None:
    size = snap.page_size
    changed = _changed(snap)
    if not changed:
        return
    recs, uses = by_record(changed)
    base_page = page_reader(fd, size)
    placed: list[int] = []
    with overlay_file() as overlay:
        for rec, data in zip(recs, fetch_in_order(recs, RawReader(reader))):
            key = blob_location(rec)
            slot_uses = uses[(rec.pack, rec.offset)]
            payload = decode_delta_record(data, rec, slot_uses, snap.base, base_page, reader.codec)
            for slot, pgno in slot_uses:
                page = payload[slot * size:(slot + 1) * size]
                if len(page) != size:
                    raise CorruptObject(key, "record is shorter than the slots the map names")
                overlay.write(page)
                placed.append(pgno)
        overlay.flush()
        ofd = overlay.fileno()
        for i, pgno in enumerate(placed):
            os.pwrite(fd, os.pread(ofd, size, i * size), pgno * size)


__all__ = ["build_db", "install_db", "rebuild_db", "PageLoc"]


def install_db(tmp, name: str, full_path: str) -> None:
    """Remove stale companions, then rename the rebuilt database (``name`` in the tree's
    temp directory ``tmp``, a ``TreeTmp``, already with its mode and mtime) into place,
    all in its directory as reached from the tree's root without a symlink
    (``TreeTmp.parent``: ``UnsafePath`` otherwise)."""
    base = os.path.basename(full_path)
    with tmp.parent(full_path) as parent:
        for suffix in SQLITE_COMPANIONS:
            try:
                os.unlink(base + suffix, dir_fd=parent)
            except FileNotFoundError:
                continue
            except IsADirectoryError as err:  # (EISDIR) never SQLite's; never removed
                raise UnsafePath(full_path + suffix, "it is a directory where SQLite keeps a companion file; the "
                                                     "database is not restored beside it: move it away and restore "
                                                     "again") from err
        os.replace(name, base, src_dir_fd=tmp.fd, dst_dir_fd=parent)
        sync(parent)
