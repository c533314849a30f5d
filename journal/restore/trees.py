"""Restoring the trees: decide each entry, write what must be written, fall back per file.

``write_trees`` decides every entry of every tree first (``entry.decide``; an
invalid local database is moved aside), then writes: one pool stages the files of all
trees, databases and large files first, small ones in groups (``restore/writer.py``); each
tree's files are published in durable batches (``restore/publish.py``). A file whose newest copy
is damaged is retried from the newest older manifest with a good copy, in the caller's
thread, else it is reported lost.
"""

from __future__ import annotations

import errno
import os
import stat

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from ..local.errors import UnsafePath
from ..os_errors import describe_os_error, os_error_hint
from ..repository.history import ManifestCache
from ..localfs import observe
from ..local.state import FileState, TreeCache
from ..signatures import dir_signature, mtime_ns, signature
from .aside import move_aside
from .entry import WRITES, CheckDir, Parents, Verdict, decide, refused_paths
from ..format.model import KIND_DIR, KIND_SQLITE, BlobRef, Entry
from .publish import Staged
from .reads import StagingReads
from .writer import LINK_WORKERS, WORKERS, Outcome, Pipeline, TreeWriter, make_pool, plan_jobs, stop_pool
from ..paths import shown
from ..report import Reporter
from .adopt import Adopt
from .include import Include


class TreeRestore(msgspec.Struct, kw_only=True):
    name: str
    dest: str
    seq: int | None = None              # the checkpoint the tree came from
    actions: dict[Verdict, int] = {}    # what was done with each file (every entry but directories), by verdict
    directories: dict[Verdict, int] = {}  # ... and with each directory, counted apart (design §10)
    bytes: int = 0
    lost: list[str] = []
    refused: dict[str, str] = {}        # lost paths restore refused, with why (the rest had no good copy)
    uncreatable: list[str] = []         # not on disk, and past the path length limits here: lost too
    fallbacks: list[str] = []           # files restored from an older checkpoint than ``seq``
    skipped: list[str] = []             # newer checkpoints the tree could not come from, and why
    databases: list[str] = []
    removed: list[str] = []             # local paths the adopted checkpoint does not hold, taken out
    included: list[str] = []            # a partial restore: the paths its patterns select (``restore/include.py``)
    error: str | None = None

    def fallback_note(self) -> str | None:
        """Why this tree is not the newest checkpoint's version of it, or None when it is."""
        if self.seq is None:
            return None
        if self.skipped:
            return f"restored from checkpoint {self.seq}: {self.skipped[0]}"
        if self.fallbacks:
            return (f"{len(self.fallbacks)} file(s) restored from checkpoints older than {self.seq}: "
                    f"{self.fallbacks[0]}")
        return None


class RestorePaths(msgspec.Struct, frozen=True, kw_only=True):
    """Where a restore keeps what is not in a tree: all of it in the state directory."""

    #: The state directory: each tree's temp directory is recorded there (``local/tree_tmp.py``).
    state_dir: str
    #: Where invalid local databases are moved, one directory per tree below it.
    aside: str
    #: Where live databases are copied to be checked (``CheckDir``); None: the
    #: system's temp directory (a dry run creates nothing in the state directory).
    check: str | None


def write_trees(trees: list[TreeRun], dry_run: bool, reporter: Reporter) -> None:
    """Decide every entry of every tree, then write them (see the module docstring).

    When it returns, every file written and every directory changed is durable."""
    if dry_run:
        for run in trees:
            run.plan(dry_run=True)
        return
    workers = LINK_WORKERS if any(run.repo.read_ahead for run in trees) else WORKERS
    pool = make_pool(workers)
    pipeline = Pipeline(pool, in_flight=4 * workers)
    try:
        writes = [(run, entry) for run in trees for entry in run.plan(dry_run=False)]
        progress = _Progress(reporter, sum(len(run.entries) for run in trees), len(writes))
        for run, entries in plan_jobs(writes):
            pipeline.submit(run.writer, entries, progress.wrap(run.settle))
        pipeline.drain()
        finishing = [pool.submit(run.finish) for run in trees]  # the trees' last syncs overlap
        for job in finishing:
            job.exception()  # all of them have stopped before any error is raised
        for job in finishing:
            job.result()
    except BaseException:
        pipeline.abort()
        for run in trees:
            run.discard()
        raise
    finally:
        stop_pool(pool)
        for run in trees:
            run.close()


