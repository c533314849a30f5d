"""On-disk structures: blob references, tree entries, index pages, manifests.

All are ``msgspec.Struct(frozen=True)`` and are encoded as JSON with a fixed field
order, so equal values always encode to equal bytes (and so to equal blob ids).
New fields get defaults; a field's type never changes. The structures a tree holds by
the thousand (references, entries, pages) are not tracked by the cyclic garbage
collector (``gc=False``): they hold only strings, numbers and tuples of one another, so
they can form no cycle, and a 20,000-entry tree no longer makes every collection
traverse it.

Decoding checks every field's range (a size is never negative, an offset never past
``MAX_OFFSET``, a kind is one of five, a page holds at most ``MAX_ITEMS`` items);
what one field cannot say alone (an id is 64 hex digits, an entry's size is what its
blobs add up to) is checked by ``ref_problem`` and ``entry_problem``, which readers of
the store call (``index.decode_page``, ``Repository.load_manifest``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .objects import HEADER, MAX_OFFSET, MAX_RAW, MAX_RECORD, is_id

#: The store format this code writes (docs/design.md §18): which record kinds, flags
#: and structure versions a writer may produce. It reads every format from 1 on. No
#: stored field holds it: each structure keeps its own version (the record header,
#: manifests, pages, tombstones and a plain store's config 1, page maps 3, the local
#: state and an encrypted store's config 2), and a new format adds only what an older
#: reader refuses, never what it would misread.
FORMAT = 12
MANIFEST_VERSION = 1
#: A fork's manifest (``Manifest.fork`` set) is version 2, so a reader that predates
#: forks refuses it (skips it as unreadable) instead of taking it for the newest checkpoint.
FORK_MANIFEST_VERSION = 2
PAGE_VERSION = 1
PLAIN_STORE_VERSION = 1             # the config's version of a plain store
ENCRYPTED_STORE_VERSION = 2         # ... of an encrypted store (design §22), which earlier readers refuse
STORE_VERSION = ENCRYPTED_STORE_VERSION  # the newest config version read: a newer one is refused
STORE_FORMAT = "journal-store"      # the store config's ``format``: what kind of store, not a version

KIND_FILE = "file"
KIND_JSONL = "jsonl"
KIND_SYMLINK = "symlink"
KIND_DIR = "dir"
KIND_SQLITE = "sqlite"
#: A snapshot entry names a full page map and at most two delta maps (``format/pagemap.py``).
MAX_MAPS = 3
#: Items (entries or children) per index page at most, whatever the boundary hashes say.
MAX_ITEMS = 1024

Count = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]     # sizes, totals, sequence numbers
Nanos = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
Id = Annotated[str, msgspec.Meta(min_length=64, max_length=64)]   # hex digits: ``objects.is_id``
PackName = Annotated[str, msgspec.Meta(max_length=64)]            # an id, or "" (same pack)
#: One line of text from the store that messages may quote (a host, a time).
Text = Annotated[str, msgspec.Meta(max_length=256, pattern=r"^[^\x00-\x1f\x7f]*$")]


class BlobRef(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Where one blob lives: ``[id, pack, offset, length, size]``.

    ``id`` is the SHA-256 of the uncompressed payload, ``pack`` the pack's hash,
    ``offset``/``length`` the record's byte range in the pack, ``size`` the payload size.
    """

    id: Id
    pack: PackName
    offset: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)]
    length: Annotated[int, msgspec.Meta(ge=HEADER.size, le=MAX_RECORD)]
    size: Annotated[int, msgspec.Meta(ge=0, le=MAX_RAW)]


#: A writer names the pack of a blob whose pack is not closed yet (its name, the hash of
#: its bytes, is not known) with this prefix and a placeholder (``repository/pack.py``);
#: no stored reference has it (``ref_problem``).
PENDING_PACK = "@"


def is_pending(pack: str) -> bool:
    """True for the placeholder pack name of a blob whose pack is not closed yet."""
    return pack.startswith(PENDING_PACK)


