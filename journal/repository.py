"""The repository: meaning on top of the store (config, packs, blobs, manifests).

Layout (see docs/design.md)::

    config                       StoreInfo, JSON
    packs/<hh>/<sha256>          concatenated records
    manifests/<seq, 12 digits>   one manifest record each
"""

from __future__ import annotations

import datetime as _dt
import uuid
from collections.abc import Iterator

import msgspec

from .errors import CorruptObject, KeyExists, NoStore, NotAStore, ObjectNotFound, StoreError
from .model import STORE_VERSION, BlobRef, Manifest, StoreInfo, decode, encode
from .objects import KIND_MANIFEST, KIND_PAGE, blob_id, decode_record, embedded_base, encode_record, parse_header
from .pack import pack_key
from .store.base import Store

CONFIG_KEY = "config"
MANIFEST_PREFIX = "manifests/"
PACK_PREFIX = "packs/"
SEQ_WIDTH = 12


def manifest_key(seq: int) -> str:
    """The store key of manifest ``seq`` (fixed width: no key is a prefix of another)."""
    return f"{MANIFEST_PREFIX}{seq:0{SEQ_WIDTH}d}"


def blob_location(ref: BlobRef) -> str:
    """A readable name for one blob, used in errors and findings."""
    return f"{pack_key(ref.pack)}@{ref.offset}"


def _not_a_store(store: Store, problem: str) -> StoreError:
    """A location without a valid config: a damaged journal store when it holds
    manifests (name the config object), else something that is not a journal store."""
    if next(iter(store.list(MANIFEST_PREFIX)), None) is None:
        return NotAStore(store.location)
    return StoreError(f"open store: {store.location}/{CONFIG_KEY} {problem}, yet the store holds checkpoints; "
                      "the store's config object is damaged: copy it back from a backup of the store "
                      "(nothing was changed)")