class _Progress:
    """Progress over every entry of every tree: decided ones count at once, writes when settled."""

    def __init__(self, reporter: Reporter, total: int, writes: int):
        self.reporter, self.total, self.done = reporter, total, total - writes
        if writes:
            reporter.progress(self.done, total)

    def wrap(self, settle):
        def settled(entry, outcome):
            settle(entry, outcome)
            self.done += 1
            self.reporter.progress(self.done, self.total)
        return settled


def _newest_good_tree(cache: ManifestCache, seqs: list[int], tr: TreeRestore, reporter: Reporter,
                      chosen: int | None = None):
    """The newest (seq, entries, pages) of tree ``tr.name`` whose manifest and pages
    verify; each newer checkpoint passed over is noted in ``tr.skipped``. Forks are not
    on the main line: only the one asked for by number (``chosen``) is taken.

    Data packs it names may be missing: each file then falls back on its own
    (``TreeRun._older_copy``), so intact files of newer manifests are never lost.
    """
    name = tr.name
    for seq in reversed(seqs):
        try:
            manifest, _ = cache.manifest(seq)
            if name not in manifest.trees or (manifest.is_fork and seq != chosen):
                continue
            entries, pages = cache.tree(seq, name)
        except (CorruptObject, ObjectNotFound) as err:
            tr.skipped.append(f"checkpoint {seq} is unusable ({err})")
            reporter.warn(f"restore: tree {name}: manifest {seq} unusable ({err}); trying an older one")
            continue
        return seq, entries, pages
    return None


