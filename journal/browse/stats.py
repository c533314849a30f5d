"""``journal stats``: what the store holds and what it costs, from the store's listing,
its manifests and its index pages only: never a data pack, never a page map, so it
stays cheap on a large store.

* **The store**: one listing of every key gives its objects and bytes, as packs,
  manifests and the rest (config, inputs, tombstones, keys, leases).
* **Per tree, and in total**, over every checkpoint the store holds (forks too):
  - ``files`` and ``logical_bytes``: the newest main-line checkpoint's, what a restore writes;
  - ``history_bytes``: the tree's bytes added up over every checkpoint, what restoring
    each one would write; ``database_bytes``: the SQLite snapshots' part of it;
  - ``objects`` and ``stored_bytes``: the distinct records the tree names, as stored
    (index pages and their bases; file chunks, transcript segments and their bases;
    snapshots' page maps). A record two trees name counts in each, once in the total;
  - ``data_objects``, ``data_bytes`` and ``data_stored_bytes``: the file and transcript
    records among them, their payload bytes and their stored bytes;
  - ``dedup``: ``(history_bytes - database_bytes) / data_bytes``; ``compression``:
    ``data_bytes / data_stored_bytes`` (deltas against a base count as compression).
* A snapshot's database pages are records its page maps name, and stats reads no page
  map: they are in ``unattributed_bytes``, the packs' bytes no counted record accounts
  for (with records only expired checkpoints named, and packs no checkpoint names).
* **Growth**: each checkpoint's ``added_bytes`` and ``added_objects`` (its manifest
  says them), by UTC day, and their mean per day from the first day to the last.
* **Largest files**: the newest main-line checkpoint's files, transcripts and databases.

Reads: one listing; one GET per manifest; one GET per distinct index page of each tree
(a page is keyed by its pack and id, which fix its whole subtree: a subtree a later
checkpoint shares is counted once and not read again), and one per page delta's base
not kept from an earlier read (``RecordCache``). ``requests`` says what was made, as
counted by a ``CountingStore`` around the store. A manifest or tree that cannot be read
is passed over with a warning and named in ``skipped``: its numbers are left out.
"""

from __future__ import annotations

import datetime as _dt
import heapq

import msgspec

from ..format.index import Said, child_pages, decode_page, load_child
from ..format.model import KIND_FILE, KIND_JSONL, KIND_SQLITE, BlobRef, Manifest, Page
from ..report import SILENT, Reporter
from ..repository.repository import MANIFEST_PREFIX, PACK_PREFIX, RecordCache, Repository, manifest_key
from ..store.counting import CountingStore
from .view import DAMAGE

#: Bytes of whole index pages kept while the trees are walked (a page delta's base).
KEPT_BYTES = 8 << 20
#: The entry kinds ``largest`` lists.
LISTED_KINDS = (KIND_FILE, KIND_JSONL, KIND_SQLITE)


class Requests(msgspec.Struct, kw_only=True):
    """The store requests stats made (opening the store, before it, not counted)."""

    lists: int              # listings (one, of every key)
    manifest_gets: int      # one per manifest
    index_gets: int         # ranged GETs of packs: index pages and their bases, never data
    other_gets: int
    heads: int
    bytes_read: int


class TreeStats(msgspec.Struct, kw_only=True):
    """One tree's numbers, or the store's total (``name`` "total"); see the module docstring."""

    name: str
    checkpoints: int = 0
    files: int = 0
    logical_bytes: int = 0
    history_bytes: int = 0
    database_bytes: int = 0
    objects: int = 0
    stored_bytes: int = 0
    data_objects: int = 0
    data_bytes: int = 0
    data_stored_bytes: int = 0
    dedup: float | None = None
    compression: float | None = None


class Day(msgspec.Struct, kw_only=True):
    """What the checkpoints of one UTC day added to the store."""

    date: str
    checkpoints: int = 0
    added_bytes: int = 0
    added_objects: int = 0


class LargeFile(msgspec.Struct, kw_only=True):
    tree: str
    path: str
    kind: str
    size: int


class StoreStats(msgspec.Struct, kw_only=True):
    store: str
    objects: int = 0            # every key the listing holds
    bytes: int = 0
    packs: int = 0
    pack_bytes: int = 0
    manifests: int = 0
    manifest_bytes: int = 0
    other_objects: int = 0      # config, inputs, tombstones, keys, leases
    other_bytes: int = 0
    checkpoints: int = 0        # manifests read, forks included
    forks: int = 0
    newest: int | None = None   # the newest main-line checkpoint read
    first_time: str | None = None
    last_time: str | None = None
    trees: list[TreeStats] = []
    total: TreeStats = msgspec.field(default_factory=lambda: TreeStats(name="total"))
    unattributed_bytes: int = 0
    growth: list[Day] = []      # the days with checkpoints, oldest first
    days: int = 0               # from the oldest checkpoint's UTC day to the newest's, both counted
    bytes_per_day: float = 0.0  # the bytes added over ``days``
    largest: list[LargeFile] = []
    requests: Requests | None = None
    skipped: list[str] = []


