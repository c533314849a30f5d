"""The restore operation: newest valid manifest -> live trees (or ``--to DIR``: ``restore/export.py``).

For each tree, the newest manifest whose integrity holds and whose index pages load
is used. Each file is written only from verified blobs, and reaches its live path only
once its bytes are durable; a file whose blobs are bad or missing falls back to the
newest older manifest with a good copy, else it is reported lost (``restore/trees.py``).
Only a restore with nothing lost, once everything it wrote is durable, marks the local
state complete.
"""

from __future__ import annotations

import os

import msgspec

from ..config import TREE_NAME
from ..errors import (ConfigError, CorruptObject, JournalError, NoReadableCheckpoint, ObjectNotFound, UnsafePath,
                      describe_error)
from .export import ExportMark, begin_export, check_export_dir, write_mark
from ..format.model import KIND_DIR
from ..repository.history import ManifestCache, select_seqs
from ..repository.moment import Moment, parse_moment
from ..checkpoint.fork import ForkResult, commit_fork
from ..repository.lineage import Case, classify, newest_main, open_repository, require_history
from ..local.state import (LocalState, StateLock, TreeCache, cache_from_entries, clear_restore_marker, load_state,
                         new_state, save_state)
from ..heap import cycles_paused
from ..report import SILENT, Reporter
from ..repository import fetch
from ..local import activity, tree_tmp
from ..paths import INVALID_DIR, shown
from ..repository.repository import Repository, manifest_key, utc_now
from .adopt import Adopt, LocalWork
from .trees import TreeRestore, TreeRun, write_trees
from ..store.base import Store


class RestoreResult(msgspec.Struct, kw_only=True):
    seq: int | None = None          # newest manifest in the store (at or before ``--at``)
    complete: bool = True
    fallback: bool = False          # a tree or a file came from an older checkpoint than ``seq``
    dry_run: bool = False
    trees: list[TreeRestore] = []
    warnings: list[str] = []
    replaced: list[str] = []        # ``--to --replace``: the earlier export's trees removed first
    lineage: str | None = None      # a restore into the live trees: fresh, hot or stale (``lineage.Case``)
    lineage_note: str | None = None # ... stale: what happened to this disk's history
    rollback: bool = False          # the live trees were made into an older checkpoint (``--rollback``)
    fork: ForkResult | None = None  # stale, or a rollback: the local work kept first (``fork.seq``: None, none)

    def fallback_notes(self) -> list[str]:
        """One line per tree restored from a fallback (``TreeRestore.fallback_note``)."""
        return [f"{t.name}: {t.fallback_note()}" for t in self.trees if t.fallback_note()]


def restore(cfg, store: Store, reporter: Reporter = SILENT, *, at: str | None = None,
            to: str | None = None, dry_run: bool = False, replace: bool = False,
            rollback: bool = False) -> RestoreResult:
    """Restore every configured tree (every stored tree with ``to``). See the module docstring.

    ``to`` must be absent or empty, or, with ``replace``, hold an earlier export only
    (``restore/export.py``): an export is exactly the checkpoint asked for. A restore
    into the live trees, or the error it ends with, is recorded for ``journal status``.

    Into the live trees, where this disk stands decides (``lineage.classify``): fresh or
    hot, newer local state is kept; stale (the store moved on), or a rollback (``at``
    with ``rollback``, which ``at`` onto the live trees needs), the local work the
    chosen checkpoint lacks is kept as a fork first, then the trees become that
    checkpoint (``restore/adopt.py``)."""
    moment = None if at is None else parse_moment(at, "restore", "--at")  # named first, whatever else is wrong
    if to is None and at is not None and not rollback:
        raise ConfigError(f"restore: --at {at} onto the live trees would roll them back; add --rollback to do "
                          "that (local work newer than that checkpoint is kept as a fork first), or export it "
                          "with --to DIR")
    if rollback and (to is not None or at is None):
        raise ConfigError("restore: --rollback makes the live trees an older checkpoint: it needs --at SEQ|TIME "
                          "and no --to")
    live = to is None and not dry_run
    try:
        with cycles_paused():
            result = _restore(cfg, store, reporter, moment, to, dry_run, replace, rollback)
    except (JournalError, OSError) as err:
        if live:
            activity.failed(cfg.state_dir, "restore", describe_error(err))
        raise
    finally:
        fetch.shutdown()  # nothing more to fetch: no idle threads left behind
    if live:
        activity.restore_done(cfg.state_dir, activity.restore_record(result))
    return result


