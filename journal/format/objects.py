"""The record format: one self-describing, self-verifying, compressed blob.

A record is a 56-byte header followed by one zstd frame::

    magic "JRNL" | version u8 | kind u8 | flags u16 | raw_size u64 | stored_size u64 | sha256 32B

``sha256`` is the hash of the uncompressed payload and is the blob's id. Every
decode re-hashes the payload and raises ``CorruptObject`` naming the key on any
mismatch, so no unverified byte leaves this module.

Flags. ``FLAG_DELTA`` marks a *delta*: the frame was compressed with another record's
payload (its *base*) as a zstd raw-content dictionary. Its id is still the SHA-256 of
its own payload; decoding it needs the base, and the result is verified like any
other. A base is always a whole record, so chains are one deep. Where the base is:

* a JSONL segment: the last 64 KiB of its anchor, found by position in the
  entry's refs (``format/segments.py``);
* a chunk: the chunk the entry names in ``Entry.bases`` (``checkpoint/file_delta.py``);
* a dbpage group (a dbpage record holds a *page group*, its pages back to back):
  ``FLAG_MEMBERS``, the page numbers of its slots stored before the frame; the base is
  the full map's pages of those numbers, back to back (``format/pagemap.py``)::

      header | u16 n | n bytes: the members, u32 each | zstd frame

* an index page or a page map: ``FLAG_BASE_AT``, the base's position stored before the
  frame; the base's id and size are read from its own header, which its payload is
  verified against, and a wrong position cannot go unnoticed either, because the delta
  decoded against any other bytes fails its own hash::

      header | u16 44 | pack 32B | offset u64 | length u32 | zstd frame

  An index page delta without ``FLAG_BASE_AT`` (read only: stores written before
  format 6) stores the base's ``BlobRef`` as a JSON array instead::

      header | u16 n | n bytes: the base's BlobRef (JSON array) | zstd frame

  A dbpage delta without ``FLAG_MEMBERS`` (read only: version 2 page maps) is one page
  whose base is the full map's page of the same number.

``FLAG_ENTRY_BASES`` marks an index page one of whose entries names chunk bases, so a
reader that does not know ``Entry.bases`` refuses the page rather than misread a delta
chunk as whole. A reader refuses every flag it does not know (``KIND_FLAGS``).
"""

from __future__ import annotations

import functools
import re
import struct
import threading
from typing import NamedTuple

import zstandard

from ..errors import CorruptObject, RecordTooLarge, ids_apart
from .codec import PLAIN, Codec

MAGIC = b"JRNL"
RECORD_VERSION = 1     # the header's version: every record, whatever the store format (model.FORMAT)
HEADER = struct.Struct(">4sBBHQQ32s")

KIND_CHUNK = 1      # a fixed-size piece of an ordinary file
KIND_SEGMENT = 2    # complete lines appended to a JSONL transcript
KIND_PAGE = 3       # a page of a tree index
KIND_MANIFEST = 4   # a checkpoint manifest
KIND_PAGEMAP = 5    # the page list of a SQLite snapshot (full, or a delta over a full one)
KIND_DBPAGE = 6     # one page of a SQLite snapshot
KIND_INPUT = 7      # one submitted prompt (format 8, ``format/inputs.py``)
KIND_DELIVERY = 8   # an input's delivery marker
KIND_CLAIM = 9      # a client id taken in a session
KIND_NAMES = {KIND_CHUNK: "chunk", KIND_SEGMENT: "segment", KIND_PAGE: "page", KIND_MANIFEST: "manifest",
              KIND_PAGEMAP: "pagemap", KIND_DBPAGE: "dbpage", KIND_INPUT: "input", KIND_DELIVERY: "delivery",
              KIND_CLAIM: "claim"}

FLAG_DELTA = 0x0001    # compressed against a base payload (raw-content dictionary)
FLAG_MEMBERS = 0x0002  # a dbpage group delta: its slots' page numbers precede the frame
FLAG_BASE_AT = 0x0004  # an index page or page map delta names its base by position
#: An index page one of whose entries names chunk bases (``Entry.bases``): readers
#: that do not know bases refuse the page instead of dropping them.
FLAG_ENTRY_BASES = 0x0008
#: The flags each kind may carry; any other bit set is refused.
KIND_FLAGS = {KIND_DBPAGE: FLAG_DELTA | FLAG_MEMBERS, KIND_PAGE: FLAG_DELTA | FLAG_BASE_AT | FLAG_ENTRY_BASES,
              KIND_SEGMENT: FLAG_DELTA,
              KIND_PAGEMAP: FLAG_DELTA | FLAG_BASE_AT, KIND_CHUNK: FLAG_DELTA}
