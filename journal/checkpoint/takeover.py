"""``journal takeover``: make this container's local trees the continuation of the store.

After another writer moved the store past what this container knows (a
``ManifestConflict``), there are three ways out: ``journal restore`` (adopt the
store's history; newer local files are kept), another store prefix, or this one.
Takeover adopts the newest valid manifest as the parent *without touching local
files*; every path is marked for a re-read, so the next checkpoint publishes the
local view as the next sequence. Files only the other writer had stay in the store
(the mass-deletion guard keeps them when most of a tree would vanish). Nothing is
deleted, and the other writer's manifests stay in history.

It is also the deliberate way past the lineage guards (``repository/lineage.py``): when the local
state follows another store (``ForeignStore``), or knows checkpoints this store no
longer holds (``HistoryLost``, possibly none at all), takeover adopts this store's
history as it is and says what it leaves: the other store, or the lost checkpoints.
"""

from __future__ import annotations

import msgspec

from ..errors import CorruptObject, JournalError, ObjectNotFound
from ..repository.history import ManifestCache
from ..repository.lineage import committed_seq, newest_main, refuse_downgrade
from ..local.state import LocalState, StateLock, cache_from_entries, load_state, new_state, read_state, save_state
from ..repository.repository import Repository
from ..store.base import Store


class TakeoverResult(msgspec.Struct, kw_only=True):
    store_id: str                 # the store whose history this container continues now
    seq: int                      # the sequence adopted as parent (0: the store holds no checkpoint)
    previous_writer: str | None   # host, pid and time of that manifest
    trees: list[str] = []
    left_store: str | None = None  # the other store the local state followed until now
    left_seq: int | None = None    # the last checkpoint the local state knew there, or here beyond ``seq``


def takeover(cfg, store: Store) -> TakeoverResult:
    """Adopt the store's newest valid manifest as this writer's parent; see the module docstring."""
    with StateLock(cfg.state_dir, wait=True):
        repo = Repository.open(store, key=cfg.key)
        refuse_downgrade(repo, cfg.state_dir)  # a takeover never writes in the clear what was encrypted
        seqs = repo.manifest_seqs()
        result = _left_behind(read_state(cfg.state_dir), repo, seqs[-1] if seqs else 0)
        old = load_state(cfg.state_dir, repo.store_id) or new_state(repo.store_id)
        if not seqs:
            if result.left_seq is None:
                raise JournalError(f"takeover: the store {store.location} has no checkpoint yet, so there is "
                                   "nothing to take over; `journal checkpoint` publishes this container's files")
            save_state(cfg.state_dir, LocalState(store_id=repo.store_id, writer=old.writer, restore_complete=True,
                                                 encrypted=repo.codec.encrypted, key_id=repo.key_id))
            return result
        cache = ManifestCache(repo)
        newest = newest_main(cache, seqs)
        for seq in reversed(seqs):
            try:
                manifest, _ = cache.manifest(seq)
            except (CorruptObject, ObjectNotFound):
                continue
            if manifest.is_fork:
                continue   # off the main line: nobody builds on a fork (design §11, "Lineage")
            trees = {}
            for name, root in manifest.trees.items():
                entries, pages = cache.tree(seq, name)
                trees[name] = cache_from_entries(root.root, pages, entries, dirty=True, keep_local=True,
                                                 bases=cache.page_bases(seq, name))
            save_state(cfg.state_dir, LocalState(store_id=repo.store_id, writer=old.writer, seq=newest,
                                                 manifest_id=cache.manifest_id(newest), restore_complete=True,
                                                 trees=trees, encrypted=repo.codec.encrypted, key_id=repo.key_id))
            result.seq, result.trees = seq, sorted(trees)
            result.previous_writer = f"host {manifest.host} pid {manifest.pid} at {manifest.created}"
            return result
        raise CorruptObject(store.location, "no manifest in the store passes its checks; nothing to take over")


def _left_behind(before: LocalState | None, repo: Repository, newest: int) -> TakeoverResult:
    """What the local state followed that this takeover leaves: another store's history,
    or checkpoints of this store newer than any it holds now."""
    result = TakeoverResult(store_id=repo.store_id, seq=0, previous_writer=None)
    if before is None or before.seq <= 0:
        return result
    if before.store_id != repo.store_id:
        result.left_store, result.left_seq = before.store_id, before.seq
    elif committed_seq(before) > newest:
        result.left_seq = committed_seq(before)
    return result
