"""Garbage collection: an explicit, two-phase tombstone pass. Never run by checkpoint.

1. **Mark.** Retention (``gc/retention.py``) chooses the manifests to keep. Every
   manifest it does not keep, and every pack no kept manifest reaches, is named in
   new immutable tombstones (``tombstones/<ns>-<id>``), at most ``TOMBSTONE_ITEMS``
   items each, written while the pack listing streams. Each records the time and
   its ``mark_seq``: the newest manifest sequence listed right after the last pack
   it names was listed.
2. **Sweep.** A key named by a tombstone older than ``grace`` is deleted only if no
   manifest reaches it: none present when gc started (kept, or expired but not yet
   swept), and none committed since (packs go in batches of at most ``DELETE_BATCH``,
   one tombstone's at a time, and just before each batch is sent the manifests are
   listed again and new ones walked). A pack that no manifest had ever uploaded at
   marking time (an *orphan*: a crashed or
   in-progress checkpoint's) is deleted only once the store has moved past the
   tombstone's ``mark_seq``, so the checkpoint that was uploading it has either
   committed (and its manifest now protects it) or can never commit. Manifests are
   deleted before packs (references before objects); then the ripe tombstones are
   swept one at a time, each deleted (in a later batch) once all it names is resolved.

**Requests.** No HEAD per object: sizes come with the listings (``Store.list_sizes``),
and the sweep knows what is already gone from the mark's pack listing of the same
run (what the tombstones name and that listing lacks). Skipping a pack that came back
after that listing is safe: it is not deleted this time (``docs/design.md`` §16).
Deletions go at most ``DELETE_BATCH`` keys per ``Store.delete_many`` call (one
DeleteObjects request on S3), each right after a lease check.

**Memory.** gc holds what grows with the manifests and with the data they reach,
never with the garbage: per manifest its sequence, size, time and tree names
(retention) and the packs and pages the walked manifests reach; one tombstone (at
most ``TOMBSTONE_ITEMS`` items) at a time. The sets that grow with the garbage, the
packs some manifest uploaded, the packs some tombstone already names and those of
them the pack listing lacks, go to a private temporary SQLite database on disk
(``gc/spill.py``), read back in ascending order, merged in step with the (ascending)
pack listing, or looked up. A plan holds counts, bytes and a sample of
``SAMPLE_ITEMS`` items, not every item.

``plan_gc`` decides and counts what gc would do now (``--dry-run`` prints it);
``execute_gc`` runs a plan: it streams the listings again under the plan's
decisions (kept manifests, what they reach, the ripe tombstones), writing and
deleting, holding the store's gc lease, checking it before each destructive step
and renewing it as it goes (``gc/lease.py``). ``gc`` does both in one pass.
"""

from __future__ import annotations

import os
import re
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from ..format.inputs import parse_key as parse_input_key
from .inputs import InputPolicy, expired_inputs, input_fate
from .lease import LEASE_SECONDS, Lease
from ..repository.pack import pack_key
from .reach import Reach
from ..report import SILENT, Reporter
from ..repository.repository import MANIFEST_PREFIX, PACK_PREFIX, SEQ_WIDTH, Repository, manifest_key, utc_now
from .retention import ManifestInfo, Policy, choose_kept
from .spill import Spill
from ..store.base import Store
from ..format.tombstone import (TOMBSTONE_ITEMS, TOMBSTONE_PREFIX, Chunk, Item, LazyTombstone, Tombstone, read_item,
                                read_tombstone)

#: The sweep deletes at most this many keys per request (S3's DeleteObjects limit), each
#: batch right after a lease check, and a batch of packs right after listing manifests again.
DELETE_BATCH = 1000
#: When a bulk delete fails and is redone key by key, the manifests are listed again
#: every this many single requests (and the lease is checked before each).
FALLBACK_RELIST = 32
#: Items a plan names (per list); the counts and bytes cover all of them.
SAMPLE_ITEMS = 100

