"""The checkpoint operation: walk the live trees, publish new blobs, then the manifest.

Under the state lock, an idle tick is answered from the quiet snapshot
(``local/quiet.py``) with no store access. Otherwise, in the order of
docs/design.md §12 ("Read and write ordering"):

1. packs earlier commits found already stored are checked again (``recheck/``); a
   pending manifest a crash left is republished, or dropped when a pack it names is gone;
2. the snapshots of databases the cache knows to have changed (or a new tree holds)
   start (``sqlite/ahead.py``);
   every tree is walked and scanned; new chunks, segments and database pages go into
   the data pack (a pack that reaches 64 MiB closes and uploads meanwhile). Nothing
   changed: stop here, with no store write;
3. the fence: the store must still hold ``manifests/<seq>`` and not yet
   ``manifests/<seq+1>`` (the two HEADs at once);
4. the data pack is closed and its upload (put-if-absent) starts;
5. the changed trees' index pages go into the index pack, closed and uploaded, and
   every data upload is waited for;
6. the local state is saved with the manifest as pending;
7. the manifest is put at ``manifests/<seq+1>``, put-if-absent: the commit point;
8. the local state is saved with pending cleared; packs whose put found them already
   stored are checked again (and kept in ``recheck/`` while a gc may be running, ``recheck.gc_running``).

A crash anywhere leaves the previous manifest authoritative. A crash between 6 and 7
is finished by the next run, which republishes the pending manifest bytes (step 1).
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import TYPE_CHECKING

import msgspec

from ..background import Background
from ..repository.blob_cache import BlobCache
from ..config import Config, TreeConfig, no_trees_hint
from ..errors import ConfigError, CorruptObject, JournalError, ObjectNotFound
from .errors import CheckpointAfterIncompleteRestore, CheckpointErrors
from ..os_errors import describe_error
from ..repository.errors import HistoryWithoutState
from ..heap import cycles_paused
from ..localfs import clear_dir
from ..local import activity, quiet
from ..local import tree_tmp
from ..repository.lineage import next_free, open_repository, refuse_foreign, require_committed
from ..local.state import (STATE_FILE, LocalState, StateLock, TreeCache, cache_from_entries,
                         forget_state, load_state, new_state, save_state)
from .chunk_copies import keep_copies
from .commit import commit_manifest, mark_said, put_pending
from .file_delta import FileDeltas
from ..local.files import HAS_DB, FileState, Files
from ..format.model import KIND_SQLITE, Fork, Manifest, decode
from ..format.objects import KIND_CHUNK
from ..repository.pack import PackWriter, clear_spool
from ..paths import CHUNKS_DIR, SPOOL_DIR, STAGING_DIR
from .recheck import gc_running, recheck_dir, recheck_kept, rechecks_pending
from ..report import SILENT, Reporter
from ..signatures import Signature, file_stamp
from ..repository.repository import CONFIG_KEY, Repository, manifest_key, pack_key
from .scan import ScanContext, TreeResult, databases_ahead, scan_tree
from ..sqlite.ahead import Ahead
from ..sqlite.base_copy import prune_base_copies
from ..store.base import Store

if TYPE_CHECKING:
    from ..local.watch import Watch


class CheckpointResult(msgspec.Struct, kw_only=True):
    """What one checkpoint did. ``seq`` is None for an idle checkpoint. ``objects`` and
    ``bytes`` are what it uploaded, the manifest included (``--json``: ``objects_uploaded``,
    ``bytes_uploaded``, as ``journal log`` and ``journal status`` say it)."""

    seq: int | None = None
    manifest_id: str | None = None
    trees: list[TreeResult] = []
    blobs: int = 0
    objects: int = msgspec.field(default=0, name="objects_uploaded")
    bytes: int = msgspec.field(default=0, name="bytes_uploaded")
    seconds: float = 0.0
    warnings: list[str] = []


def checkpoint(cfg: Config, store: Store, reporter: Reporter = SILENT, *,
               allow_deletions: bool = False, wait: bool = False, watch: Watch | None = None) -> CheckpointResult:
    """Take one checkpoint of every configured tree. See the module docstring. What it
    did, or the error it ends with, is recorded for ``journal status`` (``local/activity.py``).
    ``watch``: a long-running caller's inotify watch (``local/watch.py``), which lets the
    quiet check take the directories where nothing happened without a look."""
    if not cfg.active_trees():
        raise ConfigError(f"checkpoint: no trees configured; {no_trees_hint(cfg)}")
    started = time.monotonic()
    with StateLock(cfg.state_dir, wait=wait), cycles_paused():
        result = CheckpointResult()
        try:
            proven = _locked(cfg, store, reporter, allow_deletions, result, watch)
        except (JournalError, OSError) as err:
            if watch is not None:
                watch.settle(None)
            result.seconds = time.monotonic() - started
            if result.seq is not None:  # committed, with some paths failed (CheckpointErrors)
                activity.checkpoint_done(cfg.state_dir, result, walked=True, ok=False)
            activity.failed(cfg.state_dir, "checkpoint", describe_error(err))
            raise
        result = proven or result
        if watch is not None:
            watch.settle(cfg.state_dir)
        result.seconds = time.monotonic() - started
        activity.checkpoint_done(cfg.state_dir, result, walked=proven is None)
    return result


def _locked(cfg: Config, store: Store, reporter: Reporter, allow_deletions: bool,
            result: CheckpointResult, watch: Watch | None) -> CheckpointResult | None:
    """The checkpoint, under the state lock: the quiet snapshot's result when it proves
    nothing changed, else None once ``result`` holds what this run did."""
    state_file = os.path.join(cfg.state_dir, STATE_FILE)
    key = config_key(cfg)
    trusted = watch.trusted(cfg.state_dir) if watch is not None else frozenset()
    proven, same = quiet.same_rows(cfg.state_dir, state_file, config_key=key, fork=True, trusted=trusted)
    if proven is not None and proven.remote is not None and _moved_on(store, *proven.remote):
        proven = None   # another writer committed the next checkpoint: the full path says so
    if proven is not None:  # unchanged since the last clean checkpoint
        return msgspec.convert(proven.result, CheckpointResult)
    repo = open_repository(store, cfg.state_dir, create=True, key=cfg.key)
    state = _load_or_refuse(cfg.state_dir, repo)
    state.encrypted, state.key_id = repo.codec.encrypted, repo.key_id  # a store once encrypted stays so (§22)
    loaded = {name: cache.files for name, cache in state.trees.items()}  # as the quiet snapshot's state holds them
    try:
        _recheck_kept(cfg.state_dir, repo, result, reporter)
        if state.pending is not None:
            _publish_pending(cfg, repo, state, result, reporter)
        rows, next_seq = capture_and_commit(cfg, repo, state, result, reporter,
                                            ScanOptions(allow_deletions=allow_deletions, same=same or {}, loaded=loaded))
    except BaseException:
        forget_state(cfg.state_dir)  # the in-memory copy may be ahead of the file
        quiet.discard(cfg.state_dir)
        raise
    _save_quiet(cfg, key, state_file, result, rows, store, same, next_seq, state.seq)
    return None


def _moved_on(store: Store, next_key: str, own_key: str | None) -> bool:
    """Whether a cloud store moved on since the quiet snapshot: the next checkpoint's
    manifest is there, or this writer's own is gone (a gc after another writer's). The
    two HEADs go out together, as the fence's do."""
    if own_key is None:
        return store.head(next_key) is not None
    asked = Background(store.head, next_key, name="journal-fence")
    try:
        gone = store.head(own_key) is None
    finally:
        asked.join()
    return gone or asked.result() is not None


