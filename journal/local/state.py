"""This machine's local state: a cache of what this writer last published or restored.

It lives in the state directory on local disk, outside the trees, beside
``<state_dir>/lock``, the ``flock`` that lets one checkpoint or restore run at a time
(``StateLock``). Every name in the state directory is in ``journal/paths.py``.

In memory it is one ``LocalState``. On disk it is two parts (design §10):

* ``state-base/<token>``: a *base* (``StateBase``), every tree's path and page tables
  as they were at some save; written once under a new random name and never changed;
* ``state.msgpack``: the *state file* (``StateFile``), replaced atomically at every
  save: the scalars (sequence, pending manifest, markers), the name of its base, and
  per tree what differs from the base (entries set or changed, keys gone).

A save writes only the state file while the difference is small (a one-change tick
writes a few KiB, not the 7 MiB of a 20,000-file tree); past ``COMPACT_PART`` of the
paths it writes a new base first, then the state file naming it, then removes the
other bases. The cache is trusted only for the store it names (``store_id``).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat as stat_mod
import time
import uuid
from collections.abc import Iterator

import msgspec

from ..atomic import makedirs, write_file_atomic
from .errors import LockBusy, StateDirUnusable
from ..format.model import BlobRef
from ..localfs import open_regular
from ..paths import LOCK_FILE, PRIVATE_DIR, PRIVATE_FILE, STATE_BASE_DIR, STATE_FILE, TMP_DIR
from ..signatures import Stamp, file_stamp, stamp
from .files import FileState, Files, Group, GroupRecord
from .private import open_state_dir

#: The state's version. ``load_state`` refuses a version newer than it knows; each one
#: marks what older code would misread:
#:
#: * 2: entries may name chunk bases (``Entry.bases``);
#: * 3: the state file holds each tree as changes to a base (``StateFile.base``);
#: * 4: a base groups each tree's paths by directory (``BaseTree.groups``); the state
#:   file itself is as in version 3.
#:
#: This code reads all four: a version 1 or 2 file is a state file with no base, and a
#: base says its own version (3: one map of paths per tree).
STATE_VERSION = 4
READ_STATE_VERSIONS = (1, 2, 3, 4)

#: A save writes a new base once the changes since the current one reach this part of
#: the paths (and at least ``COMPACT_MIN`` of them): the state file stays below about a
#: sixteenth of the base, and a base is written once per that many changed paths.
COMPACT_PART = 16
COMPACT_MIN = 512
#: ... or once the directories with changes that this save does not change again hold
#: this part of the paths (and at least ``COMPACT_MIN``): a load decodes the group of
#: every directory with changes, where it takes the others as the base stored them, and
#: a new base spares it only those no later save changes again (a directory an agent
#: keeps writing to is decoded at every load whatever the base).
COMPACT_STALE_PART = 2
#: A base's name: its token, 32 hex digits (``uuid4().hex``).
_TOKEN = re.compile("[0-9a-f]{32}")


class _Tree(msgspec.Struct, kw_only=True):
    root: BlobRef | None = None
    pages: dict[str, BlobRef] = {}
    page_keys: dict[str, tuple[int, str]] = {}    # page id -> (level, first path), to find what a new page replaces
    bases: dict[str, BlobRef] = {}                # id of a page stored as a delta -> its base page
    dirty: bool = False                 # publish a new index even if no file changed
    reupload: bool = False              # re-read every file and upload fresh blobs (no reuse)
    restored: str | None = None         # why this is not the newest checkpoint's version (said by the next manifest)
    restored_seq: int | None = None     # ... a rollback's checkpoint (a hot restore writes that one again)
    keep_local: bool = False            # taken over: until a checkpoint publishes it, no live file is replaced


class TreeCache(_Tree, kw_only=True):
    """One tree as this machine last published or restored it. ``files`` is a ``Files``
    (path -> ``FileState``, held by directory; ``local/files.py``): a plain mapping given
    here is grouped. Held in memory only (a state file holds ``TreeDelta``, a base
    ``BaseTree``)."""

    files: Files = {}

    def __post_init__(self):
        if not isinstance(self.files, Files):
            self.files = Files.of(self.files)


#: A tree's tables: the maps of its last index and its paths (``files``). A state file
#: holds each as changes to the base's (entries set or changed; ``<table>_gone``: keys
#: gone), a base holds each whole. Every other field of a tree is a scalar, held whole in
#: the state file. Declared here, field by field: a new map is a table only once it is
#: listed, with its ``_gone`` field in ``TreeDelta`` and its place in ``BaseTree``
#: (``tests/test_state.py`` checks that every map of a tree is listed).
_TABLES = tuple(field.__name__ for field in (_Tree.pages, _Tree.page_keys, _Tree.bases, TreeCache.files))
_SCALARS = tuple(f for f in _Tree.__struct_fields__ if f not in _TABLES)


class TreeDelta(_Tree, kw_only=True):
    """A tree in the state file: its scalars, and its tables as changes to the base's
    (entries set or changed; keys gone). With no base, or a tree the base lacks, the
    tables are whole: a version 1 or 2 state file reads as this, and so does a tree of
    a version 3 base."""

    files: dict[str, FileState] = {}
    files_gone: list[str] = []
    pages_gone: list[str] = []
    page_keys_gone: list[str] = []
    bases_gone: list[str] = []


class BaseTree(msgspec.Struct, kw_only=True):
    """A tree in a version 4 base: its tables, its paths as one group per directory."""

    pages: dict[str, BlobRef] = {}
    page_keys: dict[str, tuple[int, str]] = {}
    bases: dict[str, BlobRef] = {}
    groups: dict[str, GroupRecord] = {}


class StateBase(msgspec.Struct, kw_only=True):
    """A base file, ``state-base/<token>``: every tree's tables at one save. The token is
    also its name, so a state file names exactly the base it was written against.
    ``trees`` is the encoded map of trees, read by ``version``: 4, ``BaseTree``s; 3, the
    trees whole (``TreeDelta`` without changes). In memory a base is a ``Base``."""

    version: int = STATE_VERSION
    token: str
    trees: msgspec.Raw


class _BaseOut(msgspec.Struct, kw_only=True):
    """A ``StateBase`` as a save encodes it (the same fields: its trees encoded in place)."""

    version: int = STATE_VERSION
    token: str
    trees: dict[str, BaseTree]


class Base(msgspec.Struct, kw_only=True):
    """A base in memory: its token, and every tree as a ``TreeCache`` of its tables (the
    groups of its ``files`` shared with the states merged from it: never changed)."""

    token: str
    trees: dict[str, TreeCache] = {}


_decode_v4 = msgspec.msgpack.Decoder(dict[str, BaseTree]).decode
_decode_v3 = msgspec.msgpack.Decoder(dict[str, TreeDelta]).decode


class LocalState(msgspec.Struct, kw_only=True):
    """Everything this writer knows about the store and the live trees."""

    version: int = STATE_VERSION
    store_id: str
    writer: str
    seq: int = 0                        # highest manifest sequence known to exist
    manifest_id: str | None = None      # id of manifest ``seq`` (None: none, or it was unreadable)
    restore_complete: bool = False
    trees: dict[str, TreeCache] = {}
    pending_seq: int | None = None      # a manifest written to the state but maybe not the store
    pending: bytes | None = None        # ... its record bytes, republished on the next run
    pending_parent: int | None = None   # ... the checkpoint it builds on (None: ``pending_seq - 1``; a
                                        # manifest committed past forks has a gap below it)
    encrypted: bool | None = None       # the store was encrypted at the last save (None: a state older than this)
    key_id: str | None = None           # ... the key object that opened it then (design §22)


class StateFile(LocalState, kw_only=True):
    """``state.msgpack`` as stored: a ``LocalState`` whose trees are changes to the base
    named ``base`` in ``state-base/`` (None: no base, every tree whole)."""

    trees: dict[str, TreeDelta] = {}
    base: str | None = None
    base_sha256: str | None = None      # of the base file's bytes: a base that differs is not read


def cache_from_entries(root: BlobRef | None, pages: dict[str, BlobRef], entries, **flags) -> TreeCache:
    """A tree cache built from stored entries, every path marked for a re-read."""
    return TreeCache(root=root, pages=pages, files={e.path: FileState(None, e) for e in entries}, **flags)


def new_state(store_id: str) -> LocalState:
    return LocalState(store_id=store_id, writer=uuid.uuid4().hex)


class _Held(msgspec.Struct, frozen=True):
    """The state file this process last read or saved, decoded. A long-running process
    (``journal supervise``) checkpoints every few seconds and keeps it between runs while
    the file on disk is still that one (``stamp``)."""

    stamp: Stamp                    # the state file's, as read or saved
    state: LocalState
    base: Base | None               # the base the file names (None: it names none)
    base_sha256: str | None         # ... its SHA-256, which the next save's state file names
    written: dict[str, TreeDelta] | None   # the trees as this process's last save wrote them
                                           # (None after a read): ``trees_as_saved`` writes them again
    paths: dict[str, Files]         # each tree's paths as that read or save left them (``_stale``)


#: ``_Held`` by state file path.
_memo: dict[str, _Held] = {}


def _held(path: str) -> _Held | None:
    """What this process holds of the state file at ``path``, while the file is still that one."""
    held = _memo.get(path)
    return held if held is not None and held.stamp == file_stamp(path) else None


def load_state(state_dir: str, store_id: str) -> LocalState | None:
    """The cached state for ``store_id``, or None when missing, unreadable (its base
    included) or for another store."""
    state, whole = _read(state_dir)
    if not whole or state.version not in READ_STATE_VERSIONS or state.store_id != store_id:
        return None
    return state


def read_state(state_dir: str) -> LocalState | None:
    """What this machine knows, whatever store the state names, for the lineage guards
    (``repository/lineage.py``): None only when the state file is missing or unreadable.
    A state file whose base is unreadable, or of a newer version, still tells its
    scalars (store, writer, sequence, pending manifest), with no trees; ``load_state``
    refuses it. A base that a save replaced between the reads of the state file and of
    its base is read again through the new state file."""
    return _read(state_dir)[0]


class StoreMark(msgspec.Struct):
    """What a state file says of the store it follows, read without its trees."""

    store_id: str
    encrypted: bool | None = None
    key_id: str | None = None


def read_store_mark(state_dir: str) -> StoreMark | None:
    """The store the state file follows and whether it was encrypted (the downgrade
    guard, design §22), without decoding its trees; None when missing or unreadable."""
    path = os.path.join(state_dir, STATE_FILE)
    held = _held(path)
    if held is not None:
        return StoreMark(store_id=held.state.store_id, encrypted=held.state.encrypted, key_id=held.state.key_id)
    try:
        fh = open_regular(path)
        if fh is None:
            return None
        with fh:
            return msgspec.msgpack.decode(fh.read(), type=StoreMark)
    except (OSError, msgspec.DecodeError):
        return None


def _read(state_dir: str) -> tuple[LocalState | None, bool]:
    """``(state, whole)``: the state as it is (``read_state``), and whether it is the
    whole state of a version this code reads (False: only its scalars are told)."""
    path = os.path.join(state_dir, STATE_FILE)
    top = None
    for _ in range(3):
        held = _held(path)
        if held is not None:
            return held.state, True
        try:
            with open(path, "rb") as fh:
                read = stamp(os.fstat(fh.fileno()))
                top = msgspec.msgpack.decode(fh.read(), type=StateFile)
        except (OSError, msgspec.DecodeError):
            return None, False
        if top.version not in READ_STATE_VERSIONS:
            return _scalars(top), False  # a newer state: its store and writer are still told
        base = _read_base(state_dir, top.base, top.base_sha256) if top.base is not None else None
        if top.base is not None and base is None:
            if file_stamp(path) != read:
                continue  # replaced meanwhile, with its base: read the new one
            break
        state = _merged(top, base)
        _memo[path] = _Held(stamp=read, state=state, base=base,
                            base_sha256=top.base_sha256 if base is not None else None, written=None,
                            paths=_paths_of(state))
        return state, True
    return _scalars(top), False


def _scalars(top: StateFile) -> LocalState:
    """What a state file tells without its trees: enough for the lineage guards, which
    refuse a vanished or foreign store even when the base is lost (never taken for no
    state: that would let a checkpoint start a new history over the one it follows)."""
    return LocalState(**{f: getattr(top, f) for f in LocalState.__struct_fields__ if f != "trees"})


def _read_base(state_dir: str, name: str, digest: str | None) -> Base | None:
    """The base ``name``, when it is a regular file (never through a symlink, never
    blocking on a FIFO put there) whose bytes have the SHA-256 ``digest`` the state
    file names (a long-lived cache: a flipped bit that still decodes must not be taken
    for entries) and hold that token; else None."""
    if not _TOKEN.fullmatch(name) or digest is None:
        return None
    try:
        fh = open_regular(os.path.join(state_dir, STATE_BASE_DIR, name))
        if fh is None:
            return None
        with fh:
            data = fh.read()
        if hashlib.sha256(data).hexdigest() != digest:
            return None
        return _decoded_base(data, name)
    except (OSError, msgspec.DecodeError):
        return None


def _decoded_base(data: bytes, name: str) -> Base | None:
    """The base decoded: its groups' paths stay encoded (``Group.stored``) until asked for."""
    stored = msgspec.msgpack.decode(data, type=StateBase)
    if stored.token != name:
        return None
    if stored.version == 4:
        return Base(token=name, trees={
            tree: TreeCache(pages=t.pages, page_keys=t.page_keys, bases=t.bases,
                            files=Files({d: Group.stored(r) for d, r in t.groups.items()}))
            for tree, t in _decode_v4(stored.trees).items()})
    if stored.version in READ_STATE_VERSIONS:
        return Base(token=name, trees={
            tree: TreeCache(pages=t.pages, page_keys=t.page_keys, bases=t.bases, files=t.files)
            for tree, t in _decode_v3(stored.trees).items()})
    return None