#: Kinds whose deltas always name their base by position.
BASE_AT_KINDS = (KIND_PAGEMAP,)
#: Flags that qualify a delta: never set without ``FLAG_DELTA``.
DELTA_ONLY = FLAG_MEMBERS | FLAG_BASE_AT
_BASE_LEN = struct.Struct(">H")
BASE_AT = struct.Struct(">32sQI")

#: The largest payload a record of each kind holds. Each writer takes its limit from
#: here and ``encode_record`` refuses a larger payload, so no record the writer makes is
#: over it; a reader refuses a header that claims more, before decompressing anything.
CHUNK_BYTES = 1 << 20        # ordinary files are cut into chunks of this size (checkpoint/capture.py)
SEGMENT_BYTES = 9 << 20      # cut at 8 MiB inside a long line, after a 1 MiB read (checkpoint/capture.py)
PAGE_BYTES = 64 << 20        # an index page: at most index.MAX_ITEMS entries or children
MANIFEST_BYTES = 16 << 20
PAGEMAP_BYTES = 256 << 20    # ~45 bytes a page: ~6 million pages, a 23 GiB database of 4 KiB pages
DBPAGE_BYTES = 256 << 10     # a page group (sqlite/capture.py); one page is at most 64 KiB
INPUT_BYTES = (16 << 20) + (8 << 10)  # the largest input_limit (16 MiB of text) and its head line
NOTE_BYTES = 8 << 10         # a delivery marker or a client-id claim: a few names and times
RAW_LIMITS = {KIND_CHUNK: CHUNK_BYTES, KIND_SEGMENT: SEGMENT_BYTES, KIND_PAGE: PAGE_BYTES,
              KIND_MANIFEST: MANIFEST_BYTES, KIND_PAGEMAP: PAGEMAP_BYTES, KIND_DBPAGE: DBPAGE_BYTES,
              KIND_INPUT: INPUT_BYTES, KIND_DELIVERY: NOTE_BYTES, KIND_CLAIM: NOTE_BYTES}
MAX_RAW = max(RAW_LIMITS.values())
#: The longest record: a header, a base or member list (at most 65,535 bytes after its
#: length) and a zstd frame, which zstd keeps within 1/256 (plus 64 bytes) of its payload.
MAX_RECORD = HEADER.size + _BASE_LEN.size + 0xFFFF + MAX_RAW + (MAX_RAW >> 8) + 64
#: The furthest offset a reference may name: far past any pack (packs close at 64 MiB).
MAX_OFFSET = 1 << 48
COMPRESSION_LEVEL = 3
#: A chunk at least this long is probed before it is compressed: when ``PROBE_SLICES``
#: slices of ``PROBE_SLICE`` bytes, spread over it, do not compress, its frame is written
#: as raw blocks (``_raw_frame``) without running the compressor over it. These are the
#: bytes zstd writes for a payload none of whose blocks compress (a frame with a 4-byte
#: content size: payloads over 65,791 bytes). A probe that misses a compressible part
#: stores it raw: larger, never wrong (the frame decodes like any other).
PROBE_MIN = 128 << 10
PROBE_SLICES, PROBE_SLICE = 16, 4 << 10
#: zstd keeps a block only when it saves this share of its bytes (``ZSTD_minGain``):
#: a probe that saves less says the chunk's blocks would be stored raw.
PROBE_GAIN = 1 / 64
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: The frame header of a single-segment frame with a 4-byte content size, no checksum.
RAW_DESCRIPTOR = 0xA0
RAW_BLOCK = 128 << 10   # zstd's largest block
# Deltas are few and small, so they get stronger levels: 19 against a page-sized base;
# 9 against a 64 KiB segment anchor (there 19 takes 10x as long for ~4% less).
DELTA_LEVEL_SMALL_BASE, DELTA_LEVEL = 19, 9
SMALL_BASE = 16 << 10


