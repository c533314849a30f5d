"""The restore operation: the newest valid manifest -> the trees of one target.

A restore has one target per mode (``Target``):

* ``LiveTarget``: the configured live trees. Newer local state is kept, where this
  disk stands decides what is adopted, and the local state is saved at the end.
* ``ExportTarget``: ``--to DIR``, every stored tree under ``DIR`` (``restore/export.py``).
  Neither the live trees nor the local state are touched.
* ``LiveDryRun`` and ``ExportDryRun``: the same, planned and reported; nothing is
  created or changed.

For each tree, the newest manifest whose integrity holds and whose index pages load
is used. Each file is written only from verified blobs, and reaches its live path only
once its bytes are durable; a file whose blobs are bad or missing falls back to the
newest older manifest with a good copy, else it is reported lost (``restore/trees.py``).
Only a restore with nothing lost, once everything it wrote is durable, marks the local
state complete.

A partial restore (``include``: ``restore/include.py``) takes only the entries its
patterns select, in either target. Onto the live trees it never marks for complete
what it did not restore: on a hot disk the local state keeps what it said of every
other path (complete only if it was), and a fresh disk stays fresh (no local state is
saved, so a checkpoint still refuses until a whole restore). A stale disk or a
rollback, which a whole tree's fork and adoption need, is refused.
"""

from __future__ import annotations

import os

import msgspec

from ..config import TREE_NAME, Config, KeySource
from ..errors import ConfigError, CorruptObject, JournalError, ObjectNotFound
from ..local.errors import UnsafePath
from ..os_errors import describe_error
from ..repository.errors import NoReadableCheckpoint
from .errors import IncludeMatchesNothing, PartialRestoreRefused
from .export import ExportMark, begin_export, check_export_dir, write_mark
from .include import Include, merge_restored
from ..format.model import KIND_DIR
from ..repository.history import ManifestCache, select_seqs
from ..repository.moment import Moment, parse_moment
from ..checkpoint.fork import ForkResult, commit_fork
from ..repository.lineage import Case, Position, classify, newest_main, open_and_list, require_history
from ..local.state import (LocalState, StateLock, TreeCache, cache_from_entries, clear_restore_marker, load_state,
                         new_state, save_state)
from ..background import Background
from ..heap import cycles_paused
from ..report import SILENT, Reporter
from ..repository import fetch
from ..local import activity, tree_tmp
from ..paths import INVALID_DIR, TMP_DIR, shown
from ..repository.repository import Repository, manifest_key, utc_now
from .adopt import Adopt, LocalWork
from .entry import Verdict
from .trees import RestorePaths, TreeRestore, TreeRun, write_trees
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
    include: list[str] = []         # a partial restore: its patterns (each tree lists what they select)

    def fallback_notes(self) -> list[str]:
        """One line per tree restored from a fallback (``TreeRestore.fallback_note``)."""
        return [f"{t.name}: {t.fallback_note()}" for t in self.trees if t.fallback_note()]


def restore(cfg: Config, store: Store, reporter: Reporter = SILENT, *, at: str | None = None,
            to: str | None = None, dry_run: bool = False, replace: bool = False,
            rollback: bool = False, include: list[str] | None = None) -> RestoreResult:
    """Restore every configured tree into the live trees, or every stored tree into ``to``.

    Into the live trees, where this disk stands decides (``lineage.classify``). On a
    fresh or hot disk, newer local state is kept. On a stale disk (the store moved
    on), or on a rollback (``at`` with ``rollback``), the local work that the chosen
    checkpoint lacks is first kept as a fork; then the trees become that checkpoint
    (``restore/adopt.py``). The outcome, or the error, is recorded for ``journal status``.

    ``to`` must be absent or empty, or hold an earlier export and ``replace`` be given
    (``restore/export.py``): an export is exactly the checkpoint asked for.
    ``dry_run`` plans and reports every tree, and changes nothing. ``include``: only
    the paths these patterns select (see the module docstring); a pattern that
    matches nothing is ``IncludeMatchesNothing``, raised before anything is written.
    """
    moment = None if at is None else parse_moment(at, "restore", "--at")  # named first, whatever else is wrong
    selection = Include(include) if include else None
    if selection is not None and to is None and at is not None:
        raise PartialRestoreRefused(f"some paths of checkpoint {at} among the others' would mix two checkpoints "
                                    f"in the live trees; export them (`journal restore --at {at} --to DIR --include "
                                    "PATTERN`)")
    _check_options(at, to, rollback)
    target = choose_target(cfg, to, replace, dry_run)
    check = None if dry_run else os.path.join(cfg.state_dir, TMP_DIR)   # a dry run creates nothing there
    paths = RestorePaths(state_dir=cfg.state_dir, check=check,
                         aside=os.path.join(cfg.state_dir, INVALID_DIR, utc_now().replace(":", "")))
    records = target.live and target.writes
    try:
        with cycles_paused():
            result = Restoring(store, cfg.key, target, paths, reporter, moment, rollback, selection).run()
    except (JournalError, OSError) as err:
        if records:
            activity.failed(cfg.state_dir, "restore", describe_error(err))
        raise
    finally:
        fetch.shutdown()  # nothing more to fetch: no idle threads left behind
    if records:
        activity.restore_done(cfg.state_dir, activity.restore_record(result))
    return result


