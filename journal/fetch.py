"""Bounded concurrent reads: the blobs of a file fetched ahead, yielded in order.

Blobs that sit back to back in one pack (a file's chunks from one checkpoint, a
database snapshot's pages) are fetched as one ranged read of up to ``RUN_BYTES``;
up to ``WINDOW`` such reads are in flight. Memory stays bounded by
``WINDOW * RUN_BYTES``; on a cloud store the round trips overlap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from .model import BlobRef

WINDOW = 4
RUN_BYTES = 4 << 20
_pool: ThreadPoolExecutor | None = None


class BlobReader(Protocol):
    def read_run(self, refs: list[BlobRef]) -> list[bytes]: ...


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WINDOW, thread_name_prefix="journal-fetch")
    return _pool


def runs(refs: Iterable[BlobRef]) -> Iterator[list[BlobRef]]:
    """Group refs into runs of back-to-back records of one pack, in order."""
    run: list[BlobRef] = []
    size = 0
    for ref in refs:
        if run and (ref.pack != run[-1].pack or ref.offset != run[-1].offset + run[-1].length
                    or size + ref.length > RUN_BYTES):
            yield run
            run, size = [], 0
        run.append(ref)
        size += ref.length
    if run:
        yield run


def fetch_in_order(refs: Iterable[BlobRef], reader: BlobReader, window: int = WINDOW) -> Iterator[bytes]:
    """Yield each ref's verified payload in order; the first failing read raises here."""
    pending: deque = deque()
    try:
        for run in runs(refs):
            pending.append(_executor().submit(reader.read_run, run))
            if len(pending) >= window:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
