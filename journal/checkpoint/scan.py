"""Scanning one live tree against the local cache: what changed, what is new, what is gone.

Paths whose stat signature is unchanged are reused from the cache without a read.
Changed paths are captured (``checkpoint/capture.py`` for files, ``sqlite/capture.py`` for
databases); their new blobs go into the checkpoint's data pack.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Iterable, Iterator
from itertools import chain

import msgspec

from ..repository.blob_cache import BlobCache
from .capture import capture_item
from ..sqlite.ahead import Ahead, Wanted
from .file_delta import FileDeltas
from ..config import TreeConfig
from ..errors import CorruptObject, ObjectNotFound
from .errors import Unstorable
from ..os_errors import os_error_hint
from ..sqlite.errors import SnapshotFailed
from ..local.files import HAS_DB, Files, Group
from ..local.state import FileState, TreeCache
from ..paths import shown
from ..format.model import KIND_DIR, KIND_FILE, KIND_JSONL, KIND_SQLITE
from ..repository.pack import PackWriter
from ..report import Reporter
from ..local.quiet import DB, DIR, OTHER, Row
from ..signatures import Signature, clamp_mtime, dir_signature, live_signature, signature
from ..local.walk import QUIET_ROW, UNREADABLE, Item, Matcher, same_paths, walk_tree


#: ``_capture``'s answer for a path that exists but cannot be read this time.
_KEEP = object()

#: A checkpoint that would drop more than this share of a tree's files keeps them.
DELETION_GUARD = 0.5
#: A vanished transcript with more history than this is kept unless deletions are allowed.
TRANSCRIPT_GUARD_BYTES = 4096


class TreeResult(msgspec.Struct, kw_only=True):
    """What one checkpoint did to one tree, in the words every command uses (design §10):
    *files* are every entry but directories (regular files, symlinks, databases),
    *directories* are counted apart, *deletions* are paths dropped because they vanished.
    The attribute names are the library's; ``--json`` prints the ``name=`` ones."""

    name: str
    files: int = 0                                                        # in the tree now
    directories: int = 0
    changed: int = msgspec.field(default=0, name="files_changed")         # new or changed
    dirs_changed: int = msgspec.field(default=0, name="directories_changed")
    deleted: int = msgspec.field(default=0, name="files_deleted")
    dirs_deleted: int = msgspec.field(default=0, name="directories_deleted")
    kept_deleted: int = msgspec.field(default=0, name="deletions_held")   # vanished files kept (guards)
    absent: bool = False


class ScanContext(msgspec.Struct, kw_only=True):
    """What every tree's scan in one checkpoint shares. A struct, as the results are (a
    dataclass would import ``dataclasses`` at every busy tick, for this class alone)."""

    data: PackWriter
    maps: BlobCache
    staging_dir: str
    reporter: Reporter
    deltas: FileDeltas | None = None      # rewritten files' changed chunks (checkpoint/file_delta.py)
    allow_deletions: bool = False
    errors: list[str] = []
    warnings: list[str] = []
    # The quiet snapshot's rows (``local/quiet.py``); None once any path was not read cleanly.
    quiet_rows: list[Row] | None = []
    # The last snapshot's rows of the directories it found unchanged, by (tree, absolute path).
    same: dict[tuple[str, str], Row] = {}
    # The trees' paths as the state the snapshot was written after holds them, by tree
    # (the state as this run loaded it): a tree whose cache is still that very ``Files``
    # takes an unchanged directory's group whole (``_same_dirs``).
    trusted: dict[str, Files] = {}
    # journal's temp directories in the trees that another process uses now (a
    # migrate's): left out of the walk by their exact paths (``tree_tmp.sweep``).
    busy_tmp: set[str] = set()
    # Snapshots of changed databases made ahead of the walk reaching them (``databases_ahead``).
    ahead: Ahead | None = None

    def warn(self, message: str) -> None:
        """A warning for the reporter that also lands in the checkpoint's result."""
        self.warnings.append(message)
        self.reporter.warn(message)


