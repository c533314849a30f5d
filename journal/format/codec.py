"""How a store names payloads and stores objects: plain, or keyed (design §22).

A store's *codec* does three things, and every reader and writer asks it rather than
hashing or writing bytes itself:

* ``id`` / ``digest`` / ``hasher``: a payload's id. In a plain store (``PLAIN``) it is
  the SHA-256 of the payload; in an encrypted store, the HMAC-SHA-256 of the payload
  under a key derived from the store's master key (``journal/crypto/keyring.py``), so
  equal payloads still get equal ids within the store (dedup, reuse, verify-on-read
  are unchanged) and an id says nothing to whoever lacks the key;
* ``seal`` / ``open``: an object's stored bytes. A plain store stores what it encoded;
  an encrypted one seals each record, tombstone and lease with an AEAD before the
  store sees it, and opens it (checking its tag) when it is read. Compression, deltas,
  pages and maps happen before sealing, on the same plaintext either way;
* ``name_digest``: the digest a key made of a user's names carries (the input
  journal's session directories and client-id claims): None in a plain store, whose
  keys carry a readable label and an unkeyed digest (``format/inputs.py``).

``role`` tells what a sealed object is (``RECORD``, ``TOMBSTONE``, ``LEASE``): it is
the AEAD's associated data, so an object of one role never opens as another.
"""

from __future__ import annotations

import hashlib

#: Where an encrypted store keeps the key objects that wrap its master key
#: (``journal/crypto/keys.py``); a plain store has none.
KEYS_PREFIX = "keys/"
#: The associated data of each kind of sealed object.
RECORD = b"journal record"
TOMBSTONE = b"journal tombstone"
LEASE = b"journal lease"


class Codec:
    """A plain store's codec: SHA-256 ids, objects stored as they are encoded."""

    encrypted = False
    #: Bytes ``seal`` adds to an object.
    overhead = 0
    #: The BLAKE2b key of index page boundaries (``format/index.py``): none in a plain store.
    boundary_key = b""

    def digest(self, data) -> bytes:
        """A payload's id, as 32 bytes."""
        return hashlib.sha256(data).digest()

    def id(self, data) -> str:
        """A payload's id: 64 lowercase hex digits."""
        return hashlib.sha256(data).hexdigest()

    def hasher(self):
        """An incremental hasher of ids (``update``, ``hexdigest``), for payloads read a piece at a time."""
        return hashlib.sha256()

    def seal(self, data: bytes, role: bytes) -> bytes:
        """The stored bytes of an object of ``role``."""
        return data

    def open(self, data, role: bytes, where: str):
        """An object's bytes from what the store holds at ``where`` (``CorruptObject`` if
        they fail their tag, in an encrypted store)."""
        return data

    def name_digest(self, domain: str, text: str) -> str | None:
        """The keyed digest of a name in ``domain`` (64 hex), or None in a plain store."""
        return None


PLAIN = Codec()
