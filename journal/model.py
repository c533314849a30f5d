"""On-disk structures: blob references, tree entries, index pages, manifests.

All are ``msgspec.Struct(frozen=True)`` and are encoded as JSON with a fixed field
order, so equal values always encode to equal bytes (and so to equal blob ids).
New fields get defaults; a field's type never changes.
"""

from __future__ import annotations

import msgspec

MANIFEST_VERSION = 1
PAGE_VERSION = 1
STORE_VERSION = 1                   # the store config's version: a newer one is refused

KIND_FILE = "file"
KIND_JSONL = "jsonl"
KIND_SYMLINK = "symlink"
KIND_DIR = "dir"
KIND_SQLITE = "sqlite"


class BlobRef(msgspec.Struct, frozen=True, array_like=True):
    """Where one blob lives: ``[id, pack, offset, length, size]``.

    ``id`` is the SHA-256 of the uncompressed payload, ``pack`` the pack's hash,
    ``offset``/``length`` the record's byte range in the pack, ``size`` the payload size.
    """

    id: str
    pack: str
    offset: int
    length: int
    size: int


class Entry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One path of a tree and the blobs that rebuild it, in order."""

    path: str
    kind: str
    mode: int
    mtime_ns: int = 0
    size: int = 0
    refs: tuple[BlobRef, ...] = ()
    target: str | None = None
    #: Format 6: for a ``file``, each ref's base when the chunk is a delta (None: whole);
    #: empty when every chunk is whole (``file_delta.py``).
    bases: tuple[BlobRef | None, ...] = ()


class PageRef(msgspec.Struct, frozen=True, array_like=True):
    """A child page of an index page: its first path, its blob, and subtree totals."""

    first: str
    ref: BlobRef
    files: int
    bytes: int


class Page(msgspec.Struct, frozen=True, kw_only=True):
    """An index page. Level 0 holds entries sorted by path; higher levels hold children."""

    version: int = PAGE_VERSION
    level: int
    entries: tuple[Entry, ...] = ()
    children: tuple[PageRef, ...] = ()


class TreeRoot(msgspec.Struct, frozen=True, kw_only=True):
    """A tree in a manifest: its root page (``None`` when empty) and totals."""

    root: BlobRef | None
    files: int
    bytes: int


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint: the complete live set of every tree, published last."""

    version: int = MANIFEST_VERSION
    seq: int
    parent: int | None
    parent_id: str | None
    created: str
    created_ns: int
    host: str
    pid: int
    writer: str
    trees: dict[str, TreeRoot]
    packs: tuple[str, ...] = ()
    added_bytes: int = 0
    added_objects: int = 0
    #: Trees this checkpoint publishes as a restore left them when that was not the
    #: newest checkpoint's version (a fallback past a damaged one, ``restore --at``):
    #: tree name -> why. Absent (not encoded) otherwise.
    restored: dict[str, str] | msgspec.UnsetType = msgspec.UNSET


class StoreInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The ``config`` object at the root of every store."""

    format: str = "journal-store"
    version: int = STORE_VERSION
    store_id: str
    created: str


_encoder = msgspec.json.Encoder(order="deterministic")


def encode(value: msgspec.Struct) -> bytes:
    """Deterministic JSON encoding of an on-disk structure."""
    return _encoder.encode(value)


def decode(data: bytes, cls: type):
    """Decode and validate one on-disk structure; raises ``msgspec.DecodeError``."""
    return msgspec.json.decode(data, type=cls)
