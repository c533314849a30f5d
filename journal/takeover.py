"""``journal takeover``: make this container's local trees the continuation of the store.

After another writer moved the store past what this container knows (a
``ManifestConflict``), there are three ways out: ``journal restore`` (adopt the
store's history; newer local files are kept), another store prefix, or this one.
Takeover adopts the newest valid manifest as the parent *without touching local
files*; every path is marked for a re-read, so the next checkpoint publishes the
local view as the next sequence. Files only the other writer had stay in the store
(the mass-deletion guard keeps them when most of a tree would vanish). Nothing is
deleted, and the other writer's manifests stay in history.
"""

from __future__ import annotations

import msgspec

from .errors import CorruptObject, JournalError, ObjectNotFound
from .history import ManifestCache
from .localstate import LocalState, StateLock, cache_from_entries, load_state, new_state, save_state
from .repository import Repository
from .store.base import Store


class TakeoverResult(msgspec.Struct, kw_only=True):
    seq: int                      # the sequence adopted as parent
    previous_writer: str | None   # host, pid and time of that manifest
    trees: list[str] = []


def takeover(cfg, store: Store) -> TakeoverResult:
    """Adopt the store's newest valid manifest as this writer's parent; see the module docstring."""
    with StateLock(cfg.state_dir, wait=True):
        repo = Repository.open(store)
        seqs = repo.manifest_seqs()
        if not seqs:
            raise JournalError(f"takeover: the store {store.location} has no checkpoint yet, so there is "
                               "nothing to take over; `journal checkpoint` publishes this container's files")
        cache = ManifestCache(repo)
        for seq in reversed(seqs):
            try:
                manifest, mid = cache.manifest(seq)
            except (CorruptObject, ObjectNotFound):
                continue
            trees = {}
            for name, root in manifest.trees.items():
                entries, pages = cache.tree(seq, name)
                trees[name] = cache_from_entries(root.root, pages, entries, dirty=True)
            old = load_state(cfg.state_dir, repo.store_id) or new_state(repo.store_id)
            save_state(cfg.state_dir, LocalState(store_id=repo.store_id, writer=old.writer, seq=seqs[-1],
                                                 manifest_id=mid, restore_complete=True, trees=trees))
            return TakeoverResult(seq=seq, trees=sorted(trees),
                                  previous_writer=f"host {manifest.host} pid {manifest.pid} at {manifest.created}")
        raise CorruptObject(store.location, "no manifest in the store passes its checks; nothing to take over")
