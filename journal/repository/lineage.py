"""Lineage guards: a machine continues only the history its local state knows.

The local state names the store it follows (``store_id``) and the last checkpoint it
knows there. Before anything is restored into the live trees or published, that is
compared with the store configured now (design §3, §10, §14):

* the store is absent or empty although the state has checkpointed to one:
  ``StoreVanished`` (an unmounted volume; ``journal init`` starts a new store);
* the store is another one than the state follows: ``ForeignStore``;
* the store no longer holds the last checkpoint the state knows, nor a later one
  (its manifests were deleted, the store was rolled back): ``HistoryLost``.

``journal takeover`` is the deliberate way to follow another history; it says what it
adopts and what it leaves (``journal init`` only ever creates a store).

Within one store, ``classify`` tells where this disk stands against the store's *main
line* (every manifest that is not a fork): *fresh* (no local state), *hot* (the
store's newest checkpoint is the one this disk last wrote or restored) or *stale*
(the store holds checkpoints this disk never saw; with local changes of its own it is
*diverged*, which ``checkpoint/fork.py`` tells apart). Restore acts on it (design §11,
"Lineage").
"""

from __future__ import annotations

import enum
import os

import msgspec

from ..config import KeySource
from .errors import Downgraded, ForeignStore, HistoryLost, ManifestConflict, NoStore, StoreVanished
from ..local.state import LocalState, read_state, read_store_mark
from ..paths import STATE_FILE
from ..background import Background
from .repository import Repository, list_manifest_seqs, manifest_key
from ..store.base import Store


def open_repository(store: Store, state_dir: str, *, create: bool, key: KeySource | None = None) -> Repository:
    """Open the store (unlocked with ``key`` when it is encrypted); create it when absent
    only if this machine never checkpointed to a store (encrypted when a ``key`` is
    set). A store that vanished (an unmounted volume) is not silently replaced by a new,
    empty one on local disk: ``journal init`` creates it on purpose."""
    try:
        repo = Repository.open(store, key=key)
    except NoStore:
        if not create:
            raise
        refuse_vanished(store, state_dir)
        repo = Repository.open(store, create=True, key=key)
    refuse_downgrade(repo, state_dir)
    return repo


def open_and_list(store: Store, state_dir: str, *, create: bool,
                  key: KeySource | None = None) -> tuple[Repository, list[int]]:
    """``open_repository``, and every manifest's sequence, ascending: the listing goes
    out beside the config's read (on a bucket, one round trip instead of two)."""
    listing = Background(list_manifest_seqs, store, name="journal-list")
    try:
        repo = open_repository(store, state_dir, create=create, key=key)
    finally:
        listing.join()
    return repo, listing.result()


def open_existing(store: Store, state_dir: str, *, audit: bool = False, key: KeySource | None = None) -> Repository:
    """Open the store for reading (``log``, ``verify``, ``gc``, unlocked with ``key`` when
    it is encrypted): a store that vanished after this machine checkpointed to it is
    ``StoreVanished``, as for a checkpoint."""
    try:
        repo = Repository.open(store, audit=audit, key=key)
    except NoStore:
        refuse_vanished(store, state_dir)
        raise
    refuse_downgrade(repo, state_dir)
    return repo


def refuse_downgrade(repo: Repository, state_dir: str) -> None:
    """``Downgraded`` when the store's config says plain but the store was encrypted
    (design §22): this machine's local state knew it encrypted, or (a state that does
    not say: none, another store's, one older than the mark) the store holds key
    objects of its own id, which only an encrypted store has. Writing it in the clear
    is what replacing its config would achieve."""
    if repo.info is None or repo.codec.encrypted:
        return
    mark = read_store_mark(state_dir)
    if mark is not None and mark.store_id == repo.store_id and mark.encrypted is not None:
        if mark.encrypted:
            raise Downgraded(repo.store.location, "this machine's local state knew it encrypted, opened with key "
                                                  f"{mark.key_id}")
        return
    from ..crypto.keys import own_key_object  # (no `cryptography` import: key objects are read as JSON)

    kid = own_key_object(repo.store, repo.store_id)
    if kid is not None:
        raise Downgraded(repo.store.location, f"it holds key object keys/{kid} of its store id, which only an "
                                              "encrypted store has")


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
    if state.pending is None:
        return state.seq
    return state.pending_parent if state.pending_parent is not None else state.seq - 1


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


