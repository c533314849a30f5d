"""Lineage guards: a machine continues only the history its local state knows.

The local state names the store it follows (``store_id``) and the last checkpoint it
knows there. Before anything is restored into the live trees or published, that is
compared with the store configured now (design §3, §10, §14):

* the store is absent or empty although the state has checkpointed to one:
  ``StoreVanished`` (an unmounted volume; ``journal init`` starts a new store);
* the store is another one than the state follows: ``ForeignStore``;
* the store no longer holds the last checkpoint the state knows, nor a later one
  (its manifests were deleted, the store was rolled back): ``HistoryLost``.

``journal takeover`` and ``journal init`` (a store without history only) are the
deliberate ways to follow another history; they say what they adopt and what they leave.
"""

from __future__ import annotations

import os

from ..config import KeySource
from ..errors import ForeignStore, HistoryLost, ManifestConflict, NoStore, StoreVanished
from ..local.state import LocalState, StateLock, read_state, save_state
from ..paths import STATE_FILE
from .repository import MANIFEST_PREFIX, Repository, manifest_key
from ..store.base import Store


def open_repository(store: Store, state_dir: str, *, create: bool, key: KeySource | None = None) -> Repository:
    """Open the store (unlocked with ``key`` when it is encrypted); create it when absent
    only if this machine never checkpointed to a store (encrypted when a ``key`` is
    set). A store that vanished (an unmounted volume) is not silently replaced by a new,
    empty one on local disk: ``journal init`` creates it on purpose."""
    try:
        return Repository.open(store, key=key)
    except NoStore:
        if not create:
            raise
        refuse_vanished(store, state_dir)
        return Repository.open(store, create=True, key=key)


def open_existing(store: Store, state_dir: str, *, audit: bool = False, key: KeySource | None = None) -> Repository:
    """Open the store for reading (``log``, ``verify``, ``gc``, unlocked with ``key`` when
    it is encrypted): a store that vanished after this machine checkpointed to it is
    ``StoreVanished``, as for a checkpoint."""
    try:
        return Repository.open(store, audit=audit, key=key)
    except NoStore:
        refuse_vanished(store, state_dir)
        raise


def refuse_vanished(store: Store, state_dir: str) -> None:
    """``StoreVanished`` when this machine has checkpointed to a store (its local state
    knows a checkpoint, or its state file is there but unreadable) and ``store`` is
    absent or empty now."""
    known = read_state(state_dir)
    if known is not None and known.seq > 0:
        raise StoreVanished(store.location, known.store_id, known.seq, store.missing_parent()) from None
    if known is None and os.path.lexists(_state_path(state_dir)):  # damaged: never taken for a fresh machine
        raise StoreVanished(store.location, None, None, store.missing_parent(),
                            unreadable_state=_state_path(state_dir)) from None


def committed_seq(state: LocalState) -> int:
    """The newest checkpoint ``state`` knows to be committed: a pending manifest may
    never have reached the store, so it counts its parent."""
    return state.seq - 1 if state.pending is not None else state.seq


def followed(state_dir: str, repo: Repository) -> LocalState | None:
    """The local state that follows another store with a history (``state.seq > 0``),
    else None: a state of this store, a fresh one, or none at all."""
    state = read_state(state_dir)
    if state is None or state.store_id == repo.store_id or state.seq <= 0:
        return None
    return state


def refuse_foreign(op: str, state_dir: str, repo: Repository) -> None:
    """``ForeignStore`` when the local state follows another store's history."""
    other = followed(state_dir, repo)
    if other is not None:
        raise ForeignStore(op, repo.store.location, repo.store_id, _state_path(state_dir), other.store_id, other.seq)


def require_history(op: str, state_dir: str, repo: Repository, seqs: list[int]) -> None:
    """Refuse a store that is not the one the local state follows, or that lost the
    checkpoints it knows (``seqs``: the store's manifest listing, ascending)."""
    refuse_foreign(op, state_dir, repo)
    state = read_state(state_dir)
    known = committed_seq(state) if state is not None and state.store_id == repo.store_id else 0
    if known > 0 and (not seqs or seqs[-1] < known):
        raise HistoryLost(op, repo.store.location, _state_path(state_dir), known, manifest_key(known),
                          seqs[-1] if seqs else None)


def require_committed(repo: Repository, seq: int, state_dir: str) -> None:
    """Before a checkpoint publishes on top of ``seq``: the store still holds manifest
    ``seq`` (one HEAD), or a later one. A later one without ``seq`` itself means another
    writer moved on and gc expired ``seq``: ``ManifestConflict``. None: ``HistoryLost``."""
    if seq <= 0 or repo.store.head(manifest_key(seq)) is not None:
        return
    seqs = repo.manifest_seqs()  # listing only on this error path
    later = [s for s in seqs if s > seq]
    if later:
        raise ManifestConflict(later[0], describe_writer(repo, later[0]))
    raise HistoryLost("checkpoint", repo.store.location, _state_path(state_dir), seq, manifest_key(seq),
                      seqs[-1] if seqs else None)


def adopt_new_store(state_dir: str, repo: Repository) -> LocalState | None:
    """``journal init`` on a store without history while the local state follows another
    store: follow this one from now on (a fresh state, so the next checkpoint publishes
    every file as checkpoint 1). Returns the state it replaced, or None when there was
    nothing to adopt (the same store, no state, or a store that has a history:
    ``journal takeover`` is the way to continue that one)."""
    if followed(state_dir, repo) is None:
        return None
    with StateLock(state_dir, wait=True):
        other = followed(state_dir, repo)
        if other is None or next(iter(repo.store.list(MANIFEST_PREFIX)), None) is not None:
            return None
        save_state(state_dir, LocalState(store_id=repo.store_id, writer=other.writer, restore_complete=True))
        return other


def describe_writer(repo: Repository, seq: int) -> str:
    """Who committed ``seq``: host, pid and time, for conflict errors."""
    try:
        other, _ = repo.load_manifest(seq)
    except Exception as err:  # noqa: BLE001 - any failure still names the sequence
        return f"another writer (its manifest {manifest_key(seq)} is unreadable: {err})"
    return f"host {other.host} pid {other.pid} at {other.created}"


def _state_path(state_dir: str) -> str:
    return os.path.join(state_dir, STATE_FILE)
