"""The record format: one self-describing, self-verifying, compressed blob.

A record is a 56-byte header followed by one zstd frame::

    magic "JRNL" | version u8 | kind u8 | flags u16 | raw_size u64 | stored_size u64 | sha256 32B

``sha256`` is the hash of the uncompressed payload and is the blob's id. Every
decode re-hashes the payload and raises ``CorruptObject`` naming the key on any
mismatch, so no unverified byte leaves this module.
"""

from __future__ import annotations

import hashlib
import struct

import zstandard

from .errors import CorruptObject

MAGIC = b"JRNL"
FORMAT_VERSION = 1
HEADER = struct.Struct(">4sBBHQQ32s")

KIND_CHUNK = 1      # a fixed-size piece of an ordinary file
KIND_SEGMENT = 2    # complete lines appended to a JSONL transcript
KIND_PAGE = 3       # a page of a tree index
KIND_MANIFEST = 4   # a checkpoint manifest
KIND_PAGEMAP = 5    # the page list of a SQLite snapshot (full, or a delta over a full one)
KIND_DBPAGE = 6     # one page of a SQLite snapshot
KIND_NAMES = {KIND_CHUNK: "chunk", KIND_SEGMENT: "segment", KIND_PAGE: "page", KIND_MANIFEST: "manifest",
              KIND_PAGEMAP: "pagemap", KIND_DBPAGE: "dbpage"}

#: The largest payload a record may claim; guards decompression against a bad header.
MAX_RAW = 1 << 31
COMPRESSION_LEVEL = 3


def blob_id(payload: bytes) -> str:
    """The id of a payload: its SHA-256, hex."""
    return hashlib.sha256(payload).hexdigest()


def encode_record(kind: int, payload: bytes) -> tuple[str, bytes]:
    """Return ``(blob id, record bytes)`` for ``payload``."""
    digest = hashlib.sha256(payload).digest()
    frame = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL).compress(payload)
    header = HEADER.pack(MAGIC, FORMAT_VERSION, kind, 0, len(payload), len(frame), digest)
    return digest.hex(), header + frame


def parse_header(data: bytes, *, key: str) -> tuple[int, int, int, str]:
    """Return ``(kind, raw_size, stored_size, id)`` from a record's first bytes."""
    if len(data) < HEADER.size:
        raise CorruptObject(key, f"record header truncated ({len(data)} bytes)")
    magic, version, kind, flags, raw_size, stored, digest = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptObject(key, "bad magic")
    if flags:
        raise CorruptObject(key, f"unknown flags {flags:#06x}")
    if version != FORMAT_VERSION:
        raise CorruptObject(key, f"unsupported record version {version}")
    if kind not in KIND_NAMES:
        raise CorruptObject(key, f"unknown record kind {kind}")
    if raw_size > MAX_RAW:
        raise CorruptObject(key, f"implausible payload size {raw_size}")
    return kind, raw_size, stored, digest.hex()


def decode_record(data: bytes, *, key: str, expect_id: str | None = None,
                  expect_kind: int | None = None) -> bytes:
    """Verify one record and return its payload.

    Raises ``CorruptObject(key)`` when the header, the length, the frame, the hash,
    the expected id or the expected kind do not hold.
    """
    kind, raw_size, stored, digest = parse_header(data, key=key)
    if len(data) != HEADER.size + stored:
        raise CorruptObject(key, f"record is {len(data)} bytes, header says {HEADER.size + stored}")
    if expect_kind is not None and kind != expect_kind:
        raise CorruptObject(key, f"expected a {KIND_NAMES[expect_kind]}, found a {KIND_NAMES[kind]}")
    if expect_id is not None and digest != expect_id:
        raise CorruptObject(key, f"record holds blob {digest[:12]}, expected {expect_id[:12]}")
    try:
        payload = zstandard.ZstdDecompressor().decompress(data[HEADER.size:], max_output_size=raw_size)
    except zstandard.ZstdError as err:
        raise CorruptObject(key, f"zstd frame: {err}") from err
    if len(payload) != raw_size or hashlib.sha256(payload).hexdigest() != digest:
        raise CorruptObject(key, "payload hash mismatch")
    return payload
