"""Records and packs in a store: reading verified blobs, writing packs, history.

Owns what sits between the named bytes of ``journal.store`` and the operations:
packs, ranged fetches, segment readers, which manifests exist and how a command names
one (``moment``), the lineage guards.
May import: ``journal.local`` (the lineage guards read the local state), ``journal.crypto``
(an encrypted store is unlocked when it is opened), ``journal.config`` (where its key
comes from, and how a duration is written), ``journal.format``, ``journal.store``, and
the base modules.
"""