def config_key(cfg: Config) -> str:
    """A digest of the effective configuration, for the quiet snapshot."""
    return hashlib.sha256(msgspec.msgpack.encode(cfg)).hexdigest()


def _save_quiet(cfg: Config, key: str, state_file: str, result: CheckpointResult,
                rows: list[quiet.Row] | None, store: Store, same: dict[tuple[str, str], quiet.Row],
                next_seq: int, own: int) -> None:
    """Save the quiet snapshot after a clean checkpoint, else drop the stale one (also
    while packs wait for a recheck, so that every tick takes the full path).

    The snapshot also proves the store did not move on: a local store's config file is
    still there (never "idle" over an unmounted store), the next checkpoint's manifest
    (``next_seq``) is still absent, and this writer's last one (``own``) still there."""
    state_sig = file_stamp(state_file)
    if rows is None or result.warnings or state_sig is None or rechecks_pending(cfg.state_dir):
        quiet.discard(cfg.state_dir)
        return
    # Directories whose files changed last come first: in a busy tree the check then
    # fails (and the full checkpoint starts) after a few directories, not thousands.
    # The walked ones, newest change first, then those taken from the last snapshot
    # (``same``), in its order: they changed no later than when it was saved.
    held = {id(row) for row in same.values()}
    walked = sorted((row for row in rows if id(row) not in held), key=_last_change, reverse=True)
    present = {id(row) for row in rows}
    rows = walked + [row for row in same.values() if id(row) in present]
    walked = {t.name for t in result.trees if not t.absent}
    idle = CheckpointResult(trees=[TreeResult(name=t.name, files=t.files, directories=t.directories, absent=t.absent)
                                   for t in result.trees])
    snapshot = quiet.Quiet(
        inputs=cfg.inputs, config_key=key, state_sig=state_sig, result=msgspec.to_builtins(idle),
        result_json=msgspec.json.format(msgspec.json.encode(idle), indent=2).decode(),
        absent=[t.path for t in cfg.trees + cfg.dormant if t.name not in walked],
        present=[p for p in (store.local_file(CONFIG_KEY), own and store.local_file(manifest_key(own))) if p],
        unmade=[nxt] if (nxt := store.local_file(manifest_key(next_seq))) is not None else [],
        remote=(manifest_key(next_seq), manifest_key(own) if own else None) if nxt is None else None, dirs=rows)
    try:
        quiet.save(cfg.state_dir, snapshot)
    except OSError:  # a full disk: the checkpoint is committed; without a snapshot the next tick walks
        quiet.discard(cfg.state_dir)


