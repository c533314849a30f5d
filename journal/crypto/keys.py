"""An encrypted store's keys: where a user's key comes from, and the key objects that
wrap the store's one master key under it (design §22, restic's model).

The master key is 32 random bytes, drawn when the store is created and never stored
in the clear. Each key object wraps it under one user key::

    keys/<32 hex, random>   {"version":1,"store_id":"<32 hex>","kdf":"hkdf-sha256"|"scrypt",
                             "scrypt":null|{"n":N,"r":R,"p":P},"salt":"<64 hex>",
                             "created":"<UTC time>","master":"<120 hex>","check":"<64 hex>"}

``master`` is ``nonce (12) | AES-256-GCM(wrapping key, nonce, master key, aad) | tag
(16)``, with ``aad`` = ``journal master key <store id>``, so a key object copied from
another store (or left by an init that stopped before its config) never unlocks this
one. The wrapping key is HKDF-SHA-256(the key file's bytes, salt, ``journal key
file``) for a key file, and scrypt(the passphrase's UTF-8 bytes, salt, N, R, P) for a
passphrase. ``check`` is HMAC-SHA-256 under the master key's check key
(``keyring.py``) of the object's JSON with ``check`` set to ``""``: ``verify`` finds a
changed byte in every key object, also in one it has no user key for. Several key
objects wrap the same master key, so a key is added, removed or rotated without
rewriting any data. Which key objects are the store's keys is the newest key set's
(``keyset.py``): a key change (``manage.py``) claims the next set.

A key file is at least 32 bytes, used whole as they are (``journal init --encrypt``
creates one of 32 random bytes, mode 0600, when the path is free); a passphrase is
any non-empty text. A process unlocks a store once and keeps the keyring in memory
for its life (``journal supervise`` across every tick); nothing of a key is written
anywhere but the wrapped master key in the store.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from typing import Annotated, Literal, NamedTuple

import msgspec

from ..atomic import write_file_atomic
from ..config import KeySource
from ..errors import CorruptObject, ObjectNotFound
from .errors import KeyUnusable, NoKey, WrongKey
from ..format.codec import KEYS_PREFIX
from ..format.model import Text, decode, encode
from .keyring import KEY_BYTES, NONCE_BYTES, Keyring, aes_gcm, hkdf_sha256, require
from .keyset import list_keys_dir, members

HKDF = "hkdf-sha256"
SCRYPT = "scrypt"
#: A key file journal creates holds this many random bytes; a key file holds at least as many.
KEY_FILE_BYTES = KEY_BYTES
KEY_FILE_MAX = 64 << 10
KEY_FILE_INFO = b"journal key file"
#: The scrypt cost a new passphrase key gets (32 MiB, ~0.1 s); a reader accepts up to
#: ``SCRYPT_MEMORY`` bytes (128 * n * r * p), so a crafted key object cannot make it
#: allocate more.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1
SCRYPT_MEMORY = 128 << 20


class ScryptCost(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    n: Annotated[int, msgspec.Meta(ge=2, le=1 << 24)]
    r: Annotated[int, msgspec.Meta(ge=1, le=64)]
    p: Annotated[int, msgspec.Meta(ge=1, le=64)]


class KeyObject(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One key object: the master key wrapped under one user key (the module docstring)."""

    version: Literal[1]
    store_id: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
    kdf: Literal["hkdf-sha256", "scrypt"]
    scrypt: ScryptCost | None
    salt: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{64}$")]
    created: Text
    master: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{120}$")]
    check: Annotated[str, msgspec.Meta(pattern=r"^([0-9a-f]{64})?$")]


class Secret(NamedTuple):
    """A user's key as read from its source: the material, and which KDF it goes through."""

    kdf: str
    material: bytes
    source: str       # as messages name it


def read_secret(source: KeySource) -> Secret:
    """The key a source gives; ``KeyUnusable`` naming the source when it gives none."""
    if source.file is None:
        value = os.environ.get(source.env or "")
        if not value:
            raise KeyUnusable(source.describe(), "is not set or is empty", f"set {source.env} to the passphrase")
        return Secret(SCRYPT, value.encode("utf-8", "surrogateescape"), source.describe())
    data = _read_key_file(source)
    if len(data) < KEY_FILE_BYTES:
        raise KeyUnusable(source.describe(), f"holds {len(data)} bytes, fewer than the {KEY_FILE_BYTES} of a key file",
                          "point it at the store's key file (`journal init --encrypt --key-file PATH` makes one)")
    return Secret(HKDF, data, source.describe())


