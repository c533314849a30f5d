"""Base copies: the content of a snapshot's full page map, kept on local disk.

In a delta map, changed pages are stored as group deltas against the pages with the
same numbers in the snapshot's full map (their *bases*, ``sqlite/capture.py``). So
that a checkpoint need not read base pages back from the store, the staging copy a
full map was cut from is kept (renamed, not copied) as
``<state_dir>/sqlite-base/<full map id>.db`` instead of being removed.
Named by the full map's id, a copy means the same wherever the tree lives.

The copy is only a cache. Every page read from it is checked against the full map's
page id; a page that does not match (no copy yet after a restore, a copy cut from a
later snapshot, a short file) is read from the store instead and written back, so
the copy converges to the full map. A base page the store cannot serve (missing or
corrupt) is left out: that page then goes into a whole group. A store that fails (an
outage) fails the checkpoint, like any other store call.

Beside a copy, ``<full map id>.db.same`` says which of its pages are known to hold the
full map's bytes (``same_pages``): every page but the ones it lists, while the copy is
the same file, untouched since (device, inode, size, mtime and ctime; pages written back here re-stamp
it), and the machine has not restarted since (its boot id: a copy is written without
fsync, so after a power loss its pages may be anything). A checkpoint
takes a page of the live copy whose bytes equal such a page as the full map's page,
without hashing it (``sqlite/capture.py``); any other page is hashed. Without the
record, or with one that does not match, every page is hashed.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import NamedTuple

import msgspec

from ..atomic import makedirs, replace_file
from ..errors import CorruptObject, ObjectNotFound
from ..format.codec import PLAIN, Codec
from ..format.pagemap import PageLoc
from ..paths import BASE_DIR, PRIVATE_DIR


def base_path(state_dir: str, full_map_id: str) -> str:
    """Where the base copy of the snapshot whose full map is ``full_map_id`` is kept."""
    return os.path.join(state_dir, BASE_DIR, f"{full_map_id}.db")


#: The record beside a base copy naming the pages that may differ from the full map.
SAME_SUFFIX = ".same"
#: This boot's id (Linux): a record from another boot is not trusted.
BOOT_ID = "/proc/sys/kernel/random/boot_id"


class SamePages(NamedTuple):
    """A base copy whose pages hold the full map's bytes, except ``differs`` (sorted pgnos)."""

    path: str
    differs: list[int]

    def known(self, first: int, count: int) -> bool:
        """Whether pages ``first`` to ``first + count - 1`` are all known to be the full map's."""
        at = bisect_left(self.differs, first)
        return at == len(self.differs) or self.differs[at] >= first + count


def _boot_id() -> str | None:
    try:
        with open(BOOT_ID, "rb") as fh:
            return fh.read(100).decode("ascii", "replace").strip() or None
    except OSError:
        return None


def same_pages(state_dir: str, full_map_id: str) -> SamePages | None:
    """The base copy of ``full_map_id`` and the pages of it that may differ from the full
    map, when its record matches the copy and this boot; else None (hash every page)."""
    return _same_at(base_path(state_dir, full_map_id))


class _SameRecord(msgspec.Struct, forbid_unknown_fields=True):
    """A base copy's ``.same`` record: this boot, the copy's (device, inode, size, mtime,
    ctime) when
    recorded, and the pages where it differs from the full map. Decoded strictly: any
    other shape (an unknown field, a bool for an int, nesting of any depth) is a
    ``ValueError`` at its first wrong token, never read as far as a recursion limit."""

    boot: str
    file: list[int]
    differs: list[int]


def _same_at(path: str) -> SamePages | None:
    """``same_pages`` of the copy at ``path``: its record, if it names this very file
    (device, inode, size, mtime, ctime: a copy replaced or written in place by anything but ``BaseCopy``
    is not trusted) and this boot."""
    try:
        with open(path + SAME_SUFFIX, "rb") as fh:
            rec = msgspec.json.decode(fh.read(1 << 24), type=_SameRecord)
        stamp = _stamp(path)
    except (OSError, ValueError):
        return None
    boot = _boot_id()
    if boot is None or rec.boot != boot or rec.file != stamp:
        return None
    return SamePages(path, sorted(rec.differs))


def _stamp(path: str) -> list[int]:
    """The copy's identity as its record names it: its change time too, which no one can
    set back (``utime`` sets the modification time, and a copy written in place with its
    mtime put back would otherwise pass as untouched)."""
    st = os.stat(path)
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _write_within(fd: int, page: bytes, offset: int) -> bool:
    """Write a verified base page into a copy, unless it lies past the copy's end: that
    would leave a hole of zeros before it, pages the record would then call the full
    map's (a live all-zero page would take the full map's id). False when not written."""
    if offset > os.fstat(fd).st_size:
        return False
    os.pwrite(fd, page, offset)
    return True


def _mark_same(path: str, differs) -> None:
    """Record that the copy at ``path`` holds the full map's pages except ``differs``."""
    boot = _boot_id()
    if boot is None:
        return
    rec = _SameRecord(boot=boot, file=_stamp(path), differs=sorted(differs))
    replace_file(path + SAME_SUFFIX, msgspec.json.encode(rec))


