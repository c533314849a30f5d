"""The migrate operation: the legacy rsync layout becomes each harness's first checkpoint.

``plan_migration()`` (migrate/plan.py) reads the legacy root, the old HOME, the live trees,
the processes' open files and the store, changes nothing, and returns a frozen
``MigrationPlan`` listing every step with its reason. ``execute()`` runs it once:

1. the open transcripts are found again and their complete lines measured;
2. legacy files missing locally are copied into the live trees (an existing local
   path is never replaced); the Codex sessions symlink is unlinked first;
3. each database gets the first legacy copy that SQLite recovers and quick_check
   passes, recovered in a private temp directory (never opened in place);
4. one checkpoint publishes the live trees, the open transcripts included;
5. ``verify --full``, then each open transcript's complete lines are read back;
6. only then are the old opencode/Hermes/fx directories renamed ``*.pre-agent-state``.

Nothing is ever deleted; see docs/design.md §17.
"""

from __future__ import annotations

import enum
import hashlib
import os
import stat as stat_mod
import tempfile

import msgspec

from ..atomic import rename_noclobber
from ..checkpoint.run import checkpoint
from ..config import Config
from ..errors import CorruptObject, ObjectNotFound, StoreError
from ..checkpoint.errors import CheckpointErrors
from ..local.errors import UnsafePath
from ..sqlite.errors import SnapshotFailed
from ..repository.history import ManifestCache
from .open_files import OpenTranscript, complete_length, find_open_transcripts
from .plan import (LEGACY_TREES, Action, MigrationPlan, Step,
                   legacy_sources, plan_migration, retired_name)
from .legacy_db import DbCandidate, recover_db
from ..localfs import chmod_dir, open_regular
from ..paths import INVALID_DIR
from ..restore.aside import move_aside
from ..restore.entry import ensure_parents
from ..format.model import KIND_JSONL, KIND_SQLITE, Entry
from ..presets import SQLITE_COMPANIONS
from ..report import SILENT, Reporter
from ..repository.repository import Repository, utc_now
from ..repository.segments import read_blobs
from ..store.base import Store
from ..local.tree_tmp import TreeTmp
from ..verify import verify

class Outcome(enum.StrEnum):
    """What became of one step. ``--json`` shows these values: they never change."""

    DONE = "done"
    SKIPPED = "skipped"     # its precondition no longer holds (a path appeared since the plan): never forced
    FAILED = "failed"
    PLANNED = "planned"     # a dry run: nothing was done
    NOTED = "noted"         # nothing to do (a step that leaves something alone)


class StepResult(msgspec.Struct, kw_only=True):
    step: Step
    outcome: Outcome
    detail: str = ""


class Capture(msgspec.Struct, kw_only=True):
    """An open transcript: its complete lines when migrate started, and what the checkpoint holds."""

    path: str
    tree: str
    rel: str
    pids: tuple[int, ...]
    complete: int           # bytes of complete lines when measured
    sha256: str             # of those bytes
    stored: int = 0         # bytes the checkpoint holds
    ok: bool = False
    detail: str = ""


class MigrationReport(msgspec.Struct, kw_only=True):
    dry_run: bool
    ok: bool = False
    noop: bool = False      # nothing to import, capture, unlink or rename
    plan: MigrationPlan
    results: list[StepResult] = []
    seq: int | None = None  # the checkpoint that holds the migration
    verified: bool = False
    captures: list[Capture] = []
    problems: list[str] = []
    warnings: list[str] = []


def migrate(cfg: Config, store: Store, legacy_root: str, *, old_home: str | None = None,
            dry_run: bool = False, reporter: Reporter = SILENT) -> MigrationReport:
    """Plan the migration; with ``dry_run`` return the plan as the report, else execute it."""
    plan = plan_migration(cfg, store, legacy_root, old_home=old_home, reporter=reporter)
    if not dry_run:
        return execute(plan, cfg, store, reporter)
    return MigrationReport(dry_run=True, ok=not plan.problems, noop=_noop(plan), plan=plan,
                           results=[StepResult(step=s, outcome=Outcome.PLANNED) for s in plan.steps],
                           problems=list(plan.problems), warnings=list(plan.warnings))


def _noop(plan: MigrationPlan) -> bool:
    return not any(s.op in (Action.CHECKPOINT, Action.RENAME, Action.UNLINK) for s in plan.steps)