class TreeRun:
    """One tree being restored: its entries, what was decided for each path, and which
    entry each path ended up with (the newest copy, an older one, or None: lost).

    ``repo`` is what the tree's files are read from; ``cache`` its manifests and
    index pages; ``seqs`` the checkpoints the tree may come from, oldest first."""

    def __init__(self, repo: StagingReads, cache: ManifestCache, seqs: list[int], name: str, dest: str,
                 reporter: Reporter, paths: RestorePaths, known: dict[str, FileState] | None = None,
                 adopt: Adopt | None = None, chosen: int | None = None, keep_local: bool = False):
        self.repo, self.cache, self.seqs, self.reporter = repo, cache, seqs, reporter
        self.paths = paths
        self.known = known or {}   # the local state's view of this tree (a database unchanged since is SAME)
        self.adopt = adopt         # a stale disk or a rollback: the checkpoint replaces local state
        self.chosen = chosen       # a fork asked for by number (``--at``)
        self.keep_local = keep_local   # taken over, not yet published: no local file is replaced
        self.tr = TreeRestore(name=name, dest=dest)
        self.entries: list[Entry] = []
        self.pages: dict[str, BlobRef] = {}
        self.actions: dict[str, Verdict] = {}
        self.dirs: set[str] = set()     # the paths of directory entries (counted apart from files)
        self.used: dict[str, Entry | None] = {}
        self.writer: TreeWriter | None = None
        self.emptied = False    # a dry run of ``--replace``: the destination is removed first
        self.found: list[Entry] | None = None   # the entries to restore, once ``find`` read them

    def find(self) -> list[Entry] | None:
        """The entries of the newest good copy of the tree, read once (``tr.seq`` names
        it); None, with ``tr.error`` set, when no manifest has one."""
        tr = self.tr
        if self.found is None and tr.error is None:
            found = _newest_good_tree(self.cache, self.seqs, tr, self.reporter, self.chosen)
            if found is None:
                tr.error = f"restore: tree {tr.name}: no manifest with a complete copy of it"
                return None
            tr.seq, self.found, self.pages = found
        return self.found

    def select(self, include: Include) -> bool:
        """Restore only what ``include`` takes of this tree; whether it takes anything.
        A tree that cannot be read counts when a pattern may name it (it is reported)."""
        entries = self.find()
        if entries is None:
            return include.may_name(self.tr.name)
        self.found, self.tr.included = include.select(self.tr.name, entries)
        return bool(self.tr.included)

    def plan(self, dry_run: bool) -> list[Entry]:
        """Decide each entry, moving invalid local databases aside; return those to write.
        An entry restore must refuse is refused alone (``_refuse``): the rest are restored."""
        tr, dest = self.tr, self.tr.dest
        entries = self.find()
        if entries is None:
            return []
        self.dirs = {e.path for e in entries if e.kind == KIND_DIR}
        refused = refused_paths(entries)
        if refused:
            for path, why in refused.items():
                self._refuse(path, why)
            entries = [e for e in entries if e.path not in refused]
        if not dry_run:
            writer = TreeWriter(dest, self.repo, self.paths.state_dir)
            try:
                writer.make_root()
            except OSError as err:  # e.g. a regular file where the tree's directory belongs
                tr.error = f"restore: tree {tr.name}: cannot create {describe_os_error(err, err.filename or dest)}"
                return []
            self.writer = writer
        if self.adopt is not None:
            self._take_out_extras(entries, dry_run)
        self.entries = entries
        writes: list[Entry] = []
        parents: dict[str, Parents] = {}
        check = CheckDir(self.paths.check)  # live databases are checked through private copies outside the tree
        try:
            for entry in entries:
                try:
                    self._decide(entry, dry_run, check, parents, writes)
                except UnsafePath as err:
                    self._refuse(entry.path, err.reason)
        finally:
            check.cleanup()
        return writes

    def _aside(self) -> str:
        """Where this tree's invalid local databases are moved."""
        return os.path.join(self.paths.aside, self.tr.name)

    def _take_out_extras(self, entries: list[Entry], dry_run: bool) -> None:
        """Adopting a checkpoint: the local paths it does not hold go (``Adopt.remove_extras``),
        before anything is decided (a file may stand where it has a directory)."""
        tr, keep = self.tr, {e.path for e in entries}
        if dry_run:
            tr.removed = sorted(p for p in self.known if p not in keep)
        else:
            tr.removed = self.adopt.remove_extras(tr.dest, self.known, keep, self._aside(),
                                                  lambda msg: self.reporter.warn(f"restore: {tr.name}: {msg}"))
        for path in tr.removed:
            kind = self.known[path].entry.kind
            counts = tr.directories if kind == KIND_DIR else tr.actions
            counts[Verdict.REMOVE] = counts.get(Verdict.REMOVE, 0) + 1

    def _decide(self, entry: Entry, dry_run: bool, check_dir: CheckDir, parents: dict[str, Parents],
                writes: list[Entry]) -> None:
        tr, dest = self.tr, self.tr.dest
        try:
            action = Verdict.WRITE if self.emptied else decide(dest, entry, check_dir, parents, self.repo,
                                                               self.known.get(entry.path))
            if self.adopt is not None:
                action = self.adopt.overrule(dest, entry, action, self.known.get(entry.path))
            elif self.keep_local and action == Verdict.REPLACE and entry.kind != KIND_SQLITE:
                action = Verdict.KEEP_NEWER   # `journal takeover` made this disk's files the next checkpoint
        except OSError as err:  # the local path exists but cannot be read: never written over
            action = Verdict.KEEP_UNREADABLE
            full = os.path.join(dest, entry.path)
            self.reporter.warn(f"restore: cannot read {shown(full)} ({err.strerror or err}); left it as it is; "
                               f"{os_error_hint(err, full)}")
        if entry.kind == KIND_SQLITE:
            try:
                _report_db(dest, entry, action, dry_run, self.reporter, self._aside(), tr, self.adopt)
            except (UnsafePath, OSError) as err:  # its directory was swapped, a companion changed: nothing written
                why = err.reason if isinstance(err, UnsafePath) else describe_os_error(err)
                self._refuse(entry.path, f"the local database could not be moved aside: {why}")
                return
        self._count(entry.path, action)
        if action == Verdict.CANNOT_CREATE:
            full = os.path.join(dest, entry.path)
            err = OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG), full)
            self.reporter.warn(f"restore: cannot create {shown(full)} ({err.strerror}); nothing is there, so it is "
                               f"lost and the restore is incomplete; {os_error_hint(err, full)}")
            tr.uncreatable.append(entry.path)
            self.used[entry.path] = None
            return
        if action in WRITES and not dry_run:
            if action != Verdict.WRITE:   # a write where nothing was: it must still be absent (``TreeWriter.expect``)
                full = os.path.join(dest, entry.path)
                self.writer.expect[full] = observe(full)   # after a database was moved aside
            writes.append(entry)
            return
        if action in WRITES:
            tr.bytes += entry.size
        self.used[entry.path] = entry

    def _count(self, path: str, action: Verdict) -> None:
        """Record ``action`` for ``path``, a directory's apart from the files'. A path
        is counted once: a later verdict (a path changed meanwhile) replaces the first."""
        actions = self.tr.directories if path in self.dirs else self.tr.actions
        was = self.actions.get(path)
        if was is not None:
            actions[was] -= 1
            if not actions[was]:
                del actions[was]
        actions[action] = actions.get(action, 0) + 1
        self.actions[path] = action

    def _refuse(self, path: str, why: str) -> None:
        """Refuse one entry: it is lost (the restore is incomplete); nothing else is."""
        tr = self.tr
        self._count(path, Verdict.REFUSED)
        self.used[path] = None
        tr.lost.append(path)
        tr.refused[path] = why
        self.reporter.warn(f"restore: {tr.name}/{shown(path)}: refused: {why}; the rest of the tree is restored")

    def settle(self, entry: Entry, outcome: Outcome) -> None:
        """Take back one written entry, as its job completes: record which entry its path
        now holds (``_settled``), or refuse it."""
        try:
            self.used[entry.path] = self._settled(entry, outcome)
        except UnsafePath as err:  # the entry, or the older copy staged for it, was refused
            self._refuse(entry.path, err.reason)

    def _settled(self, entry: Entry, outcome: Outcome) -> Entry | None:
        """Publish a staged entry, or try older manifests' copies of a damaged one.

        Returns the entry now on disk (the newest copy or an older one), None when lost.
        Errors other than a bad blob are raised (``UnsafePath``: the entry is refused).
        """
        match outcome:
            case None:  # a directory, made already
                return entry
            case Staged():
                self.writer.publish(outcome)
                self.tr.bytes += outcome.size
                return entry
            case CorruptObject() | ObjectNotFound():
                return self._older_copy(entry, outcome)
            case _:
                raise outcome

    def _older_copy(self, entry: Entry, damage: CorruptObject | ObjectNotFound) -> Entry | None:
        """Stage and publish the newest older copy of ``entry``'s path that verifies (older
        manifests are read only now); None when there is none: the path is lost."""
        tr, reporter = self.tr, self.reporter
        reporter.warn(f"restore: {tr.name}/{shown(entry.path)}: copy in manifest {tr.seq} is damaged ({damage})")
        for seq, cand in _older_copies(self.cache, [s for s in self.seqs if not self.cache.is_fork(s)], tr.seq,
                                       tr.name, entry):
            try:
                staged = self.writer.stage_now(cand)
            except (CorruptObject, ObjectNotFound) as err:
                reporter.warn(f"restore: {tr.name}/{shown(entry.path)}: copy in manifest {seq} is damaged ({err})")
                continue
            self.writer.publish(staged)
            tr.bytes += staged.size
            msg = f"{tr.name}/{shown(entry.path)}: restored from manifest {seq} (manifest {tr.seq}'s copy is damaged)"
            tr.fallbacks.append(msg)
            reporter.warn(f"restore: {msg}")
            return cand
        tr.lost.append(entry.path)
        return None

    def _chmodded_since(self, entry: Entry) -> bool:
        """Whether ``entry`` is a directory whose mode was changed here since the local
        state last saw it. That is a newer local change, kept as a newer file is. A
        directory this restore made (at 0700, ``local/under.py``) was never changed
        here: it takes the checkpointed mode."""
        known = self.known.get(entry.path)
        if entry.kind != KIND_DIR or known is None or known.sig is None or self.adopt is not None \
                or self.actions.get(entry.path) in WRITES:
            return False
        try:
            st = os.lstat(os.path.join(self.tr.dest, entry.path))
        except OSError:
            return False
        if not stat.S_ISDIR(st.st_mode) or dir_signature(st) == tuple(known.sig):
            return False
        self.reporter.note(f"restore: kept the newer local mode {stat.S_IMODE(st.st_mode):o} of "
                           f"{self.tr.name}/{shown(entry.path)}")
        return True

    def finish(self) -> None:
        if self.writer is not None:
            # Directory modes only for directories that are in place (never a refused one),
            # and never over a mode changed here since the last checkpoint or restore.
            self.writer.finish([e for e in self.entries if self.used.get(e.path) is not None
                                and not self._chmodded_since(e)])
            for full in self.writer.batch.kept:
                self._changed_meanwhile(os.path.relpath(full, self.tr.dest))
            for full, err in self.writer.batch.unsafe:   # its directory became a symlink: written nowhere
                self.tr.lost.append(os.path.relpath(full, self.tr.dest))
                self.reporter.warn(f"restore: {self.tr.name}: {err.reason}; not restored")
        self.tr.lost.sort()  # files settle in the order they complete; report in path order
        self.tr.fallbacks.sort()

    def _changed_meanwhile(self, path: str) -> None:
        """A path another process created or changed while the restore ran: it is kept."""
        self._count(path, Verdict.KEEP_NEWER)
        self.reporter.warn(f"restore: {self.tr.name}/{shown(path)} was created or changed while the restore ran; "
                           "kept the local file")

    def discard(self) -> None:
        if self.writer is not None:
            self.writer.discard()

    def close(self) -> None:
        """Remove the tree's temp directory (saying so when it cannot be removed)."""
        if self.writer is None:
            return
        try:
            warning = self.writer.close()
        except OSError as err:
            warning = f"cannot remove {self.writer.root}'s temp directory: {err}"
        if warning:
            self.reporter.warn(f"restore: {self.tr.name}: {warning}")

    def tree_cache(self, newest: int | None) -> TreeCache | None:
        """The local-state cache of this tree after its files are in place."""
        tr, dest = self.tr, self.tr.dest
        if tr.seq is None or (not self.entries and tr.error):
            return None
        files: dict[str, FileState] = {}
        for entry in self.entries:
            got, action = self.used.get(entry.path), self.actions[entry.path]
            if got is not None and action != Verdict.KEEP_CONFLICT:
                files[entry.path] = FileState(_sig_after(dest, got, action), got)
        # Publish the tree again at the next checkpoint when what is on disk is not the
        # newest manifest's version of it (a fallback, a loss, or a rollback with --at).
        behind = tr.seq != newest and tr.name in _tree_names_at(self.cache, newest)
        rolled = f"fork {tr.seq}" if self.cache.is_fork(tr.seq) else f"checkpoint {tr.seq}"
        note = tr.fallback_note() or (f"rolled back to {rolled} by `journal restore --at {tr.seq} --rollback` "
                                      f"(the newest was {newest})" if behind else None)
        if note or tr.lost:
            # What is on disk came (partly) from a manifest gc may expire at any time, so
            # the next checkpoint must not lean on its blobs: it re-reads and re-uploads,
            # and its manifest says which checkpoint the tree came back from. The
            # signatures stay: they say which paths still hold what restore wrote (a
            # fork's judge compares by them, ``restore/adopt.py``).
            return TreeCache(root=None, pages={}, files=files, dirty=True, reupload=True, keep_local=self.keep_local,
                             restored=note, restored_seq=None if tr.fallback_note() else tr.seq)
        return TreeCache(root=self.cache.manifest(tr.seq)[0].trees[tr.name].root, pages=self.pages, files=files,
                         bases=self.cache.page_bases(tr.seq, tr.name), dirty=self.keep_local,
                         keep_local=self.keep_local)


