"""The repository: meaning on top of the store (config, packs, blobs, manifests).

Layout (see docs/design.md)::

    config                       StoreInfo, JSON
    packs/<hh>/<sha256>          concatenated records
    manifests/<seq, 12 digits>   one manifest record each
    leases/gc                    the lease of the one gc running (``gc/lease.py``)
    leases/renewing              there while that gc renews its lease (delete, then put)
    keys/<32 hex>                an encrypted store's key objects (``journal/crypto/keys.py``)
    keys/set-<seq, 12 digits>    ... its key sets: which key objects are its keys (``crypto/keyset.py``)

Every record read or written goes through the store's codec (``repo.codec``,
``format/codec.py``): the identity and SHA-256 ids in a plain store; sealed objects and
keyed ids in an encrypted one, unlocked once when the store is opened.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import re
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import NamedTuple

import msgspec

from ..config import KeySource
from ..errors import ConfigError, CorruptObject, KeyExists, ObjectNotFound, StoreError
from .errors import DamagedConfig, NoStore, NotAStore, NotEncrypted
from ..format.codec import KEYS_PREFIX, PLAIN, RECORD, Codec
from ..format.model import (ENCRYPTED_STORE_VERSION, PLAIN_STORE_VERSION, STORE_FORMAT, STORE_VERSION, BlobRef,
                            Manifest, StoreInfo, decode, encode, manifest_problem, ref_problem)
from ..format.objects import (KIND_MANIFEST, KIND_PAGE, blob_id, decode_record, embedded_base, encode_record, is_id,
                      parse_header)
from ..store.base import Staged, Store

CONFIG_KEY = "config"
MANIFEST_PREFIX = "manifests/"
PACK_PREFIX = "packs/"
SEQ_WIDTH = 12
#: The gc lease: held by a gc from before it plans until after its last delete
#: (``gc/lease.py``); a checkpoint looks at it to know whether a sweep may be running.
LEASE_KEY = "leases/gc"
#: Put by the gc holding the lease before it deletes the lease to renew it, and deleted
#: after the new lease is put: a gc always holds one of the two keys (not a prefix of
#: each other: a prefix would show as a directory on hf-mount).
RENEWING_KEY = "leases/renewing"
LEASE_SECONDS = 15 * 60

_PACK_KEY = re.compile(r"packs/([0-9a-f]{2})/(\1[0-9a-f]{62})")


def manifest_key(seq: int) -> str:
    """The store key of manifest ``seq`` (fixed width: no key is a prefix of another)."""
    return f"{MANIFEST_PREFIX}{seq:0{SEQ_WIDTH}d}"


def pack_key(pack: str) -> str:
    """The store key of a pack id."""
    return f"{PACK_PREFIX}{pack[:2]}/{pack}"


def pack_of(key: str) -> str | None:
    """The pack id a well-formed pack key names (``packs/<hh>/<64 hex>``), else None."""
    match = _PACK_KEY.fullmatch(key)
    return match.group(2) if match else None


def blob_location(ref: BlobRef) -> str:
    """A readable name for one blob, used in errors and findings."""
    return f"{pack_key(ref.pack)}@{ref.offset}"


#: A sealed config ends ``,"checksum":"<64 hex>"}``: the SHA-256 of the config's bytes
#: without that member (exactly the bytes of an unsealed config with the same members).
CHECKSUM_MEMBER = b',"checksum":"'
_STORE_ID = re.compile(r"[0-9a-f]{32}")
_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


#: The one cipher an encrypted store's config may name (``journal/crypto/keyring.py``).
CIPHER = "aes-256-gcm"


class _UnsealedConfig(msgspec.Struct, forbid_unknown_fields=True):
    """A config without a checksum (read only: stores created by formats 1-6 keep theirs,
    as no object is rewritten): exactly these members, so a changed byte in a member's
    name or in the JSON's structure is still noticed."""

    format: str
    version: int
    store_id: str
    created: str


def seal_config(info: StoreInfo) -> bytes:
    """The bytes of a new store's config: StoreInfo's JSON with its checksum last."""
    body = encode(info)
    return body[:-1] + CHECKSUM_MEMBER + hashlib.sha256(body).hexdigest().encode() + b'"}'