def execute(plan: MigrationPlan, cfg: Config, store: Store, reporter: Reporter = SILENT) -> MigrationReport:
    """Run ``plan`` once, in order; see the module docstring. Never deletes anything.

    A step whose precondition no longer holds (a path appeared locally since the
    plan) is skipped, never forced. The renames run only when the checkpoint
    verified; otherwise the old directories stay where they are.
    """
    report = MigrationReport(dry_run=False, noop=_noop(plan), plan=plan, problems=list(plan.problems),
                             warnings=list(plan.warnings))
    run = _Run(plan, cfg, store, reporter, report)
    with tempfile.TemporaryDirectory(prefix="journal-migrate-") as run.tmp:
        try:
            run.measure_open_transcripts()
            for step in plan.steps:
                outcome, detail = _run_step(run, step)
                report.results.append(StepResult(step=step, outcome=outcome, detail=detail))
                if outcome == Outcome.FAILED:
                    report.problems.append(f"migrate: {step.op} {step.path}: {detail}")
        finally:
            run.close_tree_tmps()
    publishes = any(s.op == Action.CHECKPOINT for s in plan.steps)
    if not publishes:
        for c in report.captures:  # opened after the plan was made: the plan has no checkpoint for it
            report.problems.append(f"migrate: {c.path} was opened after the plan; run `journal migrate` again")
    report.ok = not report.problems and (report.verified or not publishes)
    return report


def _run_step(run: "_Run", step: Step) -> tuple[Outcome, str]:
    handler = _HANDLERS.get(step.op)
    if handler is None:
        return Outcome.NOTED, ""
    try:
        return handler(run, step)
    except StoreError as err:  # the checkpoint or verify step: it fails, and the report says why
        return Outcome.FAILED, str(err)
    except OSError as err:
        return Outcome.FAILED, f"{err.strerror or err}: {err.filename or step.path}"


class _Run:
    """What one execution carries between steps."""

    def __init__(self, plan: MigrationPlan, cfg: Config, store: Store, reporter: Reporter, report: MigrationReport):
        self.plan, self.cfg, self.store, self.reporter, self.report = plan, cfg, store, reporter, report
        self.trees = {t.name: t for t in cfg.trees + cfg.dormant}
        self.tmp = ""
        self.trim: set[str] = set()                 # open sources: copied up to their last complete line
        self.new_dirs: list[tuple[str, int]] = []
        self.aside = os.path.join(cfg.state_dir, INVALID_DIR, utc_now().replace(":", ""))
        self.tree_tmps: dict[str, TreeTmp] = {}    # tree root -> journal's temp dir in it

    def tree_tmp(self, root: str) -> TreeTmp:
        """The temp directory in the live tree ``root`` (``local/tree_tmp.py``), made on first use."""
        if root not in self.tree_tmps:
            self.tree_tmps[root] = TreeTmp.make(root, self.cfg.state_dir)
        return self.tree_tmps[root]

    def close_tree_tmps(self) -> None:
        """Remove the trees' temp directories (before the checkpoint walks the trees)."""
        tmps, self.tree_tmps = self.tree_tmps, {}
        for tmp in tmps.values():
            warning = tmp.close()
            if warning:
                self.report.warnings.append(f"migrate: {warning}")

    def measure_open_transcripts(self) -> None:
        names = dict.fromkeys(t for _, t in LEGACY_TREES)
        sources = {n: legacy_sources(n, self.plan.legacy_root, self.plan.old_home) for n in names}
        for o in find_open_transcripts(self.trees, sources):
            if o.legacy and o.tree not in self.plan.imports:
                continue  # already a plan problem: that tree is not imported
            try:
                capture = _measure(o)
            except FileNotFoundError:
                continue  # closed and removed since the scan: nothing open to capture
            self.trim.add(o.path)
            self.report.captures.append(capture)

    def root_rel(self, step: Step) -> tuple[str, str]:
        root = self.trees[step.tree].path
        return root, os.path.relpath(step.path, root)


def _measure(o: OpenTranscript) -> Capture:
    digest = hashlib.sha256()
    with open(o.path, "rb") as fh:
        complete = complete_length(fh.fileno(), os.fstat(fh.fileno()).st_size)
        for piece in _read_upto(fh, complete):
            digest.update(piece)
    return Capture(path=o.path, tree=o.tree, rel=o.rel, pids=o.pids, complete=complete, sha256=digest.hexdigest())


def _read_upto(fh, limit: int):
    left = limit
    while left > 0:
        piece = fh.read(min(left, 1 << 20))
        if not piece:
            return
        left -= len(piece)
        yield piece


# --------------------------------------------------------------------------- steps


def _import_tree(run: _Run, step: Step) -> tuple[Outcome, str]:
    if os.path.isdir(step.path):
        return Outcome.NOTED, ""
    os.makedirs(step.path, 0o700, exist_ok=True)
    return Outcome.DONE, "created the live tree"