class Entry(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """One path of a tree and the blobs that rebuild it, in order."""

    path: str
    kind: Literal["file", "jsonl", "symlink", "dir", "sqlite"]
    mode: Annotated[int, msgspec.Meta(ge=0, le=0o7777)]
    mtime_ns: Nanos = 0
    size: Count = 0
    refs: tuple[BlobRef, ...] = ()
    target: str | None = None
    #: For a ``file``, each ref's base when the chunk is a delta (None: whole); empty
    #: (not encoded) when every chunk is whole (``checkpoint/file_delta.py``).
    bases: tuple[BlobRef | None, ...] = ()


class PageRef(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A child page of an index page: its first path, its blob, and subtree totals."""

    first: str
    ref: BlobRef
    files: Count
    bytes: Count


class Page(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An index page. Level 0 holds entries sorted by path; higher levels hold children."""

    version: Literal[1] = PAGE_VERSION
    level: Annotated[int, msgspec.Meta(ge=0)]
    entries: Annotated[tuple[Entry, ...], msgspec.Meta(max_length=MAX_ITEMS)] = ()
    children: Annotated[tuple[PageRef, ...], msgspec.Meta(max_length=MAX_ITEMS)] = ()


class TreeRoot(msgspec.Struct, frozen=True, kw_only=True):
    """A tree in a manifest: its root page (``None`` when empty) and totals."""

    root: BlobRef | None
    files: Count
    bytes: Count


class Fork(msgspec.Struct, frozen=True, kw_only=True):
    """What makes a manifest a *fork*: local work of a disk whose history the store had
    moved past (design §11, "Lineage"), kept as a checkpoint of its own beside the main
    line. ``onto`` is the checkpoint the live trees were made into right after (the
    newest one, or the one a rollback chose); ``why`` says which case it was."""

    onto: Count
    why: Text


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint: the complete live set of every tree, published last. A manifest
    with ``fork`` set is a fork (version 2): it is not on the main line, so neither a
    writer nor a plain restore builds on it."""

    version: Literal[1, 2] = MANIFEST_VERSION
    seq: Count
    parent: Count | None
    parent_id: Id | None
    created: Text
    created_ns: Nanos
    host: Text
    pid: Count
    writer: Text
    trees: dict[Text, TreeRoot]              # names: restore checks them (config.TREE_NAME)
    packs: tuple[Id, ...] = ()
    added_bytes: Count = 0
    added_objects: Count = 0
    #: Trees this checkpoint publishes as a restore left them when that was not the
    #: newest checkpoint's version (a fallback past a damaged one, ``restore --at``):
    #: tree name -> why. Absent (not encoded) otherwise.
    restored: dict[Text, str] | msgspec.UnsetType = msgspec.UNSET
    #: Set on a fork only (then ``version`` is 2; design §9).
    fork: Fork | msgspec.UnsetType = msgspec.UNSET

    @property
    def is_fork(self) -> bool:
        return self.fork is not msgspec.UNSET


class StoreInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The ``config`` object at the root of every store. ``encryption`` names an
    encrypted store's cipher (``aes-256-gcm``, version 2); a plain store's config has
    no such member (version 1), byte for byte as before encryption existed."""

    format: str = STORE_FORMAT
    version: int = PLAIN_STORE_VERSION
    store_id: str
    created: str
    encryption: str | msgspec.UnsetType = msgspec.UNSET


_encoder = msgspec.json.Encoder(order="deterministic")


def encode(value: msgspec.Struct) -> bytes:
    """Deterministic JSON encoding of an on-disk structure."""
    return _encoder.encode(value)


def decode(data: bytes, cls: type):
    """Decode and validate one on-disk structure; raises ``msgspec.DecodeError``."""
    return msgspec.json.decode(data, type=cls)


def ref_problem(ref: BlobRef, same_pack: bool = False) -> str | None:
    """What is wrong with a reference read from the store, or None: its id and its pack
    are 64 hex digits; only a child page's reference may leave the pack empty ("the pack
    this page was read from")."""
    if not is_id(ref.id):
        return f"names blob {ref.id!r}, which is not a blob id"
    if not is_id(ref.pack) and (ref.pack or not same_pack):
        return f"names pack {ref.pack!r}, which is not a pack name"
    return None


def entry_problem(entry: Entry) -> str | None:
    """What is wrong with an entry read from the store, or None. The decoder checks each
    field alone; this checks what they say together: every reference is sound; a file's
    or transcript's size is what its blobs add up to; only a file names chunk bases, one
    per blob; a symlink has a target and names no blobs, as a directory names none; a
    snapshot names 1 to ``MAX_MAPS`` page maps."""
    kind, refs = entry.kind, entry.refs
    for ref in refs:
        problem = ref_problem(ref)
        if problem:
            return problem
    if entry.bases:
        if kind != KIND_FILE or len(entry.bases) != len(refs):
            return f"names {len(entry.bases)} chunk bases for {len(refs)} {kind} blobs"
        for base in entry.bases:
            problem = base and ref_problem(base)
            if problem:
                return f"chunk base {problem}"
    if (entry.target is not None) != (kind == KIND_SYMLINK):
        return "a symlink needs a target, and only a symlink has one"
    if kind in (KIND_FILE, KIND_JSONL):
        total = sum(ref.size for ref in refs)
        if total != entry.size:
            return f"says {entry.size:,} bytes, its blobs hold {total:,}"
    elif kind == KIND_SQLITE:
        if not 1 <= len(refs) <= MAX_MAPS:
            return f"a snapshot names {len(refs)} page maps (1 to {MAX_MAPS})"
    elif refs:
        return f"a {kind} names {len(refs)} blobs"
    elif kind == KIND_SYMLINK and (not entry.target or "\0" in entry.target):
        return f"symlink target {entry.target!r} is empty or holds a NUL"
    return None


def manifest_problem(manifest: Manifest) -> str | None:
    """What is wrong with a manifest read from the store, or None: every pack it names,
    its parent's id and every tree's root reference are sound; a fork, and only a fork,
    is version 2."""
    if manifest.is_fork != (manifest.version == FORK_MANIFEST_VERSION):
        return f"is version {manifest.version} {'with' if manifest.is_fork else 'without'} a fork"
    if manifest.parent_id is not None and not is_id(manifest.parent_id):
        return f"names parent {manifest.parent_id!r}, which is not a manifest id"
    for pack in manifest.packs:
        if not is_id(pack):
            return f"names pack {pack!r}, which is not a pack name"
    for name, tree in manifest.trees.items():
        problem = tree.root is not None and ref_problem(tree.root)
        if problem:
            return f"tree {name!r}: root page {problem}"
    return None