def _check_options(at: str | None, to: str | None, rollback: bool) -> None:
    """Refuse ``--at`` onto the live trees without ``--rollback``, and ``--rollback`` without it."""
    if to is None and at is not None and not rollback:
        raise ConfigError(f"restore: checkpoint {at} onto the live trees would roll them back; `journal restore "
                          f"--at {at} --rollback` does that (local work newer than that checkpoint is kept as a fork "
                          f"first), `journal restore --at {at} --to DIR` exports it")
    if rollback and (to is not None or at is None):
        raise ConfigError("restore: a rollback makes the live trees an older checkpoint: it needs the checkpoint "
                          "(`journal restore --at SEQ|TIME --rollback`), and no export directory")


def choose_target(cfg: Config, to: str | None, replace: bool, dry_run: bool) -> Target:
    """The target of one mode: the live trees or ``to``, for real or as a dry run."""
    if to is None:
        return LiveDryRun(cfg) if dry_run else LiveTarget(cfg)
    return (ExportDryRun if dry_run else ExportTarget)(to, replace, cfg.state_dir)


class Restoring:
    """One restore under way, step by step (``run``). A target's steps read it."""

    # Set once the store is open (``run``):
    repo: Repository
    cache: ManifestCache
    all_seqs: list[int]     # every manifest, ascending: the one listing a restore makes
    seqs: list[int]         # those the restore may use (up to ``at``)
    chosen: int | None      # the checkpoint ``at`` names by number (a fork may be), else None

    def __init__(self, store: Store, key: KeySource | None, target: Target, paths: RestorePaths,
                 reporter: Reporter, at: Moment | None = None, rollback: bool = False, include: Include | None = None):
        self.store, self.key, self.target, self.paths, self.reporter = store, key, target, paths, reporter
        self.at = at
        self.include = include   # a partial restore: the patterns that select what it takes
        self.result = RestoreResult(dry_run=not target.writes, rollback=rollback,
                                    include=include.patterns if include is not None else [])
        self.names: list[tuple[str, str]] = []   # (tree, directory) for each tree restored
        self.runs: list[TreeRun] = []            # the trees written
        self.kept: dict[str, TreeCache] = {}     # rolled-back trees left as they are (``_keep_rolled_back``)
        self.newest = 0                          # the store's newest checkpoint on the main line; 0: none
        self.sweeping: Background | None = None  # the store's temp files swept meanwhile (``_sweep``)

    def run(self) -> RestoreResult:
        target, state_dir = self.target, self.paths.state_dir
        target.prepare()  # refused before anything is touched
        with StateLock(state_dir, wait=True, create=target.writes):
            self.repo, self.all_seqs = open_and_list(self.store, state_dir, create=target.writes, key=self.key)
            if target.live:
                require_history("restore", state_dir, self.repo, self.all_seqs)
            if target.writes:
                self._sweep()
            self.cache = ManifestCache(self.repo)
            self.seqs, self.chosen = select_seqs(self.cache, self.at, self.all_seqs)
            seqs = self.seqs
            onto = self.chosen if self.chosen is not None else newest_main(self.cache, seqs)
            self.result.seq = onto or (seqs[-1] if seqs else None)
            self.names = target.destinations(self._stored_trees(seqs), self.result)
            if onto:
                self.cache.read_ahead(onto, [name for name, _ in self.names])   # one round trip per level
            self.newest = newest_main(self.cache, self.all_seqs) if seqs else 0
            known, adopt = target.local_view(self, onto) if seqs else (target.local_state(self), None)
            for name, dest in self.names:
                self._plan_tree(name, dest, known, adopt)
            if self.include is not None:
                self._select(self.include)
            target.begin(self)
            write_trees(self.runs, not target.writes, self.reporter)
            self._tally()
            if self.sweeping is not None:
                self.sweeping.result()
            # Every tree's files and directories are durable here (restore/publish.py).
            target.finish(self)
            return self.result

    def _sweep(self) -> None:
        """Remove what a killed writer or restore left: at startup, not on every tick. The
        store's temp files go in a thread (on a mount, a listing is a round trip before
        the first byte), waited for before the restore finishes."""
        self.sweeping = Background(self.store.sweep_temp, name="journal-sweep")
        for warning in tree_tmp.sweep(self.paths.state_dir)[1]:  # a killed restore's temp dirs in the trees
            self.reporter.warn(f"restore: {warning}")

    def _stored_trees(self, seqs: list[int]) -> list[str]:
        """Every valid tree name the store holds, sorted. Every manifest carries every tree
        the store has seen, so the newest readable one names them all: restore's metadata
        reads do not grow with history. An invalid name is reported as a failed tree."""
        stored: set[str] = set()
        first_error: JournalError | None = None
        for seq in reversed(seqs):
            try:
                stored.update(self.cache.manifest(seq)[0].trees)
                break
            except (CorruptObject, ObjectNotFound) as err:
                first_error = first_error or err
                self.reporter.warn(f"restore: skipping manifest {seq}: {err}")
        else:
            if seqs:  # history exists and none of it reads: "nothing to restore" would be a lie
                raise NoReadableCheckpoint("restore", len(seqs), manifest_key(seqs[-1]), str(first_error))
        for name in sorted(stored):
            if not TREE_NAME.match(name):
                stored.discard(name)
                self.result.complete = False
                self.result.trees.append(TreeRestore(name=name, dest="", error=str(UnsafePath(name, "not a valid "
                                                                                                  "tree name"))))
        return sorted(stored)

    def _plan_tree(self, name: str, dest: str, known: LocalState | None, adopt: Adopt | None) -> None:
        """Set up the restore of tree ``name`` into ``dest``. ``known`` is what this
        machine last had of it; ``adopt`` says how the trees adopt a checkpoint."""
        tseqs, tchosen = _tree_seqs(known, name, self.seqs, adopt, self.at, self.chosen)
        if tchosen is not None and tchosen not in tseqs:
            self._keep_rolled_back(name, dest, tchosen, known.trees[name])
            return
        held = known.trees.get(name) if known is not None else None
        keep_local = adopt is None and self.at is None and held is not None and held.keep_local
        run = TreeRun(self.repo, self.cache, tseqs, name, dest, self.reporter, self.paths,
                      held.files if held is not None else None, adopt=adopt, chosen=tchosen, keep_local=keep_local)
        run.emptied = self.target.emptied(name)
        self.runs.append(run)

    def _select(self, include: Include) -> None:
        """Keep only the trees the patterns take something of, each restricted to what
        they take; a pattern that matches nothing raises, before anything is written."""
        self.runs = [run for run in self.runs if run.select(include)]
        missed = include.unmatched()
        if missed:
            unreadable = [run.tr.name for run in self.runs if run.tr.error]
            raise IncludeMatchesNothing(shown(missed[0]), self.result.seq, unreadable)
        taken = {run.tr.name for run in self.runs}
        self.names = [(name, dest) for name, dest in self.names if name in taken]

    def _keep_rolled_back(self, name: str, dest: str, seq: int, held: TreeCache) -> None:
        """A rollback not published yet whose checkpoint a gc deleted since: the tree on
        disk is the only copy of it, and the newer local state. It is left as it is."""
        self.kept[name] = held
        dirs = sum(f.entry.kind == KIND_DIR for f in held.files.values())
        self.result.trees.append(TreeRestore(
            name=name, dest=dest, seq=seq, actions={Verdict.KEEP_ROLLED_BACK: len(held.files) - dirs},
            directories={Verdict.KEEP_ROLLED_BACK: dirs} if dirs else {}))
        self.reporter.warn(f"restore: tree {name} was rolled back to checkpoint {seq}, which the store no longer "
                           "holds, and no checkpoint has published it yet: left as it is; the next checkpoint "
                           "publishes it")

    def _tally(self) -> None:
        """Add each tree written to the result; a loss makes it incomplete."""
        for run in self.runs:
            self.result.trees.append(run.tr)
            if run.tr.lost or run.tr.uncreatable or run.tr.error:
                self.result.complete = False
            if run.tr.fallback_note():
                self.result.fallback = True