def _unlink(run: _Run, step: Step) -> tuple[Outcome, str]:
    # Only the link itself, and only if it still is the link the plan saw.
    if not os.path.islink(step.path) or os.readlink(step.path) != step.target:
        return Outcome.SKIPPED, "no longer the planned symlink; left alone"
    os.unlink(step.path)
    return Outcome.DONE, f"unlinked; its target {step.target} is untouched"


def _guarded(fn):
    """A per-path step: a path that appeared since the plan is kept; an unsafe parent fails."""
    def run_step(run: _Run, step: Step) -> tuple[Outcome, str]:
        if os.path.lexists(step.path):
            return Outcome.SKIPPED, "exists locally now (appeared since the plan); kept"
        root, rel = run.root_rel(step)
        try:
            ensure_parents(root, rel)
            return fn(run, step, root, rel)
        except (UnsafePath, OSError) as err:
            return Outcome.FAILED, str(err)
    return run_step


@_guarded
def _mkdir(run: _Run, step: Step, root: str, rel: str) -> tuple[Outcome, str]:
    os.mkdir(step.path, 0o700)
    mode = stat_mod.S_IMODE(os.lstat(step.source).st_mode)
    if mode & 0o700 == 0o700:
        chmod_dir(step.path, mode)  # now: a run killed before the checkpoint leaves the right mode
    else:
        run.new_dirs.append((step.path, mode))  # stays writable until its files are in place
    return Outcome.DONE, ""


@_guarded
def _copy(run: _Run, step: Step, root: str, rel: str) -> tuple[Outcome, str]:
    fh = open_regular(step.source)  # still the regular file the plan saw, never a link or FIFO
    if fh is None:
        return Outcome.FAILED, "no longer a regular file (changed since the plan); nothing copied"
    with fh:
        st = os.fstat(fh.fileno())
        size = st.st_size
        if step.kind == KIND_JSONL:
            size = complete_length(fh.fileno(), size)  # never a torn last line, open writer or not
        written = run.tree_tmp(root).publish(step.path, _read_upto(fh, size), mode=stat_mod.S_IMODE(st.st_mode),
                                             mtime_ns=st.st_mtime_ns)
    cut = st.st_size - written
    if not cut:
        return Outcome.DONE, f"{written:,} bytes"
    if os.path.realpath(step.source) in run.trim:
        return Outcome.DONE, f"{written:,} bytes (an open writer's incomplete last {cut} bytes left out)"
    run.report.warnings.append(f"migrate: {step.source}: its last {cut} bytes are not a complete line; left "
                               "out of the live copy (the legacy file keeps them)")
    return Outcome.DONE, f"{written:,} bytes (an incomplete last line of {cut} bytes left out)"


@_guarded
def _link(run: _Run, step: Step, root: str, rel: str) -> tuple[Outcome, str]:
    tmp = run.tree_tmp(root)
    name = tmp.new_symlink(os.readlink(step.source))
    try:
        tmp.rename_noclobber(name, step.path)
    except BaseException:
        tmp.unlink(name)
        raise
    return Outcome.DONE, ""


def _move_db(run: _Run, step: Step) -> tuple[Outcome, str]:
    root, rel = run.root_rel(step)
    try:
        moved = move_aside(root, Entry(path=rel, kind=KIND_SQLITE, mode=0), os.path.join(run.aside, step.tree))
    except (UnsafePath, OSError) as err:  # nothing written over it: the step fails, the others go on
        return Outcome.FAILED, str(err)
    return Outcome.DONE, f"moved (with its -wal/-shm) to {moved}"


@_guarded
def _install_db(run: _Run, step: Step, root: str, rel: str) -> tuple[Outcome, str]:
    with tempfile.TemporaryDirectory(dir=run.tmp) as private:
        try:
            verified = recover_db(DbCandidate(path=step.source, kind=step.kind), private)
        except SnapshotFailed as err:
            return Outcome.FAILED, f"{err.detail}; the legacy copy is left untouched"
        for suffix in SQLITE_COMPANIONS:
            if os.path.lexists(step.path + suffix):  # a stray WAL would be replayed into the new file
                move_aside(root, Entry(path=rel + suffix, kind=KIND_SQLITE, mode=0), os.path.join(run.aside, step.tree))
        st = os.stat(step.source)
        with open(verified, "rb") as fh:
            size = run.tree_tmp(root).publish(step.path, fh, mode=stat_mod.S_IMODE(st.st_mode),
                                              mtime_ns=st.st_mtime_ns)
    return Outcome.DONE, f"{size:,} bytes from the {step.kind} {step.source}"