def _restore(cfg, store: Store, reporter: Reporter, at: Moment | None, to: str | None, dry_run: bool,
             replace: bool, rollback: bool) -> RestoreResult:
    old: list[str] = []
    if to is not None:
        to = os.path.abspath(to)
        _check_to(to)
        old = check_export_dir(to, replace)  # refused before anything is touched
    with StateLock(cfg.state_dir, wait=True, create=not dry_run):
        repo = open_repository(store, cfg.state_dir, create=not dry_run, key=cfg.key)
        all_seqs = repo.manifest_seqs()  # the one listing a restore makes
        if to is None:  # an export touches neither the live trees nor the local state
            require_history("restore", cfg.state_dir, repo, all_seqs)
        if not dry_run:
            store.sweep_temp()  # a killed writer's temp files; at startup, not on every tick
            for warning in tree_tmp.sweep(cfg.state_dir)[1]:  # a killed restore's temp dirs in the trees
                reporter.warn(f"restore: {warning}")
        cache = ManifestCache(repo)
        seqs, chosen = select_seqs(cache, at, all_seqs)
        target = chosen if chosen is not None else newest_main(cache, seqs)
        result = RestoreResult(dry_run=dry_run, seq=target or (seqs[-1] if seqs else None), rollback=rollback)
        names = _tree_names(cfg, cache, seqs, to, result, reporter)
        caches: dict[str, TreeCache] = {}
        aside = os.path.join(cfg.state_dir, INVALID_DIR, utc_now().replace(":", ""))
        newest = newest_main(cache, all_seqs) if seqs else None
        want_state = not dry_run and to is None
        adopt, scanned = None, None
        if to is None and seqs:
            adopt, scanned = _where_this_disk_stands(cfg, repo, cache, all_seqs, target, names, result, reporter,
                                                     dry_run)
        if to is not None:
            result.replaced = [os.path.join(to, name) for name in old]
            for path in result.replaced:
                reporter.note(f"restore: {'would remove' if dry_run else 'removing'} {path}, "
                              "written by the earlier export there (--replace)")
            if not dry_run:
                begin_export(to, old, [name for name, _ in names], cfg.state_dir)
        known = load_state(cfg.state_dir, repo.store_id) if to is None else None  # what this machine last had
        if scanned is not None:   # adopting: the live trees as the fork's scan just saw them
            known = LocalState(store_id=repo.store_id, writer="", trees=scanned)
        trees = []
        for name, dest in names:
            tseqs, tchosen = _tree_seqs(known, name, seqs, adopt, at, chosen)
            if tchosen is not None and tchosen not in tseqs:
                # A rollback not published yet whose checkpoint a gc deleted since: the
                # tree on disk is the only copy of it, and the newer local state.
                caches[name] = known.trees[name]
                held = known.trees[name].files
                dirs = sum(f.entry.kind == KIND_DIR for f in held.values())
                result.trees.append(TreeRestore(name=name, dest=dest, seq=tchosen,
                                                actions={"keep-rolled-back": len(held) - dirs},
                                                directories={"keep-rolled-back": dirs} if dirs else {}))
                reporter.warn(f"restore: tree {name} was rolled back to checkpoint {tchosen}, which the store no "
                              "longer holds, and no checkpoint has published it yet: left as it is; the next "
                              "checkpoint publishes it")
                continue
            held = known.trees.get(name) if known is not None else None
            trees.append(TreeRun(repo, cache, tseqs, name, dest, reporter, cfg.state_dir,
                                 held.files if held is not None else None, adopt=adopt, chosen=tchosen,
                                 keep_local=adopt is None and at is None and held is not None and held.keep_local))
        for run in trees:
            run.emptied = dry_run and run.tr.name in old
        if want_state:
            # No live tree has changed yet: from here on, until the save below, the state
            # must not say that a restore completed (a kill mid-way would leave that marker
            # over half-changed trees, and the next checkpoint would publish them).
            clear_restore_marker(cfg.state_dir, repo.store_id)
        write_trees(trees, dry_run, aside, reporter)
        for run in trees:
            result.trees.append(run.tr)
            tcache = run.tree_cache(newest) if want_state else None
            if tcache is not None:
                caches[run.tr.name] = tcache
            if run.tr.lost or run.tr.uncreatable or run.tr.error:
                result.complete = False
            if run.tr.fallback_note():
                result.fallback = True
        # Every tree's files and directories are durable here (restore/publish.py): only now may
        # the state say that the restore is complete.
        if want_state:
            _save_restored_state(cfg, repo, cache, newest or 0, all_seqs, caches, result.complete)
        if to is not None and not dry_run:
            write_mark(to, ExportMark(trees=[name for name, _ in names], seq=result.seq, complete=result.complete),
                       cfg.state_dir)
        return result


