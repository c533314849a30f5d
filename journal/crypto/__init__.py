"""Encryption at rest (design §22): the keyed codec of an encrypted store and its keys.

``keyring`` owns the master key's use: the keys derived from it (HKDF-SHA-256), keyed
ids (HMAC-SHA-256), keyed name digests, and sealing and opening objects (AES-256-GCM,
a 96-bit nonce derived from the object, as in SIV). ``keys`` owns the user's keys:
where one comes from (a key file, a passphrase through scrypt), the key objects under
``keys/`` that wrap the master key, and unlocking a store once per process.
``keyset`` owns which key objects are the store's keys: every key change claims the
next key set (put-if-absent), so racing changes never leave the store without a key.
``manage`` owns the changes (adding, listing, removing and rotating keys) and
``verify``'s audit of them. Every primitive comes from the ``cryptography`` package
(the optional extra ``journal[crypto]``), imported only when a store is encrypted.
May import: ``journal.config`` (where a key comes from), ``journal.format``, ``journal.store``
and the base modules.
"""