def _tree_names_at(cache: ManifestCache, seq: int) -> set[str]:
    try:
        return set(cache.manifest(seq)[0].trees)
    except (CorruptObject, ObjectNotFound):
        return set()


def _report_db(dest: str, entry: Entry, action: Verdict, dry_run: bool, reporter: Reporter, aside: str,
               tr: TreeRestore, adopt: Adopt | None = None) -> None:
    """Say what happens to a local database; move an invalid one aside (never delete it),
    and, when adopting a checkpoint, one that is not the checkpoint's."""
    full = os.path.join(dest, entry.path)
    if action == Verdict.REPLACE and adopt is not None and os.path.lexists(full):
        if dry_run:
            return
        moved = move_aside(dest, entry, aside)
        kept = f"its content is in fork {adopt.fork}" if adopt.fork else "nothing in it is newer than a checkpoint"
        msg = (f"restore: local database {shown(full)} is not checkpoint {adopt.onto}'s ({kept}); moved it (and its "
               f"-wal, -shm, -journal) to {shown(moved)}")
        reporter.note(msg)
        tr.databases.append(msg)
    elif action == Verdict.KEEP_VALID_DB:
        msg = f"restore: kept the valid local database {shown(full)} (it passes quick_check; it is authoritative)"
        reporter.note(msg)
        tr.databases.append(msg)
    elif action == Verdict.REPLACE and not dry_run:
        moved = move_aside(dest, entry, aside)
        msg = (f"restore: local database {shown(full)} is not valid (it fails quick_check, or a -wal, -shm or -journal "
               f"beside it is not a regular file); moved it (and those) to {shown(moved)}")
        reporter.warn(msg)
        tr.databases.append(msg)