class Case(enum.Enum):
    """Where a disk stands against the store's main line (``classify``)."""

    FRESH = "fresh"     # no local state of this store: restore the newest checkpoint
    HOT = "hot"         # the newest checkpoint is this disk's last: newer local state wins
    STALE = "stale"     # the store moved past this disk's last checkpoint


class Position(msgspec.Struct, frozen=True, kw_only=True):
    """``classify``'s answer. ``base`` is the last main-line checkpoint this disk wrote or
    restored (0: none), ``newest`` the store's newest main-line checkpoint (0: none),
    ``refused`` the sequence of this disk's pending manifest when another writer's
    checkpoint holds it (a checkpoint that lost the race)."""

    case: Case
    base: int = 0
    newest: int = 0
    refused: int | None = None

    def describe(self) -> str:
        """One phrase: what happened to this disk's history."""
        if self.case is not Case.STALE:
            return f"{self.case.value}"
        if self.refused is not None:
            return (f"its checkpoint {self.refused} was refused (another writer committed that sequence) and "
                    f"the store moved on to checkpoint {self.newest}")
        return f"this disk last knew checkpoint {self.base}, and the store moved on to checkpoint {self.newest}"


def newest_main(cache, seqs: list[int]) -> int:
    """The newest of ``seqs`` that is not a fork (an unreadable manifest counts as one of
    the main line: nobody can tell); 0 when there is none."""
    for seq in reversed(seqs):
        if not cache.is_fork(seq):
            return seq
    return 0


def classify(state: LocalState | None, repo: Repository, cache, seqs: list[int]) -> Position:
    """Where a disk whose local state is ``state`` stands against the store (``seqs``: its
    manifest listing, ascending); see the module docstring. The caller has refused a
    foreign store and a lost history (``require_history``)."""
    """``cache``: a ``history.ManifestCache`` of ``repo``."""
    newest = newest_main(cache, seqs)
    if state is None or state.store_id != repo.store_id or state.seq <= 0:
        return Position(case=Case.FRESH, newest=newest)
    base, mid, refused = committed_seq(state), state.manifest_id, None
    if state.pending is not None:
        stored = repo.store.get(manifest_key(state.pending_seq)) if state.pending_seq in seqs else None
        if stored == state.pending:
            base = state.pending_seq   # committed before the state could say so
        else:
            mid = None   # the state's id is the pending manifest's, not its parent's
            if stored is not None and not cache.is_fork(state.pending_seq):
                refused = state.pending_seq
    same = newest == base and (mid is None or cache.manifest_id(base) in (None, mid))
    case = Case.HOT if same and refused is None else Case.STALE
    return Position(case=case, base=base, newest=newest, refused=refused)


def next_free(repo: Repository, seq: int, cache=None) -> int:
    """The sequence a writer whose last checkpoint is ``seq`` commits next: ``seq + 1``,
    or past the forks other disks made above it (a fork is not on the main line). Any
    other manifest there is another writer's: ``ManifestConflict``. ``cache``: a
    ``history.ManifestCache`` (made here only when a manifest is found there: an
    ordinary tick imports no more than it did)."""
    nxt = seq + 1
    while repo.store.head(manifest_key(nxt)) is not None:
        if cache is None:
            from .history import ManifestCache

            cache = ManifestCache(repo)
        if not cache.is_fork(nxt):
            raise ManifestConflict(nxt, describe_writer(repo, nxt))
        nxt += 1
    return nxt


def describe_writer(repo: Repository, seq: int) -> str:
    """Who committed ``seq``: host, pid and time, for conflict errors."""
    try:
        other, _ = repo.load_manifest(seq)
    except Exception as err:  # noqa: BLE001 - any failure still names the sequence
        return f"another writer (its manifest {manifest_key(seq)} is unreadable: {err})"
    return f"host {other.host} pid {other.pid} at {other.created}"


def _state_path(state_dir: str) -> str:
    return os.path.join(state_dir, STATE_FILE)