class Target:
    """Where a restore writes its trees. There is one subclass per mode; each step a
    mode takes differently is a method here, a no-op by default."""

    #: Into the live trees: this disk's history must be known, and where it stands decides.
    live = False
    #: Creates or changes anything; False in a dry run.
    writes = True

    def prepare(self) -> None:
        """Refuse what this target cannot take, before anything is touched."""

    def destinations(self, stored: list[str], result: RestoreResult) -> list[tuple[str, str]]:
        """``(tree, directory)`` for each of the ``stored`` trees this target restores."""
        raise NotImplementedError

    def local_state(self, r: Restoring) -> LocalState | None:
        """What this machine last had of the trees; None: newer local state is not known."""
        return None

    def local_view(self, r: Restoring, onto: int) -> tuple[LocalState | None, Adopt | None]:
        """The local state, and how the trees adopt checkpoint ``onto`` (None: they do not)."""
        return self.local_state(r), None

    def emptied(self, name: str) -> bool:
        """Whether tree ``name``'s directory counts as empty although it is not (yet)."""
        return False

    def begin(self, r: Restoring) -> None:
        """Runs once every tree is set up, before the first one changes."""

    def finish(self, r: Restoring) -> None:
        """Runs once every tree's files and directories are durable."""


class LiveTarget(Target):
    """The configured live trees. Newer local state is kept (requirement 5), and the
    local state is saved once every tree is durable."""

    live = True

    def __init__(self, cfg: Config):
        self.cfg = cfg   # a stale disk's fork is a checkpoint of the whole configuration
        self.before: LocalState | None = None   # the local state as ``begin`` found it

    def destinations(self, stored: list[str], result: RestoreResult) -> list[tuple[str, str]]:
        configured = {t.name: t.path for t in self.cfg.trees + self.cfg.dormant}
        if stored and not configured.keys() & set(stored):
            # A container that forgot AM_LOCAL would "restore nothing" and start its agent
            # on empty state, and its first checkpoint would publish that.
            where = "AM_LOCAL is unset" if self.cfg.local is None else f"AM_LOCAL is {self.cfg.local}"
            raise ConfigError(f"restore: the store holds tree(s) {', '.join(stored)} but none of them is "
                              f"configured here ({where}); set AM_LOCAL to the directory that holds the agents' "
                              "state, add the trees to the config (`journal trees` shows it), or point "
                              "JOURNAL_STORE at this container's own store")
        for name in stored:
            if name not in configured:
                result.warnings.append(f"restore: tree {name} is in the store but not configured here; left in "
                                       "the store")
        return [(name, configured[name]) for name in stored if name in configured]

    def local_state(self, r: Restoring) -> LocalState | None:
        return load_state(self.cfg.state_dir, r.repo.store_id)

    def local_view(self, r: Restoring, onto: int) -> tuple[LocalState | None, Adopt | None]:
        adopt, scanned = self._where_this_disk_stands(r, onto)
        if scanned is not None:   # adopting: the live trees as the fork's scan just saw them
            return LocalState(store_id=r.repo.store_id, writer="", trees=scanned), adopt
        return self.local_state(r), adopt

    def _where_this_disk_stands(self, r: Restoring, onto: int) -> tuple[Adopt | None, dict | None]:
        """Classify this disk (``result.lineage``). A fresh or hot disk adopts nothing:
        (None, None). A stale disk, or a rollback, keeps its local work as a fork
        (``_keep_fork``), then adopts ``onto``: returns how, and the trees as the fork's
        scan saw them."""
        result = r.result
        position = classify(self.local_state(r), r.repo, r.cache, r.all_seqs)
        result.lineage = position.case.value
        if position.case is Case.STALE:
            result.lineage_note = position.describe()
            if r.include is not None:
                raise PartialRestoreRefused(f"this disk is stale ({position.describe()}); only a whole `journal "
                                            "restore` adopts the newer checkpoints (keeping this disk's local work "
                                            "as a fork first); or export the paths (`journal restore --to DIR "
                                            "--include PATTERN`)")
        if not result.rollback and position.case is not Case.STALE:
            return None, None
        if position.case is Case.FRESH:
            return None, None   # no local state: nothing here was ever checkpointed, so newer local files stay
        adopt = Adopt(onto=onto, exact=result.rollback)
        fork = self._keep_fork(r, position, adopt)
        if fork is None:
            return adopt, None
        result.fork, scanned = fork
        adopt.fork = result.fork.seq
        _say_fork(result.fork, onto, "" if adopt.exact else f"{position.describe()}; ", r.reporter)
        return adopt, scanned

    def _keep_fork(self, r: Restoring, position: Position, adopt: Adopt) -> tuple[ForkResult, dict] | None:
        """Commit this disk's local work that ``adopt.onto`` lacks as a fork."""
        onto = adopt.onto
        why = (f"rollback to checkpoint {onto}" if adopt.exact else
               "refused writer" if position.refused is not None else "stale or diverged disk")
        work = LocalWork(r.cache, dict(r.names), position.base, onto, adopt.exact)
        return commit_fork(self.cfg, r.repo, onto=onto, why=f"{why}: {position.describe()}"[:256], work=work,
                           reupload=position.base != position.newest, reporter=r.reporter)

    def begin(self, r: Restoring) -> None:
        if r.include is not None:   # a partial restore keeps what the state said of every other path
            self.before = self.local_state(r)
        # No live tree has changed yet. From here until ``finish`` saves the state, it
        # must not say that a restore completed: a kill mid-way would leave that marker
        # over half-changed trees, and the next checkpoint would publish them.
        clear_restore_marker(self.cfg.state_dir, r.repo.store_id)

    def finish(self, r: Restoring) -> None:
        """Save the local state, marked complete only when nothing was lost."""
        if r.include is not None:
            self._finish_partial(r)
            return
        caches = dict(r.kept)
        for run in r.runs:
            tcache = run.tree_cache(r.newest)
            if tcache is not None:
                caches[run.tr.name] = tcache
        _save_restored_state(self.cfg.state_dir, r.repo, r.cache, r.newest, r.all_seqs, caches, r.result.complete)

    def _finish_partial(self, r: Restoring) -> None:
        """A partial restore: on a hot disk, the local state as it was (its pending
        manifest too), each restored path's signature updated; complete only if it was
        and nothing was lost here. A fresh disk is left without a state: a checkpoint
        refuses until a whole restore."""
        before = self.before
        if r.result.lineage != Case.HOT.value or before is None:
            r.result.warnings.append("restore: only the paths the patterns select were restored into this fresh "
                                     "container; `journal checkpoint` refuses until a whole `journal restore` ran")
            return
        complete = before.restore_complete and r.result.complete
        if not complete:
            r.result.warnings.append("restore: the local state is not marked complete (the last whole restore here "
                                     "was not, or this one lost a path); `journal checkpoint` refuses until a whole "
                                     "`journal restore` ran")
        caches = _carry_forward(r.cache, r.all_seqs, dict(before.trees))
        for run in r.runs:
            tcache, held = run.tree_cache(r.newest), caches.get(run.tr.name)
            if tcache is not None and held is not None:
                caches[run.tr.name] = merge_restored(held, tcache)
        save_state(self.cfg.state_dir, msgspec.structs.replace(before, trees=caches, restore_complete=complete))