def blob_id(payload: bytes, codec: Codec = PLAIN) -> str:
    """The id of a payload: its SHA-256, hex (keyed in an encrypted store: ``format/codec.py``)."""
    return codec.id(payload)


_local = threading.local()   # one (de)compressor per thread: creating one costs more than a 4 KiB page


def _compressor() -> zstandard.ZstdCompressor:
    cctx = getattr(_local, "cctx", None)
    if cctx is None:
        cctx = _local.cctx = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
    return cctx


def _chunk_frame(payload: bytes) -> list:
    """A chunk's zstd frame, in pieces for one join with the record's header: raw
    blocks when a probe finds it does not compress (an incompressible file costs that
    one copy instead of the compressor's pass), else level ``COMPRESSION_LEVEL``."""
    if len(payload) < PROBE_MIN:
        return [_compressor().compress(payload)]
    view = memoryview(payload)
    step = len(payload) // PROBE_SLICES
    sample = b"".join(view[i * step:i * step + PROBE_SLICE] for i in range(PROBE_SLICES))
    if len(_compressor().compress(sample)) < len(sample) * (1 - PROBE_GAIN):
        return [_compressor().compress(payload)]
    return _raw_frame(view)


def _raw_frame(payload: memoryview) -> list:
    """The pieces of one zstd frame of ``payload`` as raw blocks (RFC 8878: a single
    segment, its content size in 4 bytes; blocks of ``RAW_BLOCK``, each behind its
    3-byte header)."""
    size = len(payload)
    parts = [ZSTD_MAGIC, bytes((RAW_DESCRIPTOR,)), size.to_bytes(4, "little")]
    for start in range(0, size, RAW_BLOCK):
        block = payload[start:start + RAW_BLOCK]
        last = start + RAW_BLOCK >= size
        parts += ((len(block) << 3 | last).to_bytes(3, "little"), block)
    return parts


def raw_blocks(frame, size: int) -> list | None:
    """The blocks of ``frame``, as views of it, when it is exactly one zstd frame of
    ``size`` bytes in raw blocks (as ``_raw_frame`` writes one); else None (it is to be
    decompressed). What the blocks hold is for the caller to verify."""
    view = memoryview(frame)
    if len(view) < 9 or view[:4] != ZSTD_MAGIC or view[4] != RAW_DESCRIPTOR \
            or int.from_bytes(view[5:9], "little") != size:
        return None
    blocks, at, total = [], 9, 0
    while at + 3 <= len(view):
        head = int.from_bytes(view[at:at + 3], "little")
        n, at = head >> 3, at + 3
        if head & 6 or at + n > len(view):  # a compressed or RLE block, or one cut short
            return None
        blocks.append(view[at:at + n])
        at, total = at + n, total + n
        if head & 1:
            return blocks if at == len(view) and total == size else None
    return None


def _decompressor() -> zstandard.ZstdDecompressor:
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


