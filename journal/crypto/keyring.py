"""An encrypted store's codec: what its master key is used for (design §22).

Six 32-byte keys are derived from the master key with HKDF-SHA-256 (RFC 5869; no
salt, so the salt is 32 zero bytes; ``info`` below), each for one purpose only:

* the data key: AES-256-GCM seals every object that carries user data (``seal``):
  ``nonce (12 bytes) | ciphertext | tag (16 bytes)``, the object's role
  (``format/codec.py``: a record, a tombstone, a lease) as associated data;
* the nonce key: an object's nonce is the first 12 bytes of HMAC-SHA-256(nonce key,
  len(role) as u32 big-endian | role | plaintext) (a synthetic IV, as in SIV);
* the id key: a payload's id is HMAC-SHA-256(id key, payload), in place of SHA-256;
* the name key: the input journal's keys carry HMAC-SHA-256(name key, domain NUL
  name) in place of a user's session, harness and client-id names;
* the boundary key: the BLAKE2b key (32 bytes) that places index page boundaries
  (``format/index.py``), so page lengths do not depend on path names alone;
* the check key: each key object carries HMAC-SHA-256(check key, the object's JSON
  with ``check`` empty), so ``verify``, holding the master key, finds a changed byte
  in any key object, also one it cannot unwrap (``keys.py``).

Nonces are derived, never drawn: a nonce repeats only for the same role and the same
plaintext (which then gives the same ciphertext, harmlessly: GCM fails only when one
nonce seals two different messages, or one message under two associated data, and both
are in the derivation). Two different (role, plaintext) pairs get the same nonce with
the chance of a collision of a 96-bit PRF: below n^2 / 2^97 for n sealed objects, as
for random nonces, which NIST SP 800-38D bounds to 2^32 messages per key (a chance
below 2^-32): 4 billion records, decades of busy checkpoints. Derived nonces keep what
the plain store has: equal records seal to equal bytes, so a pack spooled again (a
retried checkpoint, the same chunks under a new name) is the same pack under the same
name, uploaded once. What it reveals: that two sealed objects are equal, which a
pack's name (the SHA-256 of its stored bytes) says anyway.
"""

from __future__ import annotations

import hashlib
import hmac

from ..errors import CorruptObject
from .errors import CryptoUnavailable
from ..format.codec import Codec

CIPHER = "aes-256-gcm"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
DATA_INFO = b"journal data key"
ID_INFO = b"journal id key"
NAME_INFO = b"journal name key"
CHECK_INFO = b"journal key check"
BOUNDARY_INFO = b"journal boundary key"
NONCE_INFO = b"journal nonce key"


def require(what: str):
    """The ``cryptography`` package's modules, or ``CryptoUnavailable`` saying ``what`` needs it."""
    try:
        from cryptography import exceptions
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers import aead
        from cryptography.hazmat.primitives.kdf import hkdf, scrypt
    except ImportError:
        raise CryptoUnavailable(what) from None
    return exceptions, hashes, aead, hkdf, scrypt


def hkdf_sha256(secret: bytes, info: bytes, salt: bytes | None = None) -> bytes:
    """HKDF-SHA-256 of ``secret`` (RFC 5869), 32 bytes."""
    _exc, hashes, _aead, hkdf, _scrypt = require("deriving a key")
    return hkdf.HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=salt, info=info).derive(secret)


def aes_gcm(key: bytes):
    """An AES-256-GCM cipher (``encrypt``/``decrypt`` with a nonce and associated data)."""
    return require("encryption")[2].AESGCM(key)


class Keyring(Codec):
    """The codec of an encrypted store, unlocked with its master key."""

    encrypted = True
    overhead = NONCE_BYTES + TAG_BYTES

    def __init__(self, master: bytes):
        if len(master) != KEY_BYTES:
            raise ValueError("a master key is 32 bytes")
        self.master = master  # wrapped again by ``keys.add_key``; never written anywhere in the clear
        self._invalid_tag = require("encryption")[0].InvalidTag
        self._aead = aes_gcm(hkdf_sha256(master, DATA_INFO))
        self._ids = hmac.new(hkdf_sha256(master, ID_INFO), digestmod=hashlib.sha256)
        self._name_key = hkdf_sha256(master, NAME_INFO)
        self._check_key = hkdf_sha256(master, CHECK_INFO)
        self.boundary_key = hkdf_sha256(master, BOUNDARY_INFO)
        self._nonces = hmac.new(hkdf_sha256(master, NONCE_INFO), digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return "Keyring(<locked away>)"

    def digest(self, data) -> bytes:
        h = self._ids.copy()
        h.update(data)
        return h.digest()

    def id(self, data) -> str:
        h = self._ids.copy()
        h.update(data)
        return h.hexdigest()

    def hasher(self):
        return self._ids.copy()

    def seal(self, data: bytes, role: bytes) -> bytes:
        h = self._nonces.copy()
        h.update(len(role).to_bytes(4, "big") + role)
        h.update(data)
        nonce = h.digest()[:NONCE_BYTES]
        return nonce + self._aead.encrypt(nonce, data, role)

    def open(self, data, role: bytes, where: str) -> bytes:
        if len(data) < self.overhead:
            raise CorruptObject(where, f"a sealed object of {len(data)} bytes is shorter than its nonce and tag")
        try:
            return self._aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], role)
        except self._invalid_tag:
            raise CorruptObject(where, "fails its authentication tag (changed after it was written, or sealed "
                                       "with another store's key)") from None

    def key_check(self, body: bytes) -> str:
        """The ``check`` of a key object whose JSON (with ``check`` empty) is ``body``."""
        return hmac.new(self._check_key, body, hashlib.sha256).hexdigest()

    def name_digest(self, domain: str, text: str) -> str:
        return hmac.new(self._name_key, f"{domain}\0{text}".encode(), hashlib.sha256).hexdigest()
