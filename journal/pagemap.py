"""Page maps: which blob holds each page of a SQLite snapshot.

A snapshot is split into page-sized blobs (one SQLite page each), so a few small
transactions upload only the pages they dirtied, wherever they are in the file.
The list of pages is a *page map*, itself a blob (kind ``pagemap``, msgpack):

* a **full** map lists every page;
* a **delta** map lists only the pages that differ from a full map, which the
  entry names first. Deltas are cumulative (always against the full map, never
  chained), so a restore reads at most two maps. A new full map is written when the
  delta would list more than ``max(DELTA_MIN, page_count // DELTA_SHARE)`` pages.

Each record is ``pgno u32 | pack index u16 | offset u64 | length u32 | sha256 32B``;
pack index ``0xFFFF`` means "the pack this map was read from".

Map version 2 adds ``deltas``: the sorted pgnos (``u32`` each) whose record is a
*page delta* (a dbpage record flagged ``FLAG_DELTA``), compressed against the page
with the same pgno in the entry's full map. Only delta maps have them: a full map
lists whole pages only, so a base is always a whole page and a delta is at most one
page deep. A map without deltas is written as version 1, byte for byte as before.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from .errors import CorruptObject
from .model import BlobRef

MAP_VERSION = 2
SAME_PACK = 0xFFFF
RECORD = struct.Struct(">IHQI32s")
PGNO = struct.Struct(">I")
DELTA_MIN = 1024
DELTA_SHARE = 8


class PageMap(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    version: int
    full: bool
    page_size: int
    page_count: int
    packs: list[str]
    records: bytes
    deltas: bytes = b""


class Snapshot(NamedTuple):
    """A snapshot entry's maps, resolved: every page in order, and what each needs."""

    page_size: int
    pages: list[BlobRef]          # pgno -> the record that holds the page
    base: dict[int, BlobRef]      # the full map's pages (a delta's base is base[pgno])
    deltas: frozenset[int]        # pgnos whose record in ``pages`` is a page delta


def encode_map(full: bool, page_size: int, page_count: int, pages: dict[int, BlobRef],
               locate: Callable[[BlobRef], str], deltas: set[int] | frozenset[int] = frozenset()) -> bytes:
    """Encode ``pages`` (pgno -> ref); ``locate(ref)`` gives its pack, ``""`` for the map's own.

    ``deltas``: the pgnos whose record is a page delta against the full map's page
    (delta maps only).
    """
    if deltas and (full or not deltas <= pages.keys()):
        raise ValueError("page deltas belong in a delta map, and each must be one of its pages")
    packs: dict[str, int] = {}
    out = bytearray()
    for pgno in sorted(pages):
        ref = pages[pgno]
        pack = locate(ref)
        idx = SAME_PACK if pack == "" else packs.setdefault(pack, len(packs))
        out += RECORD.pack(pgno, idx, ref.offset, ref.length, bytes.fromhex(ref.id))
    marks = b"".join(PGNO.pack(p) for p in sorted(deltas))
    return msgspec.msgpack.encode(PageMap(version=2 if marks else 1, full=full, page_size=page_size,
                                          page_count=page_count, packs=list(packs), records=bytes(out),
                                          deltas=marks))


def decode_map(payload: bytes, own_pack: str, key: str) -> tuple[PageMap, dict[int, BlobRef]]:
    """Decode a map read from pack ``own_pack``; raises CorruptObject(key)."""
    try:
        pm = msgspec.msgpack.decode(payload, type=PageMap)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise CorruptObject(key, f"page map does not decode: {err}") from err
    if pm.version not in (1, MAP_VERSION) or len(pm.records) % RECORD.size:
        raise CorruptObject(key, "page map has a bad version or length")
    pages = {}
    page_size = pm.page_size
    try:
        for pgno, idx, offset, length, digest in RECORD.iter_unpack(pm.records):
            pack = own_pack if idx == SAME_PACK else pm.packs[idx]
            pages[pgno] = BlobRef(digest.hex(), pack, offset, length, page_size)
    except IndexError:
        raise CorruptObject(key, "page map names a pack it does not list") from None
    delta_pgnos(pm, pages, key)
    return pm, pages


def delta_pgnos(pm: PageMap, pages: dict[int, BlobRef], key: str) -> frozenset[int]:
    """The pgnos a decoded map marks as page deltas; raises CorruptObject(key) if malformed."""
    if not pm.deltas:
        return frozenset()
    if pm.version < 2 or pm.full or len(pm.deltas) % PGNO.size:
        raise CorruptObject(key, "page deltas in a full or version 1 map, or a torn delta list")
    marks = [p for (p,) in PGNO.iter_unpack(pm.deltas)]
    if any(a >= b for a, b in zip(marks, marks[1:])) or not set(marks) <= pages.keys():
        raise CorruptObject(key, "page delta list is unsorted or names a page the map lacks")
    return frozenset(marks)


def load_snapshot(refs: tuple[BlobRef, ...], read_map: Callable[[BlobRef], bytes]) -> Snapshot:
    """Resolve a snapshot entry's map refs (full map, then optionally a delta map)."""
    if not refs:
        raise CorruptObject("sqlite entry", "a snapshot entry names no page map")
    key = f"pagemap {refs[0].id[:12]}"
    base, base_pages = decode_map(read_map(refs[0]), refs[0].pack, key)
    if not base.full:
        raise CorruptObject(key, "first map of a snapshot is not a full map")
    pages, count, deltas = dict(base_pages), base.page_count, frozenset()
    if len(refs) > 1:
        key = f"pagemap {refs[1].id[:12]}"
        delta, delta_pages = decode_map(read_map(refs[1]), refs[1].pack, key)
        if delta.full or delta.page_size != base.page_size:
            raise CorruptObject(key, "second map of a snapshot is not a delta over the first")
        deltas = delta_pgnos(delta, delta_pages, key)
        if not deltas <= base_pages.keys():
            raise CorruptObject(key, "a page delta has no base page in the full map")
        pages.update(delta_pages)
        count = delta.page_count
    ordered = []
    for pgno in range(count):
        if pgno not in pages:
            raise CorruptObject(f"pagemap {refs[-1].id[:12]}", f"page {pgno} of {count} is missing")
        ordered.append(pages[pgno])
    return Snapshot(base.page_size, ordered, base_pages, frozenset(p for p in deltas if p < count))


def snapshot_pages(refs: tuple[BlobRef, ...], read_map: Callable[[BlobRef], bytes]) -> tuple[int, list[BlobRef], dict[int, BlobRef]]:
    """``(page_size, pages in order, full map's pages)`` of a snapshot entry's map refs."""
    snap = load_snapshot(refs, read_map)
    return snap.page_size, snap.pages, snap.base