def _base_pieces(base: Base) -> Iterator[bytes]:
    """A base's bytes (version 4), piece by piece: exactly ``msgspec.msgpack.encode`` of
    its ``_BaseOut`` (each group as it was read, or encoded now), but one group at a
    time, so a save never holds the whole base, nor every group encoded at once (at
    200,000 paths those were 76 MB and a 109 MB buffer beside the paths themselves)."""
    enc = msgspec.msgpack.encode
    yield _map_header(3) + enc("version") + enc(STATE_VERSION) + enc("token") + enc(base.token) + enc("trees") \
        + _map_header(len(base.trees))
    for name, t in base.trees.items():
        groups = t.files.groups
        pages, page_keys, bases, groups_key = map(enc, BaseTree.__struct_fields__)   # the fields, in order
        yield enc(name) + _map_header(4) + pages + enc(t.pages) + page_keys + enc(t.page_keys) \
            + bases + enc(t.bases) + groups_key + _map_header(len(groups))
        for d, group in groups.items():
            yield enc(d) + enc(group.record())


def _map_header(n: int) -> bytes:
    """A msgpack map header for ``n`` pairs, in the shortest form (as msgspec writes it)."""
    if n < 16:
        return bytes((0x80 | n,))
    return b"\xde" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdf" + n.to_bytes(4, "big")


