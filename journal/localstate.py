"""This machine's local state: a cache of what this writer last published or restored.

It lives in the state directory on local disk, outside the trees::

    <state_dir>/state.msgpack   LocalState (msgpack), replaced atomically
    <state_dir>/lock            flock: one checkpoint or restore at a time
    <state_dir>/tmp/            temp files of the atomic writes
    <state_dir>/spool/          packs being built

The cache is trusted only for the store it names (``store_id``).
"""

from __future__ import annotations

import fcntl
import os
import uuid

import msgspec

from .atomic import write_file_atomic
from .errors import LockBusy
from .model import BlobRef, Entry

STATE_VERSION = 1
STATE_FILE = "state.msgpack"


class FileState(msgspec.Struct, array_like=True):
    """A path's stat signature when last read (``None``: re-read it) and its entry."""

    sig: tuple[int, int, int, int] | None
    entry: Entry


class TreeCache(msgspec.Struct, kw_only=True):
    root: BlobRef | None = None
    pages: dict[str, BlobRef] = {}
    files: dict[str, FileState] = {}
    dirty: bool = False                 # publish a new index even if no file changed


class LocalState(msgspec.Struct, kw_only=True):
    """Everything this writer knows about the store and the live trees."""

    version: int = STATE_VERSION
    store_id: str
    writer: str
    seq: int = 0                        # highest manifest sequence known to exist
    manifest_id: str | None = None      # id of the manifest this state was built from
    restore_complete: bool = False
    trees: dict[str, TreeCache] = {}
    pending_seq: int | None = None      # a manifest written to the state but maybe not the store
    pending: bytes | None = None        # ... its record bytes, republished on the next run


def signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """What decides whether a path must be read again."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode)


def new_state(store_id: str) -> LocalState:
    return LocalState(store_id=store_id, writer=uuid.uuid4().hex)


def load_state(state_dir: str, store_id: str) -> LocalState | None:
    """The cached state for ``store_id``, or None when missing, unreadable or for another store."""
    try:
        with open(os.path.join(state_dir, STATE_FILE), "rb") as fh:
            state = msgspec.msgpack.decode(fh.read(), type=LocalState)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if state.version != STATE_VERSION or state.store_id != store_id:
        return None
    return state


def save_state(state_dir: str, state: LocalState) -> None:
    """Replace the state file atomically (temp, fsync, rename, fsync dir)."""
    os.makedirs(state_dir, exist_ok=True)
    write_file_atomic(os.path.join(state_dir, STATE_FILE), msgspec.msgpack.encode(state),
                      os.path.join(state_dir, "tmp"))


class StateLock:
    """An exclusive ``flock`` on ``<state_dir>/lock``, held for one operation."""

    def __init__(self, state_dir: str, wait: bool = False):
        self.path = os.path.join(state_dir, "lock")
        self.wait = wait
        self.fd: int | None = None

    def __enter__(self) -> "StateLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise LockBusy(self.path) from None
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
