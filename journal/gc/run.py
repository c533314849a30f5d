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
   swept one at a time: a tombstone goes *before* what it names, and what of it still
   waits is named again in a new tombstone of its time and mark, so no tombstone ever
   names a pack or input key gc deleted (content uploaded again is never taken for
   that garbage).

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

**Sweeping its own marks** (``sweep_marked``, ``--grace 0 --yes``): the sweep takes the
tombstones this run writes as ripe too, after the ones it found: every expired
manifest is deleted first, then what only they reached, each tombstone before what it
names. It is two zero-grace runs back to back under one lease, less a listing: either
way the sweep walks every manifest committed since gc listed them before each batch,
and an orphan waits for the store to move past its mark (this run's mark, it never is).

**Forget** (``retention.Forget``): the mark alone, with every valid manifest kept but
the ones named, which are tombstoned as ``forgotten``: no later policy keeps them,
and a later gc past its grace deletes them and what only they reached.

``plan_gc`` decides and counts what gc would do now (``--dry-run`` prints it): a
``GcPlan``, a value. ``execute_gc`` runs a plan: it decides again from the plan's
policy, grace and time, goes on only when that gives the plan's decisions, and
streams the listings again, writing and deleting, holding the store's gc lease,
checking it before each destructive step and renewing it as it goes
(``gc/lease.py``). ``gc`` does both in one pass.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
import uuid
from array import array
from collections.abc import Callable, Iterator

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from .errors import GcPlanStale, SweepNeedsNoGrace
from ..format.codec import TOMBSTONE
from ..format.tombstone import (MANIFEST_KINDS, TOMBSTONE_ITEMS, TOMBSTONE_PREFIX, Chunk, ItemKind, LazyTombstone,
                                Tombstone, TombstoneItem, read_item, read_tombstone)
from ..report import SILENT, Reporter
from ..repository.repository import (MANIFEST_PREFIX, PACK_PREFIX, Repository, manifest_key, manifest_seq, pack_key,
                                     pack_of, utc_now)
from .delete import Deleter, named_pack
from .fate import Fate
from .inputs import InputPolicy, expired_inputs, input_fate
from .lease import LEASE_SECONDS, Lease
from .marks import each_tombstone, raw_items, read_marks
from .plan import GcPlan, GcResult
from .reach import Reach
from .retention import Forget, ManifestInfo, Policy, Verdict, check_policy, choose, verdicts
from .spill import Spill, Table

#: The sweep deletes at most this many keys per request (S3's DeleteObjects limit), each
#: batch right after a lease check, and a batch of packs right after listing manifests again.
DELETE_BATCH = 1000
#: Items a plan names (per list); the counts and bytes cover all of them.
SAMPLE_ITEMS = 100


def plan_gc(repo: Repository, policy: Policy, grace_seconds: float, reporter: Reporter = SILENT,
            now_ns: int | None = None, inputs: InputPolicy = InputPolicy(), *, sweep_marked: bool = False,
            explain: bool = False) -> GcPlan:
    """Decide and count what gc would do now; changes nothing. ``execute_gc`` runs the plan."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    with _Gc(repo, policy, grace_seconds, reporter, now_ns, inputs=inputs, sweep_marked=sweep_marked,
             explain=explain) as run:
        return run.run(GcResult())


def gc(repo: Repository, policy: Policy | Forget, grace_seconds: float, *, dry_run: bool = False,
       reporter: Reporter = SILENT, lease_seconds: float = LEASE_SECONDS,
       lease_clock: Callable[[], int] = time.time_ns, inputs: InputPolicy = InputPolicy(),
       now_ns: int | None = None, sweep_marked: bool = False, explain: bool = False) -> tuple[GcPlan, GcResult | None]:
    """Plan (and unless ``dry_run``, execute) one gc, in one pass; executing holds the
    lease (of ``lease_seconds`` by ``lease_clock``, renewed as it runs). ``inputs``: which
    stored inputs expire (default: none); ``now_ns``: the time retention counts from;
    ``sweep_marked``: sweep what this run marks too (only with a zero grace: else nothing
    it marks is ripe); ``explain``: say why of every checkpoint (``GcPlan.explained``).
    With ``policy`` a ``Forget``, only marks (``journal forget``)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    options = {"inputs": inputs, "sweep_marked": sweep_marked, "explain": explain}
    if dry_run:
        with _Gc(repo, policy, grace_seconds, reporter, now_ns, **options) as run:
            return run.run(GcResult()), None
    with Lease(repo.store, lease_seconds, lease_clock, repo.codec) as lease, \
            _Gc(repo, policy, grace_seconds, reporter, now_ns, lease, **options) as run:
        repo.store.sweep_temp()
        result = GcResult()
        return run.run(result), result


def execute_gc(repo: Repository, plan: GcPlan, lease: Lease, reporter: Reporter = SILENT) -> GcResult:
    """Run ``plan`` (from ``plan_gc``) holding ``lease``: gc decides again, with the plan's
    policy, grace and time, and goes on only when the store gives the plan's decisions
    (the same manifests, kept, expired and unreadable alike); else ``GcPlanStale``, and
    nothing is changed. Then tombstones, then the sweep."""
    with _Gc(repo, plan.policy, plan.grace_seconds, reporter, plan.now_ns, lease, inputs=plan.inputs,
             sweep_marked=plan.sweep_marked) as run:
        now = run.manifests
        if (now.seqs, now.kept, now.expire, now.unreadable) != (plan.known_seqs, plan.kept, plan.expire,
                                                                 plan.unreadable):
            raise GcPlanStale(plan.known_seqs, now.seqs)
        repo.store.sweep_temp()
        result = GcResult()
        run.run(result)
        return result


def check_sweep(grace_seconds: float, sweep_marked: bool) -> None:
    """Refuse a run told to sweep what it marks with a grace (``SweepNeedsNoGrace``):
    nothing it marks would be ripe."""
    if sweep_marked and grace_seconds != 0:
        raise SweepNeedsNoGrace(grace_seconds)


class _Tally:
    """A count, bytes and a bounded sample of what one list would hold."""

    def __init__(self) -> None:
        self.count = 0
        self.bytes = 0
        self.kinds: dict[ItemKind, int] = {}
        self.sample: list = []

    def add(self, item, nbytes: int = 0, kind: ItemKind | None = None) -> None:
        self.count += 1
        self.bytes += nbytes
        if kind is not None:
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if len(self.sample) < SAMPLE_ITEMS:
            self.sample.append(item)


def _newest_seq(repo: Repository) -> int:
    """The newest manifest sequence present now (one listing, streamed)."""
    return max(filter(None, map(manifest_seq, repo.store.list(MANIFEST_PREFIX))), default=0)


class _Manifests(msgspec.Struct, frozen=True, kw_only=True):
    """The manifests listed when gc started, and what retention decided of them."""

    sizes: dict[int, int]           # every manifest listed, with its size (the mark records the expired ones')
    seqs: list[int]                 # ... ascending
    present: frozenset[int]
    newest: int                     # 0: none
    valid: frozenset[int]           # those that decoded
    kept: dict[int, list[str]]      # kept by the policy, with why
    expire: list[int]               # valid and not kept
    unreadable: list[int]
    forks: dict[int, int] = {}      # the forks among them, with the checkpoint each was built on
    explained: list[Verdict] = []   # every one, newest first, with why (when asked)


class _Gc:
    """One gc: the decisions, made once from the manifests and the tombstones (here),
    then the streaming mark and sweep that apply them (``run``): holding ``lease``,
    writing and deleting; without it, counting only. A context manager: its spill (and
    the drafts of a dry run that sweeps its own marks) is closed on the way out."""

    def __init__(self, repo: Repository, policy: Policy | Forget, grace_seconds: float, reporter: Reporter,
                 now_ns: int, lease: Lease | None = None, inputs: InputPolicy = InputPolicy(), *,
                 sweep_marked: bool = False, explain: bool = False):
        self.forget = isinstance(policy, Forget)   # mark only, keeping every manifest not named
        if not self.forget:
            check_policy(policy, inputs_expire=not inputs.is_empty())
        check_sweep(grace_seconds, sweep_marked)
        self.repo = repo
        self.policy = policy
        self.inputs = inputs
        self.grace_seconds = grace_seconds
        self.reporter = reporter
        self.now_ns = now_ns
        self.lease = lease
        self.sweep_marked = sweep_marked and not self.forget
        self.explain = explain
        self.written: list[str] = []   # the tombstones this run wrote (swept too when ``sweep_marked``)
        # The tombstones a dry run sweeping its own marks would write, one a line, for its sweep to count.
        self.drafts = tempfile.TemporaryFile() if self.sweep_marked and lease is None else None
        self.spill = Spill()
        try:
            self.marks = read_marks(repo, self.spill, now_ns - int(grace_seconds * 1e9), reporter, self._keep)
            self.manifests = self._read_manifests()
            self.deleting = self._deleting()
            self.spill.seal()
            # What the kept manifests reach (``reached_by_kept``), then what every other
            # manifest that stays reaches too (``reach``).
            self.reach = Reach(repo)
            self.reached_by_kept, self.kept_samples = self._walk()
        except BaseException:
            self.__exit__()
            raise
        # Manifests committed after gc listed them are walked by the sweep (``Deleter.protect``).
        self.deleter = Deleter(repo, lease, set(self.manifests.seqs), DELETE_BATCH) if lease is not None else None

    def __enter__(self) -> "_Gc":
        return self

    def __exit__(self, *exc) -> None:
        self.spill.close()
        if self.drafts is not None:
            self.drafts.close()

    def _keep(self) -> None:
        """Renew the lease when it is due (a clock read until then); called throughout."""
        if self.lease is not None:
            self.lease.keep()

    # ------------------------------------------------------------------ decisions

    def _read_manifests(self) -> _Manifests:
        """Retention from one summary per manifest; the packs each names go to the spill.
        The sizes come with the listing (the mark records those of the expired ones)."""
        sizes = self.repo.manifest_sizes()
        seqs = sorted(sizes)
        infos: list[ManifestInfo] = []
        unreadable: list[int] = []
        names: dict[tuple[str, ...], tuple[str, ...]] = {}
        for seq in reversed(seqs):
            self._keep()
            try:
                manifest = self.repo.load_manifest(seq)[0]
            except (CorruptObject, ObjectNotFound):
                unreadable.append(seq)
                continue
            trees = tuple(sorted(manifest.trees))
            infos.append(ManifestInfo(seq=seq, created_ns=manifest.created_ns, trees=names.setdefault(trees, trees),
                                      fork_of=(manifest.parent or 0) if manifest.is_fork else None))
            self.spill.add(Table.UPLOADED, manifest.packs)
            del manifest  # one decoded manifest at a time: not this one while the next loads
        kept = choose(infos, self.marks.forgotten, self.policy, self.now_ns, set(sizes), unreadable)
        valid = frozenset(i.seq for i in infos)
        explained = verdicts(infos, kept, unreadable, self.policy, self.now_ns, self.marks.forgotten) \
            if self.explain else []
        return _Manifests(sizes=sizes, seqs=seqs, present=frozenset(seqs), newest=seqs[-1] if seqs else 0,
                          valid=valid, kept=kept, expire=sorted(valid - set(kept)), unreadable=sorted(unreadable),
                          forks={i.seq: i.fork_of for i in infos if i.fork_of is not None}, explained=explained)

    def _deleting(self) -> dict[int, TombstoneItem]:
        """The manifests the sweep deletes: those a ripe tombstone names, present and not
        kept now; and sweeping its own marks, every expired one (this run's tombstones name them)."""
        if self.forget:
            return {}   # forget sweeps nothing
        manifests = self.manifests
        deleting: dict[int, TombstoneItem] = {}
        for item in self.marks.ripe_manifests:
            seq = manifest_seq(item.key)
            if seq in manifests.present and seq not in manifests.kept:
                deleting.setdefault(seq, item)
        if self.sweep_marked:
            for seq in manifests.expire:
                deleting.setdefault(seq, self._expiry(seq))
        return deleting

    def _expiry(self, seq: int) -> TombstoneItem:
        """The tombstone item that expires manifest ``seq``: ``forgotten`` when this forget names it."""
        kind = ItemKind.FORGOTTEN if self.forget and seq in self.policy.seqs else ItemKind.MANIFEST
        return TombstoneItem(key=manifest_key(seq), kind=kind, bytes=self.manifests.sizes[seq])

    def _walk(self) -> tuple[frozenset[str], dict[str, str]]:
        """Walk what the kept manifests reach, then what every other manifest that stays
        reaches; returns the packs the kept ones reach, and why some of them are kept."""
        manifests = self.manifests
        for seq in sorted(manifests.kept, reverse=True):
            self._walk_one(seq)
        reached_by_kept = frozenset(self.reach.packs)
        kept_samples = {pack_key(p): why for p, why in self.reach.reasons.items()}
        if self.forget:
            return reached_by_kept, kept_samples   # the mark needs only these (nothing is swept)
        for seq in sorted(manifests.valid - set(manifests.kept) - set(self.deleting), reverse=True):
            self._walk_one(seq)  # expired but still present: still protects what it names
        return reached_by_kept, kept_samples

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

    def run(self, result: GcResult) -> GcPlan:
        """Mark, then sweep; holding the lease write and delete, else only count."""
        tomb, delete, finished = _Tally(), _Tally(), _Tally()
        doomed = [self.deleting[seq] for seq in sorted(self.deleting)]
        for item in doomed:   # counted first, as they go first
            delete.add(item, item.bytes)
        mark_seq = self._mark(tomb, result)
        waiting = 0 if self.forget else self._sweep(doomed, delete, finished, result)
        result.lease_renewals = self.lease.renewals if self.lease is not None else 0
        manifests = self.manifests
        return GcPlan(policy=self.policy, inputs=self.inputs, grace_seconds=self.grace_seconds, now_ns=self.now_ns,
                      newest_seq=manifests.newest, mark_seq=mark_seq, known_seqs=list(manifests.seqs),
                      kept=manifests.kept, expire=manifests.expire, unreadable=manifests.unreadable,
                      forks=manifests.forks,
                      tombstone=tomb.sample, tombstone_count=tomb.count, tombstone_bytes=tomb.bytes,
                      tombstone_kinds=tomb.kinds, delete=delete.sample, delete_count=delete.count,
                      bytes_freed=delete.bytes, waiting=waiting, finished_tombstones=finished.sample,
                      finished_count=finished.count, kept_samples=self.kept_samples,
                      sweep_marked=self.sweep_marked, explained=manifests.explained,
                      forgotten={seq: when for seq, when in self.marks.forgotten.items()
                                 if seq in manifests.present})

    def _mark(self, tally: _Tally, result: GcResult) -> int:
        """Tombstone every expired manifest and every pack no kept manifest reaches that no
        tombstone names yet, ``TOMBSTONE_ITEMS`` at a time while the listing streams.
        Returns the last tombstone's ``mark_seq``."""
        store, lease = self.repo.store, self.lease
        chunk = Chunk()
        mark_seq: int | None = None

        def add(item: TombstoneItem) -> None:
            tally.add(item, item.bytes, item.kind)
            if lease is not None or self.drafts is not None:
                chunk.add(item)
                if chunk.count >= TOMBSTONE_ITEMS:
                    flush()

        def flush() -> None:
            nonlocal mark_seq
            # Every pack of this chunk has been listed, so a checkpoint that uploaded one
            # of them (before it was listed) has a parent no newer than the newest
            # manifest listed from here on: that is this chunk's mark_seq.
            mark_seq = _newest_seq(self.repo)
            if lease is None:   # a dry run that sweeps its own marks: drafted, for its sweep to count
                self.drafts.write(chunk.record(self._header(mark_seq)) + b"\n")
                return
            lease.check()
            self._put_tombstone(chunk, mark_seq, result)

        for seq in self.manifests.expire:
            item = self._expiry(seq)
            if item.kind == ItemKind.FORGOTTEN:   # forgotten even if an expiry names it already
                if seq not in self.marks.forgotten:
                    add(item)
            elif item.key not in self.marks.marked_manifests:
                add(item)
        # What the tombstones name that this listing lacks is gone: the sweep skips it.
        self.spill.clear(Table.GONE)
        gone = self.spill.batch(Table.GONE)
        uploaded = self.spill.ascending(Table.UPLOADED)
        marked = self.spill.ascending(Table.MARKED, missed=gone)
        odd = 0
        for key, size in store.list_sizes(PACK_PREFIX):
            self._keep()
            pid = pack_of(key)
            if pid is None:
                odd += 1  # not a pack name journal writes: left alone
                continue
            if pid in marked or pid in self.reached_by_kept:  # (marked is asked first: every pack, in order)
                continue
            add(TombstoneItem(key=key, kind=ItemKind.PACK if pid in uploaded else ItemKind.ORPHAN, bytes=size))
        marked.finish()
        gone.flush()
        self._mark_inputs(add)
        if chunk.count:
            flush()
        if odd:
            self.reporter.warn(f"gc: left alone {odd} key(s) under {PACK_PREFIX} that are not pack names")
        return _newest_seq(self.repo) if mark_seq is None else mark_seq

    def _mark_inputs(self, add: Callable[[TombstoneItem], None]) -> None:
        """Tombstone the keys under ``inputs/`` the input policy lets go (``gc/inputs.py``)
        that no tombstone names yet; the sweep deletes what it still lets go then."""
        expired = self.spill.batch(Table.INPUTS_EXPIRED)
        for key, size in expired_inputs(self.repo.store, self.inputs, self.now_ns, self.reporter, self._keep,
                                        self.repo.codec):
            expired(key)
            if not self.spill.has(Table.INPUTS_MARKED, key):
                add(TombstoneItem(key=key, kind=ItemKind.INPUT, bytes=size))
        expired.flush()

    def _put_tombstone(self, chunk: Chunk, mark_seq: int, result: GcResult, header: Tombstone | None = None) -> None:
        """Write ``chunk`` as a new tombstone: made now, or (``header``) again with what an
        older one of that time and mark still names (counted as rewritten)."""
        count = chunk.count
        rewrite = header is not None
        header = header or self._header(mark_seq)
        record = chunk.record(header)
        key = f"{TOMBSTONE_PREFIX}{header.created_ns:020d}-{uuid.uuid4().hex[:8]}"
        self.repo.store.put_if_absent(key, self.repo.codec.seal(record, TOMBSTONE))
        if rewrite:
            result.tombstones_rewritten += 1
            return
        self.written.append(key)
        result.tombstone_key = result.tombstone_key or key
        result.tombstones_written += 1
        result.tombstoned += count

    @staticmethod
    def _header(mark_seq: int) -> Tombstone:
        """A new tombstone's header, made now (its items are added as encoded)."""
        return Tombstone(created=utc_now(), created_ns=time.time_ns(), host=os.uname().nodename, mark_seq=mark_seq,
                         items=[])

    def _sweep(self, manifests: list[TombstoneItem], delete: _Tally, finished: _Tally, result: GcResult) -> int:
        """Delete what the ripe tombstones name and nothing present reaches: the expired
        manifests first, then each ripe tombstone's packs and input keys, one tombstone at
        a time. A tombstone goes *before* the packs and input keys it names are deleted,
        and what still waits is named again in a new tombstone of the same time and mark
        (``_retire``), so no tombstone ever names a pack or input key this gc deleted:
        content uploaded again later is never taken for that old garbage (design §16).
        (Expired manifests go first, and a tombstone may name one gone: a manifest key is
        never written again, and the next sweep finds it resolved.) Sweeping its own marks,
        this run's tombstones follow the ripe ones. Returns the number of orphans that wait
        for the store to move past their mark."""
        ripe = self.marks.ripe
        if self.lease is not None:
            self.deleter.items(manifests, result)
        waiting = 0
        stones: list[str] = []  # resolved tombstones naming nothing to delete: deleted a batch at a time
        done, total = 0, len(ripe) + len(self.written)
        own = self._own_tombstones() if self.sweep_marked else ()
        found = each_tombstone(self.repo, ripe, self.reporter)
        for key, stone in itertools.chain(found, own):  # (not enumerate: it would hold the last one)
            done += 1
            waiting += self._sweep_one(key, stone, delete, finished, stones, result)
            del stone  # one tombstone at a time: not this one while the next loads
            if self.lease is not None:
                if len(stones) >= DELETE_BATCH:
                    self.deleter.tombstones(stones, result)
                self.reporter.progress(done, total)
        if stones:
            self.deleter.tombstones(stones, result)
        return waiting

    def _own_tombstones(self) -> Iterator[tuple[str, LazyTombstone]]:
        """The tombstones this run wrote (a dry run: drafted), one at a time."""
        if self.drafts is None:
            yield from each_tombstone(self.repo, list(self.written), self.reporter)
            return
        self.drafts.seek(0)
        for n, line in enumerate(self.drafts, 1):
            key = f"{TOMBSTONE_PREFIX}(this run's {n})"
            yield key, read_tombstone(line.rstrip(b"\n"), key)

    def _sweep_one(self, key: str, stone: LazyTombstone, delete: _Tally, finished: _Tally, stones: list[str],
                   result: GcResult) -> int:
        """Sweep one ripe tombstone: judge each item (``_fate``); when any is resolved or
        deleted, retire the tombstone, then delete its packs and input keys
        ``DELETE_BATCH`` at a time, decoding again only those (their places are noted,
        four bytes each), so no more than one batch is held decoded. A tombstone whose
        items are all resolved and name nothing to delete joins ``stones`` (deleted in
        bulk). Returns the number of its orphans that wait."""
        stay = Chunk()  # the items that wait or are kept, as encoded in the tombstone
        doomed = array("I")  # the places of the items to delete (3,000 at most in a tombstone gc wrote)
        waiting, changed = 0, False
        for at, (raw, item) in enumerate(raw_items(key, stone, self.reporter)):
            self._keep()
            fate = self._fate(item, stone.mark_seq)
            waiting += fate == Fate.WAIT
            if fate in (Fate.WAIT, Fate.KEEP):
                stay.add_raw(raw)
                continue
            changed = True
            if fate == Fate.DELETE:
                delete.add(item, item.bytes)
                doomed.append(at)
        if not stay.count:
            finished.add(key)
        if self.lease is None or not changed:
            return waiting
        if not stay.count and not doomed:
            stones.append(key)
            return waiting
        self._retire(key, stone, stay, result)
        packs: list[TombstoneItem] = []
        inputs: list[TombstoneItem] = []
        for at in doomed:
            self._keep()
            item = read_item(stone.items[at], key)  # (it decoded a moment ago)
            batch = inputs if item.kind == ItemKind.INPUT else packs
            batch.append(item)
            if len(batch) >= DELETE_BATCH:
                self._delete(batch, result)
                batch.clear()
        for batch in (packs, inputs):
            if batch:
                self._delete(batch, result)
        return waiting

    def _delete(self, batch: list[TombstoneItem], result: GcResult) -> None:
        """One request's worth of a swept tombstone's keys: packs (after the manifests
        are listed again) or input keys."""
        if batch[0].kind == ItemKind.INPUT:
            self.deleter.items(batch, result)
        else:
            self.deleter.packs(batch, result)

    def _retire(self, key: str, stone: LazyTombstone, stay: Chunk, result: GcResult) -> None:
        """Delete tombstone ``key`` now, in a request of its own, before anything it names;
        then write what of it waits (``stay``) as a new tombstone with its time and mark.
        A crash in between leaves keys no tombstone names: the next mark names them again
        (their grace starts over), so it delays, and never deletes."""
        self.deleter.tombstones([key], result)
        if stay.count:
            self.lease.check()
            self._put_tombstone(stay, stone.mark_seq, result,
                                header=Tombstone(created=stone.created, created_ns=stone.created_ns,
                                                 host=stone.host, mark_seq=stone.mark_seq, items=[]))

    def _fate(self, item: TombstoneItem | None, mark_seq: int) -> Fate:
        """What the sweep does with one item of a ripe tombstone (of ``mark_seq``); see ``Fate``."""
        if item is None:
            return Fate.KEEP
        if item.kind == ItemKind.INPUT:
            return input_fate(item.key, lambda key: self.spill.has(Table.INPUTS_EXPIRED, key))
        if item.kind in MANIFEST_KINDS:
            seq = manifest_seq(item.key)
            manifests = self.manifests
            if seq in manifests.present and seq not in self.deleting and seq not in manifests.kept:
                return Fate.KEEP
            return Fate.DONE
        pack = named_pack(item)
        if pack in self.reach.packs or self.spill.has(Table.GONE, pack):
            return Fate.DONE
        if item.kind == ItemKind.ORPHAN and self.manifests.newest <= mark_seq:
            return Fate.WAIT  # the store has not moved past its mark yet
        return Fate.DELETE
