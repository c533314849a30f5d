"""Records and packs in a store: reading verified blobs, writing packs, history.

Owns what sits between the named bytes of ``journal.store`` and the operations:
packs, ranged fetches, segment readers, which manifests exist, the lineage guards.
May import: ``journal.local`` (the lineage guards read the local state), ``journal.format``,
``journal.store``, and the base modules.
"""