class LiveDryRun(LiveTarget):
    """A dry run into the live trees: this disk is classified and every tree planned;
    no fork is made and nothing is changed, the local state included."""

    writes = False

    def _keep_fork(self, r: Restoring, position: Position, adopt: Adopt) -> None:
        return None

    def begin(self, r: Restoring) -> None:
        pass

    def finish(self, r: Restoring) -> None:
        pass


class ExportTarget(Target):
    """``--to DIR``: every stored tree under ``DIR``, exactly as the checkpoint holds it
    (``restore/export.py``). Neither the live trees nor the local state are touched."""

    def __init__(self, to: str, replace: bool, state_dir: str):
        self.to, self.replace = os.path.abspath(to), replace
        self.state_dir = state_dir   # where journal records its temp directory in ``to``
        self.old: list[str] = []     # the earlier export's trees, removed first (``--replace``)

    def prepare(self) -> None:
        _check_to(self.to)
        self.old = check_export_dir(self.to, self.replace)

    def destinations(self, stored: list[str], result: RestoreResult) -> list[tuple[str, str]]:
        return [(name, os.path.join(self.to, name)) for name in stored]

    def begin(self, r: Restoring) -> None:
        self._say_replaced(r, "removing")
        begin_export(self.to, self.old, [name for name, _ in r.names], self.state_dir)

    def _say_replaced(self, r: Restoring, verb: str) -> None:
        r.result.replaced = [os.path.join(self.to, name) for name in self.old]
        for path in r.result.replaced:
            r.reporter.note(f"restore: {verb} {path}, written by the earlier export there (--replace)")

    def finish(self, r: Restoring) -> None:
        """Mark the export done, and complete when nothing was lost."""
        mark = ExportMark(trees=[name for name, _ in r.names], seq=r.result.seq, complete=r.result.complete,
                          include=r.result.include)
        write_mark(self.to, mark, self.state_dir)