#: The time a ``Signature`` holds, read from the plain tuple a row keeps (no object made per path).
_mtime_of = Signature.mtime_ns.fget


def _last_change(row: quiet.Row) -> int:
    """The newest modification time among a row's files and links (0: none)."""
    return max(map(_mtime_of, filter(None, row.sigs)), default=0)


def _load_or_refuse(state_dir: str, repo: Repository) -> LocalState:
    """The local state of ``repo``'s store; a new one only for a first checkpoint into an empty store."""
    state = load_state(state_dir, repo.store_id)
    if state is not None:
        if not state.restore_complete:
            # A partial restore must not become the next checkpoint: trees it could not
            # rebuild would drop out of history (a new lineage over the real one, design §10).
            raise CheckpointAfterIncompleteRestore(os.path.join(state_dir, STATE_FILE))
        return state
    refuse_foreign("checkpoint", state_dir, repo)  # a state of another store is no "first run"
    seqs = repo.manifest_seqs()  # listing only when there is no state (first run)
    if seqs:
        raise HistoryWithoutState(os.path.join(state_dir, STATE_FILE), seqs[-1])
    fresh = new_state(repo.store_id)
    fresh.restore_complete = True  # an empty store: nothing to restore
    return fresh


def _publish_pending(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult,
                     reporter: Reporter) -> None:
    """Finish a commit that a crash interrupted between the state save and the manifest put.

    A pending manifest that names a pack the store lacks is dropped unless the store
    already holds it: the state goes back to its parent, and this checkpoint uploads
    every file again. A manifest the store already holds stands, and this checkpoint
    uploads every file again on top of it."""
    published = state.pending
    manifest = decode(repo.decode_manifest_record(published, manifest_key(state.pending_seq)), Manifest)
    stored = repo.store.head(manifest_key(state.pending_seq)) is not None
    if not stored:
        require_committed(repo, manifest.parent or 0, cfg.state_dir)  # never on top of a lost history
    missing = _missing_packs(repo, manifest)
    busy = not stored and not missing and gc_running(repo.store)
    if (missing or busy) and not stored:
        # A running gc may have planned a sweep batch before this put that deletes a pack
        # the crashed attempt found already stored (no spool copy of it is left to check
        # against after the commit): drop it, and the uploads again keep those copies.
        why = ("a gc is running, which may delete packs it relied on" if busy else
               f"it names {len(missing)} pack(s) the store does not hold")
        drop_pending(cfg, repo, state, result, reporter, why)
        return
    manifest, _, record, put = put_pending(cfg.state_dir, repo, state, manifest)
    mark_said(state, manifest.restored or {})
    if put:
        result.objects += 1
        result.bytes += len(record)
    result.seq, result.manifest_id = state.pending_seq, state.manifest_id
    state.pending = None
    state.pending_seq = None
    if missing or _missing_packs(repo, manifest):
        # Committed before a gc sweep took a pre-existing pack it names (the manifest
        # was already in the store, or the sweep ran between the check and the put).
        _warn(result, reporter, f"checkpoint: manifest {manifest.seq} names pack(s) the store lost after it was "
              "committed; this checkpoint re-uploads every file")
        reupload_all(cfg, state)
    elif gc_running(repo.store):
        # A gc running now may still delete a pack it names (planned before the put, or
        # before the crashed attempt's); this checkpoint's own uploads are checked after
        # its commit, so the newest checkpoint is whole whatever that sweep takes.
        _warn(result, reporter, f"checkpoint: manifest {manifest.seq} was published after a crash while a gc "
              "runs; this checkpoint re-uploads every file")
        reupload_all(cfg, state)
    save_state(cfg.state_dir, state)


