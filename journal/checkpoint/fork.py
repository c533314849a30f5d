"""Forks: the local work of a disk whose history the store moved past, kept in the store.

A restore that makes the live trees into a checkpoint this disk did not write (the
store's newest, on a stale or diverged disk; an older one, on a rollback) first
preserves whatever local work that checkpoint lacks (design §11, "Lineage"):

* the trees are scanned as a checkpoint scans them (the local state's caches make it
  cheap: only what changed is read);
* ``work`` (the restore's judge) names the local work among the scanned paths;
* none: nothing is committed, the data pack is dropped, the local state is unchanged;
* else the scan is committed as a *fork*: a manifest of its own (version 2, ``fork``
  set) at the first free sequence, built on this disk's last checkpoint (``parent``),
  off the main line. The local state takes its trees, not its sequence.

A pending manifest (a checkpoint that a crash or another writer interrupted) is settled
first: kept when the store holds its very bytes, else dropped, and every file is read
and uploaded again (its packs may be orphans a gc takes).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from ..errors import ObjectNotFound
from ..format.model import Fork
from ..local import quiet
from ..local.state import LocalState, TreeCache, cache_from_entries, load_state, save_state
from ..repository.history import ManifestCache
from ..repository.repository import Repository, manifest_key
from ..report import SILENT, Reporter
from .run import CheckpointResult, ForkPlan, capture_and_commit, drop_pending, reupload_all


class ForkResult(msgspec.Struct, kw_only=True):
    """What ``commit_fork`` did. ``seq`` is the fork's sequence, None when no local work
    needed one; ``work`` the local work found (``tree/path``, sorted), ``base`` the
    checkpoint this disk last knew (the fork's parent), ``onto`` the checkpoint the
    live trees are made into."""

    seq: int | None = None
    base: int = 0
    onto: int = 0
    why: str = ""
    work: list[str] = []
    objects_uploaded: int = 0
    bytes_uploaded: int = 0
    warnings: list[str] = []


def commit_fork(cfg, repo: Repository, *, onto: int, why: str,
                work: Callable[[dict[str, TreeCache], dict[str, TreeCache]], list[str]],
                reupload: bool = False, reporter: Reporter = SILENT) -> tuple[ForkResult, dict[str, TreeCache]]:
    """Keep this disk's local work that checkpoint ``onto`` lacks as a fork (see the
    module docstring). The caller holds the state lock and found a local state of this
    store. ``reupload``: this disk's last checkpoint is not the store's newest, so a gc
    may have expired it and taken its packs: every file is read and uploaded again, and
    a tree not configured here is carried as ``onto`` holds it. Any error (a path that
    cannot be read, a failed upload) is raised: the
    caller must then change no live file. Returns what it did, and the trees as scanned
    (each path's signature now: what the live trees held when the work was judged;
    their entries are only for comparing, never to be saved when no fork was made)."""
    state = load_state(cfg.state_dir, repo.store_id)
    result = CheckpointResult()
    if state.pending is not None:
        _settle_pending(cfg, repo, state, result, reporter)
    before = dict(state.trees)   # what the judge compares signatures with, before any re-upload
    if reupload:
        _from_scratch(cfg, repo, state, onto)
    plan = ForkPlan(lambda trees, _old: work(trees, before), lambda r: (r.manifest_seqs() or [0])[-1] + 1,
                    Fork(onto=onto, why=why))
    base = state.seq
    try:
        capture_and_commit(cfg, repo, state, result, reporter, fork=plan)
    finally:
        quiet.discard(cfg.state_dir)   # the live trees change next: the next tick walks them
    done = ForkResult(seq=result.seq, base=base, onto=onto, why=why, work=sorted(plan.found),
                      objects_uploaded=result.objects, bytes_uploaded=result.bytes, warnings=result.warnings)
    return done, plan.trees if plan.trees is not None else state.trees


def _from_scratch(cfg, repo: Repository, state: LocalState, onto: int) -> None:
    """Lean on nothing this disk's last checkpoint stored (see ``commit_fork``)."""
    reupload_all(cfg, state)
    active = {t.name for t in cfg.active_trees()}
    history = ManifestCache(repo)
    kept = history.manifest(onto)[0].trees
    for name in [n for n in state.trees if n not in active and n not in kept]:
        del state.trees[name]
    for name in [n for n in kept if n not in active]:
        entries, pages = history.tree(onto, name)
        state.trees[name] = cache_from_entries(kept[name].root, pages, entries, bases=history.page_bases(onto, name))


def _settle_pending(cfg, repo: Repository, state: LocalState, result: CheckpointResult, reporter: Reporter) -> None:
    """A pending manifest the store holds byte for byte was committed: keep it. Any other
    (never put, or refused: another writer's checkpoint holds its sequence) is dropped."""
    try:
        stored = repo.store.get(manifest_key(state.pending_seq))
    except ObjectNotFound:
        stored = None
    if stored == state.pending:
        state.pending = state.pending_seq = None
        save_state(cfg.state_dir, state)
        return
    drop_pending(cfg, repo, state, result, reporter, "it was never committed")