class ExportDryRun(ExportTarget):
    """A dry run of ``--to DIR``: the trees an earlier export holds there count as
    removed (``--replace``), and nothing is changed."""

    writes = False

    def emptied(self, name: str) -> bool:
        return name in self.old

    def begin(self, r: Restoring) -> None:
        self._say_replaced(r, "would remove")

    def finish(self, r: Restoring) -> None:
        pass


def _say_fork(fork: ForkResult, onto: int, said: str, reporter: Reporter) -> None:
    """Tell what became of this disk's local work before the live trees become ``onto``."""
    if fork.seq is not None:
        reporter.warn(f"restore: {said}this disk's local work that checkpoint {onto} lacks "
                      f"({len(fork.work)} path(s), e.g. {shown(fork.work[0])}) is kept as fork {fork.seq}; the live "
                      f"trees become checkpoint {onto}. `journal ls --at {fork.seq}` shows the fork, "
                      f"`journal diff {onto} {fork.seq}` what it adds, `journal restore --at {fork.seq} --to DIR` "
                      "exports it")
    else:
        reporter.warn(f"restore: {said}nothing on this disk is newer than checkpoint {onto}, so no fork was "
                      f"needed; the live trees become checkpoint {onto}")


def _tree_seqs(known: LocalState | None, name: str, seqs: list[int], adopt: Adopt | None, at: Moment | None,
               chosen: int | None) -> tuple[list[int], int | None]:
    """The checkpoints tree ``name`` may come from, and the one asked for by number
    (``chosen``, a fork may be). Usually ``seqs`` and ``chosen``.

    On a hot restart after a rollback or a fallback that no checkpoint has published
    yet, the local state names the checkpoint the tree was restored from: that version
    is the newer local state, so only checkpoints up to it count. It may be gone since
    (the caller keeps the tree as it is)."""
    tree = known.trees.get(name) if known is not None and adopt is None and at is None else None
    if tree is None or tree.restored is None or tree.restored_seq is None:
        return seqs, chosen
    return [s for s in seqs if s <= tree.restored_seq], tree.restored_seq


