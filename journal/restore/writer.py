"""Writing restored entries: staged by worker threads, settled as they complete, published in batches.

The caller cuts the writes of every tree into jobs (``plan_jobs``: databases and large
files one per job, largest first; small files in groups) and hands them over
(``Pipeline.submit``). Directories are made at once, in the caller's thread. Every
other entry is staged (``entry.stage_entry``: fetched, verified, written to a
temp file) by one of the pool's threads, at most ``IN_FLIGHT`` jobs at once, across
trees: reading the store, zstd, SHA-256, writing and SQLite's quick_check release the
GIL, so a second core works while the first one does. Outcomes come back as jobs
complete, in the caller's thread, to the callback given with each entry; there a
staged file joins its tree's ``PublishBatch`` (``TreeWriter.publish``) and a damaged
one can be retried from an older copy (``TreeWriter.stage_now``).
``TreeWriter.finish`` publishes the tree's last batch, applies directory modes and
fsyncs every directory that changed.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator

from .publish import PublishBatch, Staged
from ..atomic import makedirs
from ..local.under import make_under
from .entry import ensure_parents, finish_dirs, stage_entry
from .reads import StagingReads
from ..local.tree_tmp import TreeTmp
from ..repository.fetch import RawReader, fetch_in_order
from ..format.model import KIND_DIR, KIND_SQLITE, KIND_SYMLINK, Entry

#: Threads that stage files (2 cores here; more only adds contention for the GIL).
WORKERS = max(2, min(4, os.cpu_count() or 2))
#: ... from a store whose reads wait on a link (``Store.read_ahead``: a bucket, or a
#: FUSE mount of one): its threads mostly wait, so more of them overlap the requests'
#: latency (over a 20 MB/s link with 30 ms a request, a full restore took 3.0 s with 2
#: and 2.3 s with 6).
LINK_WORKERS = 6
#: Jobs handed to the pool and not yet taken back.
IN_FLIGHT = 4 * WORKERS
#: ... times this for a tree whose files are staged closed (``TreeWriter.whole``): the
#: pool then has work while this thread renames a batch of thousands.
WHOLE_IN_FLIGHT = 8
#: Files below this size are staged in groups of up to GROUP_FILES files / GROUP_BYTES bytes.
SMALL_FILE = 256 << 10
GROUP_FILES = 16
GROUP_BYTES = 1 << 20

#: What a submission comes back as: None (a directory, made), the Staged file, or the error.
Outcome = Staged | Exception | None


POOL_NAME = "journal-restore"


def make_pool(workers: int = WORKERS):
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=POOL_NAME)


def stop_pool(pool) -> None:
    """Cancel what has not started and wait for every staging thread, including one a
    Ctrl-C caught half started: ``pool.submit`` queues the job, then starts a thread
    and records it only once it runs, so an interrupt in between leaves a thread that
    ``shutdown`` does not join, staging temp files after the caller cleaned up."""
    import threading

    pool.shutdown(wait=True, cancel_futures=True)
    for thread in threading.enumerate():
        if thread.name.startswith(POOL_NAME) and thread is not threading.current_thread():
            _join_started(thread, time.monotonic() + 10)


def _join_started(thread, deadline: float) -> None:
    """Join ``thread``, which may not have begun running yet: a Ctrl-C that lands
    right after ``Thread.start`` created it leaves it registered but not started, and
    ``join`` refuses such a thread until it runs (it will, at once)."""
    while True:
        try:
            thread.join()
            return
        except RuntimeError:   # "cannot join thread before it is started"
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


class TreeWriter:
    """One tree's writes: its directories, its temp directory and its publish batch."""

    def __init__(self, root: str, reader: StagingReads, state_dir: str):
        self.root = root
        self.reader = reader
        self.state_dir = state_dir
        self.tmp: TreeTmp | None = None
        self.batch = PublishBatch()
        self._known: set[str] = {root}
        # A live path restore replaces -> what it was when the write was decided (``observe``);
        # any other path it writes had nothing there, and must still have nothing.
        self.expect: dict[str, tuple | None] = {}
        self.whole = False   # its temp directory's files are made durable by the batch's syncfs: staged closed

    def make_root(self) -> None:
        """Create the tree's directory (and missing ancestors), durably."""
        for path in makedirs(self.root):
            self.batch.mark_dir(os.path.dirname(path))

    def tmp_dir(self) -> TreeTmp:
        """The tree's temp directory (``local/tree_tmp.py``), made on first use."""
        if self.tmp is None:
            tmp = self.tmp = TreeTmp(self.root, self.state_dir)  # kept first: ``close`` undoes a half-made one
            try:
                tmp.open()
            except BaseException:
                self.tmp = None
                tmp.close()
                raise
            self.whole = self.batch.synced_whole(tmp)
        return self.tmp

    def close(self) -> str | None:
        """Remove the temp directory; a warning when it holds what journal did not make."""
        tmp, self.tmp = self.tmp, None
        return tmp.close() if tmp is not None else None

    def prepare(self, entry: Entry):
        """Make ``entry``'s parents, and ``entry`` itself when it is a directory.

        Returns True when the entry still has to be staged, else its outcome: None (a
        directory, made now) or the error that refused it (UnsafePath: a parent is not a
        real directory).
        """
        created: list[str] = []
        try:
            ensure_parents(self.root, entry.path, self._known, created)
            if entry.kind != KIND_DIR:
                self.tmp_dir()
                return True
            full = os.path.join(self.root, entry.path)
            if full not in self._known:
                make_under(self.root, entry.path, created)
                self._known.add(full)
            return None
        except Exception as err:  # noqa: BLE001  (handed back like a worker's error)
            return err
        finally:
            for path in created:
                self.batch.mark_dir(os.path.dirname(path))

    def stage_now(self, entry: Entry) -> Staged:
        """Stage ``entry`` in this thread (an older copy, after the newest one failed)."""
        tmp = self.tmp_dir()
        return stage_entry(self.root, tmp, entry, self.reader, close=self.whole)

    def publish(self, staged: Staged) -> None:
        staged.expect = self.expect.get(staged.path)
        self.batch.add(staged)

    def finish(self, entries: list[Entry]) -> None:
        """Publish what is staged, apply directory modes, fsync every changed directory."""
        self.batch.flush()
        for path in finish_dirs(self.root, entries):
            self.batch.mark_dir(path)
        self.batch.sync_dirs()

    def discard(self) -> None:
        """After an error: remove every temp file staged and not yet published."""
        self.batch.discard()


