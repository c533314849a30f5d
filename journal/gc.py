"""Garbage collection: an explicit, two-phase tombstone pass. Never run by checkpoint.

1. **Mark.** Retention (``retention.py``) chooses the manifests to keep. Every
   manifest it does not keep, and every pack no kept manifest reaches, is named in
   a new immutable tombstone (``tombstones/<ns>-<id>``) with the time and the newest
   manifest sequence at marking (``mark_seq``).
2. **Sweep.** A key named by a tombstone older than ``grace`` is deleted only if no
   manifest present now (kept, or expired but not yet swept) reaches it. A pack that
   no manifest had ever uploaded at marking time (an *orphan*: a crashed or
   in-progress checkpoint's) is deleted only once the store has moved past
   ``mark_seq``, so the checkpoint that was uploading it has either committed (and
   its manifest now protects it) or can never commit. Manifests are deleted before
   packs (references before objects); a tombstone is deleted when all it names is
   resolved.

``plan_gc`` returns a frozen plan; ``--dry-run`` prints it; ``execute_gc`` runs it,
holding the store's gc lease and checking it before each destructive step.
"""

from __future__ import annotations

import socket
import time
import uuid

import msgspec

from .errors import ObjectNotFound
from .lease import Lease
from .pack import pack_key
from .reach import Reach
from .report import SILENT, Reporter
from .repository import PACK_PREFIX, Repository, manifest_key, utc_now
from .retention import Policy, choose_kept

TOMBSTONE_PREFIX = "tombstones/"
LEASE_CHECK_EVERY = 32


class Item(msgspec.Struct, frozen=True, array_like=True):
    key: str
    kind: str       # "manifest" | "pack" | "orphan"
    bytes: int


class Tombstone(msgspec.Struct, frozen=True, kw_only=True):
    version: int = 1
    created: str
    created_ns: int
    host: str
    mark_seq: int
    items: list[Item]


class GcPlan(msgspec.Struct, frozen=True, kw_only=True):
    grace_seconds: float
    newest_seq: int
    mark_seq: int                 # newest manifest listed *after* the packs were listed
    known_seqs: list[int]         # manifests the plan walked or saw
    kept: dict[int, list[str]]
    expire: list[int]
    unreadable: list[int]
    tombstone: list[Item]
    delete: list[Item]
    finished_tombstones: list[str]
    bytes_freed: int
    kept_samples: dict[str, str]


class GcResult(msgspec.Struct, kw_only=True):
    tombstone_key: str | None = None
    deleted: int = 0
    bytes_freed: int = 0
    tombstones_removed: int = 0


