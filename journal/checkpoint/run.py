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

import msgspec

from ..background import Background
from ..repository.blob_cache import BlobCache
from ..config import Config, no_trees_hint
from ..errors import (CheckpointAfterIncompleteRestore, CheckpointErrors, ConfigError, CorruptObject,
                      HistoryWithoutState, JournalError, ObjectNotFound, describe_error)
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
from ..local.files import HAS_DB, Files
from ..format.model import KIND_SQLITE, Fork, Manifest, decode
from ..format.objects import KIND_CHUNK
from ..repository.pack import PackWriter, clear_spool
from ..paths import CHUNKS_DIR, SPOOL_DIR, STAGING_DIR
from .recheck import gc_running, recheck_dir, recheck_kept, rechecks_pending
from ..report import SILENT, Reporter
from ..signatures import file_stamp, signature_mtime
from ..repository.repository import CONFIG_KEY, Repository, manifest_key, pack_key
from .scan import ScanContext, TreeResult, databases_ahead, scan_tree
from ..sqlite.ahead import Ahead
from ..sqlite.base_copy import prune_base_copies
from ..store.base import Store


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
               allow_deletions: bool = False, wait: bool = False) -> CheckpointResult:
    """Take one checkpoint of every configured tree. See the module docstring. What it
    did, or the error it ends with, is recorded for ``journal status`` (``local/activity.py``)."""
    if not cfg.active_trees():
        raise ConfigError(f"checkpoint: no trees configured; {no_trees_hint(cfg)}")
    started = time.monotonic()
    with StateLock(cfg.state_dir, wait=wait), cycles_paused():
        result = CheckpointResult()
        try:
            proven = _locked(cfg, store, reporter, allow_deletions, result)
        except (JournalError, OSError) as err:
            result.seconds = time.monotonic() - started
            if result.seq is not None:  # committed, with some paths failed (CheckpointErrors)
                activity.checkpoint_done(cfg.state_dir, result, walked=True, ok=False)
            activity.failed(cfg.state_dir, "checkpoint", describe_error(err))
            raise
        result = proven or result
        result.seconds = time.monotonic() - started
        activity.checkpoint_done(cfg.state_dir, result, walked=proven is None)
    return result


def _locked(cfg: Config, store: Store, reporter: Reporter, allow_deletions: bool,
            result: CheckpointResult) -> CheckpointResult | None:
    """The checkpoint, under the state lock: the quiet snapshot's result when it proves
    nothing changed, else None once ``result`` holds what this run did."""
    state_file = os.path.join(cfg.state_dir, STATE_FILE)
    key = config_key(cfg)
    proven, same = quiet.same_rows(cfg.state_dir, state_file, config_key=key, fork=True)
    if proven is not None and proven.remote is not None and _moved_on(store, *proven.remote):
        proven = None   # another writer committed the next checkpoint: the full path says so
    if proven is not None:  # unchanged since the last clean checkpoint
        return msgspec.convert(proven.result, CheckpointResult)
    repo = open_repository(store, cfg.state_dir, create=True, key=cfg.key)
    state = _load_or_refuse(cfg, repo)
    state.encrypted, state.key_id = repo.codec.encrypted, repo.key_id  # a store once encrypted stays so (§22)
    loaded = {name: cache.files for name, cache in state.trees.items()}  # as the quiet snapshot's state holds them
    try:
        _recheck_kept(cfg, repo, result, reporter)
        if state.pending is not None:
            _publish_pending(cfg, repo, state, result, reporter)
        rows, next_seq = capture_and_commit(cfg, repo, state, result, reporter, allow_deletions, same, loaded)
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
    """Save the quiet snapshot after a clean checkpoint; drop a stale one otherwise (and
    while packs wait for a recheck: every tick then takes the full path). A store that
    is a directory here (a mounted volume) is part of what the snapshot proves: its
    config file must still be there, so an idle tick never says "idle" over an
    unmounted store. So are the next checkpoint's manifest (``next_seq``) and this
    writer's last (``own``): while the one is absent and the other there, no other
    writer moved the store on (a gc after another writer's checkpoints takes the
    second)."""
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