def store_stats(repo: Repository, top: int = 10, reporter: Reporter = SILENT) -> StoreStats:
    """The store's numbers (see the module docstring), listing the ``top`` largest files.
    Reads only; never writes."""
    counted = CountingStore(repo.store)
    reader = Repository(counted, repo.info, codec=repo.codec, key_id=repo.key_id)
    result = StoreStats(store=repo.store.location)
    seqs = _count_listing(result, counted)
    tally = _Tally(reader, result, top)
    held: list[Manifest] = []   # forks newer than the newest main-line checkpoint: counted after it
    for done, seq in enumerate(reversed(seqs), 1):
        manifest = tally.manifest(seq)
        if manifest is not None and result.newest is None and manifest.is_fork:
            held.append(manifest)
        elif manifest is not None:
            for one in (manifest, *held):
                tally.add(one)
            held.clear()
        reporter.progress(done, len(seqs))
    for fork in held:   # a store of forks only
        tally.add(fork)
    tally.finish()
    result.requests = Requests(lists=counted.lists, manifest_gets=counted.gets["manifests"],
                               index_gets=counted.gets["packs"], heads=counted.heads, bytes_read=counted.bytes_read,
                               other_gets=sum(counted.gets.values()) - counted.gets["manifests"] - counted.gets["packs"])
    for note in result.skipped:
        reporter.warn(f"stats: {note}; its numbers are left out")
    return result


def _count_listing(result: StoreStats, store: CountingStore) -> list[int]:
    """Count the store's keys from one listing; the manifests' sequence numbers, ascending."""
    seqs = []
    for key, size in store.list_sizes(""):
        result.objects += 1
        result.bytes += size
        if key.startswith(PACK_PREFIX):
            result.packs += 1
            result.pack_bytes += size
        elif key.startswith(MANIFEST_PREFIX):
            result.manifests += 1
            result.manifest_bytes += size
            name = key[len(MANIFEST_PREFIX):]
            if name.isdigit() and manifest_key(int(name)) == key:
                seqs.append(int(name))
        else:
            result.other_objects += 1
            result.other_bytes += size
    return sorted(seqs)


class _Tree:
    """One tree's running numbers: its bit in ``_Tally.records``, and the database bytes
    under each distinct page it names (by pack and id: the page's whole subtree)."""

    def __init__(self, name: str, bit: int):
        self.stats = TreeStats(name=name)
        self.bit = bit
        self.seen: dict[tuple[str, str], int] = {}


