"""Planning a migration: reading the upstream shell design's layout, the open transcripts
and the store (legacy SQLite copies are recovered privately by migrate/legacy_db.py). ``execute``
is in migrate/execute.py.

The legacy root (``/data/state``) holds one rsync-copied tree per harness; opencode
and Hermes also hold ``checkpoints/<db>`` (a ``.backup`` copy) and, from the older
raw layout, ``<db>`` with its ``-wal`` and ``-shm`` copied at different moments.
The harnesses' old HOME (``/data/home``) may still hold real ``.gemini``,
``.local/share/opencode``, ``.hermes`` and ``.fx`` directories.

Nothing here writes outside a private temp directory: a legacy database is only
ever opened as a copy. ``plan_migration`` returns a frozen plan of every step.
"""

from __future__ import annotations

import datetime as _dt
import enum
import os
import stat as stat_mod
import tempfile

import msgspec

from ..config import Config, TreeConfig
from ..errors import ConfigError
from ..repository.errors import HistoryWithoutState, NoStore
from ..sqlite.errors import SnapshotFailed
from .legacy_db import CHECKPOINT_COPY, RAW_TRIO, DbCandidate, recover_db
from ..repository.lineage import refuse_foreign, refuse_vanished
from ..local.state import load_state
from ..paths import STATE_FILE, shown
from ..report import SILENT, Reporter
from ..signatures import mtime_ns
from ..repository.repository import Repository, utc_now
from ..sqlite.snapshot import check_live_db
from ..store.base import Store
from ..local.walk import Matcher, walk_tree
from .open_files import OpenTranscript, find_open_transcripts

#: Legacy directory under the legacy root -> the tree it becomes.
LEGACY_TREES: tuple[tuple[str, str], ...] = (
    ("codex", "codex"), ("claude", "claude"), ("gemini", "gemini"), ("openclaw-backup", "openclaw"),
    ("opencode", "opencode"), ("hermes", "hermes"), ("fx", "fx"))

#: Directories under the old HOME: (tree, path, retire). A retired one is renamed to
#: ``*.pre-agent-state`` once imported; Gemini's stays in place as the rollback copy.
OLD_HOME_DIRS: tuple[tuple[str, str, bool], ...] = (
    ("gemini", ".gemini", False), ("opencode", ".local/share/opencode", True),
    ("hermes", ".hermes", True), ("fx", ".fx", True))

#: Where the shell design kept its verified ``.backup`` copies, inside a SQLite tree.
CHECKPOINTS = "checkpoints"
#: Paths under ``$AM_LOCAL`` the shell design kept for itself; journal leaves them alone.
OLD_LOCAL_DIRS = {"agent-state-stamps": "the shell design's per-tree stamps; journal keeps its own local state",
                  "agent-state-invalid": "invalid local databases the shell design kept for diagnosis",
                  "agent-state-snapshots": "the shell design's SQLite staging directory"}

RETIRED = ".pre-agent-state"


class Action(enum.StrEnum):
    """What one step of a migration does, or what it leaves alone. ``--json`` and
    ``--dry-run`` show these values: users' scripts read them, so a value never changes."""

    IMPORT_TREE = "import-tree"         # a legacy tree no checkpoint has
    SKIP_TREE = "skip-tree"             # a legacy tree not imported (not configured, stored, not a real dir)
    UNLINK = "unlink-symlink"           # the old Codex sessions symlink into the legacy root (never its target)
    MKDIR = "create-dir"                # a directory missing locally
    COPY = "copy"                       # a file missing locally
    LINK = "copy-symlink"               # a symlink missing locally
    UNCHANGED = "unchanged"             # paths already identical locally (one step per tree)
    KEEP_LOCAL = "keep-local"           # a local path that differs, or cannot be reached: kept
    INSTALL_DB = "install-db"           # the first legacy copy of a database that SQLite recovers
    REJECT_DB = "reject-db"             # a legacy copy that fails its checks: left untouched
    UNUSED_DB = "unused-db"             # a legacy copy not needed: left untouched
    KEEP_DB = "keep-local-db"           # a valid local database: kept, it is authoritative
    MOVE_DB = "move-invalid-db"         # an invalid local database, moved aside (never deleted)
    CHECKPOINT = "checkpoint"           # the imported trees and the open transcripts, as one checkpoint
    VERIFY = "verify"                   # verify --full, then each open transcript's lines read back
    RENAME = "rename"                   # an old-HOME directory renamed *.pre-agent-state once verified
    LEAVE = "leave"                     # something left where it is, with the reason