def drop_pending(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult, reporter: Reporter,
                 why: str) -> None:
    """Drop the pending manifest ``state`` holds (it is not published: ``why``): the state
    goes back to its parent, and the next capture re-reads and re-uploads every file
    (the packs it named may be orphans a gc takes)."""
    manifest = decode(repo.decode_manifest_record(state.pending, manifest_key(state.pending_seq)), Manifest)
    _warn(result, reporter, f"checkpoint: pending manifest {manifest.seq} not published: {why}; dropped it, "
          "and this checkpoint re-uploads every file")
    state.seq, state.manifest_id = manifest.parent or 0, manifest.parent_id
    state.pending = state.pending_seq = None
    _inactive_as_in_parent(cfg, repo, state, result, reporter)
    reupload_all(cfg, state)
    save_state(cfg.state_dir, state)


def _recheck_kept(state_dir: str, repo: Repository, result: CheckpointResult, reporter: Reporter) -> None:
    """Packs earlier checkpoints found already stored stay checked for one gc lease
    after their commit: a sweep batch planned before that commit may delete them."""
    for pack in recheck_kept(repo.store, recheck_dir(state_dir)):
        _warn(result, reporter, f"checkpoint: pack {pack} (named by a committed checkpoint) was deleted by a gc "
              "sweep planned before that commit; uploaded it again")


def _warn(result: CheckpointResult, reporter: Reporter, message: str) -> None:
    result.warnings.append(message)
    reporter.warn(message)


def _missing_packs(repo: Repository, manifest: Manifest) -> list[str]:
    return [p for p in manifest.packs if repo.store.head(pack_key(p)) is None]


def reupload_all(cfg: Config, state: LocalState) -> None:
    """Make the capture re-read every file of every active tree and upload fresh blobs,
    reusing none. A tree not active now (its live directory is gone) has nothing to
    re-read: it keeps its cache, so the next manifest still names it."""
    active = {t.name for t in cfg.active_trees()}
    for name, cache in state.trees.items():
        if name in active:
            state.trees[name] = cache_from_entries(None, {}, (f.entry for f in cache.files.values()),
                                                   dirty=True, reupload=True, restored=cache.restored,
                                                   restored_seq=cache.restored_seq, keep_local=cache.keep_local)


def _inactive_as_in_parent(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult,
                           reporter: Reporter) -> None:
    """After a pending manifest is dropped, a tree that is not active now takes its
    version in the parent manifest (the dropped one may name missing packs, and there
    is no live directory to read it again from); one the parent lacks is left out."""
    from ..repository.history import ManifestCache  # imported here: only a dropped pending manifest needs it

    active = {t.name for t in cfg.active_trees()}
    try:
        parent = repo.load_manifest(state.seq)[0] if state.seq else None
    except (CorruptObject, ObjectNotFound):   # a gc expired it (a fork then takes them from its ``onto``)
        parent = None
    history = ManifestCache(repo)
    for name in [n for n in state.trees if n not in active]:
        if parent is None or name not in parent.trees:
            del state.trees[name]
            _warn(result, reporter, f"checkpoint: tree {name} is only in the dropped manifest and its live "
                  "directory is gone; it is left out of this checkpoint")
            continue
        entries, pages = history.tree(state.seq, name)
        state.trees[name] = cache_from_entries(parent.trees[name].root, pages, entries,
                                               bases=history.page_bases(state.seq, name))


class ScanOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What a checkpoint's scans may drop, and what they may take as it was."""

    allow_deletions: bool = False                   # vanished paths are dropped whatever the guards say
    same: dict[tuple[str, str], quiet.Row] = {}     # directories the quiet snapshot found unchanged
    loaded: dict[str, Files] = {}                   # each tree's paths as this run loaded the state:
                                                    # a tree still holding them takes ``same``'s directories whole