def stage_group(root: str, tmp: TreeTmp, entries: list[Entry], reader: StagingReads,
                close: bool = False) -> list[Staged | Exception]:
    """Stage several entries of one tree in turn (one pool job); each outcome on its own
    (``close``: each file staged closed, ``stage_entry``).

    The blobs of a group of small files usually sit back to back in one pack (a
    checkpoint packs files in path order), so they are read together first: one ranged
    read instead of one per file. If that read fails, each file reads its own blobs and
    so gets its own outcome.
    """
    blobs = _read_together(entries, reader) if len(entries) > 1 else None
    out: list[Staged | Exception] = []
    for entry in entries:
        try:
            mine = None
            if blobs is not None and entry.kind not in _OWN_READ:
                mine = [blobs.popleft() for _ in entry.refs]
            out.append(stage_entry(root, tmp, entry, reader, mine, close=close))
        except Exception as err:  # noqa: BLE001  (settled by the caller, one entry at a time)
            out.append(err)
    return out


_OWN_READ = (KIND_SQLITE, KIND_SYMLINK, KIND_DIR)


def _read_together(entries: list[Entry], reader: StagingReads) -> deque | None:
    """Every blob record of ``entries`` (not databases or links), as stored, in order
    (``stage_entry`` verifies each); None on any error (each entry then reads its own
    blobs, and meets its own error)."""
    refs = [ref for e in entries if e.kind not in _OWN_READ for ref in e.refs]
    try:
        return deque(fetch_in_order(refs, RawReader(reader)))
    except Exception:  # noqa: BLE001
        return None


