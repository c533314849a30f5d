"""The restore operation: newest valid manifest -> live trees (or ``--to DIR``).

For each tree, the newest manifest whose integrity holds and whose index pages load
is used. Each file is written only from verified blobs; a file whose blobs are bad
or missing falls back to the newest older manifest with a good copy, else it is
reported lost. Only a restore with nothing lost marks the local state complete.
"""

from __future__ import annotations

import itertools
import os

import msgspec

from .config import TREE_NAME
from .errors import CorruptObject, ObjectNotFound, UnsafePath
from .history import ManifestCache, select_seqs
from .localstate import (FileState, LocalState, StateLock, TreeCache, cache_from_entries, load_state, new_state,
                         save_state, signature)
from .materialize import (KEEP_CONFLICT, KEEP_VALID_DB, REPLACE, SAME, WRITES, check_paths, decide, finish_dirs,
                          move_aside, remove_tmp, write_entry)
from .model import KIND_DIR, KIND_SQLITE, BlobRef, Entry
from .repository import utc_now
from .sqlite_snapshot import live_signature
from .report import SILENT, Reporter
from .repository import Repository
from .store.base import Store


class TreeRestore(msgspec.Struct, kw_only=True):
    name: str
    dest: str
    seq: int | None = None
    actions: dict[str, int] = {}
    bytes: int = 0
    lost: list[str] = []
    fallbacks: list[str] = []
    databases: list[str] = []
    error: str | None = None


class RestoreResult(msgspec.Struct, kw_only=True):
    seq: int | None = None          # newest manifest in the store
    complete: bool = True
    dry_run: bool = False
    trees: list[TreeRestore] = []
    warnings: list[str] = []


def restore(cfg, store: Store, reporter: Reporter = SILENT, *, at: str | None = None,
            to: str | None = None, dry_run: bool = False) -> RestoreResult:
    """Restore every configured tree (every stored tree with ``to``). See the module docstring."""
    with StateLock(cfg.state_dir, wait=True):
        repo = Repository.open(store, create=not dry_run)
        if not dry_run:
            store.sweep_temp()  # a killed writer's temp files; at startup, not on every tick
        all_seqs = repo.manifest_seqs()  # the one listing a restore makes
        seqs = select_seqs(repo, at, all_seqs)
        result = RestoreResult(dry_run=dry_run, seq=seqs[-1] if seqs else None)
        cache = ManifestCache(repo)
        names = _tree_names(cfg, cache, seqs, to, result, reporter)
        caches: dict[str, TreeCache] = {}
        aside = os.path.join(cfg.state_dir, "invalid", utc_now().replace(":", ""))
        newest = all_seqs[-1] if seqs else None
        for name, dest in names:
            tr, tcache = _restore_tree(repo, cache, seqs, name, dest, dry_run, reporter, aside, newest)
            result.trees.append(tr)
            if tcache is not None:
                caches[name] = tcache
            if tr.lost or tr.error:
                result.complete = False
        if not dry_run and to is None:
            _save_restored_state(cfg, repo, cache, seqs, all_seqs, caches, result.complete)
        return result


def _tree_names(cfg, cache: ManifestCache, seqs: list[int], to: str | None, result, reporter) -> list[tuple[str, str]]:
    # Every manifest carries every tree the store has seen, so the newest readable
    # one names them all: restore's metadata reads do not grow with history.
    stored: set[str] = set()
    for seq in reversed(seqs):
        try:
            stored.update(cache.manifest(seq)[0].trees)
            break
        except (CorruptObject, ObjectNotFound) as err:
            reporter.warn(f"restore: skipping manifest {seq}: {err}")
    for name in sorted(stored):
        if not TREE_NAME.match(name):
            stored.discard(name)
            result.complete = False
            result.trees.append(TreeRestore(name=name, dest="", error=str(UnsafePath(name, "not a valid tree name"))))
    if to is not None:
        return [(name, os.path.join(os.path.abspath(to), name)) for name in sorted(stored)]
    configured = {t.name: t.path for t in cfg.trees + cfg.dormant}
    for name in sorted(stored - configured.keys()):
        result.warnings.append(f"restore: tree {name} is in the store but not configured here; left in the store")
    return [(name, configured[name]) for name in sorted(stored & configured.keys())]


def _newest_good_tree(cache: ManifestCache, seqs: list[int], name: str, reporter):
    """The newest (seq, entries, pages) of tree ``name`` whose manifest and pages verify.

    Data packs it names may be missing: each file then falls back on its own
    (``_write_with_fallback``), so intact files of newer manifests are never lost.
    """
    for seq in reversed(seqs):
        try:
            manifest, _ = cache.manifest(seq)
            if name not in manifest.trees:
                continue
            entries, pages = cache.tree(seq, name)
        except (CorruptObject, ObjectNotFound) as err:
            reporter.warn(f"restore: tree {name}: manifest {seq} unusable ({err}); trying an older one")
            continue
        return seq, entries, pages
    return None