def read_config(raw: bytes) -> StoreInfo:
    """Decode a config object strictly; ``ValueError`` (its problem) when it fails a check.

    A sealed config must match its checksum (any changed byte fails it; members a newer
    writer added are covered by it). An unsealed one (``_UnsealedConfig``) must hold exactly the
    four members, well formed: a changed byte that keeps it well formed goes unnoticed."""
    at = raw.rfind(CHECKSUM_MEMBER)
    try:
        if at >= 0:
            body, digest = raw[:at] + b"}", raw[at + len(CHECKSUM_MEMBER):]
            if digest[64:] != b'"}' or hashlib.sha256(body).hexdigest().encode() != digest[:64]:
                raise ValueError("fails its checksum (a byte of it changed after it was written)")
            info = decode(body, StoreInfo)
        else:
            old = decode(raw, _UnsealedConfig)
            info = StoreInfo(format=old.format, version=old.version, store_id=old.store_id, created=old.created)
    except msgspec.DecodeError as err:
        raise ValueError(f"is unreadable ({err})") from err
    if info.format != STORE_FORMAT:
        raise ValueError(f"names format {info.format!r}")
    if not _STORE_ID.fullmatch(info.store_id) or not _CREATED.fullmatch(info.created):
        raise ValueError(f"holds a malformed store id or time ({info.store_id!r}, {info.created!r})")
    if info.version <= STORE_VERSION and (info.version >= ENCRYPTED_STORE_VERSION) != (info.encryption is not msgspec.UNSET):
        raise ValueError(f"says version {info.version} with encryption {info.encryption!r}: an encrypted store is "
                         f"version {ENCRYPTED_STORE_VERSION}, a plain one version {PLAIN_STORE_VERSION}")
    if info.encryption not in (msgspec.UNSET, CIPHER):
        raise ValueError(f"names cipher {info.encryption!r}; this journal knows only {CIPHER}")
    return info


def _fresh(store: Store) -> bool:
    """Empty, or holding only key objects: an encrypted store's creation that stopped
    before its config, whose keys name a store id no config ever will."""
    if store.is_empty():
        return True
    keys = list(store.list())  # nothing listed of a location that is not empty: not a store (a file)
    return bool(keys) and all(key.startswith(KEYS_PREFIX) for key in keys)


def _holds_data(store: Store) -> bool:
    from ..format.inputs import INPUT_PREFIX  # here: the input journal's records are not every command's

    return any(next(iter(store.list(prefix)), None) is not None
               for prefix in (MANIFEST_PREFIX, PACK_PREFIX, INPUT_PREFIX))


def _not_a_store(store: Store, problem: str) -> StoreError:
    """A location without a valid config: a damaged journal store when it holds
    manifests, packs or inputs (name the config object), else something that is not a journal store."""
    if not _holds_data(store):
        return NotAStore(store.location)
    return DamagedConfig(store.location, f"{problem}, yet the store holds checkpoints, packs or inputs")


class ManifestRead(NamedTuple):
    """One manifest as ``Repository.iter_manifests_desc`` reads it: loaded, or why not."""

    seq: int
    manifest: Manifest | None               # None: it failed its checks or is gone (``error``)
    outcome: str | CorruptObject | ObjectNotFound   # the manifest's id; else the error

    @property
    def id(self) -> str | None:
        """The manifest's id; None when it could not be read."""
        return None if self.manifest is None else self.outcome

    @property
    def error(self) -> CorruptObject | ObjectNotFound | None:
        """Why the manifest could not be read; None when it was."""
        return self.outcome if self.manifest is None else None