def plan_jobs(writes: list[tuple[object, Entry]]) -> list[tuple[object, list[Entry]]]:
    """Cut ``(tree, entry)`` writes, in path order, into pool jobs ``(tree, entries)``.

    Databases come first, then the other large files, largest first, one per job: the
    longest jobs start early, and the rest fill the other core around them.

    Small files follow, grouped by tree (``GROUP_FILES``, ``GROUP_BYTES``) in the order
    their blobs sit in the packs. A group is then usually one ranged read
    (``stage_group``), so a tree of many small files costs few reads and few handoffs
    between threads.
    """
    big = [w for w in writes if w[1].kind == KIND_SQLITE or w[1].size >= SMALL_FILE]
    big.sort(key=lambda w: (w[1].kind != KIND_SQLITE, -w[1].size))
    jobs = [(tree, [entry]) for tree, entry in big]
    group: list[Entry] = []
    owner, size = None, 0
    for tree, entry in _small_in_pack_order(writes):
        if group and (tree is not owner or len(group) >= GROUP_FILES or size + entry.size > GROUP_BYTES):
            jobs.append((owner, group))
            group, size = [], 0
        owner = tree
        group.append(entry)
        size += entry.size
    if group:
        jobs.append((owner, group))
    return jobs


def _small_in_pack_order(writes: list[tuple[object, Entry]]) -> Iterator[tuple[object, Entry]]:
    """The small files of ``writes`` by tree (in the order each tree first comes), then
    where their first blob sits (pack, offset; no blob first), else as they came. Sorted
    pack by pack on the offsets themselves: no key tuple per write (200,000 of them)."""
    trees: dict[int, tuple[object, dict[str, list[Entry]]]] = {}
    for tree, _ in writes:
        trees.setdefault(id(tree), (tree, {}))
    for tree, entry in writes:
        if entry.kind != KIND_SQLITE and entry.size < SMALL_FILE:
            trees[id(tree)][1].setdefault(entry.refs[0].pack if entry.refs else "", []).append(entry)
    for tree, packs in trees.values():
        for pack in sorted(packs):
            entries = packs.pop(pack)
            entries.sort(key=_offset)
            for entry in entries:
                yield tree, entry


def _offset(entry: Entry) -> int:
    """Where an entry's first blob sits in its pack (0 for no blob)."""
    return entry.refs[0].offset if entry.refs else 0


class Pipeline:
    """Jobs in the pool, at most ``in_flight`` at once, their outcomes settled as they complete.

    Each entry's outcome is handed to the ``settle`` callback of its job in the caller's
    thread, as jobs complete: one slow file (a large database) does not hold back the
    outcomes, the temp files and the open descriptors of the files behind it.
    """

    def __init__(self, pool, in_flight: int = IN_FLIGHT):
        self.pool = pool
        self.in_flight = in_flight
        self._jobs: dict = {}       # future -> (settle, entries), in submission order

    def submit(self, writer: TreeWriter, entries: list[Entry], settle: Callable[[Entry, Outcome], None]) -> None:
        """Stage ``entries`` of ``writer``'s tree in one job; ``settle(entry, outcome)``
        runs later in this thread for each of them."""
        todo = []
        for entry in entries:
            ready = writer.prepare(entry)
            if ready is True:
                todo.append(entry)
            else:
                settle(entry, ready)
        if not todo:
            return
        tmp = writer.tmp_dir()
        job = self.pool.submit(stage_group, writer.root, tmp, todo, writer.reader, writer.whole)
        self._jobs[job] = (settle, todo)
        while len(self._jobs) >= self.in_flight * (WHOLE_IN_FLIGHT if writer.whole else 1):
            self._settle_done()

    def drain(self) -> None:
        while self._jobs:
            self._settle_done()

    def _settle_done(self) -> None:
        from concurrent.futures import FIRST_COMPLETED, wait

        done, _ = wait(self._jobs, return_when=FIRST_COMPLETED)
        for job in [j for j in self._jobs if j in done]:  # submission order among the done
            settle, entries = self._jobs.pop(job)
            outcomes = job.result()
            for i, (entry, outcome) in enumerate(zip(entries, outcomes)):
                try:
                    settle(entry, outcome)
                except BaseException:
                    _discard(outcomes[i + 1:])
                    raise

    def abort(self) -> None:
        """After an error: stop pending work and remove temp files it staged."""
        jobs, self._jobs = list(self._jobs), {}
        for job in jobs:
            job.cancel()
        for job in jobs:
            try:
                outcomes = job.result()
            except BaseException:  # noqa: BLE001  (cancelled, or already failing)
                continue
            _discard(outcomes)


def _discard(outcomes) -> None:
    for outcome in outcomes:
        if isinstance(outcome, Staged):
            outcome.discard()