class ForkPlan:
    """How ``capture_and_commit`` commits a fork (``checkpoint/fork.py``).

    ``work(trees, before)`` names the local work among the scanned trees (tree/path
    strings); none means nothing is committed. ``next_seq(repo)`` is the sequence to try
    first, ``fork`` the manifest's mark. The scan fills in ``found`` (what ``work``
    found) and ``trees`` (the scanned trees; when no fork is committed their entries
    name packs never uploaded, so they are never to be saved)."""

    def __init__(self, work, next_seq, fork: Fork):
        self.work, self.next_seq, self.fork = work, next_seq, fork
        self.found: list[str] = []
        self.trees: dict[str, TreeCache] | None = None


class _Scanned(msgspec.Struct, kw_only=True):
    """What scanning every active tree found."""

    before: dict[str, TreeCache]                    # the trees as the state held them
    trees: dict[str, TreeCache]                     # ... as they are now (one not scanned: as it was)
    changed: list[str] = []                         # the trees with something to commit
    captured: dict[str, list[FileState]] = {}       # the paths read this time, by tree
    touched: bool = False                           # some tree's paths are not the state's (fresher signatures)


def capture_and_commit(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult,
                       reporter: Reporter, options: ScanOptions | None = None,
                       fork: ForkPlan | None = None) -> tuple[list[quiet.Row] | None, int]:
    """Scan every active tree, commit what changed, then prune the local copies it no
    longer needs. Returns the new quiet snapshot's rows (None: no snapshot this time)
    and the sequence the next checkpoint commits. With ``fork``, what changed is
    committed as a fork, and only when ``fork.work`` finds local work in it."""
    options = options or ScanOptions()
    ctx = _scan_context(cfg.state_dir, repo, reporter, options)
    try:
        scanned = _scan_trees(cfg.active_trees(), state, ctx, result)
        if fork is not None:
            fork.found = (fork.work(scanned.trees, scanned.before) if scanned.changed else None) or []
            fork.trees = scanned.trees
        if not scanned.changed or (fork is not None and not fork.found):
            next_seq = _commit_nothing(cfg.state_dir, repo, state, scanned, ctx, local=fork is None)
        else:
            next_seq = _commit(cfg.state_dir, repo, state, scanned, ctx, result, fork)
            _prune_copies(cfg.state_dir, cfg.chunk_copies_limit, ctx, scanned, options.loaded, result)
    except BaseException:
        ctx.data.abort()
        raise
    finally:
        ctx.ahead.close()  # before the staging copies go: it waits for a snapshot under way
        clear_dir(ctx.staging_dir)
    result.warnings += ctx.warnings + ctx.errors
    if ctx.errors:
        raise CheckpointErrors(ctx.errors, result.seq)
    return ctx.quiet_rows, next_seq


def _scan_context(state_dir: str, repo: Repository, reporter: Reporter, options: ScanOptions) -> ScanContext:
    """What one checkpoint's scans share: a new data pack (the spool and the staging
    copies emptied first), the local copies of page maps and chunks, and the databases'
    snapshots started ahead. journal's temp directories a killed restore or migrate
    left in the trees are swept."""
    spool = os.path.join(state_dir, SPOOL_DIR)
    staging = os.path.join(state_dir, STAGING_DIR)
    clear_spool(spool)
    clear_dir(staging)  # sqlite.snapshot.clear_staging, without importing sqlite3
    data = PackWriter(repo.store, spool, codec=repo.codec)
    chunks = BlobCache(state_dir, repo, CHUNKS_DIR, KIND_CHUNK)
    ctx = ScanContext(data=data, maps=BlobCache(state_dir, repo, bases=True), staging_dir=staging,
                      reporter=reporter, allow_deletions=options.allow_deletions, same=options.same,
                      trusted=options.loaded, deltas=FileDeltas(data, chunks))
    ctx.busy_tmp, swept = tree_tmp.sweep(state_dir)
    for warning in swept:
        ctx.warn(f"checkpoint: {warning}")
    ctx.ahead = Ahead(staging, data.codec)
    return ctx