def plan_gc(repo: Repository, policy: Policy, grace_seconds: float, reporter: Reporter = SILENT,
            now_ns: int | None = None) -> GcPlan:
    """Decide what gc would do now; changes nothing."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    seqs = repo.manifest_seqs()
    valid, unreadable = {}, []
    for seq, manifest, _ in repo.iter_manifests_desc(seqs):
        if manifest is None:
            unreadable.append(seq)
        else:
            valid[seq] = manifest
    kept = choose_kept(list(valid.values()), policy, now_ns) if valid else {}
    stones = list(_load_tombstones(repo, reporter))
    ripe = [(k, t) for k, t in stones if t.created_ns <= now_ns - int(grace_seconds * 1e9)]
    newest = seqs[-1] if seqs else 0
    present = set(valid) | set(unreadable)
    deleting = {seq for _, t in ripe for i in t.items if i.kind == "manifest"
                for seq in [_seq_of(i.key)] if seq in present and seq not in kept}
    reach = Reach(repo)
    for seq in sorted(kept, reverse=True):
        reach.walk(valid[seq])
    reached_by_kept = set(reach.packs)
    for seq in sorted(set(valid) - set(kept) - deleting, reverse=True):
        reach.walk(valid[seq])  # expired but still present: still protects what it names
    delete, finished = _sweep(repo, ripe, valid, unreadable, kept, deleting, reach.packs, newest)
    marked = {i.key for _, t in stones for i in t.items}
    uploaded = {p for m in valid.values() for p in m.packs}
    tomb = [Item(key=manifest_key(s), kind="manifest", bytes=repo.store.head(manifest_key(s)) or 0)
            for s in sorted(set(valid) - set(kept)) if manifest_key(s) not in marked]
    for key in repo.store.list(PACK_PREFIX):
        pack = key.rsplit("/", 1)[-1]
        if pack not in reached_by_kept and key not in marked:
            tomb.append(Item(key=key, kind="pack" if pack in uploaded else "orphan",
                             bytes=repo.store.head(key) or 0))
    # A checkpoint uploading the packs just listed has a parent no newer than this.
    after = repo.manifest_seqs()
    return GcPlan(grace_seconds=grace_seconds, newest_seq=newest, mark_seq=after[-1] if after else 0,
                  known_seqs=sorted(set(seqs) | set(after)), kept=kept, expire=sorted(set(valid) - set(kept)),
                  unreadable=sorted(unreadable), tombstone=tomb, delete=delete, finished_tombstones=finished,
                  bytes_freed=sum(i.bytes for i in delete),
                  kept_samples={pack_key(p): why for p, why in reach.reasons.items()})


def _seq_of(key: str) -> int:
    return int(key.rsplit("/", 1)[1])


def _sweep(repo, ripe, valid, unreadable, kept, deleting, reached, newest) -> tuple[list[Item], list[str]]:
    delete: list[Item] = []
    finished: list[str] = []
    present_manifests = set(valid) | set(unreadable)
    for key, stone in ripe:
        resolved = True
        for item in stone.items:
            if item.kind == "manifest":
                seq = _seq_of(item.key)
                if seq in deleting:
                    delete.append(item)
                elif seq in present_manifests:
                    resolved = resolved and seq in kept  # revived by the policy: nothing to do
                continue
            pack = item.key.rsplit("/", 1)[-1]
            if pack in reached or repo.store.head(item.key) is None:
                continue  # revived by a newer manifest, or already gone
            if item.kind == "orphan" and newest <= stone.mark_seq:
                resolved = False  # its checkpoint may still commit: wait for the store to move on
                continue
            delete.append(item)
        if resolved:
            finished.append(key)
    # References before objects: manifests first, then packs.
    delete.sort(key=lambda i: (i.kind != "manifest", i.key))
    return delete, finished


def _load_tombstones(repo: Repository, reporter: Reporter):
    for key in repo.store.list(TOMBSTONE_PREFIX):
        try:
            yield key, msgspec.json.decode(repo.store.get(key), type=Tombstone)
        except (ObjectNotFound, msgspec.DecodeError, msgspec.ValidationError) as err:
            reporter.warn(f"gc: ignoring unreadable tombstone {key}: {err}")


def gc(repo: Repository, policy: Policy, grace_seconds: float, *, dry_run: bool = False,
       reporter: Reporter = SILENT) -> tuple[GcPlan, GcResult | None]:
    """Plan (and unless ``dry_run``, execute) one gc; planning and executing hold the lease."""
    if dry_run:
        return plan_gc(repo, policy, grace_seconds, reporter), None
    with Lease(repo.store) as lease:
        plan = plan_gc(repo, policy, grace_seconds, reporter)
        return plan, execute_gc(repo, plan, lease, reporter)


def execute_gc(repo: Repository, plan: GcPlan, lease: Lease, reporter: Reporter = SILENT) -> GcResult:
    """Run ``plan`` once: write the new tombstone, then sweep (manifests, packs, tombstones)."""
    result = GcResult()
    repo.store.sweep_temp()
    if plan.tombstone:
        now = time.time_ns()
        stone = Tombstone(created=utc_now(), created_ns=now, host=socket.gethostname(),
                          mark_seq=plan.mark_seq, items=plan.tombstone)
        result.tombstone_key = f"{TOMBSTONE_PREFIX}{now:020d}-{uuid.uuid4().hex[:8]}"
        repo.store.put_if_absent(result.tombstone_key, msgspec.json.encode(stone))
    protected: set[str] = set()
    packs_started = 0
    for done, item in enumerate(plan.delete, 1):
        if done % LEASE_CHECK_EVERY == 1:
            lease.check()
        if item.kind != "manifest":
            # Just before the first pack and every so often: what did checkpoints
            # committed since the plan start to need?
            if packs_started % LEASE_CHECK_EVERY == 0:
                protected |= _packs_of_new_manifests(repo, plan)
            packs_started += 1
            if item.key.rsplit("/", 1)[-1] in protected:
                continue
        repo.store.delete(item.key)
        result.deleted += 1
        result.bytes_freed += item.bytes
        reporter.progress(done, len(plan.delete))
    for key in plan.finished_tombstones:
        stone = msgspec.json.decode(repo.store.get(key), type=Tombstone)
        if any(i.key.rsplit("/", 1)[-1] in protected for i in stone.items):
            continue  # something it names was revived meanwhile: a later run looks again
        repo.store.delete(key)
        result.tombstones_removed += 1
    return result


def _packs_of_new_manifests(repo: Repository, plan: GcPlan) -> set[str]:
    """Packs reached by manifests committed since the plan was made (they must stay)."""
    reach = Reach(repo)
    known = set(plan.known_seqs)
    for seq in repo.manifest_seqs():
        if seq not in known:
            try:
                reach.walk(repo.load_manifest(seq)[0])
            except ObjectNotFound:
                continue
    return reach.packs