_PACK_KEY = re.compile(r"packs/([0-9a-f]{2})/\1[0-9a-f]{62}")


class GcPlan(msgspec.Struct, frozen=True, kw_only=True, weakref=True):
    """What gc decided: the manifests kept and expired, and what it tombstones and deletes
    (counts, bytes, and the first ``SAMPLE_ITEMS`` of each list)."""

    grace_seconds: float
    newest_seq: int               # the newest manifest when gc started (the orphan rule compares with it)
    mark_seq: int                 # the newest manifest listed after the last tombstoned pack was listed
    known_seqs: list[int]         # the manifests listed when gc started
    kept: dict[int, list[str]]
    expire: list[int]
    unreadable: list[int]
    tombstone: list[Item]         # a sample
    tombstone_count: int
    tombstone_bytes: int
    tombstone_kinds: dict[str, int]
    delete: list[Item]            # a sample: manifests first, then packs
    delete_count: int
    bytes_freed: int
    waiting: int                  # orphans named by ripe tombstones, kept until the store moves past mark_seq
    finished_tombstones: list[str]  # a sample
    finished_count: int
    kept_samples: dict[str, str]


class GcResult(msgspec.Struct, kw_only=True):
    tombstone_key: str | None = None    # the first tombstone this run wrote
    tombstones_written: int = 0
    tombstoned: int = 0                 # objects the new tombstones name
    deleted: int = 0
    bytes_freed: int = 0
    protected: int = 0                  # planned deletions skipped: a manifest committed meanwhile needs them
    tombstones_removed: int = 0
    lease_renewals: int = 0


def plan_gc(repo: Repository, policy: Policy, grace_seconds: float, reporter: Reporter = SILENT,
            now_ns: int | None = None, inputs: InputPolicy = InputPolicy()) -> GcPlan:
    """Decide and count what gc would do now; changes nothing. ``execute_gc`` can run it."""
    run = _Gc(repo, policy, grace_seconds, reporter, time.time_ns() if now_ns is None else now_ns, inputs=inputs)
    try:
        plan = run.run(None, GcResult())
    except BaseException:
        run.close()
        raise
    _attach(plan, run)
    return plan


def gc(repo: Repository, policy: Policy, grace_seconds: float, *, dry_run: bool = False,
       reporter: Reporter = SILENT, lease_seconds: float = LEASE_SECONDS,
       lease_clock: Callable[[], int] = time.time_ns, inputs: InputPolicy = InputPolicy(),
       now_ns: int | None = None) -> tuple[GcPlan, GcResult | None]:
    """Plan (and unless ``dry_run``, execute) one gc, in one pass; executing holds the
    lease (of ``lease_seconds`` by ``lease_clock``, renewed as it runs). ``inputs``: which
    stored inputs expire (default: none); ``now_ns``: the time retention counts from."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    if dry_run:
        run = _Gc(repo, policy, grace_seconds, reporter, now_ns, inputs=inputs)
        try:
            return run.run(None, GcResult()), None
        finally:
            run.close()
    with Lease(repo.store, lease_seconds, lease_clock) as lease:
        run = _Gc(repo, policy, grace_seconds, reporter, now_ns, lease, inputs=inputs)
        try:
            repo.store.sweep_temp()
            result = GcResult()
            return run.run(lease, result), result
        finally:
            run.close()


def execute_gc(repo: Repository, plan: GcPlan, lease: Lease, reporter: Reporter = SILENT) -> GcResult:
    """Run ``plan`` (from ``plan_gc`` in this process) once: tombstones, then the sweep."""
    run = _RUNS.pop(id(plan), None)
    if run is None:
        raise ValueError("execute_gc: this plan was not made by plan_gc in this process, or was run already")
    try:
        run.repo, run.reporter = repo, reporter
        repo.store.sweep_temp()
        result = GcResult()
        run.run(lease, result)
        return result
    finally:
        run.close()


# Plans made by plan_gc, with the state execute_gc needs (a plan is plain data).
_RUNS: dict[int, "_Gc"] = {}


def _attach(plan: GcPlan, run: "_Gc") -> None:
    _RUNS[id(plan)] = run
    weakref.finalize(plan, _forget, id(plan), run)


def _forget(key: int, run: "_Gc") -> None:
    if _RUNS.get(key) is run:
        del _RUNS[key]
    run.close()


class _Tally:
    """A count, bytes and a bounded sample of what one list would hold."""

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.kinds: dict[str, int] = {}
        self.sample: list = []

    def add(self, item, nbytes: int = 0, kind: str | None = None) -> None:
        self.count += 1
        self.bytes += nbytes
        if kind is not None:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if len(self.sample) < SAMPLE_ITEMS:
            self.sample.append(item)


def _pack_id(key: str) -> str | None:
    """The id of a well-formed pack key (``packs/<hh>/<64 hex>``), else None."""
    return key[9:] if _PACK_KEY.fullmatch(key) else None


def _key_problem(item: Item) -> bool:
    """Whether ``item``'s key is of the wrong shape for its kind (never deleted)."""
    if item.kind == "manifest":
        return _seq_of(item.key) is None
    if item.kind == "input":
        return parse_input_key(item.key) is None
    return _pack_id(item.key) is None