def _last_change(row: quiet.Row) -> int:
    """The newest modification time among a row's files and links (0: none)."""
    return max(map(signature_mtime, filter(None, row.sigs)), default=0)


def _load_or_refuse(cfg: Config, repo: Repository) -> LocalState:
    state = load_state(cfg.state_dir, repo.store_id)
    if state is not None:
        if not state.restore_complete:
            # A partial restore must not become the next checkpoint: trees it could not
            # rebuild would drop out of history (a new lineage over the real one, design §10).
            raise CheckpointAfterIncompleteRestore(os.path.join(cfg.state_dir, STATE_FILE))
        return state
    refuse_foreign("checkpoint", cfg.state_dir, repo)  # a state of another store is no "first run"
    seqs = repo.manifest_seqs()  # listing only when there is no state (first run)
    if seqs:
        raise HistoryWithoutState(os.path.join(cfg.state_dir, STATE_FILE), seqs[-1])
    fresh = new_state(repo.store_id)
    fresh.restore_complete = True  # an empty store: nothing to restore
    return fresh


def _publish_pending(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult,
                     reporter: Reporter) -> None:
    """Finish a commit that a crash interrupted between the state write and the manifest put.

    A pending manifest naming a pack the store does not hold (its put failed in a way
    that looked like success, or a gc sweep took a pre-existing copy) is dropped, not
    published: the state goes back to its parent and this checkpoint re-reads and
    re-uploads every file under the same seq. If the store already holds that manifest
    (it was committed before the pack went), it stands, and this checkpoint commits
    the next seq with every file uploaded again."""
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
    manifest, _, record, put = put_pending(cfg, repo, state, manifest)
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


def _recheck_kept(cfg: Config, repo: Repository, result: CheckpointResult, reporter: Reporter) -> None:
    """Packs earlier checkpoints found already stored stay checked for one gc lease
    after their commit: a sweep batch planned before that commit may delete them."""
    for pack in recheck_kept(repo.store, recheck_dir(cfg.state_dir)):
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


