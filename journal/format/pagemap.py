"""Page maps: which record holds each page of a SQLite snapshot.

A snapshot is described page by page, so a few small transactions upload only the
pages they dirtied, wherever they are in the file. Pages are stored in *page groups*:
one dbpage record holds up to a group's worth of pages back to back, so a restore
decodes and verifies a few hundred records rather than one per page. The list of
pages is a *page map*, itself a blob (kind ``pagemap``, msgpack):

* a **full** map lists every page; its records are whole (never deltas);
* a **delta** map lists only the pages that differ from a full map, which the entry
  names first. The entry names at most two delta maps after it, applied in order: a
  cumulative one (every page that differs from the full map), then a *recent* one
  (every page that differs from the first two), written while it stays small
  (``RECENT_MIN``, ``RECENT_SHARE``), so a tick's map grows with that tick's changes,
  not with every page changed since the full map. A restore reads at most three maps.
  A new full map is written when the pages differing from it would be more than
  ``max(DELTA_MIN, page_count // DELTA_SHARE)``.

The payload is a msgpack map (``PageMap``; design §7 has every rule a reader checks):
``version`` (3; 1 and 2 are read), ``full``, ``page_size``, ``page_count`` (the
snapshot's pages once this map is applied), ``packs`` (the pack ids the tables index)
and two big-endian tables as msgpack bin:

* ``records``: ``pack index u16 | offset u64 | length u32 | pages u32 | flags u8 |
  sha256 32B`` per record; flag ``1`` marks a *group delta*, a record compressed
  against the full map's pages of its members (the page numbers stored in the record,
  ``objects.FLAG_MEMBERS``), back to back, skipping members the full map lacks;
* ``slots``: ``pgno u32 | record index u32 | slot u32 | page sha256 32B`` per page
  (``pgno`` from 0: the page at byte ``pgno * page_size``).

Pack index ``0xFFFF`` means "the pack this map was read from". A page's own SHA-256 is
what a checkpoint compares to find changed pages; the record's is what every read
verifies.

Versions 1 and 2 (read only) list one record per page in ``records``
(``pgno u32 | pack index u16 | offset u64 | length u32 | sha256 32B``), the record's
id being the page's, and have no ``slots``. Version 2 adds ``deltas``, the sorted pgnos
(``u32`` each) whose record is a one-page delta against the full map's page of the
same number.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Annotated, NamedTuple

import msgspec

from ..errors import CorruptObject
from .model import MAX_MAPS, BlobRef, Id
from .objects import DBPAGE_BYTES, HEADER, MAX_OFFSET, MAX_RECORD, is_id

MAP_VERSION = 3
SAME_PACK = 0xFFFF
RECORD = struct.Struct(">IHQI32s")       # versions 1-2: one record per page
GROUP = struct.Struct(">HQIIB32s")       # version 3: the record table
SLOT = struct.Struct(">III32s")          # version 3: the page table
PGNO = struct.Struct(">I")
GROUP_DELTA = 0x01
DELTA_MIN = 1024
DELTA_SHARE = 8
#: A recent map is written instead of a new cumulative one while it lists at most
#: ``max(RECENT_MIN, cumulative pages // RECENT_SHARE)`` pages.
RECENT_MIN = 64
RECENT_SHARE = 8
#: A map's writer names at most about this many packs: when reusing stored pages would
#: name more, the pages of the least-used packs are stored again (sqlite/capture.py).
#: A full map reuses each unchanged page from the pack it was first written to, so
#: without a bound a database that keeps changing names more packs at every full map,
#: up to the table's limit (``SAME_PACK``), and pins all of them against gc.
MAP_PACKS = 1024
MAP_PACKS_KEPT = 768


class MapPlace(enum.IntEnum):
    """Where a page map sits in a snapshot entry's refs (at most ``model.MAX_MAPS``)."""

    FULL = 0            # the full map: every page
    CUMULATIVE = 1      # a delta map: every page that differs from the full map
    RECENT = 2          # a delta map: every page that differs from the first two