def _checkpoint(run: _Run, step: Step) -> tuple[Outcome, str]:
    failed = sum(r.outcome == Outcome.FAILED for r in run.report.results)
    if failed:
        # A committed checkpoint would make the next run skip these trees ("the store
        # already has it"), so the failed paths would never be imported.
        return Outcome.SKIPPED, (f"not taken: {failed} step(s) failed; what was copied stays in place, and the "
                                 "next `journal migrate` plans the rest again")
    for path, mode in sorted(run.new_dirs, reverse=True):
        chmod_dir(path, mode)
    run.close_tree_tmps()
    try:
        result = checkpoint(run.cfg, run.store, run.reporter, wait=True)
        seq, detail = result.seq, ""
    except CheckpointErrors as err:
        seq, detail = err.seq, str(err)
        run.report.problems.append(detail)
    if seq is None:
        seqs = Repository.open(run.store, key=run.cfg.key).manifest_seqs()
        seq = seqs[-1] if seqs else None
        detail = detail or f"nothing changed since checkpoint {seq}; it holds the live trees"
    run.report.seq = seq
    if seq is None:
        return Outcome.FAILED, "no checkpoint was committed"
    return Outcome.DONE, detail or f"committed checkpoint {seq}"


def _verify(run: _Run, step: Step) -> tuple[Outcome, str]:
    seq = run.report.seq
    if seq is None:
        return Outcome.SKIPPED, "no checkpoint to verify"
    repo = Repository.open(run.store, key=run.cfg.key)
    result = verify(repo, run.reporter, full=True)
    mine = [f for f in result.errors if f.manifest == seq]
    for f in result.errors:
        if f.manifest != seq:
            run.report.warnings.append(f"verify: {f.kind}: manifest {f.manifest}: {f.key}: {f.detail}")
    cache = ManifestCache(repo)
    for cap in run.report.captures:
        _confirm(repo, cache, seq, cap)
    bad = [c for c in run.report.captures if not c.ok]
    run.report.verified = not mine and not bad
    if run.report.verified:
        return Outcome.DONE, (f"checkpoint {seq} verifies in full; {len(run.report.captures)} open transcript(s) "
                              "read back")
    what = [f"{f.kind} {f.key}: {f.detail}" for f in mine] + [f"{c.path}: {c.detail}" for c in bad]
    return Outcome.FAILED, "; ".join(what)


def _confirm(repo: Repository, cache: ManifestCache, seq: int, cap: Capture) -> None:
    """Check that manifest ``seq`` holds the transcript's measured complete lines, byte for byte."""
    try:
        entries, _ = cache.tree(seq, cap.tree)
    except (KeyError, CorruptObject, ObjectNotFound) as err:
        cap.detail = f"tree {cap.tree} is not readable in checkpoint {seq} ({err})"
        return
    entry = next((e for e in entries if e.path == cap.rel), None)
    if entry is None:
        cap.detail = f"not in checkpoint {seq}"
        return
    cap.stored = entry.size
    if entry.kind != KIND_JSONL or entry.size < cap.complete:
        cap.detail = f"checkpoint {seq} holds {entry.size} of its {cap.complete} complete bytes"
        return
    digest, left = hashlib.sha256(), cap.complete
    for payload in read_blobs(entry, repo):
        if left <= 0:
            break
        piece = payload[:left]
        digest.update(piece)
        left -= len(piece)
    cap.ok = digest.hexdigest() == cap.sha256
    cap.detail = "" if cap.ok else f"checkpoint {seq} holds different bytes (was the file rewritten?)"


def _rename(run: _Run, step: Step) -> tuple[Outcome, str]:
    if run.report.problems or not run.report.verified:
        if any(r.step.op == Action.CHECKPOINT and r.outcome == Outcome.DONE for r in run.report.results):
            return Outcome.SKIPPED, (f"left in place: the migration has problems; tree {step.tree} is in checkpoint "
                                     f"{run.report.seq} now, so a later run neither imports nor renames it: once "
                                     f"the problems are fixed, rename it by hand to {step.target}")
        return Outcome.SKIPPED, ("left in place: the migration has problems and committed no checkpoint; a later "
                                 "`journal migrate` imports this tree again and renames it once its checkpoint "
                                 "verifies")
    target = step.target
    try:
        rename_noclobber(step.path, target)
    except FileExistsError:
        target = retired_name(step.path)  # taken since the plan: pick the next free name
        rename_noclobber(step.path, target)
    return Outcome.DONE, f"renamed to {target}"


_HANDLERS = {Action.IMPORT_TREE: _import_tree, Action.UNLINK: _unlink, Action.MKDIR: _mkdir, Action.COPY: _copy,
             Action.LINK: _link, Action.MOVE_DB: _move_db, Action.INSTALL_DB: _install_db,
             Action.CHECKPOINT: _checkpoint, Action.VERIFY: _verify, Action.RENAME: _rename}