class Step(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One action of a migration, or one thing it leaves alone, with the reason."""

    op: Action
    path: str
    reason: str
    tree: str | None = None
    source: str | None = None
    target: str | None = None   # a rename's new name, an unlinked symlink's target
    kind: str | None = None     # dir/file/jsonl/symlink for files; checkpoint-copy/raw-trio for databases
    size: int = 0


class MigrationPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one migration will do, in order, and what it found wrong; printed by --dry-run."""

    version: int = 1
    legacy_root: str
    old_home: str
    store: str
    created: str
    imports: tuple[str, ...]            # trees whose first checkpoint this migration makes
    steps: tuple[Step, ...]
    open_transcripts: tuple[OpenTranscript, ...] = ()
    problems: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


class Source(msgspec.Struct, frozen=True, kw_only=True):
    """One directory that feeds a tree's import; ``legacy`` marks the legacy root's copy."""

    root: str
    legacy: bool = False


class LegacyFile(msgspec.Struct, frozen=True, kw_only=True):
    """The copy of one path chosen among the sources (the newest, the legacy root's on a tie)."""

    rel: str
    src: str
    kind: str               # dir, file, jsonl, symlink
    size: int = 0
    mode: int = 0
    mtime_ns: int = 0
    target: str | None = None


def legacy_sources(tree: str, legacy_root: str, old_home: str, live: tuple[str, ...] = ()) -> list[Source]:
    """The existing real directories that feed ``tree``, the legacy root's first. An
    old-HOME directory that is, holds or lies in a live tree (``live``: their paths) is
    no source: it is that live state itself."""
    found = [Source(root=os.path.join(legacy_root, d), legacy=True) for d, t in LEGACY_TREES if t == tree]
    found += [Source(root=os.path.join(old_home, p)) for t, p, _ in OLD_HOME_DIRS if t == tree]
    return [s for s in found if _real_dir(s.root) and (s.legacy or not _live_overlap(s.root, live))]


def _live_overlap(path: str, live: tuple[str, ...]) -> str | None:
    """The first live tree path that ``path`` is, holds or lies in (real paths), else None."""
    real = os.path.realpath(path)
    for tree in live:
        other = os.path.realpath(tree)
        if real == other or real.startswith(other + os.sep) or other.startswith(real + os.sep):
            return tree
    return None


def _real_dir(path: str) -> bool:
    try:
        return stat_mod.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def scan_sources(tree: TreeConfig, sources: list[Source], left_out: list[tuple[str, str]] | None = None
                 ) -> tuple[dict[str, LegacyFile], dict[str, list[DbCandidate]]]:
    """Every path the sources hold under the tree's patterns, and every database's candidates.

    A database (the tree's SQLite patterns, with its ``-wal`` and ``-shm``) is never a
    file of the import. It gets candidates instead: ``checkpoints/<name>`` first, then
    the raw trios in source order.

    For a path in several sources, the newest copy wins. When the kinds differ, the
    first source's copy wins, and what another source holds under a path that is a
    file there cannot be placed. Those paths, and the paths the path rule refuses
    (``local/treepath.py``), are appended to ``left_out`` as (legacy path, why).
    """
    left_out = [] if left_out is None else left_out
    matcher = Matcher(tree.exclude, tree.jsonl, tree.sqlite)
    chosen: dict[str, LegacyFile] = {}
    dbs: dict[str, list[DbCandidate]] = {}
    for src in sources:
        if src.legacy and tree.sqlite:
            _checkpoint_copies(src.root, matcher, dbs)
        skipped: list[tuple[str, str]] = []
        for item in walk_tree(src.root, matcher, skipped):
            if src.legacy and tree.sqlite and item.path.split("/")[0] == CHECKPOINTS:
                continue
            full = os.path.join(src.root, item.path)
            if item.kind == "sqlite":
                dbs.setdefault(item.path, []).append(DbCandidate(path=full, kind=RAW_TRIO))
                continue
            found = _legacy_file(item, full, matcher)
            prev = chosen.get(item.path)
            if prev is None or (prev.kind == found.kind and found.kind != "dir" and found.mtime_ns > prev.mtime_ns):
                chosen[item.path] = found
        left_out.extend(skipped)
    _drop_under_files(chosen, left_out)
    return chosen, dbs


def _drop_under_files(chosen: dict[str, LegacyFile], left_out: list[tuple[str, str]]) -> None:
    files = {rel for rel, f in chosen.items() if f.kind != "dir"}
    for rel in sorted(chosen):
        parts = rel.split("/")
        above = next((a for a in ("/".join(parts[:i]) for i in range(1, len(parts))) if a in files), None)
        if above is not None:
            left_out.append((chosen.pop(rel).src, f"{chosen[above].src} is a file in another source"))


def _checkpoint_copies(root: str, matcher: Matcher, dbs: dict[str, list[DbCandidate]]) -> None:
    folder = os.path.join(root, CHECKPOINTS)
    if not _real_dir(folder):
        return
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if matcher.is_sqlite(name, name) and stat_mod.S_ISREG(os.lstat(path).st_mode):
            dbs.setdefault(name, []).insert(0, DbCandidate(path=path, kind=CHECKPOINT_COPY))


def _legacy_file(item, full: str, matcher: Matcher) -> LegacyFile:
    st = item.stat
    if item.kind == "dir":
        return LegacyFile(rel=item.path, src=full, kind="dir", mode=stat_mod.S_IMODE(st.st_mode))
    if item.kind == "symlink":
        return LegacyFile(rel=item.path, src=full, kind="symlink", target=os.readlink(full),
                          mtime_ns=mtime_ns(st))
    return LegacyFile(rel=item.path, src=full, kind="jsonl" if matcher.is_jsonl(item.path) else "file",
                      size=st.st_size, mode=stat_mod.S_IMODE(st.st_mode), mtime_ns=mtime_ns(st))


# --------------------------------------------------------------------------- planning


class _Planner:
    def __init__(self, cfg: Config, legacy_root: str, old_home: str, stored: set[str], tmp: str):
        self.cfg, self.legacy_root, self.old_home, self.stored, self.tmp = cfg, legacy_root, old_home, stored, tmp
        self.trees = {t.name: t for t in cfg.trees + cfg.dormant}
        self.live = tuple(t.path for t in self.trees.values())
        self.steps: list[Step] = []
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.imports: list[str] = []

    def add(self, op: Action, path: str, reason: str, **kw) -> None:
        self.steps.append(Step(op=op, path=path, reason=reason, **kw))

    def problem(self, message: str) -> None:
        self.problems.append(message)


def plan_migration(cfg: Config, store: Store, legacy_root: str, *, old_home: str | None = None,
                   reporter: Reporter = SILENT) -> MigrationPlan:
    """Read everything the migration touches and return its plan. Changes nothing.

    Raises ``ConfigError`` when the legacy root is missing or overlaps a live tree.
    Raises ``HistoryWithoutState`` when a checkpoint is needed but this machine's local
    state does not know the store's history (``journal restore`` comes first). When the
    store is absent, raises what the checkpoint would raise creating it
    (``StoreVanished``, a ``StoreError`` for a missing parent), so a dry run says it too.
    """
    legacy_root = os.path.abspath(legacy_root)
    if not os.path.isdir(legacy_root):
        raise ConfigError(f"migrate: legacy root {legacy_root} is not a directory; name the legacy layout's root "
                          "directory")
    old_home = os.path.abspath(old_home or os.path.join(os.path.dirname(legacy_root), "home"))
    repo, stored = _stored_trees(store, cfg.key, reporter)
    with tempfile.TemporaryDirectory(prefix="journal-migrate-plan-") as tmp:
        p = _Planner(cfg, legacy_root, old_home, stored, tmp)
        _check_overlap(p)
        for name in dict.fromkeys(t for _, t in LEGACY_TREES):
            _plan_tree(p, name)
        _plan_sessions_link(p)
        opened = find_open_transcripts(p.trees, _all_sources(p))
        for o in opened:
            if o.legacy and o.tree not in p.imports:
                pids = ", ".join(map(str, o.pids))
                if o.tree in p.stored:  # imported by an earlier run: nothing of it is imported again
                    p.warnings.append(
                        f"migrate: {o.path} is still open (pid {pids}) in the legacy root; tree {o.tree} was imported "
                        f"by an earlier run (the store has it), so what that process writes there now is not "
                        f"imported: stop it cleanly, and start the agent on the live tree {p.trees[o.tree].path}")
                else:
                    p.problem(f"migrate: {o.path} is open (pid {pids}) in the legacy root and tree {o.tree} is "
                              "not imported; stop that process cleanly before restarting")
        if p.imports or any(not o.legacy or o.tree in p.imports for o in opened):
            _require_history(cfg.state_dir, repo)
            if repo is None:  # the checkpoint would create the store: refuse now what it would refuse then
                refuse_vanished(store, cfg.state_dir)
                store.check_creatable(dry_run=True)
            p.add(Action.CHECKPOINT, cfg.store,
                  "publish the imported trees and every open transcript as one checkpoint")
            p.add(Action.VERIFY, cfg.store, "verify --full, then read back each open transcript's complete lines")
        _plan_old_home(p)
        _plan_leftovers(p)
    return MigrationPlan(legacy_root=legacy_root, old_home=old_home, store=cfg.store, created=utc_now(),
                         imports=tuple(p.imports), steps=tuple(p.steps), open_transcripts=tuple(opened),
                         problems=tuple(p.problems), warnings=tuple(p.warnings))


def _stored_trees(store: Store, key, reporter: Reporter) -> tuple[Repository | None, set[str]]:
    """Every tree the store has: a manifest carries every tree ever seen (§9), so the newest
    readable manifest names them all (``key`` unlocks an encrypted store)."""
    try:
        repo = Repository.open(store, key=key)
    except NoStore:
        return None, set()
    for read in repo.iter_manifests_desc():
        if read.manifest is not None:
            return repo, set(read.manifest.trees)
        reporter.warn(f"migrate: skipping unreadable manifest {read.seq}: {read.error}")
    return repo, set()


def _require_history(state_dir: str, repo: Repository | None) -> None:
    """Refuse a store whose history this disk's local state does not know."""
    if repo is not None and load_state(state_dir, repo.store_id) is None:
        refuse_foreign("migrate", state_dir, repo)
        seqs = repo.manifest_seqs()
        if seqs:
            raise HistoryWithoutState(os.path.join(state_dir, STATE_FILE), seqs[-1])


def _check_overlap(p: _Planner) -> None:
    root = os.path.normpath(p.legacy_root)
    for t in p.trees.values():
        live = os.path.normpath(t.path)
        if live == root or live.startswith(root + os.sep) or root.startswith(live + os.sep):
            raise ConfigError(f"migrate: legacy root {root} overlaps the live tree {t.name} ({live}); "
                              "the legacy copy must be a separate directory")


def _all_sources(p: _Planner):
    return {name: legacy_sources(name, p.legacy_root, p.old_home, p.live)
            for name in dict.fromkeys(t for _, t in LEGACY_TREES)}


def _plan_tree(p: _Planner, name: str) -> None:
    sources = legacy_sources(name, p.legacy_root, p.old_home, p.live)
    if not sources:
        return
    where = ", ".join(s.root for s in sources)
    tree = p.trees.get(name)
    if tree is None:
        p.add(Action.SKIP_TREE, where, f"tree {name} is not configured here; the legacy copy stays in place", tree=name)
        return
    if name in p.stored:
        p.add(Action.SKIP_TREE, tree.path, f"the store already has tree {name}, so it is not imported again; "
              f"{where} stays in place", tree=name)
        return
    if os.path.islink(tree.path) or (os.path.lexists(tree.path) and not os.path.isdir(tree.path)):
        p.problem(f"migrate: live path {tree.path} of tree {name} is not a real directory; "
                  "journal never writes through symlinks; point the tree at a local directory")
        p.add(Action.SKIP_TREE, tree.path, "the live path is not a real directory", tree=name)
        return
    p.imports.append(name)
    p.add(Action.IMPORT_TREE, tree.path, f"no checkpoint has tree {name}; import {where}", tree=name)
    unlinking = _plan_link_unlink(p, tree)
    left_out: list[tuple[str, str]] = []
    files, dbs = scan_sources(tree, sources, left_out)
    for path, why in left_out:
        p.problem(f"migrate: {shown(path)}: {why}; left out (copy it into {tree.path} by hand under a name that "
                  "fits; the next checkpoint publishes it)")
    same = 0
    for rel in sorted(files):
        same += _plan_file(p, tree, files[rel], unlinking)
    if same:
        p.add(Action.UNCHANGED, tree.path, f"{same} path(s) already identical locally", tree=name)
    for rel in sorted(dbs):
        _plan_db(p, tree, rel, dbs[rel], unlinking)


def _sessions_link(p: _Planner) -> tuple[str, str] | None:
    """(link, target) when the Codex live tree's ``sessions`` is a symlink into the legacy root."""
    codex = p.trees.get("codex")
    if codex is None:
        return None
    link = os.path.join(codex.path, "sessions")
    if not os.path.islink(link):
        return None
    target = os.readlink(link)
    resolved = os.path.normpath(os.path.join(codex.path, target))
    inside = {resolved, os.path.realpath(link)}
    roots = (p.legacy_root, os.path.realpath(p.legacy_root))
    return (link, target) if any(x.startswith(r + os.sep) for x in inside for r in roots) else None


def _plan_link_unlink(p: _Planner, tree: TreeConfig) -> set[str]:
    found = _sessions_link(p) if tree.name == "codex" else None
    if found is None:
        return set()
    link, target = found
    p.add(Action.UNLINK, link, "the old sessions symlink into the legacy root; only this link is removed, "
          "never its target", tree="codex", target=target)
    return {link}


def _plan_sessions_link(p: _Planner) -> None:
    found = _sessions_link(p)
    if found is not None and "codex" not in p.imports:
        p.problem(f"migrate: {found[0]} still points into the legacy root ({found[1]}) but tree codex is not "
                  "imported, so it is left alone; Codex writes through it are not checkpointed")


def _local(root: str, rel: str, unlinking: set[str]):
    """lstat of ``root/rel`` without following a parent symlink: None when missing (or under a
    symlink this migration unlinks), a reason string when a parent blocks it."""
    cur = root
    parts = rel.split("/")
    for i, part in enumerate(parts):
        cur = os.path.join(cur, part)
        if cur in unlinking:
            return None
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return None
        if i < len(parts) - 1 and not stat_mod.S_ISDIR(st.st_mode):
            return f"local parent {cur} is not a directory (symlinks are never written through)"
    return st


def _plan_file(p: _Planner, tree: TreeConfig, f: LegacyFile, unlinking: set[str]) -> int:
    full = os.path.join(tree.path, f.rel)
    st = _local(tree.path, f.rel, unlinking)
    if isinstance(st, str):
        p.add(Action.KEEP_LOCAL, full, st, tree=tree.name, source=f.src, kind=f.kind)
    elif st is None:
        op = {"dir": Action.MKDIR, "symlink": Action.LINK}.get(f.kind, Action.COPY)
        p.add(op, full, "missing locally", tree=tree.name, source=f.src, kind=f.kind, size=f.size)
    elif _same(f, full, st):
        return 1
    else:
        p.add(Action.KEEP_LOCAL, full, f"local copy differs (local {_when(mtime_ns(st))}, legacy {_when(f.mtime_ns)}); "
              "the local path is kept, the legacy copy stays in place", tree=tree.name, source=f.src, kind=f.kind)
    return 0


def _same(f: LegacyFile, full: str, st: os.stat_result) -> bool:
    if f.kind == "dir":
        return stat_mod.S_ISDIR(st.st_mode)
    if f.kind == "symlink":
        return stat_mod.S_ISLNK(st.st_mode) and os.readlink(full) == f.target
    if not stat_mod.S_ISREG(st.st_mode) or st.st_size != f.size:
        return False
    with open(f.src, "rb") as a, open(full, "rb") as b:
        while True:
            x, y = a.read(1 << 20), b.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def _when(ns: int) -> str:
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plan_db(p: _Planner, tree: TreeConfig, rel: str, cands: list[DbCandidate], unlinking: set[str]) -> None:
    full = os.path.join(tree.path, rel)
    st = _local(tree.path, rel, unlinking)
    if isinstance(st, str):
        p.problem(f"migrate: {shown(full)}: {st}; no legacy database installed")
        return
    if st is not None:
        local_problem = check_live_db(full, p.tmp)
        if local_problem is None:
            p.add(Action.KEEP_DB, full, "the local database passes quick_check; it is authoritative", tree=tree.name)
            for c in cands:
                p.add(Action.UNUSED_DB, c.path, "not needed: the local database is valid", tree=tree.name, kind=c.kind)
            return
    chosen = None
    for c in cands:
        if chosen is not None:
            p.add(Action.UNUSED_DB, c.path, "not needed: a preferred copy is valid; left untouched", tree=tree.name,
                  kind=c.kind)
            continue
        try:
            with tempfile.TemporaryDirectory(dir=p.tmp) as private:
                recover_db(c, private)
        except SnapshotFailed as err:
            p.add(Action.REJECT_DB, c.path, f"{err.detail}; left untouched", tree=tree.name, kind=c.kind)
            continue
        chosen = c
        if st is not None:
            p.add(Action.MOVE_DB, full,
                  f"the local database fails quick_check ({local_problem}); moved aside, never deleted",
                  tree=tree.name)
        p.add(Action.INSTALL_DB, full, "recovered from a private copy, backed up and quick_checked", tree=tree.name,
              source=c.path, kind=c.kind)
    if chosen is None:
        local = "keeps its invalid database" if st is not None else "gets none"
        p.problem(f"migrate: tree {tree.name}: no legacy copy of {shown(rel)} passes quick_check; they are left "
                  f"untouched and {shown(full)} {local} (repair a copy and put it there; the next checkpoint "
                  "publishes it)")


def _plan_old_home(p: _Planner) -> None:
    for tree, rel, retire in OLD_HOME_DIRS:
        path = os.path.join(p.old_home, rel)
        if os.path.islink(path):
            p.add(Action.LEAVE, path, f"already a symlink to {os.readlink(path)}; left alone", tree=tree)
        elif os.path.isdir(path) and (live := _live_overlap(path, p.live)):
            p.add(Action.LEAVE, path, f"it is (or holds) the live tree {live}; neither imported nor renamed", tree=tree)
        elif not os.path.isdir(path):
            continue
        elif tree not in p.imports:
            why = f"the store already has tree {tree}" if tree in p.stored else f"tree {tree} is not imported"
            p.add(Action.LEAVE, path, f"{why}; left in place", tree=tree)
        elif retire:
            p.add(Action.RENAME, path, "imported; renamed (never deleted) as the rollback copy once the checkpoint "
                  "verifies", tree=tree, target=retired_name(path))
        else:
            p.add(Action.LEAVE, path, "imported; kept in place as the rollback copy", tree=tree)


def retired_name(path: str) -> str:
    name = path + RETIRED
    if not os.path.lexists(name):
        return name
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    name, n = f"{path}{RETIRED}.{stamp}", 1
    while os.path.lexists(name):
        name, n = f"{path}{RETIRED}.{stamp}.{n}", n + 1
    return name


def _plan_leftovers(p: _Planner) -> None:
    known = {d for d, _ in LEGACY_TREES}
    for name in sorted(os.listdir(p.legacy_root)):
        if name not in known:
            p.add(Action.LEAVE, os.path.join(p.legacy_root, name), "not a harness tree journal knows; left in place")
    for tree in p.imports:
        if p.trees[tree].exclude:
            p.add(Action.LEAVE, p.trees[tree].path, f"legacy paths matching {', '.join(p.trees[tree].exclude)} are "
                  "excluded by the tree and stay in the legacy root", tree=tree)
    for name, what in OLD_LOCAL_DIRS.items():
        path = os.path.join(p.cfg.local or "", name)
        if p.cfg.local and os.path.isdir(path):
            p.add(Action.LEAVE, path, f"{what}; journal does not use it; left in place")
