"""A record decoder written from the documented format alone (docs/design.md §4-7):
struct, zstandard and json, no journal imports, so a format change in journal cannot
change what the golden-store tests read. Each golden test module adds the checks of
its own format versions (which kinds carry which flags) on top of ``decode_record``.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct

import zstandard

HEADER = struct.Struct(">4sBBHQQ32s")       # magic, version, kind, flags, raw size, stored size, sha256
KIND_CHUNK, KIND_SEGMENT, KIND_PAGE, KIND_MANIFEST, KIND_PAGEMAP, KIND_DBPAGE = 1, 2, 3, 4, 5, 6
#: Format 2-6: a delta (stored against a base); format 5: a group delta names its member
#: pages before its frame; format 6: a delta names its base by position before its frame;
#: format 6: an index page holding an entry that names chunk bases.
FLAG_DELTA, FLAG_MEMBERS, FLAG_BASE_AT, FLAG_ENTRY_BASES = 0x0001, 0x0002, 0x0004, 0x0008
BASE_AT = struct.Struct(">32sQI")           # a delta's base by position: pack, offset, length


def read_header(data: bytes) -> dict:
    magic, version, kind, flags, raw_size, stored_size, digest = HEADER.unpack_from(data)
    return {"magic": magic, "version": version, "kind": kind, "flags": flags,
            "raw_size": raw_size, "stored_size": stored_size, "sha256": digest.hex()}


def decode_record(data: bytes, base: bytes | None = None) -> tuple[dict, bytes | None]:
    """(header, payload) of one whole record, checked as §4 says a reader must. What a
    record stores before its frame goes into the header: a group delta's ``members``
    (page numbers) and a delta's ``base_ref`` (``[id, pack, offset, length, size]``; by
    position in format 6, as JSON for an index page delta of formats 2-5). A delta
    needs its base's payload; without it the payload is None (not decoded here)."""
    head = read_header(data)
    assert head["magic"] == b"JRNL" and head["version"] == 1
    assert len(data) == HEADER.size + head["stored_size"]
    flags, start = head["flags"], HEADER.size
    if flags & FLAG_MEMBERS:   # u16 n, then n bytes of member page numbers (u32 each)
        (n,) = struct.unpack_from(">H", data, start)
        head["members"] = [p for (p,) in struct.iter_unpack(">I", data[start + 2:start + 2 + n])]
        start += 2 + n
    if flags & FLAG_BASE_AT:   # u16 44, then the base's pack, offset and length
        (n,) = struct.unpack_from(">H", data, start)
        pack, offset, length = BASE_AT.unpack(data[start + 2:start + 2 + n])
        head["base_ref"] = [None, pack.hex(), offset, length, None]
        start += 2 + n
    elif flags & FLAG_DELTA and head["kind"] == KIND_PAGE:   # formats 2-5: the base's ref, as JSON
        (n,) = struct.unpack_from(">H", data, start)
        head["base_ref"] = json.loads(data[start + 2:start + 2 + n])
        start += 2 + n
    dctx = zstandard.ZstdDecompressor()
    if flags & FLAG_DELTA:
        if base is None:
            return head, None
        dctx = zstandard.ZstdDecompressor(
            dict_data=zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT))
    payload = dctx.decompress(data[start:], max_output_size=head["raw_size"])
    assert len(payload) == head["raw_size"]
    assert hashlib.sha256(payload).hexdigest() == head["sha256"]
    return head, payload


class StoreFiles:
    """A store directory read by the documented layout: a key is a file path."""

    def __init__(self, root: str):
        self.root = root

    def raw(self, key: str) -> bytes:
        with open(os.path.join(self.root, *key.split("/")), "rb") as fh:
            return fh.read()

    def stored(self, ref: list, parent_pack: str = "") -> bytes:
        """The stored record a ref names (``[id, pack, offset, length, size]``; an empty
        pack is ``parent_pack``: §7)."""
        _id, pack, offset, length, _size = ref
        pack = pack or parent_pack
        return self.raw(f"packs/{pack[:2]}/{pack}")[offset:offset + length]