class TreeScan(msgspec.Struct, kw_only=True):
    """What ``scan_tree`` found in one tree."""

    result: TreeResult
    files: Files                          # the tree's paths now: ``cache.files`` itself when none differs
    changed: bool                         # something to commit (a path new, changed or dropped; a dirty cache)
    captured: list[FileState] = []        # the paths read this time (refs may name placeholder packs)


class _Tally(msgspec.Struct, kw_only=True):
    """What ``scan_tree`` gathers while it walks one tree."""

    result: TreeResult
    held: Files                           # the cache's paths
    files: dict[str, FileState] = {}      # paths read, or taken one by one
    taken: dict[str, Group] = {}          # directories taken whole, as the cache holds them
    ntaken: int = 0                       # ... their paths
    reused: int = 0                       # paths taken from the cache as they were
    added: int = 0                        # paths put in ``files`` that the cache lacks
    seen_files: int = 0                   # paths the walk saw that are no directory
    nondir: int = 0                       # paths kept (``files``, ``taken``) that are no directory
    changed: bool = False
    captured: list[FileState] = []
    settled: int = 0                      # ``captured[:settled]`` name their packs' ids (``_settle_closed``)
    packs: int = 0                        # the data packs closed when that was looked at
    unreadable: list[str] = []            # paths that exist but could not be read: they keep their last checkpoint
    listing: list | None = None           # the walk's listing for the quiet snapshot; None once a path was not read cleanly
    in_dir: str | None = None             # the directory the walk is in ...
    here: dict[str, FileState] = {}       # ... and its cached paths (the walk yields a directory's names together)

    def keep(self, path: str, fs: FileState) -> None:
        """Put ``fs`` in the tree's paths now."""
        self.files[path] = fs
        self.nondir += fs.entry.kind != KIND_DIR


def scan_tree(tree: TreeConfig, cache: TreeCache, ctx: ScanContext) -> TreeScan:
    """Walk one tree against its cache: reuse each path whose signature is unchanged,
    read the others, and drop what vanished unless a deletion guard keeps it."""
    if not os.path.isdir(tree.path):
        if cache.files:
            ctx.warn(f"checkpoint: tree {tree.name}: {tree.path} is missing; keeping its last checkpoint")
        return TreeScan(result=TreeResult(name=tree.name, absent=True), files=cache.files, changed=False)
    tally = _Tally(result=TreeResult(name=tree.name), held=cache.files, changed=cache.dirty,
                   listing=[] if ctx.quiet_rows is not None else None)
    matcher = _matcher(tree, ctx.busy_tmp)
    skipped: list[tuple[str, str]] = []
    same, whole = _same_dirs(tree, cache, ctx.same, ctx.trusted.get(tree.name) is cache.files)
    for item in walk_tree(tree.path, matcher, skipped, tally.listing, same):
        if item.kind == QUIET_ROW:
            _take_unchanged(tally, item, whole.get(item.path))
        else:
            _scan_item(tree, item, cache.reupload, matcher, ctx, tally)
    for path, why in skipped:
        ctx.warn(str(Unstorable(path, why)))
    _keep_unreadable(cache, tally)
    # Every cached path is in ``files`` or a taken group unless fewer of them are than
    # the cache holds; the gone ones are looked for outside the taken groups only.
    if len(tally.files) + tally.ntaken - tally.added < len(cache.files):
        tally.changed = _apply_deletions(tree, cache, tally, ctx) or tally.changed
    tr = tally.result
    if not tally.changed and tally.reused == len(tally.files) + tally.ntaken == len(cache.files):
        out = cache.files  # every path reused, none gone: the cache stands as it was
        tr.files = tally.seen_files
    else:
        out = Files.build(tally.taken, tally.files, cache.files)
        tr.files = tally.nondir + tr.kept_deleted  # counted as each path was put in; held ones by ``_hold``
    tr.directories = len(out) - tr.files
    rows = None if tally.listing is None or ctx.quiet_rows is None else quiet_rows(tree, tally.listing, out)
    if rows is None:
        ctx.quiet_rows = None
    else:
        ctx.quiet_rows.extend(rows)
    return TreeScan(result=tr, files=out, changed=tally.changed, captured=tally.captured)