class _Tally:
    """Every manifest's trees walked once per distinct subtree, each record counted once
    per tree that names it (``records``: its position -> the bits of those trees)."""

    def __init__(self, repo: Repository, result: StoreStats, top: int):
        self.repo, self.result, self.top = repo, result, top
        self.kept = RecordCache(KEPT_BYTES)
        self.trees: dict[str, _Tree] = {}
        self.records: dict[tuple[str, int], int] = {}
        self.days: dict[str, Day] = {}
        self.largest: list[tuple[int, str, str, str]] = []   # a min-heap of (size, tree, path, kind)
        self.first: tuple[int, str] | None = None    # (created_ns, created) of the oldest checkpoint
        self.last: tuple[int, str] | None = None

    def skip(self, note: str) -> None:
        self.result.skipped.append(note)

    def manifest(self, seq: int) -> Manifest | None:
        """Manifest ``seq``, or None (and a note in ``skipped``) when it cannot be read."""
        try:
            return self.repo.load_manifest(seq)[0]
        except DAMAGE as err:
            self.skip(f"checkpoint {seq} is unreadable ({err})")
            return None

    def add(self, manifest: Manifest) -> None:
        """Count one checkpoint; the first main-line one added is the newest."""
        newest = self.result.newest is None and not manifest.is_fork
        if newest:
            self.result.newest = manifest.seq
        self.result.checkpoints += 1
        self.result.forks += manifest.is_fork
        self._day(manifest)
        for name, root in sorted(manifest.trees.items()):
            tree = self.trees.get(name) or self.trees.setdefault(name, _Tree(name, 1 << len(self.trees)))
            stats = tree.stats
            stats.checkpoints += 1
            stats.history_bytes += root.bytes
            if newest:
                stats.files, stats.logical_bytes = root.files, root.bytes
            if root.root is None:
                continue
            try:
                stats.database_bytes += self._subtree(tree, root.root, None, newest)
            except DAMAGE as err:
                self.skip(f"tree {name} in checkpoint {manifest.seq} is unreadable ({err})")

    def _day(self, manifest: Manifest) -> None:
        date = _dt.datetime.fromtimestamp(manifest.created_ns / 1e9, _dt.timezone.utc).date().isoformat()
        day = self.days.get(date) or self.days.setdefault(date, Day(date=date))
        day.checkpoints += 1
        day.added_bytes += manifest.added_bytes
        day.added_objects += manifest.added_objects
        when = (manifest.created_ns, manifest.created)
        self.first = when if self.first is None else min(self.first, when)
        self.last = when if self.last is None else max(self.last, when)

    def _subtree(self, tree: _Tree, ref: BlobRef, said: Said | None, newest: bool) -> int:
        """Count the page at ``ref`` and, unless this tree counted it before, its subtree;
        the database bytes under it."""
        self._note(tree, ref, data=False)
        known = tree.seen.get((ref.pack, ref.id))
        if known is not None:
            return known
        page = load_child(ref, said, lambda r, key: self._load_page(tree, r, key))
        if page.level:
            found = sum(self._subtree(tree, child, what, newest) for child, what in child_pages(page, ref, said))
        else:
            found = self._leaf(tree, page, newest)
        tree.seen[(ref.pack, ref.id)] = found
        return found

    def _load_page(self, tree: _Tree, ref: BlobRef, key: str) -> Page:
        payload, base = self.repo.read_page(ref, self.kept)
        if base is not None:
            self._note(tree, base, data=False)
        return decode_page(payload, key)

    def _leaf(self, tree: _Tree, page: Page, newest: bool) -> int:
        databases = 0
        for e in page.entries:
            if e.kind == KIND_SQLITE:
                databases += e.size
            for ref in e.refs:
                self._note(tree, ref, data=e.kind != KIND_SQLITE)
            for base in e.bases:
                if base is not None:
                    self._note(tree, base, data=True)
            if newest and self.top and e.kind in LISTED_KINDS:
                item = (e.size, tree.stats.name, e.path, e.kind)
                if len(self.largest) < self.top:
                    heapq.heappush(self.largest, item)
                elif item > self.largest[0]:
                    heapq.heapreplace(self.largest, item)
        return databases

    def _note(self, tree: _Tree, ref: BlobRef, data: bool) -> None:
        """Count the record at ``ref`` for ``tree``, and for the total, once each."""
        at = (ref.pack, ref.offset)
        held = self.records.get(at, 0)
        if held & tree.bit:
            return
        self.records[at] = held | tree.bit
        _count(tree.stats, ref, data)
        if not held:
            _count(self.result.total, ref, data)

    def finish(self) -> None:
        result, total = self.result, self.result.total
        result.trees = [self.trees[name].stats for name in sorted(self.trees)]
        total.checkpoints = result.checkpoints
        for stats in result.trees:
            for field in ("files", "logical_bytes", "history_bytes", "database_bytes"):
                setattr(total, field, getattr(total, field) + getattr(stats, field))
        for stats in (*result.trees, total):
            _ratios(stats)
        result.unattributed_bytes = max(0, result.pack_bytes - total.stored_bytes)
        result.growth = [self.days[date] for date in sorted(self.days)]
        if result.growth:
            first, last = (_dt.date.fromisoformat(result.growth[i].date) for i in (0, -1))
            result.days = (last - first).days + 1
            result.bytes_per_day = sum(d.added_bytes for d in result.growth) / result.days
        if self.first is not None:
            result.first_time, result.last_time = self.first[1], self.last[1]
        result.largest = [LargeFile(tree=t, path=p, kind=k, size=s) for s, t, p, k in sorted(self.largest, reverse=True)]


def _count(stats: TreeStats, ref: BlobRef, data: bool) -> None:
    stats.objects += 1
    stats.stored_bytes += ref.length
    if data:
        stats.data_objects += 1
        stats.data_bytes += ref.size
        stats.data_stored_bytes += ref.length


def _ratios(stats: TreeStats) -> None:
    """``dedup`` and ``compression`` (None where nothing is stored to divide by)."""
    if stats.data_bytes:
        stats.dedup = (stats.history_bytes - stats.database_bytes) / stats.data_bytes
    if stats.data_stored_bytes:
        stats.compression = stats.data_bytes / stats.data_stored_bytes
