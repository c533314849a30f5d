"""The bytes of a mount's open files: read from the packs when read, verified, kept in a
bounded cache.

- A file or transcript is read blob by blob. A read needing a blob not kept fetches it
  with the blobs right after it in its pack (one ranged read of up to ``RUN_BYTES``,
  ``repository/fetch.py``), verifies each as ``cat`` does (``segments.decode_blobs``:
  its id, kind and size; a delta against its base or anchor, read and verified too),
  and keeps them by id in an ``Lru`` of payload bytes: a blob two checkpoints share is
  read once, and a sequential read costs one request per run.
- A database is rebuilt from its snapshot, once, when first opened: restore's rebuild
  (``sqlite/rebuild.py``: every record verified, ``quick_check`` passed) into a file
  in the mount's private temp directory, which reads then serve. Two checkpoints
  holding the same snapshot share the copy. A copy no handle has open is dropped, the
  least recently used first, while the copies hold more than ``db_bytes``.
- A blob or snapshot that fails its checks fails the read (or the open) that needed it;
  nothing falls back to an older copy, since a file system cannot say that an answer
  is a fallback (``journal cat`` does, and says so).
"""

from __future__ import annotations

import bisect
import errno
import itertools
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable
from itertools import accumulate
from typing import NamedTuple

from ...format.model import KIND_SQLITE, BlobRef, Entry
from ...format.objects import KIND_CHUNK, KIND_SEGMENT
from ...repository.fetch import runs
from ...repository.repository import Repository
from ...repository.segments import decode_blobs
from ...sqlite.rebuild import rebuild_db
from ...sqlite.snapshot import remove_staging
from ..view import DAMAGE
from .lru import Lru


class DbCopy:
    """A snapshot rebuilt into a file of the temp directory (``built`` once done)."""

    def __init__(self, path: str):
        self.path = path
        self.size = 0           # its bytes, once built
        self.users = 0          # open handles
        self.built = False
        self.lock = threading.Lock()   # one rebuild at a time, and only once


class Handle(NamedTuple):
    entry: Entry
    ends: tuple[int, ...]       # where each blob ends in the file
    fd: int | None = None       # a database's rebuilt copy, open read-only
    db: DbCopy | None = None


class Files:
    """Open files by handle number. ``cache_bytes`` bounds the blob payloads kept;
    ``db_bytes`` the rebuilt databases kept on disk in ``tmp_dir`` once closed."""

    def __init__(self, repo: Repository, tmp_dir: str, cache_bytes: int, db_bytes: int):
        self.repo = repo
        self.tmp_dir = tmp_dir
        self.blobs = Lru(cache_bytes, weigh=len)
        self.db_bytes = db_bytes
        self._handles: dict[int, Handle] = {}
        self._numbers = itertools.count(1)
        self._db_names = itertools.count(1)
        self._dbs: dict[tuple[BlobRef, ...], DbCopy] = {}
        self._idle: OrderedDict[tuple[BlobRef, ...], DbCopy] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, entry: Entry) -> int:
        """A handle on ``entry``'s bytes; a database is rebuilt first unless a copy is
        kept. Raises ``CorruptObject``/``ObjectNotFound`` when its snapshot is damaged."""
        if entry.kind == KIND_SQLITE:
            db = self._take_db(entry)
            try:
                self._build(db, entry)
                handle = Handle(entry, (), os.open(db.path, os.O_RDONLY | os.O_CLOEXEC), db)
            except BaseException:
                self._give_db(entry.refs, db)
                raise
        else:
            handle = Handle(entry, tuple(accumulate(ref.size for ref in entry.refs)))
        with self._lock:
            number = next(self._numbers)
            self._handles[number] = handle
        return number

    def read(self, number: int, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (fewer at the end of the file)."""
        handle = self._handles.get(number)
        if handle is None:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        if handle.fd is not None:
            return os.pread(handle.fd, size, offset)
        entry, ends = handle.entry, handle.ends
        end = min(offset + size, entry.size)
        parts = []
        i = bisect.bisect_right(ends, offset)
        while offset < end:
            start = ends[i] - entry.refs[i].size
            parts.append(self._blob(entry, i)[offset - start:end - start])
            offset = ends[i]
            i += 1
        return b"".join(parts)

    def release(self, number: int) -> None:
        with self._lock:
            handle = self._handles.pop(number, None)
        if handle is not None and handle.fd is not None:
            os.close(handle.fd)
            self._give_db(handle.entry.refs, handle.db)

    def close(self) -> None:
        """Close every handle and remove every rebuilt copy (the mount is gone)."""
        with self._lock:
            handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            if handle.fd is not None:
                os.close(handle.fd)
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    # ----------------------------------------------------------------- blobs

    def _blob(self, entry: Entry, i: int) -> bytes:
        """Blob ``i`` of ``entry``, verified: kept, else fetched with the rest of its run."""
        ref = entry.refs[i]
        payload = self.blobs.get(ref.id)
        if payload is not None:
            return payload
        run = next(runs(entry.refs[i:]))
        decoded = decode_blobs(entry, self.repo.read_records(run), self._kept(self._read_base), i,
                               self._kept(self._read_anchor), self.repo.codec)
        payload = self.blobs[ref.id] = bytes(next(decoded))
        try:
            for later, more in zip(run[1:], decoded):
                self.blobs[later.id] = bytes(more)
        except DAMAGE:
            pass  # read ahead only: the read that needs that blob fails on it
        return payload

    def _kept(self, read: Callable[[BlobRef], bytes]) -> Callable[[BlobRef], bytes]:
        """``read`` through the cache: a base or an anchor many blobs need is read once."""
        def get(ref: BlobRef) -> bytes:
            payload = self.blobs.get(ref.id)
            if payload is None:
                payload = self.blobs[ref.id] = bytes(read(ref))
            return payload
        return get

    def _read_base(self, ref: BlobRef) -> bytes:
        return self.repo.read_whole(ref, KIND_CHUNK)

    def _read_anchor(self, ref: BlobRef) -> bytes:
        return self.repo.read_blob(ref, KIND_SEGMENT)

    # ----------------------------------------------------------------- databases

    def _take_db(self, entry: Entry) -> DbCopy:
        with self._lock:
            db = self._dbs.get(entry.refs)
            if db is None:
                db = self._dbs[entry.refs] = DbCopy(os.path.join(self.tmp_dir, f"{next(self._db_names)}.db"))
            db.users += 1
            self._idle.pop(entry.refs, None)
        return db

    def _build(self, db: DbCopy, entry: Entry) -> None:
        with db.lock:
            if db.built:
                return
            try:
                rebuild_db(entry, self.repo, db.path)
            except BaseException:
                remove_staging(db.path)
                raise
            db.size, db.built = entry.size, True

    def _give_db(self, key: tuple[BlobRef, ...], db: DbCopy) -> None:
        """One handle fewer on ``db``; then drop idle copies while they all hold too much."""
        with self._lock:
            db.users -= 1
            if db.users == 0:
                self._idle[key] = db
            held = sum(copy.size for copy in self._dbs.values())
            while held > self.db_bytes and self._idle:
                old_key, old = self._idle.popitem(last=False)
                del self._dbs[old_key]
                remove_staging(old.path)
                held -= old.size