def _take_unchanged(tally: _Tally, item: Item, group: Group | None) -> None:
    """A directory the quiet snapshot found unchanged: its paths as the cache holds them,
    as the group itself when the scan may take it whole (``_same_dirs``)."""
    if group is not None:
        tally.taken[item.path] = group
        tally.ntaken += group.n
        tally.seen_files += group.nfiles
        tally.nondir += group.nfiles
        tally.reused += group.n
        return
    paths, quiet_files, _ = same_paths(item.path, item.quiet)
    for path in paths:
        tally.files[path] = tally.held[path]
    tally.seen_files += quiet_files
    tally.nondir += quiet_files
    tally.reused += len(paths)


def _scan_item(tree: TreeConfig, item: Item, reupload: bool, matcher: Matcher, ctx: ScanContext,
               tally: _Tally) -> None:
    """One walked path: reused when its signature is the cache's (unless ``reupload``:
    every path is read again), else read; a path that cannot be read keeps its last
    checkpoint."""
    try:
        if item.kind == UNREADABLE:
            raise item.error
        sig = _sig(tree.path, item)
    except OSError as err:
        warn_unreadable(ctx, os.path.join(tree.path, item.path), err)
        tally.unreadable.append(item.path)
        tally.listing = None  # not read cleanly: no quiet snapshot this time
        return
    tally.seen_files += item.kind != KIND_DIR
    parent = item.path.rpartition("/")[0]
    if parent != tally.in_dir:
        tally.in_dir, tally.here = parent, tally.held.in_dir(parent)
    prev = tally.here.get(item.path)
    if prev is not None and prev.sig is not None and prev.sig == sig and not reupload:
        tally.keep(item.path, prev)
        tally.reused += 1
        return
    fs = _capture(tree, item, None if reupload else prev, matcher, ctx)
    if fs is None or fs is _KEEP:
        tally.listing = None  # not read cleanly: no quiet snapshot this time
        if prev is not None and (fs is _KEEP or item.kind == KIND_SQLITE):
            tally.keep(item.path, prev)  # unreadable, or a failed snapshot: the last one stays
        return
    tally.keep(item.path, fs)
    tally.added += prev is None
    tally.captured.append(fs)
    if len(ctx.data.packs) != tally.packs:
        _settle_closed(tally, ctx.data)
    if item.kind != KIND_DIR and clamp_mtime(item.stat.st_mtime_ns) != item.stat.st_mtime_ns:
        warn_clamped(ctx, os.path.join(tree.path, item.path), item.stat.st_mtime_ns)
    if prev is None or prev.entry != fs.entry:
        tally.changed = True
        if fs.entry.kind == KIND_DIR:
            tally.result.dirs_changed += 1
        else:
            tally.result.changed += 1


def _settle_closed(tally: _Tally, data: PackWriter) -> None:
    """A data pack closed: the paths read before it name its placeholder until the
    commit (``commit._resolved``) gives them the pack's id, each as a new ``FileState``.
    Given now, as the scan goes, the old ones are freed while it runs and the commit
    makes new ones only for the last pack's paths: a first checkpoint of 200,000 files
    held both copies of every path at once (50 MB). Blobs are written in the order
    they were added, so the paths read go into closed packs in order; the first one
    whose blobs are not all in a closed pack ends the pass."""
    tally.packs = len(data.packs)
    captured, files = tally.captured, tally.files
    i = tally.settled
    while i < len(captured):
        fs = captured[i]
        refs = tuple(map(data.settled, fs.entry.refs))
        if None in refs:
            break
        if refs != fs.entry.refs:
            new = msgspec.structs.replace(fs, entry=msgspec.structs.replace(fs.entry, refs=refs))
            captured[i] = new
            if files.get(fs.entry.path) is fs:
                files[fs.entry.path] = new
        i += 1
    tally.settled = i


def warn_unreadable(ctx: ScanContext, full: str, err: OSError) -> None:
    """One warning for a live path that exists but cannot be read this time."""
    ctx.warn(f"checkpoint: cannot read {shown(full)} ({err.strerror or err}); kept its last checkpoint; "
             f"{os_error_hint(err, full)}")