def _dict(base: bytes) -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(base, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


#: Delta decompressors kept per thread, by their base (bases up to ``DELTA_DICT_MAX``
#: bytes): the deltas of one keyframe share it, and loading a base as a dictionary
#: costs more than decoding a small delta with it (an index page: ~45 us against ~1).
#: A checkpoint's trees each have their own bases: verify over 10,000 checkpoints of
#: six trees made 9,425 of them with 8 kept, 1,159 with 16.
DELTA_DICTS_KEPT = 16
DELTA_DICT_MAX = 256 << 10


def _delta_decompressor(base) -> zstandard.ZstdDecompressor:
    if type(base) is not bytes or len(base) > DELTA_DICT_MAX:
        return zstandard.ZstdDecompressor(dict_data=_dict(base))
    kept = getattr(_local, "deltas", None)
    if kept is None:
        kept = _local.deltas = {}
    dctx = kept.get(base)
    if dctx is None:
        if len(kept) >= DELTA_DICTS_KEPT:
            del kept[next(iter(kept))]   # the first kept
        dctx = kept[base] = zstandard.ZstdDecompressor(dict_data=_dict(base))
    return dctx


class BaseAt(NamedTuple):
    """How an index page or page map delta names its base: by position (``FLAG_BASE_AT``)."""

    pack: str       # the committed pack's id
    offset: int
    length: int


class BaseRef(NamedTuple):
    """How an index page delta named its base before ``BaseAt``: the base's JSON
    reference. Read-only form; tests still write it to check it is read."""

    ref: bytes


class Members(NamedTuple):
    """What a dbpage group delta names instead of a base: its pages (``FLAG_MEMBERS``)."""

    pgnos: bytes    # big-endian u32 page numbers


#: What a delta record stores beside its frame; None for a segment or chunk delta,
#: whose base its entry names.
BaseName = BaseAt | BaseRef | Members


def encode_record(kind: int, payload: bytes, *, base: bytes | None = None, names: BaseName | None = None,
                  level: int | None = None, marks: int = 0,
                  codec: Codec = PLAIN, digest: bytes | None = None, joined: bool = True) -> tuple[str, bytes | list]:
    """Return ``(blob id, record bytes)`` for ``payload``; the id is ``codec``'s (the
    record is not sealed here: ``PackWriter`` and the writers of single records seal it).
    ``joined=False``: the record as a list of its pieces (``PackWriter.add_record``
    writes them with one ``writev``: a raw frame's payload is never copied in memory).

    With ``base`` the frame is compressed against ``base`` as a raw-content dictionary
    and the record is flagged ``FLAG_DELTA``; the id stays ``sha256(payload)``. ``names``
    is what the delta stores beside its frame: an index page or page map delta MUST
    name its base (``BaseAt``, or an index page's read-only ``BaseRef``), a dbpage group
    delta its ``Members``, and no other record anything. ``level`` overrides the delta's
    compression level. ``marks``: flags that only tell readers what the payload holds
    (``FLAG_ENTRY_BASES``). ``digest``: the payload's id (``codec.digest``) when the caller has just
    computed it (to tell a chunk it already stored from a new one), so it is not hashed twice.
    """
    if marks & ~FLAG_ENTRY_BASES or (marks and kind != KIND_PAGE):
        raise ValueError(f"flags {marks:#06x} do not mark a {KIND_NAMES.get(kind, kind)} record")
    if len(payload) > RAW_LIMITS[kind]:
        raise RecordTooLarge(KIND_NAMES[kind], len(payload), RAW_LIMITS[kind])
    digest = codec.digest(payload) if digest is None else digest
    flags = 0
    if base is None:
        if names is not None:
            raise ValueError("only a delta names its base or members")
        pieces = _chunk_frame(payload) if kind == KIND_CHUNK else [_compressor().compress(payload)]
    else:
        if kind not in KIND_FLAGS:
            raise ValueError(f"a {KIND_NAMES.get(kind, kind)} record cannot be a delta")
        if not _names_fit(kind, names):
            raise ValueError("an index page or page map delta, and only one, names its base once; "
                             "only a dbpage group its members")
        level = level or (DELTA_LEVEL_SMALL_BASE if len(base) <= SMALL_BASE else DELTA_LEVEL)
        frame = zstandard.ZstdCompressor(level=level, dict_data=_dict(base)).compress(payload)
        flags, prefix = FLAG_DELTA, None
        if isinstance(names, BaseAt):
            flags, prefix = flags | FLAG_BASE_AT, BASE_AT.pack(bytes.fromhex(names.pack), names.offset, names.length)
        elif isinstance(names, BaseRef):
            prefix = names.ref
        elif isinstance(names, Members):
            flags, prefix = flags | FLAG_MEMBERS, names.pgnos
        if prefix is not None:
            frame = _BASE_LEN.pack(len(prefix)) + prefix + frame
        pieces = [frame]
    header = HEADER.pack(MAGIC, RECORD_VERSION, kind, flags | marks, len(payload), sum(map(len, pieces)), digest)
    record = [header, *pieces]
    return digest.hex(), b"".join(record) if joined else record


def _names_fit(kind: int, names: BaseName | None) -> bool:
    """Whether a ``kind`` delta may store ``names``."""
    if isinstance(names, BaseRef):
        return kind == KIND_PAGE
    if isinstance(names, BaseAt):
        return kind == KIND_PAGE or kind in BASE_AT_KINDS
    if isinstance(names, Members):
        return kind == KIND_DBPAGE
    return kind != KIND_PAGE and kind not in BASE_AT_KINDS


#: A delta is kept only when its frame is at most this share of the whole record's.
DELTA_MAX_SHARE = 0.5
ID = re.compile(r"[0-9a-f]{64}")


@functools.lru_cache(maxsize=1 << 14)
def is_id(name: str) -> bool:
    """True for a blob id or a committed pack's name (a SHA-256: 64 lowercase hex
    digits), which a base may be named by and a store key made of. The answers are
    kept (a cache hit is a quarter of the match): a history names the same packs, and
    each version of a growing transcript the same segments, again and again."""
    return ID.fullmatch(name) is not None


def delta_pays(delta: bytes, whole: bytes, named: int = _BASE_LEN.size + BASE_AT.size) -> bool:
    """Keep a delta (one that names its base by position) rather than the whole record:
    when it is smaller and its frame, which grows as the payload drifts from its base,
    is at most ``DELTA_MAX_SHARE`` of the whole record's frame. Frames, not records:
    the header and the base's position (``named`` bytes; 0 for a delta whose entry
    names its base) are a fixed ~100 bytes that would otherwise keep every small record
    whole. Failing this, the record is stored whole and becomes the base of later
    deltas (a keyframe)."""
    fixed = HEADER.size + named
    return len(delta) < len(whole) and len(delta) - fixed <= (len(whole) - HEADER.size) * DELTA_MAX_SHARE


class RecordHeader(NamedTuple):
    """What a record's header says, checked (``parse_header``)."""

    kind: int           # KIND_*
    flags: int          # FLAG_*, only those the kind allows
    raw_size: int       # the payload's size
    stored_size: int    # the frame's size after the header
    id: str             # the payload's id, hex


def parse_header(data: bytes, *, key: str) -> RecordHeader:
    """The header at the start of ``data``. Raises ``CorruptObject(key)`` when it is
    truncated, has a bad magic or version, an unknown kind or flags, or claims more
    bytes than its kind may hold."""
    if len(data) < HEADER.size:
        raise CorruptObject(key, f"record header truncated ({len(data)} bytes)")
    magic, version, kind, flags, raw_size, stored, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptObject(key, "bad magic")
    if version != RECORD_VERSION:
        raise CorruptObject(key, f"unsupported record version {version}")
    if kind not in KIND_NAMES:
        raise CorruptObject(key, f"unknown record kind {kind}")
    if flags & ~KIND_FLAGS.get(kind, 0) or (flags & DELTA_ONLY and not flags & FLAG_DELTA) \
            or (kind in BASE_AT_KINDS and flags & FLAG_DELTA and not flags & FLAG_BASE_AT):
        raise CorruptObject(key, f"unknown flags {flags:#06x}")
    if raw_size > RAW_LIMITS[kind]:
        raise CorruptObject(key, f"a {KIND_NAMES[kind]} record claims {raw_size:,} bytes, over the "
                                 f"{RAW_LIMITS[kind]:,} a {KIND_NAMES[kind]} may hold")
    return RecordHeader(kind, flags, raw_size, stored, digest.hex())


def decode_record(data: bytes, *, key: str, expect_id: str | None = None, expect_kind: int | None = None,
                  expect_size: int | None = None, base: bytes | None = None, codec: Codec = PLAIN,
                  pieces: bool = False) -> bytes | list:
    """Verify one record (opened, in an encrypted store) and return its payload; its id
    is checked as ``codec`` computes ids. ``pieces``: a frame of raw blocks comes back
    as the list of its blocks, views of ``data`` (hashed there, never copied).

    A delta record (``FLAG_DELTA``) is decoded against ``base``, the verified bytes of
    its base page; without one it is refused. ``base`` is ignored for other records.
    Raises ``CorruptObject(key)`` when the header, the length, the frame, the hash,
    the expected id, kind or payload size (the reference's ``size``) do not hold;
    every check but the hash's is made before anything is decompressed.
    """
    kind, flags, raw_size, stored, digest = parse_header(data, key=key)
    if len(data) != HEADER.size + stored:
        raise CorruptObject(key, f"record is {len(data)} bytes, header says {HEADER.size + stored}")
    if expect_kind is not None and kind != expect_kind:
        raise CorruptObject(key, f"expected a {KIND_NAMES[expect_kind]}, found a {KIND_NAMES[kind]}")
    if expect_id is not None and digest != expect_id:
        raise CorruptObject(key, "record holds blob {}, expected {}".format(*ids_apart(digest, expect_id)))
    if expect_size is not None and raw_size != expect_size:
        raise CorruptObject(key, f"record holds {raw_size:,} bytes, its reference says {expect_size:,}")
    if flags & FLAG_DELTA:
        if base is None:
            raise CorruptObject(key, f"a {KIND_NAMES[kind]} delta read without its base")
        dctx = _delta_decompressor(base)
    else:
        dctx = _decompressor()
    start = HEADER.size
    if _has_prefix(kind, flags):
        start += _BASE_LEN.size + _embedded_len(data, key)
    blocks = raw_blocks(memoryview(data)[start:], raw_size) if pieces and not flags & FLAG_DELTA else None
    if blocks is not None:
        hasher = codec.hasher()
        for block in blocks:
            hasher.update(block)
        if hasher.hexdigest() != digest:
            raise CorruptObject(key, "payload hash mismatch")
        return blocks
    try:
        # python-zstandard trusts a frame's own content size over max_output_size: a
        # damaged frame header must not make it allocate more than the record claims.
        declared = zstandard.frame_content_size(data[start:])
        if declared > raw_size:
            raise CorruptObject(key, f"zstd frame claims {declared} bytes, the record {raw_size}")
        payload = dctx.decompress(data[start:], max_output_size=raw_size)
    except zstandard.ZstdError as err:
        raise CorruptObject(key, f"zstd frame: {err}") from err
    if len(payload) != raw_size or codec.id(payload) != digest:
        raise CorruptObject(key, "payload hash mismatch")
    return payload


def _embedded_len(data, key: str) -> int:
    if len(data) < HEADER.size + _BASE_LEN.size:
        raise CorruptObject(key, "page delta truncated before its base reference")
    (n,) = _BASE_LEN.unpack_from(data, HEADER.size)
    if len(data) < HEADER.size + _BASE_LEN.size + n:
        raise CorruptObject(key, "page delta truncated in its base reference")
    return n


def _has_prefix(kind: int, flags: int) -> bool:
    return bool(flags & (FLAG_MEMBERS | FLAG_BASE_AT) or (flags & FLAG_DELTA and kind == KIND_PAGE))


def embedded_members(data, *, key: str) -> list[int] | None:
    """The page numbers a dbpage group delta stores (``FLAG_MEMBERS``), else None."""
    flags = parse_header(data, key=key).flags
    if not flags & FLAG_MEMBERS:
        return None
    start = HEADER.size + _BASE_LEN.size
    raw = bytes(data[start:start + _embedded_len(data, key)])
    if len(raw) % 4:
        raise CorruptObject(key, "page group member list is torn")
    return [n for (n,) in struct.iter_unpack(">I", raw)]


def embedded_base(data, *, key: str) -> bytes | tuple[str, int, int] | None:
    """Where a delta says its base is: ``(pack, offset, length)`` (``FLAG_BASE_AT``: an
    index page or a page map) or the encoded JSON reference (an index page delta
    without it, read only); None for any other record."""
    header = parse_header(data, key=key)
    flags = header.flags
    if not (flags & FLAG_BASE_AT or (flags & FLAG_DELTA and header.kind == KIND_PAGE)):
        return None
    start = HEADER.size + _BASE_LEN.size
    raw = bytes(data[start:start + _embedded_len(data, key)])
    if not flags & FLAG_BASE_AT:
        return raw
    if len(raw) != BASE_AT.size:
        raise CorruptObject(key, f"page delta names its base in {len(raw)} bytes, not {BASE_AT.size}")
    pack, offset, length = BASE_AT.unpack(raw)
    if not HEADER.size <= length <= MAX_RECORD or offset > MAX_OFFSET:
        raise CorruptObject(key, f"delta names a base of {length:,} bytes at offset {offset:,}")
    return pack.hex(), offset, length


def is_delta(data: bytes) -> bool:
    """True when a record's header (its first bytes) carries ``FLAG_DELTA``."""
    return len(data) >= HEADER.size and bool(HEADER.unpack_from(data)[3] & FLAG_DELTA)