def _check_to(to: str) -> None:
    """``--to`` must be a directory or creatable as one: no regular file on the way."""
    path = os.path.abspath(to)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        raise ConfigError(f"restore: export directory {to}: {path} is not a directory; choose another directory")


def _save_restored_state(state_dir: str, repo: Repository, cache: ManifestCache, newest: int, all_seqs: list[int],
                         caches: dict[str, TreeCache], complete: bool) -> None:
    """Save the local state after a restore into the live trees. It follows ``newest``,
    the store's newest checkpoint on the main line: the next checkpoint builds on it."""
    state = load_state(state_dir, repo.store_id) or new_state(repo.store_id)
    restored = LocalState(store_id=repo.store_id, writer=state.writer,
                          seq=newest, manifest_id=cache.manifest_id(newest),
                          restore_complete=complete, trees=_carry_forward(cache, all_seqs, caches),
                          encrypted=repo.codec.encrypted, key_id=repo.key_id)
    save_state(state_dir, restored)


def _carry_forward(cache: ManifestCache, seqs: list[int], caches: dict[str, TreeCache]) -> dict[str, TreeCache]:
    """The trees of the saved state: those restored here, and the stored trees not
    configured here, as the newest readable main-line manifest of ``seqs`` holds them.
    All of ``seqs``, even for ``restore --at``: this machine did not roll those trees
    back, and a checkpoint may only name packs the newest manifest reaches (gc keeps
    those)."""
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