def _older_copies(cache: ManifestCache, seqs: list[int], newest: int, name: str, entry: Entry):
    """Older manifests' entries at ``entry``'s path that could stand in for it, newest
    first, each set of blobs once. Such an entry has the same kind (an older directory
    or symlink is no copy of a file) and is one restore would make (``refused_paths``)."""
    seen: set[tuple[BlobRef, ...]] = {entry.refs}
    for seq in reversed([s for s in seqs if s < newest]):
        try:
            entries, _ = cache.tree(seq, name)
        except (CorruptObject, ObjectNotFound, KeyError):
            continue
        for e in entries:
            if e.path == entry.path and e.kind == entry.kind and e.refs not in seen and not refused_paths([e]):
                seen.add(e.refs)
                yield seq, e


def _sig_after(dest: str, entry: Entry, action: Verdict):
    """The cache signature: the file as written or verified now; None forces a re-read.

    A file left as it is (``SAME``: the checkpointed bytes) whose mode or mtime are not
    the entry's is re-read too: the cache would otherwise say the entry describes it, and
    the next checkpoint would publish the entry's mode and mtime over the file's own."""
    if action not in WRITES and action != Verdict.SAME:
        return None  # kept local content: the next checkpoint must capture it
    try:
        st = os.lstat(os.path.join(dest, entry.path))
    except FileNotFoundError:
        return None
    if entry.kind == KIND_SQLITE:
        from ..signatures import live_signature

        return live_signature(os.path.join(dest, entry.path))
    if entry.kind == KIND_DIR:   # a mode kept that is not the entry's: the next checkpoint reads it
        return dir_signature(st) if stat.S_IMODE(st.st_mode) == entry.mode else None
    if action == Verdict.SAME and (stat.S_IMODE(st.st_mode) != entry.mode or mtime_ns(st) != entry.mtime_ns):
        return None
    return signature(st)