def warn_clamped(ctx: ScanContext, full: str, ns: int) -> None:
    """One warning for a path captured with a time no entry holds (``signatures.mtime_ns``):
    it is stored, and restored, with the nearest one that is."""
    import datetime as dt   # here: only such a file needs it

    held = clamp_mtime(ns)
    when = (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=held // 1000)).strftime("%Y-%m-%d %H:%M:%S")
    ctx.warn(f"checkpoint: {shown(full)} has a modification time {'after' if ns > held else 'before'} {when} UTC, "
             f"which a checkpoint cannot hold; stored it with that time, the one a restore gives it; "
             f"`touch` it to give it a real time")


def _outside(cache: TreeCache, taken: dict[str, Group]) -> Iterator[tuple[str, FileState]]:
    """The cached paths outside the directories the scan took whole (those hold every
    path they held: none of theirs is gone or unreadable)."""
    for d, group in cache.files.groups.items():
        if d not in taken:
            yield from group.paths.items()


def _keep_unreadable(cache: TreeCache, tally: _Tally) -> None:
    """Every cached path at or under an unreadable one that the walk did not see keeps
    its last checkpoint (it is not deleted)."""
    if not tally.unreadable:
        return
    roots = set(tally.unreadable)
    for path, fs in _outside(cache, tally.taken):
        if path not in tally.files and _under(path, roots):
            tally.keep(path, fs)
            tally.reused += 1
            tally.seen_files += fs.entry.kind != KIND_DIR


def _under(path: str, roots: set[str]) -> bool:
    """True when ``path`` or one of its parent directories is in ``roots`` ("" is the root)."""
    if "" in roots:
        return True
    while True:
        if path in roots:
            return True
        cut = path.rfind("/")
        if cut < 0:
            return False
        path = path[:cut]


def _same_dirs(tree: TreeConfig, cache: TreeCache, same: dict[tuple[str, str], Row],
               trusted: bool) -> tuple[dict[str, Row], dict[str, Group]]:
    """``(rows, whole)``: the directories of this tree the quiet snapshot found
    unchanged, by relative path, and those of them the scan takes whole.

    A row counts only when this tree's own walk wrote it (another tree's rules may
    differ) and the cache holds every name it includes with the signature it compared.
    ``trusted``: the cache is the very one the snapshot's rows were made from, so a
    group with as many paths as the row includes is taken whole, unread. Otherwise
    each name is looked up (``_cache_holds``)."""
    out: dict[str, Row] = {}
    whole: dict[str, Group] = {}
    groups = cache.files.groups
    root = tree.path
    prefix = root.rstrip(os.sep) + os.sep
    for (name, path), row in same.items():
        if name != tree.name:
            continue
        rel_dir = "" if path == root else path[len(prefix):] if path.startswith(prefix) else None
        if rel_dir is None:
            continue
        try:
            if trusted and (group := groups.get(rel_dir)) is not None and group.n == _included(row):
                whole[rel_dir] = group
                out[rel_dir] = row
            elif _cache_holds(rel_dir, row, cache.files):
                out[rel_dir] = row
        except (TypeError, ValueError, IndexError):
            continue  # a row this code cannot read: the directory is walked
    return out, whole


def _included(row: Row) -> int:
    """How many names of a row the tree includes (a file's or link's signature, or a
    directory's or database's value)."""
    return len(row.sigs) - row.sigs.count(None) + sum(1 for _i, what, _v in row.others if what != OTHER)


def _cache_holds(rel_dir: str, row: Row, files: Files) -> bool:
    """Whether ``files`` holds every name the row includes (``same_paths``) with the
    row's signature: a file's or link's in ``sigs``, a directory's or database's in
    ``others``. Compared in place, without an item per name: this runs for every row on
    every busy tick. Signatures compare as tuples; a value of another type is no match,
    and the directory is walked."""
    prefix = f"{rel_dir}/" if rel_dir else ""
    get = files.in_dir(rel_dir).get
    names = row.names
    if len(row.sigs) != len(names):
        return False
    for name, sig in zip(names, row.sigs):
        if sig is not None and ((prev := get(prefix + name)) is None or prev.sig != sig):
            return False
    for i, what, value in row.others:
        if what != OTHER and ((prev := get(prefix + names[i])) is None or prev.sig is None or prev.sig != value):
            return False  # a cached path marked "re-read it" (no signature) is never taken as it was
    return True


def quiet_rows(tree: TreeConfig, listing: list, files: Files) -> list[Row] | None:
    """The quiet snapshot's rows for one walked tree (see ``quiet.unchanged``); None when
    some listed path has no clean signature to compare. A directory taken from the last
    snapshot (``walk_tree``'s ``same``) keeps its row."""
    root = tree.path
    rows = []
    for rel_dir, seen in listing:
        if isinstance(seen, Row):  # a directory ``walk_tree`` took from the last snapshot
            rows.append(seen)
            continue
        names, sigs, others = [], [], []
        get = files.in_dir(rel_dir).get
        for name, file_type, walked in seen:
            if file_type is None:
                return None
            fs = get(f"{rel_dir}/{name}" if rel_dir else name) if walked else None
            if walked and (fs is None or fs.sig is None):
                return None
            kind = fs.entry.kind if fs is not None else None
            if kind is not None and kind not in (KIND_DIR, KIND_SQLITE):
                sigs.append(tuple(fs.sig))
            else:
                sigs.append(None)
                others.append((len(names), DIR, tuple(fs.sig)) if kind == KIND_DIR else
                              (len(names), DB, tuple(fs.sig)) if kind == KIND_SQLITE else
                              (len(names), OTHER, file_type))
            names.append(name)
        rows.append(Row(os.path.join(root, rel_dir) if rel_dir else root, names, sigs, others, tree.name))
    return rows


def _sig(root: str, item: Item):
    if item.kind == KIND_DIR:
        return dir_signature(item.stat)
    if item.kind == KIND_SQLITE:
        try:
            return live_signature(os.path.join(root, item.path))
        except FileNotFoundError:
            return None
    return signature(item.stat)


def databases_ahead(tree: TreeConfig, cache: TreeCache | None, busy_tmp: set[str] = frozenset()) -> list[Wanted]:
    """The databases of ``tree`` its scan will likely snapshot, so that
    ``sqlite/ahead.py`` can start their snapshots early; the scan still decides what
    it captures.

    From the cache: each database the tree still includes whose live signature
    changed. A tree with no cache yet is walked for its databases (its first
    checkpoint, where the capture costs far more than the walk)."""
    if cache is None or not cache.files:
        if not tree.sqlite or not os.path.isdir(tree.path):
            return []
        root = os.path.realpath(tree.path)
        return [Wanted(os.path.join(tree.path, item.path), None, _reached(tree, root, item.path))
                for item in walk_tree(tree.path, _matcher(tree, busy_tmp)) if item.kind == KIND_SQLITE]
    if cache.reupload:
        return []
    matcher = _matcher(tree, busy_tmp)
    root = os.path.realpath(tree.path)
    out = []
    for rel_dir, group in cache.files.groups.items():
        if not group.flags & HAS_DB:
            continue
        for path, fs in group.paths.items():
            if fs.entry.kind != KIND_SQLITE or fs.sig is None or not _walked_as_db(matcher, path):
                continue
            reached = _reached(tree, root, path)
            try:
                if reached() is None or live_signature(os.path.join(tree.path, path)) == fs.sig:
                    continue
            except OSError:
                continue  # gone or unreadable: the walk finds out and says so
            out.append(Wanted(os.path.join(tree.path, path), fs, reached))
    return out


def _walked_as_db(matcher: Matcher, path: str) -> bool:
    """Whether the tree's walk would yield ``path`` as a database: reached
    (``Matcher.reaches``), with a name the tree's database patterns match."""
    return matcher.reaches(path) and matcher.is_sqlite(path, path.rsplit("/", 1)[-1])


def _reached(tree: TreeConfig, root: str, path: str):
    """A ``reached()`` for ``path`` of ``tree`` (``root``: the tree's real path): the
    file's ``(st_dev, st_ino)`` while it is a regular file whose directory resolves to
    where the tree has it (no symlink on the way), else None."""
    full = os.path.join(tree.path, path)
    where = os.path.join(root, os.path.dirname(path)).rstrip(os.sep)

    def reached() -> tuple[int, int] | None:
        try:
            st = os.lstat(full)
            if not stat_mod.S_ISREG(st.st_mode) or os.path.realpath(os.path.dirname(full)) != where:
                return None
        except OSError:
            return None
        return st.st_dev, st.st_ino
    return reached


def _matcher(tree: TreeConfig, busy_tmp: set[str]) -> Matcher:
    """The tree's rules, journal's temp directories in use (``busy_tmp``) left out."""
    own = frozenset(os.path.basename(p) for p in busy_tmp if os.path.dirname(p) == tree.path)
    return Matcher(tree.exclude, tree.jsonl, tree.sqlite, own)


def _capture(tree: TreeConfig, item: Item, prev: FileState | None, matcher: Matcher, ctx: ScanContext):
    if item.kind != KIND_SQLITE:
        try:
            return capture_item(tree.path, item, prev, matcher.is_jsonl(item.path), ctx.data.add_ahead, ctx.deltas,
                                ctx.warn, ctx.data.codec)
        except Unstorable as err:  # like a name the walk refuses: left out, loudly, every time
            ctx.warn(str(err))
            return None
        except OSError as err:  # the live path (the store's and journal's own files raise journal errors)
            ctx.data.check()  # a pack's upload that failed meanwhile is the store's failure, never the file's
            warn_unreadable(ctx, os.path.join(tree.path, item.path), err)
            return _KEEP
    from ..sqlite.capture import capture_sqlite  # here: sqlite3 and the page maps only when a database changed

    full = os.path.join(tree.path, item.path)
    seen = (item.stat.st_dev, item.stat.st_ino)
    try:
        try:
            ahead = ctx.ahead.take(full, prev, seen) if ctx.ahead is not None else None
            return capture_sqlite(full, item.path, prev, ctx.staging_dir, ctx.data, ctx.maps, ahead, seen)
        except (CorruptObject, ObjectNotFound) as err:  # the previous snapshot's maps
            ctx.data.check()  # ... unless a pack's upload failed (a bucket gone): never retried as a map
            ctx.warn(f"checkpoint: {shown(full)}: the page maps of its last snapshot are unusable ({err}); "
                     "storing a new full snapshot of it")
            return capture_sqlite(full, item.path, None, ctx.staging_dir, ctx.data, ctx.maps, seen=seen)
    except SnapshotFailed as err:
        ctx.data.check()
        ctx.reporter.warn(str(err))
        ctx.errors.append(str(err))
        return None
    except FileNotFoundError:
        ctx.data.check()
        return None
    except OSError as err:
        ctx.data.check()
        if err.filename != full:
            raise  # journal's own files (the staging copy, the base copy)
        warn_unreadable(ctx, full, err)  # the live path (a symlink loop now, no permission)
        return _KEEP


def _apply_deletions(tree: TreeConfig, cache: TreeCache, tally: _Tally, ctx: ScanContext) -> bool:
    """Drop the cached paths the walk did not find, unless a deletion guard keeps them
    (``_guard_deletions``). True when anything was dropped.

    Only directories not taken whole are looked into. A vanished path under a name that
    is now a file or symlink is dropped whatever the guards say: nothing may live inside
    a file, and a manifest keeping it would fail ``verify`` and every restore."""
    gone = [p for p, _ in _outside(cache, tally.taken) if p not in tally.files]
    if not gone:
        return False
    displaced = _displaced(gone, tally.files)
    dropped = _guard_deletions(tree, cache, tally, ctx, [p for p in gone if p not in displaced])
    tally.result.deleted += sum(1 for p in displaced if cache.files[p].entry.kind != KIND_DIR)
    tally.result.dirs_deleted += sum(1 for p in displaced if cache.files[p].entry.kind == KIND_DIR)
    return dropped or bool(displaced)


def _displaced(gone: list[str], files: dict[str, FileState]) -> set[str]:
    """Of vanished ``gone``, those under a path that is now there and not a directory
    (``files``: the paths this walk read or took one by one, where a name that changed
    from a directory to a file is; no directory taken whole is decoded to find it)."""
    out = set()
    for p in gone:
        parts = p.split("/")
        for i in range(1, len(parts)):
            fs = files.get("/".join(parts[:i]))
            if fs is not None and fs.entry.kind != KIND_DIR:
                out.add(p)
                break
    return out


def _guard_deletions(tree: TreeConfig, cache: TreeCache, tally: _Tally, ctx: ScanContext, gone: list[str]) -> bool:
    """Drop the vanished paths ``gone`` unless a guard keeps them; ``--allow-deletions``
    lifts both guards. True when anything was dropped.

    * The mass-deletion guard keeps them all when more than ``DELETION_GUARD`` of the
      tree's files (or all of them) vanished: an unmounted or half-restored tree.
    * The transcript guard keeps each vanished transcript of more than
      ``TRANSCRIPT_GUARD_BYTES``, whatever the share, unless it was renamed (``_not_renamed``)."""
    if not gone:
        return False
    tr = tally.result
    live_before = cache.files.nfiles
    dropped = sum(1 for p in gone if cache.files[p].entry.kind != KIND_DIR)
    if not ctx.allow_deletions and dropped and (dropped > live_before * DELETION_GUARD or dropped == live_before):
        ctx.warn(f"checkpoint: tree {tree.name}: {dropped} of {live_before} files vanished from "
                 f"{tree.path}; keeping them in the checkpoint (a partial or unmounted tree looks "
                 "like this); run `journal checkpoint --allow-deletions` if they were really deleted")
        return _hold(gone, cache, tally)
    held = [] if ctx.allow_deletions else [
        p for p in gone if cache.files[p].entry.kind == KIND_JSONL and cache.files[p].entry.size > TRANSCRIPT_GUARD_BYTES]
    if held:
        held = _not_renamed(held, cache, chain(tally.files.values(), *(g.paths.values() for g in tally.taken.values())))
    if held:
        history = sum(cache.files[p].entry.size for p in held)
        ctx.warn(f"checkpoint: tree {tree.name}: {len(held)} transcript(s) with {history:,} bytes of history "
                 f"vanished from {tree.path} ({', '.join(shown(p) for p in held[:3])}"
                 f"{' ...' if len(held) > 3 else ''}); keeping them in the checkpoint; run "
                 "`journal checkpoint --allow-deletions` if they were really deleted")
        _hold(held, cache, tally)
        gone = [p for p in gone if p not in tally.files]
        if not gone:
            return False
    tr.deleted = sum(1 for p in gone if cache.files[p].entry.kind != KIND_DIR)
    tr.dirs_deleted = len(gone) - tr.deleted
    return True


#: The kinds of entry that are regular files, whose signature is a ``Signature`` (with
#: the inode): the only ones a renamed transcript can be now.
_REGULAR = frozenset((KIND_FILE, KIND_JSONL))


def _not_renamed(paths: list[str], cache: TreeCache, now: Iterable[FileState]) -> list[str]:
    """Of the vanished transcripts ``paths``, those not in the tree under another name
    now (``now``: every path's state).

    A rename keeps the file: the same device and inode, and at least the bytes it had.
    Only regular files can be that file. A database's signature holds its WAL's size
    where a file's holds the inode, so it is never compared. A device of 0 (unknown: a
    state from before devices were kept, a path restore wrote) matches any device."""
    present: dict[int, list[tuple[int, int]]] = {}   # inode -> (device, size) of each regular file now
    for fs in now:
        if fs.sig is not None and fs.entry.kind in _REGULAR:
            sig = Signature.of(fs.sig)
            present.setdefault(sig.ino, []).append((fs.dev, sig.size))
    out = []
    for p in paths:
        was = cache.files[p]
        if was.sig is None or not any(size >= was.entry.size and (dev == was.dev or not dev or not was.dev)
                                      for dev, size in present.get(Signature.of(was.sig).ino, ())):
            out.append(p)
    return out


def _hold(paths: list[str], cache: TreeCache, tally: _Tally) -> bool:
    """Keep vanished ``paths`` as the cache has them; counts the files among them."""
    for p in paths:
        tally.files[p] = cache.files[p]
    tally.result.kept_deleted += sum(1 for p in paths if cache.files[p].entry.kind != KIND_DIR)
    return False