class _Hashed:
    """The pieces of ``pieces`` as they go by, each added to ``sha256``."""

    def __init__(self, pieces: Iterator[bytes]):
        self.pieces, self.sha256 = pieces, hashlib.sha256()

    def __iter__(self) -> Iterator[bytes]:
        for piece in self.pieces:
            self.sha256.update(piece)
            yield piece


def _merged(top: StateFile, base: Base | None) -> LocalState:
    """The state a state file and its base hold together. Every table is a new dict or
    ``Files`` (the base's are never changed: the next save compares with them); the
    groups of directories with no change are the base's own."""
    state = _scalars(top)
    state.trees = {}
    for name, delta in top.trees.items():
        held = _base_tree(base, name)
        state.trees[name] = _with_scalars(TreeCache, delta, {
            table: _merge_table(getattr(delta, table), getattr(delta, f"{table}_gone"),
                                None if held is None else getattr(held, table))
            for table in _TABLES})
    return state


def _merge_table(changes: dict, gone: list, held):
    """One table of a tree: the base's (``held``; None: the base lacks the tree, and
    ``changes`` is the whole table) with ``changes`` set and the keys ``gone`` removed."""
    if held is None:
        return changes
    if isinstance(held, Files):
        return held.changed(changes, gone)
    merged = dict(held)
    for key in gone:
        merged.pop(key, None)
    merged.update(changes)
    return merged