def _scan_trees(trees: tuple[TreeConfig, ...], state: LocalState, ctx: ScanContext,
                result: CheckpointResult) -> _Scanned:
    """Start the snapshots of the databases known to have changed, then scan each tree."""
    scanned = _Scanned(before=state.trees, trees=dict(state.trees))
    for tree in trees:
        for wanted in databases_ahead(tree, state.trees.get(tree.name), ctx.busy_tmp):
            ctx.ahead.want(wanted)
    for tree in trees:
        cache = state.trees.get(tree.name, TreeCache())
        scan = scan_tree(tree, cache, ctx)
        result.trees.append(scan.result)
        scanned.touched = scanned.touched or scan.files is not cache.files
        if scan.changed:
            scanned.changed.append(tree.name)
        scanned.captured[tree.name] = scan.captured
        scanned.trees[tree.name] = TreeCache(root=cache.root, pages=cache.pages, page_keys=cache.page_keys,
                                             bases=cache.bases, files=scan.files, restored=cache.restored,
                                             restored_seq=cache.restored_seq)   # a scan ends a takeover's keep_local
    return scanned


def _commit_nothing(state_dir: str, repo: Repository, state: LocalState, scanned: _Scanned, ctx: ScanContext,
                    local: bool) -> int:
    """Nothing to commit: the data pack is dropped. A checkpoint (``local``; not a fork)
    still passes the fence, since a store another writer moved on is not idle, and saves
    the fresher signatures to the local state only. Returns the next sequence."""
    ctx.data.abort()
    if not local:
        return state.seq + 1
    next_seq = _fence(repo, state.seq, state_dir)
    if scanned.touched:
        state.trees = scanned.trees
        save_state(state_dir, state)
    return next_seq


def _commit(state_dir: str, repo: Repository, state: LocalState, scanned: _Scanned, ctx: ScanContext,
            result: CheckpointResult, fork: ForkPlan | None) -> int:
    """Commit the scanned trees (``commit_manifest``): past the fence, or as a fork.
    Returns the sequence the next checkpoint commits."""
    seq = fork.next_seq(repo) if fork is not None else _fence(repo, state.seq, state_dir)
    ctx.data.close()  # its upload overlaps the index's build; ``commit_manifest`` waits for it
    trees = scanned.trees
    restored = {n: trees[n].restored for n in scanned.changed if trees[n].restored}
    committed = commit_manifest(state_dir, repo, state, trees=trees, changed=scanned.changed, data=ctx.data,
                                captured=scanned.captured, restored=restored, seq=seq,
                                fork=fork.fork if fork is not None else None)
    result.seq, result.manifest_id = committed.seq, committed.manifest_id
    result.blobs += committed.blobs
    result.objects += committed.objects
    result.bytes += committed.bytes
    for name, why in restored.items():
        _warn(result, ctx.reporter, f"checkpoint {result.seq}: tree {name}: {why}; this checkpoint makes that "
              "version the newest (its manifest records it: `journal log`)")
    return committed.seq + 1


def _prune_copies(state_dir: str, limit: int, ctx: ScanContext, scanned: _Scanned, loaded: dict[str, Files],
                  result: CheckpointResult) -> None:
    """After a commit, remove the local copies no entry needs any more. Page maps and
    database base copies are looked at only when a snapshot, a tree or a path came or
    went; chunk copies as ``chunk_copies.py`` says (bounded by ``limit`` bytes)."""
    captured = [fs for read in scanned.captured.values() for fs in read]
    if any(fs.entry.kind == KIND_SQLITE for fs in captured) or scanned.trees.keys() != loaded.keys() \
            or any(t.deleted or t.dirs_deleted for t in result.trees):
        live_maps = _map_ids(scanned.trees)
        ctx.maps.prune(live_maps)
        prune_base_copies(state_dir, live_maps)
    keep_copies(ctx.deltas.cache, scanned.before, scanned.trees, captured, ctx.deltas.remembered, limit)


def _fence(repo: Repository, seq: int, state_dir: str) -> int:
    """The fence, before anything more is uploaded: the store must still hold ``seq``
    (else the history this writer builds on is lost), and ``seq + 1`` must be free or a
    fork (another writer's checkpoint there is refused). Returns the sequence to commit.
    The two HEADs go out together: one round trip on a bucket."""
    asked = Background(repo.store.head, manifest_key(seq + 1), name="journal-fence")
    try:
        require_committed(repo, seq, state_dir)
    finally:
        asked.join()  # the first check's error wins; the other HEAD is never left running
    if asked.result() is None:
        return seq + 1
    return next_free(repo, seq)   # a fork there is passed over; another writer's checkpoint refuses


def _map_ids(trees: dict[str, TreeCache]) -> set[str]:
    """Every page map a database entry names (only directories that hold one are looked into)."""
    return {r.id for c in trees.values() for g in c.files.groups.values() if g.flags & HAS_DB
            for f in g.paths.values() if f.entry.kind == KIND_SQLITE for r in f.entry.refs}
