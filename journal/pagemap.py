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
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import msgspec

from .errors import CorruptObject
from .model import BlobRef

MAP_VERSION = 1
SAME_PACK = 0xFFFF
RECORD = struct.Struct(">IHQI32s")
DELTA_MIN = 1024
DELTA_SHARE = 8


class PageMap(msgspec.Struct, frozen=True, kw_only=True):
    version: int = MAP_VERSION
    full: bool
    page_size: int
    page_count: int
    packs: list[str]
    records: bytes


def encode_map(full: bool, page_size: int, page_count: int, pages: dict[int, BlobRef],
               locate: Callable[[BlobRef], str]) -> bytes:
    """Encode ``pages`` (pgno -> ref); ``locate(ref)`` gives its pack, ``""`` for the map's own."""
    packs: dict[str, int] = {}
    out = bytearray()
    for pgno in sorted(pages):
        ref = pages[pgno]
        pack = locate(ref)
        idx = SAME_PACK if pack == "" else packs.setdefault(pack, len(packs))
        out += RECORD.pack(pgno, idx, ref.offset, ref.length, bytes.fromhex(ref.id))
    return msgspec.msgpack.encode(PageMap(full=full, page_size=page_size, page_count=page_count,
                                          packs=list(packs), records=bytes(out)))


def decode_map(payload: bytes, own_pack: str, key: str) -> tuple[PageMap, dict[int, BlobRef]]:
    """Decode a map read from pack ``own_pack``; raises CorruptObject(key)."""
    try:
        pm = msgspec.msgpack.decode(payload, type=PageMap)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise CorruptObject(key, f"page map does not decode: {err}") from err
    if pm.version != MAP_VERSION or len(pm.records) % RECORD.size:
        raise CorruptObject(key, "page map has a bad version or length")
    pages = {}
    page_size = pm.page_size
    for pgno, idx, offset, length, digest in RECORD.iter_unpack(pm.records):
        pack = own_pack if idx == SAME_PACK else pm.packs[idx]
        pages[pgno] = BlobRef(digest.hex(), pack, offset, length, page_size)
    return pm, pages


def snapshot_pages(refs: tuple[BlobRef, ...], read_map: Callable[[BlobRef], bytes]) -> tuple[int, list[BlobRef], dict[int, BlobRef]]:
    """``(page_size, pages in order, full map's pages)`` of a snapshot entry's map refs."""
    if not refs:
        raise CorruptObject("sqlite entry", "a snapshot entry names no page map")
    base, base_pages = decode_map(read_map(refs[0]), refs[0].pack, f"pagemap {refs[0].id[:12]}")
    if not base.full:
        raise CorruptObject(f"pagemap {refs[0].id[:12]}", "first map of a snapshot is not a full map")
    pages, count = dict(base_pages), base.page_count
    if len(refs) > 1:
        delta, delta_pages = decode_map(read_map(refs[1]), refs[1].pack, f"pagemap {refs[1].id[:12]}")
        pages.update(delta_pages)
        count = delta.page_count
    ordered = []
    for pgno in range(count):
        if pgno not in pages:
            raise CorruptObject(f"pagemap {refs[-1].id[:12]}", f"page {pgno} of {count} is missing")
        ordered.append(pages[pgno])
    return base.page_size, ordered, base_pages
