"""Bounded concurrent reads: the blobs of a file fetched ahead, yielded in order.

Blobs that sit back to back in one pack (a file's chunks from one checkpoint, a
database snapshot's pages) are fetched as one ranged read of up to ``RUN_BYTES``
stored bytes and ``RUN_BYTES`` payload bytes. A file that is one such run is read in
the calling thread; a longer one has up to ``WINDOW`` runs in flight in a small pool,
so on a cloud store (or a FUSE mount) the round trips overlap. A store on a local
disk (``Store.read_ahead`` False) is read in the calling thread: its reads come from
the page cache, and handing them to other threads cost a restore ~8% of its time.

Memory is bounded across every reader at once, not per file: a reader fetches ahead
only while the runs fetched and not yet consumed by all readers (stored plus payload
bytes) stay within ``BUDGET``. A reader with nothing fetched always gets its next run,
so nothing ever waits for the budget (no deadlock, even for one thread reading two
streams in turn), and the total stays below ``BUDGET`` plus one run per reader.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Protocol

from ..format.model import BlobRef

WINDOW = 4
#: The pool's threads: the runs in flight across every reader at once. Its reads wait
#: on a link (on a local disk nothing is read ahead), so a few large runs saturating the
#: link must not queue a small file's one round trip behind them.
READ_THREADS = 16
RUN_BYTES = 4 << 20
BUDGET = 24 << 20
_pool = None
_pool_lock = threading.Lock()


class BlobReader(Protocol):
    read_ahead: bool    # Store.read_ahead of the store it reads

    def read_run(self, refs: list[BlobRef]) -> list[bytes]: ...


class Budget:
    """Bytes held by fetched, unconsumed runs, shared by every reader."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, n: int, force: bool = False) -> bool:
        """Count ``n`` more bytes if they fit (always with ``force``); False when declined."""
        with self._lock:
            if not force and self.used + n > self.limit:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used -= n


_budget = Budget(BUDGET)


def _executor():
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor

            _pool = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="journal-fetch")
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child holds none of its parent's threads: a pool inherited from it would
    take work and never run it (the child waits for ever). The child makes its own."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_in_child)


def shutdown() -> None:
    """Stop the fetch threads (a restore is over): a long-running process that only
    checkpoints then runs one thread, which lets the quiet check fork (``local/quiet.py``)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True)


def runs(refs: Iterable[BlobRef]) -> Iterator[list[BlobRef]]:
    """Group refs into runs of back-to-back records of one pack, in order.

    A run is cut before it would exceed ``RUN_BYTES`` of stored bytes or of payload
    bytes (well-compressed blobs would otherwise expand a 4 MiB read many times over).
    """
    run: list[BlobRef] = []
    stored = raw = 0
    for ref in refs:
        if run and (ref.pack != run[-1].pack or ref.offset != run[-1].offset + run[-1].length
                    or stored + ref.length > RUN_BYTES or raw + ref.size > RUN_BYTES):
            yield run
            run, stored, raw = [], 0, 0
        run.append(ref)
        stored += ref.length
        raw += ref.size
    if run:
        yield run


def run_cost(run: list[BlobRef]) -> int:
    """Bytes a fetched run holds in memory: its stored bytes and its payloads."""
    return sum(r.length + r.size for r in run)


def fetch_in_order(refs: Iterable[BlobRef], reader: BlobReader, window: int = WINDOW,
                   budget: Budget | None = None, ahead: bool | None = None) -> Iterator[bytes]:
    """Yield each ref's payload (as ``reader.read_run`` gives it) in order; the first
    failing read raises here. ``ahead``: read in the pool's threads (None: when
    ``reader.read_ahead`` says so)."""
    budget = budget or _budget
    it = runs(refs)
    first = next(it, None)
    if first is None:
        return
    second = next(it, None)
    if second is None or not (reader.read_ahead if ahead is None else ahead):
        # One read, or a store that answers from the page cache: no handoff to
        # another thread is worth it.
        yield from _read_inline([first] if second is None else itertools.chain((first, second), it), reader, budget)
        return
    pending: deque = deque()
    try:
        for run in itertools.chain((first, second), it):
            cost = run_cost(run)
            while not budget.take(cost, force=not pending):
                yield from _consume(pending, budget)
            pending.append((_executor().submit(reader.read_run, run), cost))
            if len(pending) >= window:
                yield from _consume(pending, budget)
        while pending:
            yield from _consume(pending, budget)
    finally:
        while pending:
            fut, cost = pending.popleft()
            fut.cancel()
            budget.give(cost)


def _read_inline(runs_: Iterable[list[BlobRef]], reader: BlobReader, budget: Budget) -> Iterator[bytes]:
    """Read runs in this thread, one at a time."""
    for run in runs_:
        cost = run_cost(run)
        budget.take(cost, force=True)
        try:
            payloads = reader.read_run(run)
            payloads.reverse()
            while payloads:
                yield payloads.pop()
        finally:
            budget.give(cost)


def _consume(pending: deque, budget: Budget) -> Iterator[bytes]:
    fut, cost = pending.popleft()
    try:
        payloads = fut.result()
        del fut
        payloads.reverse()
        while payloads:  # each payload is dropped here as it is handed over
            yield payloads.pop()
    finally:
        budget.give(cost)


class RawReader:
    """A ``BlobReader`` whose runs are records as stored (verified later, with their base)."""

    def __init__(self, repo):
        self.repo = repo
        self.read_ahead = repo.read_ahead

    def read_run(self, refs: list[BlobRef]) -> list:
        return self.repo.read_records(refs)