def _drop(path: str) -> None:
    """Remove a base copy and its record."""
    _unlink(path + SAME_SUFFIX)
    _unlink(path)


def prune_base_copies(state_dir: str, full_map_ids) -> int:
    """Remove every base copy whose full map is not in ``full_map_ids`` (the maps the
    current entries name); returns how many were removed."""
    keep = {f"{i}.db{suffix}" for i in full_map_ids for suffix in ("", SAME_SUFFIX)}
    folder = os.path.join(state_dir, BASE_DIR)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    removed = 0
    for name in names:
        if name not in keep:
            gone = _unlink(os.path.join(folder, name))
            removed += gone if name.endswith(".db") else 0
    return removed


class BaseCopy:
    """Verified base pages of one snapshot, from the local copy or else the store."""

    def __init__(self, state_dir: str, full_map_id: str | None, page_size: int, repo=None, codec: Codec = PLAIN):
        self.state_dir = state_dir
        self.path = base_path(state_dir, full_map_id) if full_map_id else None
        self.page_size = page_size
        self.repo = repo                           # a Repository, or None: no store reads
        self.codec = codec                         # the store's: page ids are its
        self.fetched: dict[int, bytes] = {}        # pages read from the store this time

    def read(self, want: list[tuple[int, PageLoc]]) -> dict[int, bytes]:
        """Verified bytes of the base pages ``want`` (pgno, location in the full map); a page that is
        neither in the copy nor readable from the store is left out."""
        out: dict[int, bytes] = {}
        missing = []
        repaired: list[int] = []
        fd = self._open()
        try:
            for pgno, ref in want:
                data = os.pread(fd, self.page_size, pgno * self.page_size) if fd is not None else b""
                if len(data) == self.page_size and self.codec.id(data) == ref.id:
                    out[pgno] = data
                else:
                    missing.append((pgno, ref))
            fetched = self._from_store(missing)
            # The copy's record, checked before this writes to the copy, is written again after.
            trusted = _same_at(self.path) if fetched and fd is not None else None
            for pgno, data in fetched:
                out[pgno] = data
                self.fetched[pgno] = data
                if fd is not None:
                    try:
                        if _write_within(fd, data, pgno * self.page_size):
                            repaired.append(pgno)
                    except OSError:
                        pass  # only a cache
        finally:
            if fd is not None:
                os.close(fd)
        if trusted is not None and repaired:
            try:
                _mark_same(self.path, set(trusted.differs) - set(repaired))
            except OSError:
                pass  # the old record no longer matches the copy: its pages are hashed
        return out

    def adopt(self, staging: str, full_map_id: str, differs=()) -> None:
        """Keep ``staging`` (the copy just cut into pages) as a base copy.

        When ``full_map_id`` is a new full map, ``staging`` is exactly its content and
        replaces the previous copy. Otherwise it is kept only if there is no copy yet:
        it differs from the full map only in the pages ``differs`` (reads repair those),
        and the base pages just fetched from the store are written into it first. The
        copy's record (``same_pages``) is written after it, naming the pages that may
        still differ.
        """
        target = base_path(self.state_dir, full_map_id)
        if target != self.path:
            makedirs(os.path.dirname(target), PRIVATE_DIR)
            _unlink(target + SAME_SUFFIX)
            os.replace(staging, target)
            _mark_same(target, ())
            if self.path is not None:
                _drop(self.path)
            return
        if os.path.exists(target):
            return
        with open(staging, "r+b") as fh:
            for pgno, data in sorted(self.fetched.items()):
                _write_within(fh.fileno(), data, pgno * self.page_size)
        makedirs(os.path.dirname(target), PRIVATE_DIR)
        _unlink(target + SAME_SUFFIX)
        os.replace(staging, target)
        _mark_same(target, set(differs) - self.fetched.keys())

    def _open(self) -> int | None:
        if self.path is None:
            return None
        try:
            return os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            return None

    def _from_store(self, missing: list[tuple[int, PageLoc]]) -> list[tuple[int, bytes]]:
        """The base pages ``missing`` read from their (whole) records, each checked
        against its page id; a page that cannot be read is left out."""
        if not missing or self.repo is None:
            return []
        uses: dict[tuple[str, int], list[tuple[int, PageLoc]]] = {}
        for pgno, loc in missing:
            uses.setdefault((loc.rec.pack, loc.rec.offset), []).append((pgno, loc))
        recs = [uses[k][0][1].rec for k in sorted(uses)]
        from ..repository.fetch import fetch_in_order  # imported here: most checkpoints read no base page back

        try:
            payloads = list(zip(recs, fetch_in_order(recs, self.repo)))
        except (CorruptObject, ObjectNotFound):
            payloads = []
            for rec in recs:  # a bad record costs only its own pages' deltas (stored whole)
                try:
                    payloads.append((rec, self.repo.read_blob(rec)))
                except (CorruptObject, ObjectNotFound):
                    continue
        found = []
        size = self.page_size
        for rec, payload in payloads:
            for pgno, loc in uses[(rec.pack, rec.offset)]:
                page = payload[loc.slot * size:(loc.slot + 1) * size]
                if self.codec.id(page) == loc.id:
                    found.append((pgno, page))
        return found


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
        return 1
    except FileNotFoundError:
        return 0
