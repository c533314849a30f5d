"""The sweep's delete requests (design §16): batched, each after a lease check, and a
pack only while no manifest committed since gc listed the manifests reaches it.

``Deleter.packs`` lists the manifests again (walking each new one once) just before a
batch of packs goes; a failed bulk request is redone key by key by the store, each
single request after a lease check too and, for packs, after the manifests are listed
again every ``FALLBACK_RELIST`` keys. A pack a new manifest needs is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import CorruptObject, ObjectNotFound
from ..format.tombstone import ItemKind, TombstoneItem
from ..repository.repository import Repository
from .lease import Lease
from .reach import Reach

#: When a bulk delete fails and is redone key by key, the manifests are listed again
#: every this many single requests (and the lease is checked before each).
FALLBACK_RELIST = 32
#: The items that name a pack: a new manifest may need one, never a manifest or an input key.
PACK_KINDS = frozenset({ItemKind.PACK, ItemKind.ORPHAN})


def named_pack(item: TombstoneItem) -> str:
    """The pack id of a pack or orphan item (its key is a pack key: ``gc.run`` checked it)."""
    return item.key.rsplit("/", 1)[-1]


class Deleter:
    """Deletes for one gc holding ``lease``: at most ``batch`` keys per request.
    ``accounted`` holds the manifests gc has already walked (those listed when it
    started); ``fresh`` is what the manifests committed since reach."""

    def __init__(self, repo: Repository, lease: Lease, accounted: set[int], batch: int):
        self.repo = repo
        self.lease = lease
        self.accounted = accounted
        self.batch = batch
        self.fresh: Reach | None = None

    def packs(self, batch: list[TombstoneItem], result) -> None:
        """Delete the packs of ``batch`` that no manifest committed since gc started
        reaches, listing the manifests again (and walking new ones) just before. A pack
        kept so is named by no tombstone any more (its own went first): if it becomes
        garbage again, a later mark names it afresh."""
        fresh = self.protect()
        doomed = [item for item in batch if named_pack(item) not in fresh.packs]
        result.protected += len(batch) - len(doomed)
        self.items(doomed, result)

    def items(self, items: list[TombstoneItem], result) -> int:
        """Delete the packs (or manifests, or input keys) ``items`` name; returns how many a
        manifest committed meanwhile turned out to need (only found when a bulk request of
        packs is redone key by key: only packs are checked against the manifests)."""
        packs = any(item.kind in PACK_KINDS for item in items)
        kept = set(self._keys([item.key for item in items], packs=packs))
        gone = [item for item in items if item.key not in kept]
        result.deleted += len(gone)
        result.bytes_freed += sum(item.bytes for item in gone)
        result.protected += len(kept)
        return len(kept)

    def tombstones(self, keys: list[str], result) -> None:
        """Delete the tombstones ``keys`` (swept: what they name is resolved, or about to
        be deleted, or named again by a rewritten one); then empty it."""
        self._keys(keys)
        result.tombstones_removed += len(keys)
        keys.clear()

    def _keys(self, keys: list[str], packs: bool = False) -> list[str]:
        """``batch`` keys per request, each request right after a lease check; the keys a
        new manifest needs (found only key by key) are kept and returned."""
        kept: list[str] = []
        for start in range(0, len(keys), self.batch):
            self.lease.check()
            chunk = keys[start:start + self.batch]
            kept += self.repo.store.delete_many(chunk, guard=self._single_guard(packs)) or []
        return kept

    def _single_guard(self, packs: bool) -> Callable[[str], bool]:
        done = 0

        def guard(key: str) -> bool:
            nonlocal done
            self.lease.check()
            if not packs:
                return True
            if done % FALLBACK_RELIST == 0:
                self.protect()
            done += 1
            return key.rsplit("/", 1)[-1] not in self.fresh.packs

        return guard

    def protect(self) -> Reach:
        """Walk the manifests committed since gc first listed them (each once); returns
        what they reach."""
        if self.fresh is None:
            self.fresh = Reach(self.repo)
        for seq in self.repo.manifest_seqs():
            self.lease.keep()
            if seq in self.accounted:
                continue
            self.accounted.add(seq)
            try:
                manifest = self.repo.load_manifest(seq)[0]
            except (ObjectNotFound, CorruptObject):
                continue  # gone, or unreadable (restore skips it too): it needs nothing
            self.fresh.walk(manifest)
        return self.fresh
