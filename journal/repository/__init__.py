"""Records and packs in a store: reading verified blobs, writing packs, history.

Owns what sits between the named bytes of ``journal.store`` and the operations:
packs, ranged fetches, segment readers, which manifests exist, the lineage guards.
May import: ``journal.local`` (the lineage guards read the local state), ``journal.crypto``
(an encrypted store is unlocked when it is opened), ``journal.config`` (where its key
comes from), ``journal.format``, ``journal.store``, and the base modules.
"""
