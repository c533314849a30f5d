"""JSONL segments compressed against an anchor segment (design §6): which segment
is whose anchor, and how much of the anchor a delta's dictionary takes.

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
dictionary (``checkpoint/capture.py``), so a file edited in place can never produce a
delta that restore would decode against other bytes. Readers: ``repository/segments.py``.
"""

from __future__ import annotations

from .model import BlobRef

ANCHOR_MIN = 64 << 10
DICT_TAIL = 64 << 10


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


def anchor_refs(refs: tuple[BlobRef, ...]) -> list[BlobRef | None]:
    """For each of an entry's refs, its anchor's ref (None for an anchor)."""
    return [None if a is None else refs[a] for a in anchors([r.size for r in refs])]