def _not_regular(mode: int) -> str | None:
    """What a key file of ``mode`` is when it is not a regular file, as messages say it."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    return f"is {'a FIFO' if stat.S_ISFIFO(mode) else 'a socket' if stat.S_ISSOCK(mode) else 'a device'}, " \
           "not a regular file"


def _read_key_file(source: KeySource) -> bytes:
    """The key file's bytes. It is opened without blocking (a FIFO there would otherwise
    hang every command until something writes to it) and must be a regular file; a
    symlink is followed (a mounted secret is often one)."""
    try:
        fd = os.open(source.file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise KeyUnusable(source.describe(), "does not exist",
                          "point it at the store's key file (`journal init --encrypt --key-file PATH` creates "
                          "one; a key file that was lost cannot be made again)") from None
    except OSError as err:
        if err.errno == errno.ENXIO:  # a socket: it cannot be opened
            raise KeyUnusable(source.describe(), _not_regular(stat.S_IFSOCK),
                              "point it at the store's key file") from None
        raise KeyUnusable(source.describe(), f"cannot be read ({err.strerror})",
                          f"check its permissions for uid {os.getuid()}") from None
    with os.fdopen(fd, "rb") as fh:
        problem = _not_regular(os.fstat(fd).st_mode)
        if problem is not None:
            raise KeyUnusable(source.describe(), problem, "point it at the store's key file")
        try:
            data = fh.read(KEY_FILE_MAX + 1)
        except OSError as err:
            raise KeyUnusable(source.describe(), f"cannot be read ({err.strerror})",
                              "check the file system that holds it") from None
    if len(data) > KEY_FILE_MAX:
        raise KeyUnusable(source.describe(), f"holds more than {KEY_FILE_MAX:,} bytes: it is not a key file",
                          "point it at the store's key file")
    return data


def create_key_file(path: str) -> bool:
    """Create a key file of ``KEY_FILE_BYTES`` random bytes at ``path`` (mode 0600,
    published whole, never over an existing file) unless something is there; True when
    it was created. An ``OSError`` (a missing directory) is raised naming the path."""
    if os.path.lexists(path):
        return False
    try:
        write_file_atomic(path, os.urandom(KEY_FILE_BYTES), os.path.dirname(path) or ".", noclobber=True, mode=0o600)
    except FileExistsError:
        return False
    return True


def _wrapping_key(kdf: str, cost: ScryptCost | None, salt: bytes, secret: Secret) -> bytes:
    if kdf == HKDF:
        return hkdf_sha256(secret.material, KEY_FILE_INFO, salt)
    scrypt = require("a passphrase key")[4]
    return scrypt.Scrypt(salt=salt, length=KEY_BYTES, n=cost.n, r=cost.r, p=cost.p).derive(secret.material)


def _aad(store_id: str) -> bytes:
    return f"journal master key {store_id}".encode()


def wrap(keyring: Keyring, secret: Secret, store_id: str, created: str) -> KeyObject:
    """A new key object wrapping ``keyring``'s master key under ``secret``, with a fresh
    salt and nonce, and its check."""
    salt = os.urandom(32)
    cost = ScryptCost(n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P) if secret.kdf == SCRYPT else None
    nonce = os.urandom(NONCE_BYTES)
    sealed = nonce + aes_gcm(_wrapping_key(secret.kdf, cost, salt, secret)).encrypt(
        nonce, keyring.master, _aad(store_id))
    obj = KeyObject(version=1, store_id=store_id, kdf=secret.kdf, scrypt=cost, salt=salt.hex(), created=created,
                    master=sealed.hex(), check="")
    return msgspec.structs.replace(obj, check=key_check(keyring, obj))


def key_check(keyring: Keyring, obj: KeyObject) -> str:
    """What ``obj``'s ``check`` must be (the module docstring)."""
    return keyring.key_check(encode(msgspec.structs.replace(obj, check="")))


def unwrap(obj: KeyObject, secret: Secret, store_id: str) -> bytes | None:
    """The master key ``obj`` wraps, when ``secret`` is its user key; else None."""
    if obj.kdf != secret.kdf or obj.store_id != store_id:
        return None
    cost = obj.scrypt
    if obj.kdf == SCRYPT and (cost is None or cost.n & (cost.n - 1) or 128 * cost.n * cost.r * cost.p > SCRYPT_MEMORY):
        return None  # a cost no writer uses: refused before any memory is spent on it
    sealed, invalid = bytes.fromhex(obj.master), require("a key")[0].InvalidTag
    try:
        return aes_gcm(_wrapping_key(obj.kdf, cost, bytes.fromhex(obj.salt), secret)).decrypt(
            sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], _aad(store_id))
    except invalid:
        return None