def _where_this_disk_stands(cfg, repo: Repository, cache: ManifestCache, all_seqs: list[int], target: int,
                            names: list[tuple[str, str]], result: RestoreResult, reporter: Reporter,
                            dry_run: bool) -> tuple[Adopt | None, dict | None]:
    """A restore into the live trees: classify this disk (``result.lineage``); when it
    is stale, or this is a rollback, keep its local work as a fork (not in a dry run)
    and return how the trees adopt ``target`` with the trees as the fork's scan saw
    them; (None, None) for a fresh or hot disk."""
    position = classify(load_state(cfg.state_dir, repo.store_id), repo, cache, all_seqs)
    result.lineage = position.case.value
    if position.case is Case.STALE:
        result.lineage_note = position.describe()
    if not result.rollback and position.case is not Case.STALE:
        return None, None
    exact = result.rollback
    why = (f"rollback to checkpoint {target}" if exact else
           "refused writer" if position.refused is not None else "stale or diverged disk")
    if position.case is Case.FRESH:
        return None, None   # no local state: nothing here was ever checkpointed, so newer local files stay
    adopt = Adopt(onto=target, exact=exact)
    if dry_run:
        return adopt, None
    work = LocalWork(cache, dict(names), position.base, target, exact)
    result.fork, scanned = commit_fork(cfg, repo, onto=target, why=f"{why}: {position.describe()}"[:256], work=work,
                                       reupload=position.base != position.newest, reporter=reporter)
    adopt.fork = result.fork.seq
    fork = result.fork
    said = "" if exact else f"{position.describe()}; "
    if fork.seq is not None:
        reporter.warn(f"restore: {said}this disk's local work that checkpoint {target} lacks "
                      f"({len(fork.work)} path(s), e.g. {shown(fork.work[0])}) is kept as fork {fork.seq}; the live "
                      f"trees become checkpoint {target}. `journal ls --at {fork.seq}` shows the fork, "
                      f"`journal diff {target} {fork.seq}` what it adds, `journal restore --at {fork.seq} --to DIR` "
                      "exports it")
    else:
        reporter.warn(f"restore: {said}nothing on this disk is newer than checkpoint {target}, so no fork was "
                      f"needed; the live trees become checkpoint {target}")
    return adopt, scanned


def _tree_seqs(known: LocalState | None, name: str, seqs: list[int], adopt: Adopt | None, at: Moment | None,
               chosen: int | None) -> tuple[list[int], int | None]:
    """The checkpoints tree ``name`` may come from, and the fork it may (``chosen``):
    ``seqs``; on a hot restart, those up to the one a rollback or fallback restored it
    from while no checkpoint has published that version yet (the local state says so:
    that version is the newer local state)."""
    tree = known.trees.get(name) if known is not None and adopt is None and at is None else None
    if tree is None or tree.restored is None or tree.restored_seq is None:
        return seqs, chosen
    return [s for s in seqs if s <= tree.restored_seq], tree.restored_seq   # it may be gone: the caller keeps it