def clear_restore_marker(state_dir: str, store_id: str) -> None:
    """Mark the state "restore incomplete" before a restore first changes a live tree,
    so that a restore killed part way leaves checkpoints refused
    (``CheckpointAfterIncompleteRestore``). The new state keeps what it knows of the
    store (writer, sequence, pending manifest) but not the trees' caches: the restore
    is about to change those files, and its final save rebuilds them."""
    state = load_state(state_dir, store_id)
    if state is not None and state.restore_complete:
        save_state(state_dir, LocalState(store_id=store_id, writer=state.writer, seq=state.seq,
                                         manifest_id=state.manifest_id, pending_seq=state.pending_seq,
                                         pending=state.pending, pending_parent=state.pending_parent,
                                         encrypted=state.encrypted, key_id=state.key_id))


def forget_state(state_dir: str) -> None:
    """Drop the in-memory copy (after a failed operation may have changed it)."""
    _memo.pop(os.path.join(state_dir, STATE_FILE), None)


def save_state(state_dir: str, state: LocalState, *, trees_as_saved: bool = False) -> None:
    """Save ``state``: the state file is replaced atomically and holds what differs from
    its base (design §10).

    A new base is written first, under a new name, when the base is not the one this
    process read or wrote with the file on disk, or is gone, or when the changes reach
    ``COMPACT_PART`` of the paths, or the stale directories ``COMPACT_STALE_PART``
    (``_stale``). The other bases are removed once the state file naming the new one is
    in place; a save that fails removes the base it wrote.

    ``trees_as_saved``: no tree changed since this process last saved ``state``, only
    its own scalars (a commit clearing its pending manifest). The trees are written as
    that save wrote them, without comparing every path again, while the file on disk
    is still the one that save wrote."""
    open_state_dir(state_dir)
    path = os.path.join(state_dir, STATE_FILE)
    tmp_dir = os.path.join(state_dir, TMP_DIR)
    state.version = STATE_VERSION   # a state of an earlier version read here is written back as this one
    last = _held(path)
    base, digest, written, held = (last.base, last.base_sha256, last.written, last.paths) if last is not None \
        else (None,) * 4
    if base is not None and not _base_in_place(state_dir, base.token):
        base = written = None  # removed behind this process's back: the changes would name a base no reader finds
    fresh = None
    if trees_as_saved and written is not None and last.state is state:
        trees = written  # no tree changed since that save: the same changes to the same base
    else:
        trees, changed, dirs = _deltas(state.trees, base)
        paths = sum(len(cache.files) for cache in state.trees.values())
        if (changed >= max(COMPACT_MIN, paths // COMPACT_PART)
                or _stale(state.trees, dirs, base, held) >= max(COMPACT_MIN, paths // COMPACT_STALE_PART)):
            fresh = Base(token=uuid.uuid4().hex, trees={  # copies of the maps; a ``Files`` is never changed
                name: TreeCache(pages=dict(cache.pages), page_keys=dict(cache.page_keys), bases=dict(cache.bases),
                                files=cache.files)
                for name, cache in state.trees.items()})
            # ``state-base/`` made here is durable with the state file: its publish fsyncs this directory.
            makedirs(os.path.join(state_dir, STATE_BASE_DIR), PRIVATE_DIR)
            pieces = _Hashed(_base_pieces(fresh))
            write_file_atomic(os.path.join(state_dir, STATE_BASE_DIR, fresh.token), pieces, tmp_dir)
            base, digest = fresh, pieces.sha256.hexdigest()
            trees = _deltas(state.trees, base)[0]
        else:
            _whole(trees)
    top = StateFile(**{f: getattr(state, f) for f in state.__struct_fields__ if f != "trees"},
                    trees=trees, base=base.token if base is not None else None,
                    base_sha256=digest if base is not None else None)
    try:
        write_file_atomic(path, msgspec.msgpack.encode(top), tmp_dir)
    except BaseException:
        if fresh is not None:  # no state file names it: a full disk must not fill up with bases
            _remove_bases(state_dir, only=fresh.token)
        raise
    if fresh is not None:
        _remove_bases(state_dir, keep=fresh.token)
    saved = file_stamp(path)
    if saved is not None:
        _memo[path] = _Held(stamp=saved, state=state, base=base, base_sha256=digest if base is not None else None,
                            written=trees, paths=_paths_of(state))


def _base_in_place(state_dir: str, token: str) -> bool:
    try:
        return stat_mod.S_ISREG(os.lstat(os.path.join(state_dir, STATE_BASE_DIR, token)).st_mode)
    except OSError:
        return False


def _paths_of(state: LocalState) -> dict[str, Files]:
    return {name: cache.files for name, cache in state.trees.items()}


def _stale(trees: dict[str, TreeCache], dirs: dict[str, list[str]], base: Base | None,
           held: dict[str, Files] | None) -> int:
    """The paths of the directories with changes since ``base`` (``dirs``, by tree) whose
    group is still the very one the last read or save of this state file left (``held``):
    changed before, not by this save; the larger of its two sides. 0 without them."""
    if base is None or held is None:
        return 0
    out = 0
    for name, changed in dirs.items():
        now, was, old = trees[name].files.groups, held.get(name), base.trees.get(name)
        if was is None or old is None:
            continue
        for d in changed:
            group = now.get(d)
            if group is not None and group is was.groups.get(d):
                out += max(group.n, g.n if (g := old.files.groups.get(d)) is not None else 0)
    return out


def _deltas(trees: dict[str, TreeCache], base: Base | None) -> tuple[dict[str, TreeDelta], int, dict[str, list[str]]]:
    """Each tree as changes to ``base``; how many entries and keys they name; the
    directories their paths fall in, by tree (a tree the base lacks: none named)."""
    out: dict[str, TreeDelta] = {}
    changed = 0
    dirs: dict[str, list[str]] = {}
    for name, cache in trees.items():
        held = _base_tree(base, name)
        tables = {}
        for table in _TABLES:
            now = getattr(cache, table)
            if held is None:  # the base lacks the tree: the table whole (paths: made a dict by ``_whole``)
                tables[table] = now
                changed += len(now)
                continue
            if table == "files":
                set_, gone, dirs[name] = now.diff(held.files)
            else:
                set_, gone = _changes(getattr(held, table), now)
            tables[table], tables[f"{table}_gone"] = set_, gone
            changed += len(set_) + len(gone)
        out[name] = _with_scalars(TreeDelta, cache, tables)
    return out, changed, dirs


def _whole(trees: dict[str, TreeDelta]) -> None:
    """Each tree whose paths ``_deltas`` left whole, as the ``Files`` it holds, given
    them as one dict (what a state file holds), built group by group: made only once
    no new base is written, where it is dropped (200,000 paths: 25 MB)."""
    for delta in trees.values():
        if isinstance(delta.files, Files):
            paths: dict[str, FileState] = {}
            for group in delta.files.groups.values():
                paths.update(group.paths)
            delta.files = paths


def _base_tree(base: Base | None, name: str) -> TreeCache | None:
    """The tree ``name`` as ``base`` holds it; None without a base, or when it lacks the tree."""
    return base.trees.get(name) if base is not None else None


def _with_scalars(make, tree: _Tree, tables: dict):
    """``make`` (a tree type) of ``tree``'s scalars as they are, and of ``tables``."""
    return make(**{f: getattr(tree, f) for f in _SCALARS}, **tables)


_ABSENT = object()


def _changes(old: dict, now: dict) -> tuple[dict, list]:
    """``(set, gone)``: the keys of ``now`` whose value is not ``old``'s (the same object
    first, an equal one then), and the keys of ``old`` that ``now`` lacks."""
    get = old.get
    set_ = {key: value for key, value in now.items() if (was := get(key, _ABSENT)) is not value and was != value}
    gone = [key for key in old if key not in now] if len(now) - len(set_) < len(old) else []
    return set_, gone


def _remove_bases(state_dir: str, keep: str | None = None, only: str | None = None) -> None:
    """Remove every base but ``keep`` (those earlier saves named, and any a save killed
    before its state file named it left behind), or only the base ``only``. Only names
    a base can have are touched, whatever else the directory holds (or a symlink in
    its place points to), and best effort: the state file is in place already, and
    the next save that writes a base removes what this one could not."""
    folder = os.path.join(state_dir, STATE_BASE_DIR)
    try:
        names = [only] if only is not None else os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name != keep and _TOKEN.fullmatch(name):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


class StateLock:
    """An exclusive ``flock`` on ``<state_dir>/lock`` (or another ``name``), held for one
    operation (a supervisor holds ``supervise.lock`` for its lifetime)."""

    def __init__(self, state_dir: str, wait: bool = False, create: bool = True, name: str = LOCK_FILE,
                 patience: float = 0.0):
        self.path = os.path.join(state_dir, name)
        self.wait = wait
        self.create = create
        self.patience = patience   # seconds to keep trying before LockBusy (a probe holds it for microseconds)
        self.fd: int | None = None

    def __enter__(self) -> "StateLock":
        if not self.create:  # a read-only operation (a dry run) creates nothing
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                return self  # no lock file: no other operation ever ran here
        else:
            state_dir = os.path.dirname(self.path)
            try:
                open_state_dir(state_dir)  # made private, or an earlier version's tightened (design §10)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
            except OSError as err:
                raise StateDirUnusable(state_dir, err) from err
        deadline = time.monotonic() + self.patience
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockBusy(self.path) from None
                time.sleep(0.02)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def lock_held(state_dir: str, name: str) -> bool:
    """Whether a live process holds the flock ``<state_dir>/<name>`` (creates nothing).

    Unlike a recorded pid, this cannot be fooled by pid reuse or by another PID
    namespace: the kernel drops the lock when its holder dies."""
    try:
        fd = os.open(os.path.join(state_dir, name), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