class PageMap(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    version: int
    full: bool
    page_size: Annotated[int, msgspec.Meta(ge=512, le=65536)]     # SQLite's: a power of two
    page_count: Annotated[int, msgspec.Meta(ge=0, le=1 << 32)]
    packs: Annotated[list[Id], msgspec.Meta(max_length=SAME_PACK)]
    records: bytes
    deltas: bytes = b""
    slots: bytes = b""


class PageLoc(NamedTuple):
    """Where one page of a snapshot lives: ``id`` is the page's SHA-256, ``rec`` the
    record holding it, ``slot`` its index among the record's pages."""

    id: str
    rec: BlobRef
    slot: int
    delta: bool = False     # the record is a delta: it decodes against the full map's pages
    legacy: bool = False    # a version 2 one-page delta: its base is the full map's page of this pgno

    @property
    def pack(self) -> str:
        return self.rec.pack


class Snapshot(NamedTuple):
    """A snapshot entry's maps, resolved: every page in order, and what each needs."""

    page_size: int
    pages: list[PageLoc]          # pgno -> where the page is
    base: dict[int, PageLoc]      # the full map's pages (a delta's base pages)

    @property
    def deltas(self) -> frozenset[int]:
        """The pgnos whose record is a delta."""
        return frozenset(p for p, loc in enumerate(self.pages) if loc.delta)


def encode_map(full: bool, page_size: int, page_count: int, pages: dict[int, PageLoc],
               locate: Callable[[BlobRef], str]) -> bytes:
    """Encode ``pages`` (pgno -> location) as a version 3 map; ``locate(ref)`` gives a
    record's pack, ``""`` for the map's own."""
    if full and any(loc.delta for loc in pages.values()):
        raise ValueError("a full map lists whole records only")
    packs: dict[str, int] = {}
    groups: dict[tuple[str, int], int] = {}
    table, slots = bytearray(), bytearray()
    for pgno in sorted(pages):
        loc = pages[pgno]
        rec = loc.rec
        idx = groups.get((rec.pack, rec.offset))
        if idx is None:
            pack = locate(rec)
            pidx = SAME_PACK if pack == "" else packs.setdefault(pack, len(packs))
            if pidx == SAME_PACK and pack != "":
                raise ValueError(f"a page map names at most {SAME_PACK} packs (index {SAME_PACK:#x} is its own)")
            idx = groups[(rec.pack, rec.offset)] = len(groups)
            table += GROUP.pack(pidx, rec.offset, rec.length, rec.size // page_size,
                                GROUP_DELTA if loc.delta else 0, bytes.fromhex(rec.id))
        slots += SLOT.pack(pgno, idx, loc.slot, bytes.fromhex(loc.id))
    return msgspec.msgpack.encode(PageMap(version=MAP_VERSION, full=full, page_size=page_size,
                                          page_count=page_count, packs=list(packs), records=bytes(table),
                                          slots=bytes(slots)))


def decode_map(payload: bytes, own_pack: str, key: str) -> tuple[PageMap, dict[int, PageLoc]]:
    """Decode a map read from pack ``own_pack``; raises CorruptObject(key)."""
    try:
        pm = msgspec.msgpack.decode(payload, type=PageMap)
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"page map does not decode: {err}") from None
    except RecursionError:  # an unknown field nested past the decoder's depth (msgspec skips it by recursing)
        raise CorruptObject(key, "page map does not decode: nested too deep") from None
    if pm.page_size & (pm.page_size - 1):
        raise CorruptObject(key, f"page map has a bad page size {pm.page_size}")
    for pack in pm.packs:
        if not is_id(pack):
            raise CorruptObject(key, f"page map names pack {pack!r}, which is not a pack name")
    try:
        if pm.version == MAP_VERSION:
            pages = _decode_v3(pm, own_pack, key)
        elif pm.version in (1, 2):
            pages = _decode_v1(pm, own_pack, key)
        else:
            raise CorruptObject(key, f"page map has unknown version {pm.version}")
    except IndexError:
        raise CorruptObject(key, "page map names a pack or record it does not list") from None
    if pm.full and any(loc.delta for loc in pages.values()):
        raise CorruptObject(key, "a full map lists a delta record")
    return pm, pages


def _decode_v3(pm: PageMap, own_pack: str, key: str) -> dict[int, PageLoc]:
    if len(pm.records) % GROUP.size or len(pm.slots) % SLOT.size or pm.deltas:
        raise CorruptObject(key, "page map has a torn table")
    recs = []
    for pidx, offset, length, npages, flags, digest in GROUP.iter_unpack(pm.records):
        if flags & ~GROUP_DELTA or npages == 0 or npages * pm.page_size > DBPAGE_BYTES \
                or _bad_place(offset, length):
            raise CorruptObject(key, "page map has a bad record entry")
        pack = own_pack if pidx == SAME_PACK else pm.packs[pidx]
        recs.append((BlobRef(digest.hex(), pack, offset, length, npages * pm.page_size), npages, bool(flags)))
    pages: dict[int, PageLoc] = {}
    count, new = pm.page_count, tuple.__new__   # PageLoc made without its Python __new__: a map has thousands
    for pgno, idx, slot, digest in SLOT.iter_unpack(pm.slots):
        rec, npages, delta = recs[idx]
        if slot >= npages or pgno in pages or pgno >= count:
            raise CorruptObject(key, "page map names a slot its record lacks, a page twice or one past its end")
        pages[pgno] = new(PageLoc, (digest.hex(), rec, slot, delta, False))
    return pages