def capture_and_commit(cfg: Config, repo: Repository, state: LocalState, result: CheckpointResult,
                        reporter: Reporter, allow_deletions: bool,
                        same: dict[tuple[str, str], quiet.Row] | None = None,
                        loaded: dict[str, Files] | None = None,
                        fork: ForkPlan | None = None) -> tuple[list[quiet.Row] | None, int]:
    """Scan every tree (taking the directories in ``same`` as the quiet snapshot holds
    them), then commit what changed; returns the new quiet snapshot's rows, or None, and
    the sequence the next checkpoint commits. With ``fork``, what changed is committed
    as a fork, only when ``fork.work`` finds local work in it (``checkpoint/fork.py``).
    The local copies of page maps and databases are pruned when what they serve may
    have changed: a database read, a path or tree gone, or trees other than ``loaded``
    (those of the state as this run read it, with their paths: a tree whose cache still
    holds those very paths takes the unchanged directories ``same`` names whole)."""
    spool = os.path.join(cfg.state_dir, SPOOL_DIR)
    staging = os.path.join(cfg.state_dir, STAGING_DIR)
    clear_spool(spool)
    clear_dir(staging)  # sqlite.snapshot.clear_staging, without importing sqlite3
    data = PackWriter(repo.store, spool, codec=repo.codec)
    chunks = BlobCache(cfg.state_dir, repo, CHUNKS_DIR, KIND_CHUNK)
    ctx = ScanContext(data=data, maps=BlobCache(cfg.state_dir, repo, bases=True), staging_dir=staging,
                      reporter=reporter, allow_deletions=allow_deletions, same=same or {}, trusted=loaded or {},
                      deltas=FileDeltas(data, chunks))
    ctx.busy_tmp, swept = tree_tmp.sweep(cfg.state_dir)  # a killed restore's or migrate's temp dirs
    for warning in swept:
        ctx.warn(f"checkpoint: {warning}")
    ctx.ahead = Ahead(staging, data.codec)
    old_trees, new_trees = state.trees, dict(state.trees)
    changed_trees: list[str] = []
    touched = False
    try:
        for tree in cfg.active_trees():
            for full, prev, reached in databases_ahead(tree, state.trees.get(tree.name), ctx.busy_tmp):
                ctx.ahead.want(full, prev, reached)
        for tree in cfg.active_trees():
            cache = state.trees.get(tree.name, TreeCache())
            tr, files, changed = scan_tree(tree, cache, ctx)
            result.trees.append(tr)
            touched = touched or files is not cache.files
            if changed:
                changed_trees.append(tree.name)
            new_trees[tree.name] = TreeCache(root=cache.root, pages=cache.pages, page_keys=cache.page_keys,
                                             bases=cache.bases, files=files, restored=cache.restored,
                                             restored_seq=cache.restored_seq)   # a scan ends a takeover's keep_local
        next_seq = state.seq + 1
        work = fork.work(new_trees, old_trees) if fork is not None and changed_trees else None
        if fork is not None:
            fork.found, fork.trees = work or [], new_trees
        if not changed_trees or (fork is not None and not work):
            ctx.data.abort()
            if fork is None:
                next_seq = _fence(repo, state.seq, cfg.state_dir)  # a store another writer moved on is no "idle"
            if touched and fork is None:
                state.trees = new_trees
                save_state(cfg.state_dir, state)  # local only: fresher signatures, no store write
        else:
            seq = fork.next_seq(repo) if fork is not None else _fence(repo, state.seq, cfg.state_dir)
            ctx.data.close()  # its upload overlaps the index's build; ``commit_manifest`` waits for it
            restored = {n: new_trees[n].restored for n in changed_trees if new_trees[n].restored}
            committed = commit_manifest(cfg, repo, state, trees=new_trees, changed=changed_trees, data=ctx.data,
                                captured=ctx.captured, restored=restored, seq=seq,
                                fork=fork.fork if fork is not None else None)
            next_seq = committed.seq + 1
            result.seq, result.manifest_id = committed.seq, committed.manifest_id
            result.blobs += committed.blobs
            result.objects += committed.objects
            result.bytes += committed.bytes
            for name, why in restored.items():
                _warn(result, reporter, f"checkpoint {result.seq}: tree {name}: {why}; this checkpoint makes that "
                      "version the newest (its manifest records it: `journal log`)")
            if any(fs.entry.kind == KIND_SQLITE for fs in ctx.captured) or new_trees.keys() != (loaded or {}).keys() \
                    or any(t.deleted or t.dirs_deleted for t in result.trees):
                live_maps = _map_ids(new_trees)  # a snapshot, a tree or a path came or went: maybe stale copies
                ctx.maps.prune(live_maps)
                prune_base_copies(cfg.state_dir, live_maps)
            keep_copies(chunks, old_trees, new_trees, ctx.captured, ctx.deltas.remembered, cfg.chunk_copies_limit)
    except BaseException:
        ctx.data.abort()
        raise
    finally:
        ctx.ahead.close()  # before the staging copies go: it waits for a snapshot under way
        clear_dir(staging)
    result.warnings += ctx.warnings + ctx.errors
    if ctx.errors:
        raise CheckpointErrors(ctx.errors, result.seq)
    return ctx.quiet_rows, next_seq


class ForkPlan:
    """How ``capture_and_commit`` commits a fork (``checkpoint/fork.py``): ``work`` tells
    the local work among the scanned trees (tree/path strings; none: nothing is
    committed), ``next_seq`` the sequence to try first, ``fork`` the manifest's mark;
    ``found`` receives what ``work`` found, ``trees`` the scanned trees (whose entries
    name packs that are never uploaded when no fork is committed: never to be saved)."""

    def __init__(self, work, next_seq, fork: Fork):
        self.work, self.next_seq, self.fork = work, next_seq, fork
        self.found: list[str] = []
        self.trees: dict[str, TreeCache] | None = None


def _fence(repo: Repository, seq: int, state_dir: str) -> int:
    """Before uploading anything more: the store must still hold ``seq`` (or the history
    this writer builds on is lost), and another writer may own ``seq + 1``; returns the
    sequence to commit (past forks other disks made above ``seq``: they are not on the
    main line). The two HEADs go out together: on a bucket, one round trip instead of two."""
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
