"""This machine's local state: a cache of what this writer last published or restored.

It lives in the state directory on local disk, outside the trees, as
``<state_dir>/state.msgpack`` (``LocalState``, msgpack, replaced atomically), beside
``<state_dir>/lock``, the ``flock`` that lets one checkpoint or restore run at a time
(``StateLock``). Every name in the state directory is in ``journal/paths.py``.

The cache is trusted only for the store it names (``store_id``).
"""

from __future__ import annotations

import fcntl
import os
import time
import uuid

import msgspec

from ..atomic import write_file_atomic
from ..errors import LockBusy, StateDirUnusable
from ..format.model import BlobRef, Entry
from ..paths import LOCK_FILE, STATE_FILE, TMP_DIR
from ..signatures import Stamp, file_stamp, stamp

#: Version 2: entries may name chunk bases (``Entry.bases``). Code that knows only
#: version 1 would drop them silently and publish delta chunks as whole ones, so it
#: must refuse a version 2 state (its ``load_state`` does); this code reads both.
STATE_VERSION = 2
READ_STATE_VERSIONS = (1, 2)


class FileState(msgspec.Struct, array_like=True, gc=False):
    """A path's stat signature when last read (``None``: re-read it) and its entry.

    ``roll``: for a transcript, the checkpointed offset where the next growing capture's
    rolling re-check starts (``capture.check_prefix``, design §6). A reader that does not
    know the trailing field ignores it; a state without it reads as 0. Not tracked by the
    garbage collector (one per path; its fields can form no cycle: ``format/model.py``)."""

    sig: tuple[int, int, int, int] | None
    entry: Entry
    roll: int = 0


class TreeCache(msgspec.Struct, kw_only=True):
    root: BlobRef | None = None
    pages: dict[str, BlobRef] = {}
    page_keys: dict[str, tuple[int, str]] = {}    # page id -> (level, first path), to find what a new page replaces
    bases: dict[str, BlobRef] = {}                # id of a page stored as a delta -> its base page
    files: dict[str, FileState] = {}
    dirty: bool = False                 # publish a new index even if no file changed
    reupload: bool = False              # re-read every file and upload fresh blobs (no reuse)
    restored: str | None = None         # why this is not the newest checkpoint's version (said by the next manifest)


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


def cache_from_entries(root: BlobRef | None, pages: dict[str, BlobRef], entries, **flags) -> TreeCache:
    """A tree cache built from stored entries, every path marked for a re-read."""
    return TreeCache(root=root, pages=pages, files={e.path: FileState(None, e) for e in entries}, **flags)


def new_state(store_id: str) -> LocalState:
    return LocalState(store_id=store_id, writer=uuid.uuid4().hex)


# A long-running process (``journal supervise``) checkpoints every few seconds; the
# decoded state is kept between runs while the file on disk is the one it saved.
_memo: dict[str, tuple[Stamp, LocalState]] = {}


def load_state(state_dir: str, store_id: str) -> LocalState | None:
    """The cached state for ``store_id``, or None when missing, unreadable or for another store."""
    state = read_state(state_dir)
    if state is None or state.version not in READ_STATE_VERSIONS or state.store_id != store_id:
        return None
    return state


def read_state(state_dir: str) -> LocalState | None:
    """The state file as it is, whatever store it names (None when missing or unreadable):
    what this machine knows, for the lineage guards (``repository/lineage.py``)."""
    path = os.path.join(state_dir, STATE_FILE)
    memo = _memo.get(path)
    if memo is not None and memo[0] == file_stamp(path):
        return memo[1]
    try:
        with open(path, "rb") as fh:
            read = stamp(os.fstat(fh.fileno()))
            state = msgspec.msgpack.decode(fh.read(), type=LocalState)
    except (OSError, msgspec.DecodeError):
        return None
    _memo[path] = (read, state)
    return state


def clear_restore_marker(state_dir: str, store_id: str) -> None:
    """Before a restore's first change to a live tree: a state that says "restore
    complete" is replaced by one that does not, so a restore killed part way leaves
    checkpoints refused (``CheckpointAfterIncompleteRestore``), never the previous restore's marker
    over a half-changed tree. The replacement keeps what the state knows of the store
    (writer, sequence, a pending manifest) but not the trees' caches: they describe
    files the restore is about to change, and its own final save rebuilds them."""
    state = load_state(state_dir, store_id)
    if state is not None and state.restore_complete:
        save_state(state_dir, LocalState(store_id=store_id, writer=state.writer, seq=state.seq,
                                         manifest_id=state.manifest_id, pending_seq=state.pending_seq,
                                         pending=state.pending))


def forget_state(state_dir: str) -> None:
    """Drop the in-memory copy (after a failed operation may have changed it)."""
    _memo.pop(os.path.join(state_dir, STATE_FILE), None)


def save_state(state_dir: str, state: LocalState) -> None:
    """Replace the state file atomically (temp, fsync, rename, fsync dir)."""
    os.makedirs(state_dir, exist_ok=True)
    path = os.path.join(state_dir, STATE_FILE)
    state.version = STATE_VERSION   # a version 1 state read here is written back as version 2
    write_file_atomic(path, msgspec.msgpack.encode(state), os.path.join(state_dir, TMP_DIR))
    saved = file_stamp(path)
    if saved is not None:
        _memo[path] = (saved, state)


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
                os.makedirs(state_dir, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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