def _restore_tree(repo, cache, seqs, name, dest, dry_run, reporter, aside, newest):
    tr = TreeRestore(name=name, dest=dest)
    found = _newest_good_tree(cache, seqs, name, reporter)
    if found is None:
        tr.error = f"restore: tree {name}: no manifest with a complete copy of it"
        return tr, None
    tr.seq, entries, pages = found
    try:
        check_paths(entries)
    except UnsafePath as err:
        tr.error = str(err)
        return tr, None
    files: dict[str, FileState] = {}
    if not dry_run:
        os.makedirs(dest, exist_ok=True)
    total = len(entries)
    for done, entry in enumerate(entries, 1):
        action = decide(dest, entry)
        if entry.kind == KIND_SQLITE:
            _report_db(dest, entry, action, dry_run, reporter, os.path.join(aside, name), tr)
        tr.actions[action] = tr.actions.get(action, 0) + 1
        used = entry
        if action in WRITES and not dry_run:
            used = _write_with_fallback(repo, cache, seqs, tr, dest, entry, reporter)
        elif action in WRITES:
            tr.bytes += entry.size
        if used is not None and action != KEEP_CONFLICT:
            files[entry.path] = FileState(_sig_after(dest, used, action), used)
        reporter.progress(done, total)
    if not dry_run:
        finish_dirs(dest, entries)
        remove_tmp(dest)
    # Publish the tree again at the next checkpoint when what is on disk is not the
    # newest manifest's version of it (a fallback, a loss, or a rollback with --at).
    behind = tr.seq != newest and name in _tree_names_at(cache, newest)
    if tr.fallbacks or tr.lost or behind:
        # What is on disk came (partly) from a manifest gc may expire at any time, so
        # the next checkpoint must not lean on its blobs: it re-reads and re-uploads.
        return tr, cache_from_entries(None, {}, (f.entry for f in files.values()), dirty=True, reupload=True)
    return tr, TreeCache(root=cache.manifest(tr.seq)[0].trees[name].root, pages=pages, files=files)


def _tree_names_at(cache: ManifestCache, seq: int) -> set[str]:
    try:
        return set(cache.manifest(seq)[0].trees)
    except (CorruptObject, ObjectNotFound):
        return set()


def _report_db(dest: str, entry: Entry, action: str, dry_run: bool, reporter, aside: str, tr) -> None:
    """Say what happens to a local database; move an invalid one aside (never delete it)."""
    full = os.path.join(dest, entry.path)
    if action == KEEP_VALID_DB:
        msg = f"restore: kept the valid local database {full} (it passes quick_check; it is authoritative)"
        reporter.note(msg)
        tr.databases.append(msg)
    elif action == REPLACE and not dry_run:
        moved = move_aside(dest, entry, aside)
        msg = f"restore: local database {full} fails quick_check; moved it (and its -wal/-shm) to {moved}"
        reporter.warn(msg)
        tr.databases.append(msg)


def _write_with_fallback(repo, cache, seqs, tr, dest, entry: Entry, reporter) -> Entry | None:
    """Write ``entry``; on a bad blob try older manifests' copies of the same path."""
    # Older manifests are read only when the newest copy fails.
    candidates = itertools.chain([(tr.seq, entry)], _older_copies(cache, seqs, tr.seq, tr.name, entry.path))
    for seq, cand in candidates:
        try:
            tr.bytes += write_entry(dest, cand, repo)
        except (CorruptObject, ObjectNotFound) as err:
            reporter.warn(f"restore: {tr.name}/{entry.path}: copy in manifest {seq} is damaged ({err})")
            continue
        except UnsafePath as err:
            tr.error = str(err)
            return None
        if seq != tr.seq:
            msg = f"{tr.name}/{entry.path}: restored from manifest {seq} (manifest {tr.seq}'s copy is damaged)"
            tr.fallbacks.append(msg)
            reporter.warn(f"restore: {msg}")
        return cand
    tr.lost.append(entry.path)
    return None


def _older_copies(cache: ManifestCache, seqs: list[int], newest: int, name: str, path: str):
    seen: set[tuple[BlobRef, ...]] = set()
    for seq in reversed([s for s in seqs if s < newest]):
        try:
            entries, _ = cache.tree(seq, name)
        except (CorruptObject, ObjectNotFound, KeyError):
            continue
        for e in entries:
            if e.path == path and e.refs not in seen:
                seen.add(e.refs)
                yield seq, e


def _sig_after(dest: str, entry: Entry, action: str):
    """The cache signature: the file as written or verified now; None forces a re-read."""
    if action not in WRITES and action != SAME:
        return None  # kept local content: the next checkpoint must capture it
    try:
        st = os.lstat(os.path.join(dest, entry.path))
    except FileNotFoundError:
        return None
    if entry.kind == KIND_SQLITE:
        return live_signature(os.path.join(dest, entry.path))
    return (0, 0, 0, st.st_mode) if entry.kind == KIND_DIR else signature(st)


def _save_restored_state(cfg, repo: Repository, cache: ManifestCache, seqs, all_seqs, caches,
                         complete: bool) -> None:
    state = load_state(cfg.state_dir, repo.store_id) or new_state(repo.store_id)
    newest_id = None
    for seq in reversed(all_seqs):
        try:
            newest_id = cache.manifest(seq)[1]
            break
        except (CorruptObject, ObjectNotFound):
            continue
    restored = LocalState(store_id=repo.store_id, writer=state.writer,
                          seq=all_seqs[-1] if all_seqs else 0, manifest_id=newest_id,
                          restore_complete=complete, trees=_carry_forward(cache, seqs, caches))
    save_state(cfg.state_dir, restored)


def _carry_forward(cache: ManifestCache, seqs: list[int], caches: dict[str, TreeCache]) -> dict[str, TreeCache]:
    """Trees restored here, plus stored trees not configured here (kept as they are)."""
    trees = dict(caches)
    for seq in reversed(seqs):
        try:
            manifest, _ = cache.manifest(seq)
        except (CorruptObject, ObjectNotFound):
            continue
        for name, root in manifest.trees.items():
            if name in trees:
                continue
            try:
                entries, pages = cache.tree(seq, name)
            except (CorruptObject, ObjectNotFound):
                continue
            trees[name] = cache_from_entries(root.root, pages, entries)
        break
    return trees