def _bad_place(offset: int, length: int) -> bool:
    """True when a record's place in its pack is not one a writer makes."""
    return offset > MAX_OFFSET or not HEADER.size <= length <= MAX_RECORD


def _decode_v1(pm: PageMap, own_pack: str, key: str) -> dict[int, PageLoc]:
    if len(pm.records) % RECORD.size:
        raise CorruptObject(key, "page map has a bad length")
    refs = {}
    for pgno, idx, offset, length, digest in RECORD.iter_unpack(pm.records):
        if pgno in refs or pgno >= pm.page_count or _bad_place(offset, length):
            raise CorruptObject(key, "page map has a bad record entry")
        pack = own_pack if idx == SAME_PACK else pm.packs[idx]
        refs[pgno] = BlobRef(digest.hex(), pack, offset, length, pm.page_size)
    marks = _legacy_deltas(pm, refs, key)
    return {p: PageLoc(r.id, r, 0, p in marks, p in marks) for p, r in refs.items()}


def _legacy_deltas(pm: PageMap, pages: dict[int, BlobRef], key: str) -> frozenset[int]:
    if not pm.deltas:
        return frozenset()
    if pm.version < 2 or pm.full or len(pm.deltas) % PGNO.size:
        raise CorruptObject(key, "page deltas in a full or version 1 map, or a torn delta list")
    marks = [p for (p,) in PGNO.iter_unpack(pm.deltas)]
    if any(a >= b for a, b in zip(marks, marks[1:])) or not set(marks) <= pages.keys():
        raise CorruptObject(key, "page delta list is unsorted or names a page the map lacks")
    return frozenset(marks)


def load_snapshot(refs: tuple[BlobRef, ...], read_map: Callable[[BlobRef], bytes]) -> Snapshot:
    """Resolve a snapshot entry's map refs (a full map, then up to two delta maps)."""
    maps = resolve_maps(refs, lambda ref, key: decode_map(read_map(ref), ref.pack, key))
    changed, base = maps.changed, maps.base
    return Snapshot(maps.page_size, [changed.get(p) or base[p] for p in range(maps.count)], base)


#: Reads and decodes one page map: ``(ref, key) -> decode_map's (map, its pages)``.
DecodedMap = Callable[[BlobRef, str], tuple[PageMap, dict[int, PageLoc]]]


class Maps(NamedTuple):
    """A snapshot entry's maps, checked (``resolve_maps``), before its pages are put in order."""

    page_size: int
    count: int                      # its pages
    base: dict[int, PageLoc]        # the full map's pages (a delta's base pages)
    changed: dict[int, PageLoc]     # the delta maps' pages, a later map's over an earlier's


def resolve_maps(refs: tuple[BlobRef, ...], decoded: DecodedMap) -> Maps:
    """A snapshot entry's maps, with every check ``load_snapshot`` makes (raises
    ``CorruptObject``): every page below the last map's count is in one of them."""
    if not refs or len(refs) > MAX_MAPS:
        raise CorruptObject("sqlite entry", f"a snapshot entry names {len(refs)} page maps (1 to {MAX_MAPS})")
    key = f"pagemap {refs[0].id[:12]}"
    base, base_pages = decoded(refs[0], key)
    if not base.full:
        raise CorruptObject(key, "first map of a snapshot is not a full map")
    changed: dict[int, PageLoc] = {}
    count = base.page_count
    for ref in refs[1:]:
        key = f"pagemap {ref.id[:12]}"
        delta, delta_pages = decoded(ref, key)
        if delta.full or delta.page_size != base.page_size:
            raise CorruptObject(key, "a later map of a snapshot is not a delta over the first")
        if any(loc.legacy and p not in base_pages for p, loc in delta_pages.items()):
            raise CorruptObject(key, "a page delta has no base page in the full map")
        changed.update(delta_pages)
        count = delta.page_count
    # a full map holding as many pages as its count holds every page below it (a
    # decoded map lists none twice and none at or past its count)
    start = base.page_count if len(base_pages) == base.page_count else 0
    for pgno in range(start, count):
        if pgno not in changed and pgno not in base_pages:
            raise CorruptObject(f"pagemap {refs[-1].id[:12]}", f"page {pgno} of {count} is missing")
    return Maps(base.page_size, count, base_pages, changed)


def group_base(members: list[int], full: dict[int, PageLoc], read: Callable[[int], bytes]) -> bytes:
    """The dictionary of a group delta: the full map's pages of its members, back to
    back (``read(pgno)``), skipping members the full map lacks."""
    return b"".join(read(m) for m in members if m in full)
