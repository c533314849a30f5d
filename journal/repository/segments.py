"""JSONL segments compressed against an anchor segment, and reading an
entry's blobs back, verified, in order.

A tick appends a few KiB to a transcript; alone, such a segment compresses 3x, but
against earlier lines of the same conversation (the same JSON keys, tool names and
vocabulary) 6-9x. So a small segment is stored as a delta (``FLAG_DELTA``) whose
zstd raw-content dictionary is the last ``DICT_TAIL`` bytes of its *anchor*.

* The anchor of segment i is the nearest segment before it, in the entry's refs,
  that is an anchor itself: the first segment, or one of at least ``ANCHOR_MIN``
  bytes. Anchors are stored whole, so every segment decodes with at most one other
  (chains stay one deep), and which one is a function of the refs' sizes alone.
* The rule holds for every entry that contains a segment, because refs are reused
  only as a prefix of the same file's previous entry, and compaction replaces a
  trailing run (an anchor it removes takes every segment after it along).
* gc needs nothing new: an anchor is in the same entry's refs, so it is reachable
  whenever the delta is.

Writers verify an anchor's local bytes against its id before using them as a
dictionary, so a file edited in place can never produce a delta that restore would
decode against other bytes.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

from .fetch import RawReader, fetch_in_order
from ..format.model import KIND_JSONL, BlobRef, Entry
from ..format.objects import KIND_CHUNK, KIND_SEGMENT, decode_record
from .repository import Repository, blob_location

ANCHOR_MIN = 64 << 10
DICT_TAIL = 64 << 10
_READ_BLOCK = 1 << 20


def anchors(sizes: list[int]) -> list[int | None]:
    """For each segment, the index of its anchor (None: the segment is an anchor)."""
    out: list[int | None] = []
    last = None
    for i, size in enumerate(sizes):
        if i == 0 or size >= ANCHOR_MIN:
            out.append(None)
            last = i
        else:
            out.append(last)
    return out


def decode_blobs(entry: Entry, records: Iterable[bytes], read_base: Callable[[BlobRef], bytes] | None = None,
                 start: int = 0, read_anchor: Callable[[BlobRef], bytes] | None = None) -> Iterator[bytes]:
    """Verify an entry's records (as stored, in ref order, from ``refs[start]`` on) and
    yield their payloads. A file's delta chunk is decoded against its base,
    ``read_base(ref)``; a transcript read from a later segment than the first needs the
    anchor before it, ``read_anchor(ref)``, when the segment there is a delta."""
    base_of = anchors([r.size for r in entry.refs]) if entry.kind == KIND_JSONL else None
    kind = KIND_SEGMENT if entry.kind == KIND_JSONL else KIND_CHUNK
    bases = entry.bases  # aligned with the refs, or empty (checked when its page was read)
    tail = None
    if base_of is not None and start < len(base_of) and base_of[start] is not None and read_anchor is not None:
        tail = read_anchor(entry.refs[base_of[start]])[-DICT_TAIL:]
    for i, (ref, data) in enumerate(zip(entry.refs[start:], records), start):
        anchor = None if base_of is None else base_of[i]
        base = None if anchor is None else tail
        if bases and bases[i] is not None and read_base is not None:
            base = read_base(bases[i])
        payload = decode_record(data, key=blob_location(ref), expect_id=ref.id, expect_kind=kind,
                                expect_size=ref.size, base=base)
        if base_of is not None and anchor is None:
            tail = payload[-DICT_TAIL:]
        yield payload


def read_blobs(entry: Entry, repo: Repository, start: int = 0) -> Iterator[bytes]:
    """Every blob of ``entry`` (from ``refs[start]`` on: a transcript's anchor before it is
    read too, when needed), fetched ahead (``repository/fetch.py``), verified, in order."""
    return decode_blobs(entry, fetch_in_order(entry.refs[start:], RawReader(repo)), chunk_reader(repo), start,
                        lambda ref: repo.read_blob(ref, KIND_SEGMENT))


def chunk_reader(repo: Repository) -> Callable[[BlobRef], bytes]:
    """Reads a delta chunk's base: a whole chunk, verified (a delta is refused)."""
    return lambda ref: repo.read_whole(ref, KIND_CHUNK)


def read_segment(repo: Repository, ref: BlobRef, anchor: BlobRef | None) -> bytes:
    """One segment on its own: a delta is decoded against its anchor, read and verified too."""
    base = None if anchor is None else repo.read_blob(anchor, KIND_SEGMENT)[-DICT_TAIL:]
    return decode_record(repo.read_record(ref), key=blob_location(ref), expect_id=ref.id, expect_kind=KIND_SEGMENT,
                         expect_size=ref.size, base=base)


def anchor_refs(refs: tuple[BlobRef, ...]) -> list[BlobRef | None]:
    """For each of an entry's refs, its anchor's ref (None for an anchor)."""
    return [None if a is None else refs[a] for a in anchors([r.size for r in refs])]


class AnchorTails:
    """Verified anchor tails by id, for writers: a few recent ones kept in memory."""

    def __init__(self, keep: int = 64):
        self.keep = keep
        self._tails: OrderedDict[str, bytes] = OrderedDict()

    def tail(self, fd: int, offset: int, ref: BlobRef) -> bytes | None:
        """The last ``DICT_TAIL`` bytes of the anchor ``ref`` at ``offset`` of the live
        file ``fd``; None when those bytes no longer hash to the anchor's id."""
        got = self._tails.get(ref.id)
        if got is not None:
            self._tails.move_to_end(ref.id)
            return got
        digest, tail = hashlib.sha256(), b""
        end = offset + ref.size
        while offset < end:  # a block at a time: an anchor may be large
            block = os.pread(fd, min(_READ_BLOCK, end - offset), offset)
            if not block:
                return None
            digest.update(block)
            tail = (tail + block)[-DICT_TAIL:]
            offset += len(block)
        if digest.hexdigest() != ref.id:
            return None
        return self.remember(ref.id, tail)

    def remember(self, blob_id: str, payload: bytes) -> bytes:
        tail = payload[-DICT_TAIL:]
        self._tails[blob_id] = tail
        while len(self._tails) > self.keep:
            self._tails.popitem(last=False)
        return tail


#: One per process: ``journal supervise`` keeps verified anchors between ticks.
TAILS = AnchorTails()