def _seq_of(key: str) -> int | None:
    name = key[len(MANIFEST_PREFIX):]
    if key.startswith(MANIFEST_PREFIX) and name.isdigit() and len(name) == SEQ_WIDTH:
        return int(name)
    return None


def _manifests(store: Store) -> Iterator[tuple[int, int]]:
    """``(seq, size)`` of every manifest present now (one listing, streamed)."""
    for key, size in store.list_sizes(MANIFEST_PREFIX):
        seq = _seq_of(key)
        if seq is not None:
            yield seq, size


def _newest_seq(repo: Repository) -> int:
    """The newest manifest sequence present now (one listing, streamed)."""
    return max(filter(None, map(_seq_of, repo.store.list(MANIFEST_PREFIX))), default=0)


class _Gc:
    """One gc: the decisions, made once from the manifests and the tombstones, then the
    streaming mark and sweep that apply them (counting only, or writing and deleting)."""

    def __init__(self, repo: Repository, policy: Policy, grace_seconds: float, reporter: Reporter, now_ns: int,
                 lease: Lease | None = None, inputs: InputPolicy = InputPolicy()):
        if policy.is_empty() and inputs.is_empty():
            choose_kept([], policy, now_ns)  # raises the usage error naming the flags
        self.inputs = inputs
        self.repo = repo
        self.reporter = reporter
        self.grace_seconds = grace_seconds
        self.now_ns = now_ns
        self.lease = lease
        self.spill = Spill()
        self.closed = False
        try:
            self._read_manifests(policy)
            self._read_tombstones()
            self.spill.seal()
            self._walk()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.spill.close()

    def _keep(self) -> None:
        """Renew the lease when it is due (a clock read until then); called throughout."""
        if self.lease is not None:
            self.lease.keep()

    # ------------------------------------------------------------------ decisions

    def _read_manifests(self, policy: Policy) -> None:
        """Retention from one summary per manifest; the packs each names go to the spill.
        The sizes come with the listing (the mark records those of the expired ones)."""
        self.manifest_bytes = {seq: size for seq, size in _manifests(self.repo.store)}
        self.seqs = sorted(self.manifest_bytes)
        self.present = set(self.seqs)
        self.newest = self.seqs[-1] if self.seqs else 0
        infos: list[ManifestInfo] = []
        unreadable: list[int] = []
        names: dict[tuple[str, ...], tuple[str, ...]] = {}
        for seq in reversed(self.seqs):
            self._keep()
            try:
                manifest = self.repo.load_manifest(seq)[0]
            except (CorruptObject, ObjectNotFound):
                unreadable.append(seq)
                continue
            trees = tuple(sorted(manifest.trees))
            infos.append(ManifestInfo(seq=seq, created_ns=manifest.created_ns, trees=names.setdefault(trees, trees)))
            self.spill.add("uploaded", manifest.packs)
            del manifest  # one decoded manifest at a time: not this one while the next loads
        if policy.is_empty():   # only inputs expire (--keep-inputs-within alone)
            self.kept = {i.seq: ["no checkpoint retention given"] for i in infos}
        else:
            self.kept = choose_kept(infos, policy, self.now_ns) if infos else {}
        self.valid = {i.seq for i in infos}
        self.expire = sorted(self.valid - set(self.kept))
        self.unreadable = sorted(unreadable)

    def _tombstones(self, keys: Iterable[str]) -> Iterator[tuple[str, LazyTombstone]]:
        """Each readable tombstone of ``keys``, one at a time (its items still encoded)."""
        for key in keys:
            try:
                stone = read_tombstone(self.repo.store.get(key), key)
            except ObjectNotFound as err:
                self.reporter.warn(f"gc: ignoring unreadable tombstone {key}: {err}")
                continue
            except CorruptObject as err:
                self.reporter.warn(f"gc: ignoring unreadable tombstone {key}: {err.detail}")
                continue
            yield key, stone
            stone = None  # not held while the next one loads

    def _read_tombstones(self) -> None:
        """What tombstones name already (spilled), which are ripe, and the manifests the
        sweep deletes: ripe-tombstoned, present and not kept now."""
        cutoff = self.now_ns - int(self.grace_seconds * 1e9)
        self.ripe: list[str] = []
        self.marked_manifests: set[str] = set()
        self.deleting: dict[int, Item] = {}
        for key, stone in self._tombstones(self.repo.store.list(TOMBSTONE_PREFIX)):
            self._keep()
            ripe = stone.created_ns <= cutoff
            if ripe:
                self.ripe.append(key)
            inputs: list[str] = []
            self.spill.add("marked", self._marked_packs(key, stone, ripe, inputs))
            self.spill.add("inputs_marked", inputs)
            del stone  # one tombstone at a time: not this one while the next loads

    def _marked_packs(self, key: str, stone: LazyTombstone, ripe: bool, inputs: list[str]) -> Iterator[str]:
        """The ids of the packs ``stone`` names; notes the manifests and adds the input
        keys it names (to ``inputs``) on the way."""
        for item in self._items(key, stone):
            if item is None:
                continue
            if item.kind == "input":
                inputs.append(item.key)
            elif item.kind == "manifest":
                self.marked_manifests.add(item.key)
                seq = _seq_of(item.key)
                if ripe and seq in self.present and seq not in self.kept:
                    self.deleting.setdefault(seq, item)
            else:
                yield item.key.rsplit("/", 1)[-1]

    def _items(self, key: str, stone: LazyTombstone) -> Iterator[Item | None]:
        """The items of ``stone``, decoded one at a time; ``None`` for one that does not decode."""
        for raw in stone.items:
            try:
                item = read_item(raw, key)
            except CorruptObject as err:
                self.reporter.warn(f"gc: tombstone {key}: ignoring an {err.detail}")
                yield None
                continue
            if _key_problem(item):
                # A key of the wrong shape for its kind (the store's config, a manifest named
                # as a pack) is never deleted: the item is kept unresolved.
                self.reporter.warn(f"gc: tombstone {key}: ignoring an item naming {item.key!r} as a {item.kind}")
                yield None
                continue
            yield item

    def _walk(self) -> None:
        """What the kept manifests reach, then what every other manifest that stays reaches."""
        self.reach = Reach(self.repo)
        for seq in sorted(self.kept, reverse=True):
            self._walk_one(seq)
        self.reached_by_kept = frozenset(self.reach.packs)
        self.kept_samples = {pack_key(p): why for p, why in self.reach.reasons.items()}
        for seq in sorted(self.valid - set(self.kept) - set(self.deleting), reverse=True):
            self._walk_one(seq)  # expired but still present: still protects what it names
        # Manifests committed after gc listed them are walked by the sweep (``_protect``).
        self.accounted = set(self.seqs)
        self.fresh: Reach | None = None

    def _walk_one(self, seq: int) -> None:
        """Walk manifest ``seq`` again (gc keeps only a summary of each manifest)."""
        self._keep()
        try:
            manifest = self.repo.load_manifest(seq)[0]
        except ObjectNotFound:  # only a dry run, holding no lease, can see this
            self.reporter.warn(f"gc: manifest {seq} vanished while gc ran")
            return
        self.reach.walk(manifest)

    # ------------------------------------------------------------------ one pass

    def run(self, lease: Lease | None, result: GcResult) -> GcPlan:
        """Mark, then sweep; with ``lease`` write and delete, else only count."""
        tomb, delete, finished = _Tally(), _Tally(), _Tally()
        self.lease = lease
        mark_seq = self._mark(lease, tomb, result)
        waiting = self._sweep(lease, delete, finished, result)
        result.lease_renewals = lease.renewals if lease is not None else 0
        return GcPlan(grace_seconds=self.grace_seconds, newest_seq=self.newest, mark_seq=mark_seq,
                      known_seqs=list(self.seqs), kept=self.kept, expire=self.expire, unreadable=self.unreadable,
                      tombstone=tomb.sample, tombstone_count=tomb.count, tombstone_bytes=tomb.bytes,
                      tombstone_kinds=tomb.kinds, delete=delete.sample, delete_count=delete.count,
                      bytes_freed=delete.bytes, waiting=waiting, finished_tombstones=finished.sample,
                      finished_count=finished.count, kept_samples=self.kept_samples)

    def _mark(self, lease: Lease | None, tally: _Tally, result: GcResult) -> int:
        """Tombstone every expired manifest and every pack no kept manifest reaches that no
        tombstone names yet, ``TOMBSTONE_ITEMS`` at a time while the listing streams.
        Returns the last tombstone's ``mark_seq``."""
        store = self.repo.store
        chunk = Chunk()
        mark_seq: int | None = None

        def add(item: Item) -> None:
            tally.add(item, item.bytes, item.kind)
            if lease is not None:
                chunk.add(item)
                if chunk.count >= TOMBSTONE_ITEMS:
                    flush()

        def flush() -> None:
            nonlocal mark_seq
            # Every pack of this chunk has been listed, so a checkpoint that uploaded one
            # of them (before it was listed) has a parent no newer than the newest
            # manifest listed from here on: that is this chunk's mark_seq.
            mark_seq = _newest_seq(self.repo)
            lease.check()
            self._put_tombstone(chunk, mark_seq, result)

        for seq in self.expire:
            key = manifest_key(seq)
            if key not in self.marked_manifests:
                add(Item(key=key, kind="manifest", bytes=self.manifest_bytes[seq]))
        # What the tombstones name that this listing lacks is gone: the sweep skips it.
        self.spill.clear("gone")
        gone = self.spill.batch("gone")
        uploaded, marked = self.spill.ascending("uploaded"), self.spill.ascending("marked", missed=gone)
        odd = 0
        for key, size in store.list_sizes(PACK_PREFIX):
            self._keep()
            pid = _pack_id(key)
            if pid is None:
                odd += 1  # not a pack name journal writes: left alone
                continue
            if pid in marked or pid in self.reached_by_kept:  # (marked is asked first: every pack, in order)
                continue
            add(Item(key=key, kind="pack" if pid in uploaded else "orphan", bytes=size))
        marked.finish()
        gone.flush()
        self._mark_inputs(add)
        if chunk.count:
            flush()
        if odd:
            self.reporter.warn(f"gc: left alone {odd} key(s) under {PACK_PREFIX} that are not pack names")
        return _newest_seq(self.repo) if mark_seq is None else mark_seq

    def _mark_inputs(self, add: Callable[[Item], None]) -> None:
        """Tombstone the keys under ``inputs/`` the input policy lets go (``gc/inputs.py``)
        that no tombstone names yet; the sweep deletes what it still lets go then."""
        expired = self.spill.batch("inputs_expired")
        for key, size in expired_inputs(self.repo.store, self.inputs, self.now_ns, self.reporter, self._keep):
            expired(key)
            if not self.spill.has("inputs_marked", key):
                add(Item(key=key, kind="input", bytes=size))
        expired.flush()

    def _put_tombstone(self, chunk: Chunk, mark_seq: int, result: GcResult) -> None:
        now = time.time_ns()
        count = chunk.count
        record = chunk.record(Tombstone(created=utc_now(), created_ns=now, host=os.uname().nodename,
                                        mark_seq=mark_seq, items=[]))
        key = f"{TOMBSTONE_PREFIX}{now:020d}-{uuid.uuid4().hex[:8]}"
        self.repo.store.put_if_absent(key, record)
        result.tombstone_key = result.tombstone_key or key
        result.tombstones_written += 1
        result.tombstoned += count

    def _sweep(self, lease: Lease | None, delete: _Tally, finished: _Tally, result: GcResult) -> int:
        """Delete what the ripe tombstones name and nothing present reaches: the expired
        manifests first, then each ripe tombstone's packs, and the tombstones once their
        packs are gone. Returns the number of orphans that wait for the store to move
        past their mark."""
        manifests = [self.deleting[seq] for seq in sorted(self.deleting)]
        for item in manifests:
            delete.add(item, item.bytes)
        if lease is not None:
            self._delete_items(lease, manifests, result)
        waiting = 0
        stones: list[str] = []  # finished tombstones, deleted a batch at a time after their packs
        done = 0
        for key, stone in self._tombstones(self.ripe):  # (not enumerate: it would hold the last one)
            done += 1
            waits, resolved, revived = self._sweep_one(lease, key, stone, delete, result)
            waiting += waits
            del stone  # one tombstone at a time: not this one while the next loads
            if resolved:
                finished.add(key)
                if lease is not None and not revived:
                    stones.append(key)
            if lease is not None:
                if len(stones) >= DELETE_BATCH:
                    self._delete_tombstones(lease, stones, result)
                self.reporter.progress(done, len(self.ripe))
        if stones:
            self._delete_tombstones(lease, stones, result)
        return waiting

    def _sweep_one(self, lease: Lease | None, key: str, stone: LazyTombstone, delete: _Tally,
                   result: GcResult) -> tuple[int, bool, bool]:
        """Delete the packs of one ripe tombstone, ``DELETE_BATCH`` at a time. Returns the
        number of its orphans that wait, whether all it names is resolved, and whether a
        manifest committed during the run needs some of it (the tombstone then stays)."""
        resolved, revived, waiting, batch, inputs = True, False, 0, [], []
        for item in self._items(key, stone):
            self._keep()
            fate = self._fate(item, stone.mark_seq)
            resolved = resolved and fate in ("done", "delete")
            waiting += fate == "wait"
            if fate != "delete":
                continue
            delete.add(item, item.bytes)
            if lease is None:
                continue
            if item.kind == "input":
                inputs.append(item)
                if len(inputs) >= DELETE_BATCH:
                    self._delete_items(lease, inputs, result)
                    inputs = []
                continue
            batch.append(item)
            if len(batch) >= DELETE_BATCH:
                revived |= self._delete_packs(lease, batch, result)
                batch = []
        if batch:
            revived |= self._delete_packs(lease, batch, result)
        if inputs:
            self._delete_items(lease, inputs, result)
        return waiting, resolved, revived

    def _fate(self, item: Item | None, mark_seq: int) -> str:
        """What the sweep does with one item of a ripe tombstone (of ``mark_seq``): ``delete``
        it; nothing, as it is resolved: ``done`` (a pack a manifest present at the start
        reaches, or gone when the mark listed packs; a manifest deleted first, gone, or
        kept by the policy); or nothing for now, so the tombstone stays: ``wait`` (an
        orphan whose checkpoint may still commit) or ``keep`` (an unreadable item, or an
        expired manifest that is not deleted this time)."""
        if item is None:
            return "keep"
        if item.kind == "input":
            return input_fate(item.key, lambda key: self.spill.has("inputs_expired", key))
        if item.kind == "manifest":
            seq = _seq_of(item.key)
            if seq in self.present and seq not in self.deleting and seq not in self.kept:
                return "keep"
            return "done"
        pack = item.key.rsplit("/", 1)[-1]
        if pack in self.reach.packs or self.spill.has("gone", pack):
            return "done"
        if item.kind == "orphan" and self.newest <= mark_seq:
            return "wait"  # the store has not moved past its mark yet
        return "delete"

    def _delete_packs(self, lease: Lease, batch: list[Item], result: GcResult) -> bool:
        """Delete the packs of ``batch`` that no manifest committed since gc started
        reaches, listing the manifests again (and walking new ones) just before; True
        when a manifest needs one of them (its tombstone then stays)."""
        self._protect()
        doomed = [item for item in batch if item.key.rsplit("/", 1)[-1] not in self.fresh.packs]
        result.protected += len(batch) - len(doomed)
        kept = self._delete_items(lease, doomed, result)
        return len(doomed) < len(batch) or kept > 0

    def _delete_items(self, lease: Lease, items: list[Item], result: GcResult) -> int:
        """Delete the packs (or manifests, or input keys) ``items``; returns how many a
        manifest committed meanwhile turned out to need (only found when a bulk request
        of packs is redone key by key)."""
        packs = any(item.kind != "input" for item in items)
        kept = set(self._delete_keys(lease, [item.key for item in items], packs=packs))
        gone = [item for item in items if item.key not in kept]
        result.deleted += len(gone)
        result.bytes_freed += sum(item.bytes for item in gone)
        result.protected += len(kept)
        return len(kept)

    def _delete_tombstones(self, lease: Lease, keys: list[str], result: GcResult) -> None:
        """Delete the resolved tombstones ``keys`` (every pack they name is gone); then empty it."""
        self._delete_keys(lease, keys)
        result.tombstones_removed += len(keys)
        keys.clear()

    def _delete_keys(self, lease: Lease, keys: list[str], packs: bool = False) -> list[str]:
        """``DELETE_BATCH`` keys per request, each request right after a lease check.
        A failed bulk request is redone key by key by the store, each single request
        after a lease check too and, for packs, after the manifests are listed again
        every ``FALLBACK_RELIST`` keys: a pack a new manifest needs is kept (returned)."""
        kept: list[str] = []
        for start in range(0, len(keys), DELETE_BATCH):
            lease.check()
            kept += self.repo.store.delete_many(keys[start:start + DELETE_BATCH],
                                                guard=self._single_guard(lease, packs)) or []
        return kept

    def _single_guard(self, lease: Lease, packs: bool):
        done = 0

        def guard(key: str) -> bool:
            nonlocal done
            lease.check()
            if not packs:
                return True
            if done % FALLBACK_RELIST == 0:
                self._protect()
            done += 1
            return key.rsplit("/", 1)[-1] not in self.fresh.packs

        return guard

    def _protect(self) -> None:
        """Walk the manifests committed since gc first listed them (each once)."""
        if self.fresh is None:
            self.fresh = Reach(self.repo)
        for seq in self.repo.manifest_seqs():
            self._keep()
            if seq in self.accounted:
                continue
            self.accounted.add(seq)
            try:
                manifest = self.repo.load_manifest(seq)[0]
            except (ObjectNotFound, CorruptObject):
                continue  # gone, or unreadable (restore skips it too): it needs nothing
            self.fresh.walk(manifest)