class Repository:
    """A journal store opened for reading and writing."""

    def __init__(self, store: Store, info: StoreInfo | None, config_problem: str | None = None,
                 codec: Codec = PLAIN, key_id: str | None = None):
        self.store = store
        self.info = info                      # None only when opened for an audit of a damaged config
        self.config_problem = config_problem  # what is wrong with the config (an audit only)
        self.codec = codec                    # PLAIN, or the keyring of an encrypted store
        self.key_id = key_id                  # the key object that unlocked an encrypted store

    @classmethod
    def open(cls, store: Store, *, create: bool = False, audit: bool = False, key: KeySource | None = None,
             encrypt: bool = False) -> "Repository":
        """Open the store; with ``create``, initialise an absent or empty one, encrypted
        when a ``key`` is set (design §22). An encrypted store is unlocked with ``key``.

        Raises ``NotAStore`` for a non-empty location without a journal config,
        ``DamagedConfig`` for a store whose config is missing or fails its checks while
        it holds data, and ``NoStore`` for an absent or empty one when ``create`` is
        false. With ``audit`` (verify), a damaged config is recorded in
        ``config_problem`` instead, so the rest of the store can still be audited. An
        encrypted store without ``key`` is ``NoKey``, with the wrong one ``WrongKey``; a
        plain store with a ``key`` is ``NotEncrypted`` (its objects are in the clear), and
        with ``encrypt`` (``journal init --encrypt``) a ``ConfigError``.
        """
        if encrypt and key is None:
            raise ConfigError("create encrypted store: no key is set; set JOURNAL_KEY_FILE or JOURNAL_PASSPHRASE, or "
                              "name a key file (`journal init --encrypt --key-file PATH` creates it if absent)")
        try:
            info = cls._read_info(store, create, key)
        except DamagedConfig as err:
            if not audit:
                raise
            return cls(store, None, config_problem=err.problem)
        if info.encryption is msgspec.UNSET:
            if encrypt:
                raise ConfigError(f"create encrypted store: {store.location} is already a store, and not an "
                                  "encrypted one; start an encrypted store at another location")
            if key is not None:
                raise NotEncrypted(store.location, key.describe())
            return cls(store, info)
        from ..crypto.keys import unlock  # (imports `cryptography`: only for an encrypted store)

        codec, key_id = unlock(store, info.store_id, key)
        return cls(store, info, codec=codec, key_id=key_id)

    @classmethod
    def _read_info(cls, store: Store, create: bool, key: KeySource | None) -> StoreInfo:
        try:
            raw = store.get(CONFIG_KEY)
        except ObjectNotFound:
            if _fresh(store):
                if not create:
                    raise NoStore(store.location, store.missing_parent()) from None
                return cls._init(store, key)
            try:  # another process may have created the store between the two looks
                raw = store.get(CONFIG_KEY)
            except ObjectNotFound:
                raise _not_a_store(store, "is missing") from None
        try:
            info = read_config(raw)
        except ValueError as err:
            if raw.rfind(CHECKSUM_MEMBER) >= 0:  # sealed: a journal config, damaged
                raise DamagedConfig(store.location, str(err)) from None
            raise _not_a_store(store, str(err)) from None
        if info.version > STORE_VERSION:
            raise StoreError(f"open store: {store.location}/{CONFIG_KEY} says store version {info.version}; "
                             f"this journal reads version {STORE_VERSION}: upgrade journal to use this store")
        return info

    @classmethod
    def _init(cls, store: Store, key: KeySource | None) -> StoreInfo:
        """A new store's config; an encrypted store's first key object is put before it
        (a store is never without a key), bound to this new store id."""
        store.check_creatable()
        info = StoreInfo(store_id=uuid.uuid4().hex, created=utc_now())
        kid = None
        if key is not None:
            from ..crypto.keys import create_keys

            info = msgspec.structs.replace(info, version=ENCRYPTED_STORE_VERSION, encryption=CIPHER)
            kid = create_keys(store, info.store_id, key, info.created)[1]
        try:
            store.put_if_absent(CONFIG_KEY, seal_config(info))
        except KeyExists:
            if kid is not None:
                from ..crypto.keys import discard_keys

                discard_keys(store, info.store_id, kid)
            return cls._read_info(store, False, None)  # another process initialised it first
        return info

    @property
    def store_id(self) -> str:
        return self.info.store_id

    def reading_through(self, store: Store) -> "Repository":
        """This repository, read and written through ``store`` (a wrapper of its own)."""
        return Repository(store, self.info, self.config_problem, self.codec, self.key_id)

    def read_blob(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """Read one blob by reference and verify it; raises CorruptObject/ObjectNotFound.
        A delta whose record names its base (an index page, a page map) is decoded
        against that base, read and verified too."""
        return self.read_based(ref, kind)[0]

    def read_record(self, ref: BlobRef):
        """One blob's record as stored (length checked, not yet verified)."""
        return self.read_records([ref])[0]

    def read_records(self, refs: list[BlobRef]) -> list:
        """Back-to-back records of one pack, with one ranged read (lengths checked, not
        yet verified); in a plain store each a view of the one buffer, not a copy; in an
        encrypted one each opened (``CorruptObject`` when it fails its tag)."""
        start, end = refs[0].offset, refs[-1].offset + refs[-1].length
        if not is_id(refs[0].pack):  # decoders refuse such a name; a pack name is the only key read here
            raise CorruptObject(f"blob {refs[0].id[:12]}", f"names pack {refs[0].pack!r}, which is not a pack name")
        key = pack_key(refs[0].pack)
        data = self.store.get(key, start, end)
        if len(data) != end - start:
            if self.store.head(key) is None:
                raise ObjectNotFound(key)
            raise CorruptObject(blob_location(refs[0]), f"pack too short: got {len(data)} of {end - start} bytes")
        view = memoryview(data)
        if self.codec.encrypted:
            return [self.codec.open(view[r.offset - start:r.offset - start + r.length], RECORD, blob_location(r))
                    for r in refs]
        return [view[r.offset - start:r.offset - start + r.length] for r in refs]

    def read_page(self, ref: BlobRef, kept: "RecordCache | None" = None) -> tuple[bytes, BlobRef | None]:
        """Read one index page, verified; ``(payload, base)`` (see ``read_based``)."""
        return self.read_based(ref, KIND_PAGE, kept)

    def read_based(self, ref: BlobRef, kind: int | None = None,
                   kept: "RecordCache | None" = None) -> tuple[bytes, BlobRef | None]:
        """Read one blob, verified; ``(payload, base)``: the base reference of a delta
        whose record names its base (an index page, a page map),
        read and verified too, else None. A base is always a whole record of the same
        kind: a delta over a delta is refused as corrupt. With ``kept``, a whole record
        read before (as a blob or as a base: many deltas share one base) is not read
        again, and the whole records read are kept there."""
        got = kept.get(ref, kind) if kept is not None else None
        if got is not None:
            return got[0], None
        where = blob_location(ref)
        data = self.read_record(ref)
        named = embedded_base(data, key=where)
        if named is None:
            payload = decode_record(data, key=where, expect_id=ref.id, expect_kind=kind, expect_size=ref.size,
                                    codec=self.codec)
            if kept is not None:
                kept.put(ref, kind, payload)
            return payload, None
        own_kind = parse_header(data, key=where).kind
        if isinstance(named, tuple):
            base_ref = BlobRef("", *named, 0)
        else:
            try:
                base_ref = decode(named, BlobRef)
            except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
                raise CorruptObject(where, f"bad base reference: {err}") from None
            problem = ref_problem(base_ref)
            if problem:
                raise CorruptObject(where, f"base reference {problem}")
        base, base_ref = self._read_base(base_ref, own_kind, kept)
        return decode_record(data, key=where, expect_id=ref.id, expect_kind=kind, expect_size=ref.size,
                             base=base, codec=self.codec), base_ref

    def read_whole(self, ref: BlobRef, kind: int | None = None) -> bytes:
        """One blob that must be stored whole (a delta's base), verified; a delta is
        refused as corrupt, so nothing is ever made a delta of a delta."""
        return self._read_base(ref, kind)[0]

    def _read_base(self, ref: BlobRef, kind: int | None, kept: "RecordCache | None" = None) -> tuple[bytes, BlobRef]:
        """A delta's base: the whole record of ``kind`` at ``ref``, verified against its
        own header and against ``ref.id`` when the delta named one (a base named by
        position carries no id; its id and size come from its header)."""
        got = kept.get(ref, kind) if kept is not None else None
        if got is not None:
            return got
        where = blob_location(ref)
        data = self.read_record(ref)
        digest = parse_header(data, key=where).id
        payload = decode_record(data, key=where, expect_id=ref.id or None, expect_kind=kind,
                                expect_size=ref.size or None, codec=self.codec)
        whole = BlobRef(digest, ref.pack, ref.offset, ref.length, len(payload))
        if kept is not None:
            kept.put(whole, kind, payload)
        return payload, whole

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
        return [decode_record(data, key=blob_location(r), expect_id=r.id, expect_size=r.size, codec=self.codec)
                for r, data in zip(refs, records)]

    def manifest_seqs(self) -> list[int]:
        """Every manifest sequence present in the store, ascending (listing only)."""
        return list_manifest_seqs(self.store)

    def manifest_sizes(self) -> dict[int, int]:
        """Every manifest sequence present in the store, with its record's size (one listing)."""
        return {seq: size for key, size in self.store.list_sizes(MANIFEST_PREFIX)
                if (seq := manifest_seq(key)) is not None}

    def load_manifest(self, seq: int) -> tuple[Manifest, str]:
        """Read and verify manifest ``seq``; returns it with its id (payload hash)."""
        key = manifest_key(seq)
        payload = self.decode_manifest_record(self.store.get(key), key)
        try:
            manifest = decode(payload, Manifest)
        except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
            raise CorruptObject(key, f"manifest does not decode: {err}") from None
        if manifest.seq != seq:
            raise CorruptObject(key, f"manifest says seq {manifest.seq}")
        problem = manifest_problem(manifest)
        if problem:
            raise CorruptObject(key, f"manifest {problem}")
        return manifest, blob_id(payload, self.codec)

    def decode_manifest_record(self, stored: bytes, key: str) -> bytes:
        """A manifest's payload from its stored bytes (opened, then verified)."""
        return decode_record(self.codec.open(stored, RECORD, key), key=key, expect_kind=KIND_MANIFEST,
                             codec=self.codec)

    def iter_manifests_desc(self, seqs: list[int] | None = None) -> Iterator[ManifestRead]:
        """Every manifest of ``seqs`` (default: all), newest first, each loaded or with its error."""
        for seq in reversed(self.manifest_seqs() if seqs is None else seqs):
            try:
                manifest, mid = self.load_manifest(seq)
            except (CorruptObject, ObjectNotFound) as err:
                yield ManifestRead(seq, None, err)
                continue
            yield ManifestRead(seq, manifest, mid)

    def pack_sizes(self) -> dict[str, int]:
        """Every pack id in the store and its size in bytes (one listing)."""
        return {key.rsplit("/", 1)[-1]: size for key, size in self.store.list_sizes(PACK_PREFIX)}

    def put_manifest(self, record: bytes, seq: int, staged: Staged | None = None) -> None:
        """Publish a manifest record put-if-absent; raises KeyExists when taken.
        ``staged``: that record as ``stage_manifest`` made it ready, published by its rename."""
        if staged is not None:
            staged.publish()
        else:
            self.store.put_if_absent(manifest_key(seq), record)

    def stage_manifest(self, record: bytes, seq: int) -> Staged:
        """A manifest record made ready to publish (``Store.stage``): written ahead, while
        the packs it names still upload; no key shows it until ``put_manifest``."""
        return self.store.stage(manifest_key(seq), record)


class RecordCache:
    """Whole records read and verified, kept by position (pack, offset, length, kind) up
    to ``limit`` payload bytes, the least recently used dropped first. A reference finds
    a kept record when it names that position and, if it names them, the same id and size."""

    def __init__(self, limit: int = 64 << 20):
        self.limit = limit
        self.bytes = 0
        self._kept: OrderedDict[tuple, tuple[bytes, BlobRef]] = OrderedDict()

    def get(self, ref: BlobRef, kind: int | None) -> tuple[bytes, BlobRef] | None:
        at = (ref.pack, ref.offset, ref.length, kind)
        got = self._kept.get(at)
        if got is None or ref.id not in ("", got[1].id) or ref.size not in (0, got[1].size):
            return None
        self._kept.move_to_end(at)
        return got

    def put(self, ref: BlobRef, kind: int | None, payload: bytes) -> None:
        at = (ref.pack, ref.offset, ref.length, kind)
        if at in self._kept or len(payload) > self.limit:
            return
        self._kept[at] = (payload, ref)
        self.bytes += len(payload)
        while self.bytes > self.limit:
            _, (old, _ref) = self._kept.popitem(last=False)
            self.bytes -= len(old)


def list_manifest_seqs(store: Store) -> list[int]:
    """Every manifest sequence present in ``store``, ascending (one listing; no config read)."""
    return sorted(seq for seq in map(manifest_seq, store.list(MANIFEST_PREFIX)) if seq is not None)


def manifest_seq(key: str) -> int | None:
    """The sequence of a manifest key, or None for another key."""
    name = key[len(MANIFEST_PREFIX):]
    return int(name) if key.startswith(MANIFEST_PREFIX) and name.isdigit() and len(name) == SEQ_WIDTH else None


def encode_manifest(manifest: Manifest, codec: Codec = PLAIN) -> tuple[str, bytes]:
    """Return ``(manifest id, stored bytes)``: the record, sealed in an encrypted store."""
    mid, record = encode_record(KIND_MANIFEST, encode(manifest), codec=codec)
    return mid, codec.seal(record, RECORD)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