def read_key_object(raw: bytes, key: str) -> KeyObject:
    """A key object from the bytes at ``key``; ``CorruptObject(key)`` when they are not one."""
    try:
        return decode(raw, KeyObject)
    except msgspec.DecodeError as err:  # a ValidationError (a field out of range) is one too
        raise CorruptObject(key, f"does not decode as a key object: {err}") from None


def key_objects(store, store_id: str, ids: list[str] | None = None) -> Iterator[tuple[str, KeyObject | None]]:
    """``(id, key object)`` of every key object of the store (of ``ids`` if given), in
    listing order; None for one that does not decode. Objects of another store id (an
    init that stopped before its config) are left out: they cannot unlock this store."""
    for kid in list_keys_dir(store).ids if ids is None else ids:
        try:
            obj = read_key_object(store.get(KEYS_PREFIX + kid), KEYS_PREFIX + kid)
        except ObjectNotFound:
            continue  # removed since the listing
        except CorruptObject:
            yield kid, None
            continue
        if obj.store_id == store_id:
            yield kid, obj


def own_ids(store, store_id: str, ids: list[str]) -> list[str]:
    """Those of ``ids`` whose key objects are this store's (or do not decode)."""
    return [kid for kid, _obj in key_objects(store, store_id, ids)]


def own_key_object(store, store_id: str) -> str | None:
    """The id of a key object of store ``store_id`` that decodes, or None: a plain
    store has none (``repository/lineage.py``'s downgrade guard). Read as JSON: no
    ``cryptography`` import."""
    return next((kid for kid, obj in key_objects(store, store_id) if obj is not None), None)


#: Stores this process has unlocked: (store id, kdf, SHA-256 of the key) -> (keyring, key id).
_UNLOCKED: dict[tuple[str, str, bytes], tuple[Keyring, str]] = {}


def _memo(store_id: str, secret: Secret) -> tuple[str, str, bytes]:
    return store_id, secret.kdf, hashlib.sha256(secret.material).digest()


def unlock(store, store_id: str, source: KeySource | None) -> tuple[Keyring, str]:
    """The keyring of an encrypted store and the id of the key object that opened it:
    ``NoKey`` without a source, ``WrongKey`` when the source's key unwraps none of the
    store's keys (the newest key set's members, ``keyset.py``). Once per process: a
    store unlocked before is not read again."""
    if source is None:
        raise NoKey(store.location)
    require(f"open store: {store.location} is encrypted, and opening it")
    secret = read_secret(source)
    got = _UNLOCKED.get(_memo(store_id, secret))
    if got is not None:
        return got
    listing = list_keys_dir(store)
    named = members(store, store_id, listing)
    count = damaged = 0
    for kid, obj in key_objects(store, store_id, [k for k in listing.ids if named is None or k in named]):
        count += 1
        damaged += obj is None
        master = None if obj is None else unwrap(obj, secret, store_id)
        if master is not None:
            got = _UNLOCKED[_memo(store_id, secret)] = (Keyring(master), kid)
            return got
    raise WrongKey(secret.source, store.location, count, damaged)


def forget_unlocked(kid: str) -> None:
    """Forget that this process unlocked a store with key ``kid`` (rotated away)."""
    for memo in [m for m, (_k, used) in _UNLOCKED.items() if used == kid]:
        del _UNLOCKED[memo]


def create_keys(store, store_id: str, source: KeySource, created: str) -> tuple[Keyring, str]:
    """A new store's master key, and its first key object, put before the store's config
    (``Repository._init``): ``(keyring, key id)``."""
    require("creating an encrypted store")
    secret = read_secret(source)
    keyring = Keyring(os.urandom(KEY_BYTES))
    kid = put_key_object(store, wrap(keyring, secret, store_id, created))
    got = _UNLOCKED[_memo(store_id, secret)] = (keyring, kid)
    return got


def discard_keys(store, store_id: str, kid: str) -> None:
    """Remove the key object of a store whose config another process put first."""
    store.delete(KEYS_PREFIX + kid)
    for memo in [m for m in _UNLOCKED if m[0] == store_id]:
        del _UNLOCKED[memo]


def put_key_object(store, obj: KeyObject) -> str:
    """Put ``obj`` under a new random id; its id."""
    kid = uuid.uuid4().hex
    store.put_if_absent(KEYS_PREFIX + kid, encode(obj))
    return kid
