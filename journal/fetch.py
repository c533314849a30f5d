"""Bounded concurrent reads: blobs of a file fetched ahead, yielded in order.

Memory stays bounded by ``window`` blobs in flight; the store is the slow part on a
cloud backend, so restore overlaps the round trips.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from .model import BlobRef

WINDOW = 8
_pool = ThreadPoolExecutor(max_workers=WINDOW, thread_name_prefix="journal-fetch")


def fetch_in_order(refs: Iterable[BlobRef], read_blob: Callable[[BlobRef], bytes],
                   window: int = WINDOW) -> Iterator[bytes]:
    """Yield ``read_blob(ref)`` for each ref in order, with up to ``window`` reads in flight.

    The first failing read raises here, in order; reads started after it are dropped.
    """
    pending = deque()
    it = iter(refs)
    try:
        for ref in it:
            pending.append(_pool.submit(read_blob, ref))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for fut in pending:
            fut.cancel()
