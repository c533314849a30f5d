"""Local copies of blobs a checkpoint builds on (``<state_dir>/maps``, ``pages``, ``chunks``)."""

from __future__ import annotations

import os
from collections.abc import Callable

import msgspec

from ..atomic import makedirs, replace_file
from ..local.errors import LocalWriteError
from ..format.model import BlobRef, decode, encode
from ..format.objects import KIND_PAGEMAP
from ..paths import MAPS_DIR, PRIVATE_DIR
from .repository import Repository


class BlobCache:
    """Local copies of blobs a checkpoint builds on, by id, so it need not read them back:
    SQLite page maps (``maps/``) and the whole index pages that page deltas are made
    against (``pages/``), and the whole chunks of rewritten files (``chunks/``,
    ``checkpoint/file_delta.py``). Every copy is checked against its id; a miss reads the store.

    With ``bases`` (page maps) each copy also records how it is stored, in
    ``<id>.base``: ``whole``, or the JSON reference of the whole map it is a delta of.
    A writer makes a new map a delta only of a map known to be whole this way; a
    missing or unreadable record means "unknown", and the new map is stored whole.
    """

    WHOLE = b"whole"

    def __init__(self, state_dir: str, repo: Repository, subdir: str = MAPS_DIR, kind: int = KIND_PAGEMAP,
                 bases: bool = False):
        self.dir = os.path.join(state_dir, subdir)
        self.repo = repo
        self.kind = kind
        self.bases = bases

    def read(self, ref: BlobRef, whole: bool = False) -> bytes:
        """The blob ``ref``: the local copy, else read from the store (and kept).
        ``whole``: it is to be a delta's base, so a delta in the store is refused."""
        payload = self.cached(ref.id)
        if payload is not None:
            return payload
        if self.bases and not whole:  # a page map may be a delta: note which base it has
            payload, base = self.repo.read_based(ref, self.kind)
        else:  # an index page here is a base for deltas: it must be whole
            payload, base = self.repo.read_whole(ref, self.kind), None
        self.remember(ref.id, payload, base)
        return payload

    def remember(self, blob_id: str, payload: bytes, base: BlobRef | None = None) -> None:
        """Keep a blob this checkpoint is about to publish (or just read), and, with
        ``bases``, the base it is a delta of (None: it is whole)."""
        path = os.path.join(self.dir, blob_id)
        try:
            makedirs(self.dir, PRIVATE_DIR)
            replace_file(path, payload)  # mode 0600: a copy of a live file is no one else's to read
            if self.bases:
                path += ".base"
                replace_file(path, self.WHOLE if base is None else encode(base))  # never a torn record
        except OSError as err:  # a full disk: journal's own file, never a live path's
            raise LocalWriteError("keep a local copy", err, path) from err

    def cached(self, blob_id: str) -> bytes | None:
        """The local copy of ``blob_id`` if there is one and it still hashes to its id (as
        the store makes ids)."""
        try:
            with open(os.path.join(self.dir, blob_id), "rb") as fh:
                payload = fh.read()
        except FileNotFoundError:
            return None
        return payload if self.repo.codec.id(payload) == blob_id else None

    def base_of(self, blob_id: str) -> tuple[bool, BlobRef | None]:
        """``(known, base)``: whether how ``blob_id`` is stored is known here, and the
        whole blob it is a delta of (None when it is whole)."""
        try:
            with open(os.path.join(self.dir, blob_id + ".base"), "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return False, None
        if raw == self.WHOLE:
            return True, None
        try:
            return True, decode(raw, BlobRef)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return False, None

    def names(self) -> set[str]:
        """The names in the directory (none when it is missing)."""
        try:
            return set(os.listdir(self.dir))
        except FileNotFoundError:
            return set()

    def touch(self, blob_id: str) -> None:
        """Mark the copy of ``blob_id`` as just used (its mtime: ``bound`` drops the
        least recently used first). Best effort."""
        try:
            os.utime(os.path.join(self.dir, blob_id))
        except OSError:
            pass

    def bound(self, limit: int, named: Callable[[], set[str]]) -> None:
        """Keep the copies within ``limit`` bytes: when they hold more, drop first those
        whose id ``named()`` lacks (no entry uses them), then the least recently used
        (oldest mtime first), until they fit."""
        held = self._sizes()
        total = sum(size for size, _ in held.values())
        if total <= limit:
            return
        keep = named()
        order = sorted(held, key=lambda name: (name.removesuffix(".base") in keep, held[name][1]))
        for name in order:
            if total <= limit:
                break
            try:
                os.unlink(os.path.join(self.dir, name))
            except FileNotFoundError:
                pass
            total -= held[name][0]

    def _sizes(self) -> dict[str, tuple[int, int]]:
        """``name -> (bytes, mtime_ns)`` of each file in the directory."""
        out = {}
        for name in self.names():
            try:
                st = os.lstat(os.path.join(self.dir, name))
            except FileNotFoundError:
                continue
            out[name] = (st.st_size, st.st_mtime_ns)
        return out

    def prune(self, keep: set[str]) -> None:
        """Drop cached blobs not in ``keep`` nor the base of one in it."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return
        if self.bases:
            keep = keep | {base.id for blob_id in keep if (base := self.base_of(blob_id)[1]) is not None}
        for name in names:
            if name.removesuffix(".base") not in keep:
                os.unlink(os.path.join(self.dir, name))