class Repository:
    """A journal store opened for reading and writing."""

    def __init__(self, store: Store, info: StoreInfo):
        self.store = store
        self.info = info

    @classmethod
    def open(cls, store: Store, *, create: bool = False) -> "Repository":
        """Open the store; with ``create``, initialise an absent or empty one.

        Raises ``NotAStore`` for a non-empty location without a journal config, and
        ``NoStore`` for an absent or empty one when ``create`` is false.
        """
        try:
            raw = store.get(CONFIG_KEY)
        except ObjectNotFound:
            if not store.is_empty():
                raise _not_a_store(store, "is missing") from None
            if not create:
                raise NoStore(store.location) from None
            return cls._init(store)
        try:
            info = decode(raw, StoreInfo)
        except msgspec.DecodeError as err:
            raise _not_a_store(store, f"is unreadable ({err})") from err
        if info.format != "journal-store":
            raise _not_a_store(store, f"names format {info.format!r}")
        if info.version > STORE_VERSION:
            raise StoreError(f"open store: {store.location}/{CONFIG_KEY} says store version {info.version}; "
                             f"this journal reads version {STORE_VERSION}: upgrade journal to use this store")
        return cls(store, info)

    @classmethod
    def _init(cls, store: Store) -> "Repository":
        store.check_creatable()
        info = StoreInfo(store_id=uuid.uuid4().hex, created=utc_now())
        try:
            store.put_if_absent(CONFIG_KEY, encode(info))
        except KeyExists:
            return cls.open(store)  # another process initialised it first
        return cls(store, info)

    @property
    def store_id(self) -> str:
        return self.info.store_id

    def read_blob(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """Read one blob by reference and verify it; raises CorruptObject/ObjectNotFound.
        A delta whose record names its base (an index page, a page map) is decoded
        against that base, read and verified too."""
        return self.read_based(ref, kind)[0]

    def read_record(self, ref: BlobRef):
        """One blob's record as stored (length checked, not yet verified)."""
        return self.read_records([ref])[0]

    def read_records(self, refs: list[BlobRef]) -> list:
        """Back-to-back records of one pack, as stored, with one ranged read (lengths
        checked, not yet verified); each a view of the one buffer, not a copy."""
        start, end = refs[0].offset, refs[-1].offset + refs[-1].length
        key = pack_key(refs[0].pack)
        data = self.store.get(key, start, end)
        if len(data) != end - start:
            if self.store.head(key) is None:
                raise ObjectNotFound(key)
            raise CorruptObject(blob_location(refs[0]), f"pack too short: got {len(data)} of {end - start} bytes")
        view = memoryview(data)
        return [view[r.offset - start:r.offset - start + r.length] for r in refs]

    def read_page(self, ref: BlobRef) -> tuple[bytes, BlobRef | None]:
        """Read one index page, verified; ``(payload, base)`` (see ``read_based``)."""
        return self.read_based(ref, KIND_PAGE)

    def read_based(self, ref: BlobRef, kind: int | None = None) -> tuple[bytes, BlobRef | None]:
        """Read one blob, verified; ``(payload, base)``: the base reference of a delta
        whose record names its base (an index page, format 3; a page map, format 6),
        read and verified too, else None. A base is always a whole record of the same
        kind: a delta over a delta is refused as corrupt."""
        where = blob_location(ref)
        data = self.read_record(ref)
        named = embedded_base(data, key=where)
        if named is None:
            return decode_record(data, key=where, expect_id=ref.id, expect_kind=kind), None
        own_kind = parse_header(data, key=where)[0]
        if isinstance(named, tuple):
            base_ref = BlobRef("", *named, 0)
        else:
            try:
                base_ref = decode(named, BlobRef)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                raise CorruptObject(where, f"bad base reference: {err}") from None
        base, base_ref = self._read_base(base_ref, own_kind)
        return decode_record(data, key=where, expect_id=ref.id, expect_kind=kind, base=base), base_ref

    def read_whole(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """One blob that must be stored whole (a delta's base), verified; a delta is
        refused as corrupt, so nothing is ever made a delta of a delta."""
        return self._read_base(ref, kind)[0]

    def _read_base(self, ref: BlobRef, kind: int | None) -> tuple[bytes, BlobRef]:
        """A delta's base: the whole record of ``kind`` at ``ref``, verified against its
        own header and against ``ref.id`` when the delta named one (format 6 names a
        base by position only; its id and size come from its header)."""
        where = blob_location(ref)
        data = self.read_record(ref)
        _kind, _raw, _stored, digest = parse_header(data, key=where)
        payload = decode_record(data, key=where, expect_id=ref.id or None, expect_kind=kind)
        return payload, BlobRef(digest, ref.pack, ref.offset, ref.length, len(payload))

    @property
    def read_ahead(self) -> bool:
        """Whether readers should fetch ahead in other threads (``Store.read_ahead``)."""
        return self.store.read_ahead

    def read_run(self, refs: list[BlobRef]) -> list[bytes]:
        """Read back-to-back blobs of one pack with one ranged read; each is verified."""
        try:
            records = self.read_records(refs)
        except CorruptObject:
            if len(refs) == 1:
                raise
            return [self.read_blob(ref) for ref in refs]  # short: let each blob say what is wrong
        return [decode_record(data, key=blob_location(r), expect_id=r.id) for r, data in zip(refs, records)]

    def manifest_seqs(self) -> list[int]:
        """Every manifest sequence present in the store, ascending (listing only)."""
        seqs = []
        for key in self.store.list(MANIFEST_PREFIX):
            name = key[len(MANIFEST_PREFIX):]
            if name.isdigit() and len(name) == SEQ_WIDTH:
                seqs.append(int(name))
        return sorted(seqs)

    def load_manifest(self, seq: int) -> tuple[Manifest, str]:
        """Read and verify manifest ``seq``; returns it with its id (payload hash)."""
        key = manifest_key(seq)
        payload = decode_record(self.store.get(key), key=key, expect_kind=KIND_MANIFEST)
        try:
            manifest = decode(payload, Manifest)
        except msgspec.DecodeError as err:
            raise CorruptObject(key, f"manifest does not decode: {err}") from err
        if manifest.seq != seq:
            raise CorruptObject(key, f"manifest says seq {manifest.seq}")
        return manifest, blob_id(payload)

    def iter_manifests_desc(self, seqs: list[int] | None = None) -> Iterator[tuple[int, Manifest | None, str | Exception]]:
        """Yield ``(seq, manifest, id)`` newest first; a bad one yields ``(seq, None, error)``."""
        for seq in reversed(self.manifest_seqs() if seqs is None else seqs):
            try:
                manifest, mid = self.load_manifest(seq)
            except (CorruptObject, ObjectNotFound) as err:
                yield seq, None, err
                continue
            yield seq, manifest, mid

    def pack_sizes(self) -> dict[str, int]:
        """Every pack id in the store and its size in bytes (one listing)."""
        return {key.rsplit("/", 1)[-1]: size for key, size in self.store.list_sizes(PACK_PREFIX)}

    def put_manifest(self, record: bytes, seq: int) -> None:
        """Publish a manifest record put-if-absent; raises KeyExists when taken."""
        self.store.put_if_absent(manifest_key(seq), record)


def encode_manifest(manifest: Manifest) -> tuple[str, bytes]:
    """Return ``(manifest id, record bytes)``."""
    return encode_record(KIND_MANIFEST, encode(manifest))


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