def _check_to(to: str) -> None:
    """``--to`` must be a directory or creatable as one: no regular file on the way."""
    path = os.path.abspath(to)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise ConfigError(f"restore: --to {to}: {path} is not a directory; choose another --to")


def _tree_names(cfg, cache: ManifestCache, seqs: list[int], to: str | None, result, reporter) -> list[tuple[str, str]]:
    # Every manifest carries every tree the store has seen, so the newest readable
    # one names them all: restore's metadata reads do not grow with history.
    stored: set[str] = set()
    first_error: JournalError | None = None
    for seq in reversed(seqs):
        try:
            stored.update(cache.manifest(seq)[0].trees)
            break
        except (CorruptObject, ObjectNotFound) as err:
            first_error = first_error or err
            reporter.warn(f"restore: skipping manifest {seq}: {err}")
    else:
        if seqs:  # history exists and none of it reads: "nothing to restore" would be a lie
            raise NoReadableCheckpoint("restore", len(seqs), manifest_key(seqs[-1]), str(first_error))
    for name in sorted(stored):
        if not TREE_NAME.match(name):
            stored.discard(name)
            result.complete = False
            result.trees.append(TreeRestore(name=name, dest="", error=str(UnsafePath(name, "not a valid tree name"))))
    if to is not None:
        return [(name, os.path.join(to, name)) for name in sorted(stored)]
    configured = {t.name: t.path for t in cfg.trees + cfg.dormant}
    if stored and not stored & configured.keys():
        # A container that forgot AM_LOCAL would "restore nothing" and start its agent
        # on empty state, and its first checkpoint would publish that.
        where = "AM_LOCAL is unset" if cfg.local is None else f"AM_LOCAL is {cfg.local}"
        raise ConfigError(f"restore: the store holds tree(s) {', '.join(sorted(stored))} but none of them is "
                          f"configured here ({where}); set AM_LOCAL to the directory that holds the agents' state, "
                          "add the trees to the config (`journal trees` shows it), or point JOURNAL_STORE at this "
                          "container's own store")
    for name in sorted(stored - configured.keys()):
        result.warnings.append(f"restore: tree {name} is in the store but not configured here; left in the store")
    return [(name, configured[name]) for name in sorted(stored & configured.keys())]


def _save_restored_state(cfg, repo: Repository, cache: ManifestCache, newest: int, all_seqs, caches,
                         complete: bool) -> None:
    """The local state after a restore into the live trees: it follows ``newest`` (the
    store's newest checkpoint on the main line: the next checkpoint builds on it)."""
    state = load_state(cfg.state_dir, repo.store_id) or new_state(repo.store_id)
    restored = LocalState(store_id=repo.store_id, writer=state.writer,
                          seq=newest, manifest_id=cache.manifest_id(newest),
                          restore_complete=complete, trees=_carry_forward(cache, all_seqs, caches),
                          encrypted=repo.codec.encrypted, key_id=repo.key_id)
    save_state(cfg.state_dir, restored)


def _carry_forward(cache: ManifestCache, seqs: list[int], caches: dict[str, TreeCache]) -> dict[str, TreeCache]:
    """Trees restored here, plus stored trees not configured here, kept as the newest
    readable manifest of ``seqs`` (every manifest, even for ``restore --at``: this
    machine did not roll those back, and a checkpoint may only name packs the newest
    manifest reaches, which gc keeps)."""
    trees = dict(caches)
    for seq in reversed(seqs):
        try:
            manifest, _ = cache.manifest(seq)
        except (CorruptObject, ObjectNotFound):
            continue
        if manifest.is_fork:
            continue
        for name, root in manifest.trees.items():
            if name in trees:
                continue
            try:
                entries, pages = cache.tree(seq, name)
            except (CorruptObject, ObjectNotFound):
                continue
            trees[name] = cache_from_entries(root.root, pages, entries, bases=cache.page_bases(seq, name))
        break
    return trees
