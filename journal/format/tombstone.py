"""The tombstone record: what a gc mark names for a later sweep to delete.

``tombstones/<ns>-<id>`` is an immutable JSON object (design §16): when it was made,
by which host, the ``mark_seq`` its orphan rule is judged against, and its items,
each ``[key, kind, bytes]``. gc writes one every ``TOMBSTONE_ITEMS`` items and reads
them one at a time, each item left encoded until it is used. In an encrypted store
the JSON is sealed (``format/codec.py``, role ``TOMBSTONE``): it names a host.
"""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from .codec import PLAIN, TOMBSTONE, Codec
from .model import Count, Nanos, Text

TOMBSTONE_PREFIX = "tombstones/"
#: Items per tombstone: the mark writes one every this many, the sweep holds one at a time.
TOMBSTONE_ITEMS = 3000


class ItemKind(enum.StrEnum):
    """What a tombstone item names (stored as its value)."""

    MANIFEST = "manifest"   # an expired manifest
    FORGOTTEN = "forgotten"  # a manifest ``journal forget`` named: no policy keeps it again
    PACK = "pack"           # a pack some manifest uploaded that no kept manifest reaches
    ORPHAN = "orphan"       # a pack no manifest named when it was marked (a crashed or running upload's)
    INPUT = "input"         # a key under inputs/ the input retention lets go (``gc/inputs.py``)


#: The kinds that name a manifest.
MANIFEST_KINDS = frozenset({ItemKind.MANIFEST, ItemKind.FORGOTTEN})


class TombstoneItem(msgspec.Struct, frozen=True, array_like=True):
    key: str        # a manifest's key, a pack's, or one under inputs/ (gc checks which: ``gc._items``)
    kind: ItemKind
    bytes: Count


class Tombstone(msgspec.Struct, frozen=True, kw_only=True):
    version: Literal[1] = 1
    created: Text
    created_ns: Nanos
    host: Text
    mark_seq: Count
    items: list[TombstoneItem]


class LazyTombstone(msgspec.Struct, frozen=True, kw_only=True):
    """A tombstone as gc reads it: each item stays encoded (~150 bytes with its share of
    the record, against ~360 decoded) until it is used."""

    version: Literal[1] = 1
    created: Text
    created_ns: Nanos
    host: Text
    mark_seq: Count
    items: list[msgspec.Raw]


_ENCODER = msgspec.json.Encoder()
_decode_item = msgspec.json.Decoder(TombstoneItem).decode
_decode_lazy = msgspec.json.Decoder(LazyTombstone).decode


def read_tombstone(raw: bytes, key: str, codec: Codec = PLAIN) -> LazyTombstone:
    """A tombstone read from the store (opened by ``codec`` in an encrypted store), its
    items still encoded; ``CorruptObject(key)`` when the bytes are not one (torn,
    foreign, a field out of range, failing their tag)."""
    try:
        return _decode_lazy(codec.open(raw, TOMBSTONE, key))
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"tombstone does not decode: {err}") from None


def read_item(raw: bytes, key: str) -> TombstoneItem:
    """One item of the tombstone ``key``, decoded; ``CorruptObject(key)`` when it is not
    one. (Whether its key has the shape its kind needs is gc's to judge.)"""
    try:
        return _decode_item(raw)
    except msgspec.DecodeError as err:
        raise CorruptObject(key, f"unreadable item: {err}") from None


class Chunk:
    """The items of the next tombstone, held encoded (a JSON list's elements)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.count = 0

    def add(self, item: TombstoneItem) -> None:
        self.add_raw(_ENCODER.encode(item))  # (encode_into would over-allocate by half)

    def add_raw(self, raw: bytes | msgspec.Raw) -> None:
        """Add one item as encoded (an item of a tombstone read back is kept as it was)."""
        if self.count:
            self.buf += b","
        self.buf += raw
        self.count += 1

    def record(self, header: Tombstone) -> bytes:
        """The tombstone ``header`` (its ``items`` empty) naming every item added; then empty."""
        head = _ENCODER.encode(header)
        if header.items or not head.endswith(b'"items":[]}'):  # items is the last field
            raise AssertionError("gc: unexpected tombstone encoding")
        data = b"".join((head[:-2], self.buf, b"]}"))
        self.buf, self.count = bytearray(), 0
        return data


def tombstoned_packs(store, codec: Codec = PLAIN) -> set[str]:
    """The ids of the packs every readable tombstone names: garbage gc already knows
    about (an unreadable tombstone or item is skipped here; gc reports it)."""
    return {item.key.rsplit("/", 1)[-1] for _, item in _named(store, codec)
            if item.kind in (ItemKind.PACK, ItemKind.ORPHAN)}


def tombstoned_manifests(store, codec: Codec = PLAIN) -> dict[str, str]:
    """The manifest keys readable tombstones name (an expired or forgotten checkpoint,
    deleted by a later gc after its grace period), each with its tombstone's time."""
    return {item.key: stone.created for stone, item in _named(store, codec) if item.kind in MANIFEST_KINDS}


def _named(store, codec: Codec):
    """``(tombstone, item)`` for every readable item of every readable tombstone."""
    for key in store.list(TOMBSTONE_PREFIX):
        try:
            stone = read_tombstone(store.get(key), key, codec)
        except (ObjectNotFound, CorruptObject):
            continue
        for raw in stone.items:
            try:
                yield stone, read_item(raw, key)
            except CorruptObject:
                continue
