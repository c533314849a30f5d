"""What one gc decided and what it did: values (``gc/run.py`` makes them; the CLI shows
them, ``--json`` as they are)."""

from __future__ import annotations

import msgspec

from ..format.tombstone import ItemKind, TombstoneItem
from .inputs import InputPolicy
from .retention import Forget, Policy, Verdict


class GcPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What gc decided, and from what: the manifests kept and expired, and what it
    tombstones and deletes (counts, bytes, and the first ``run.SAMPLE_ITEMS`` of each list).
    A value: ``execute_gc`` runs it."""

    policy: Policy | Forget
    inputs: InputPolicy
    grace_seconds: float
    now_ns: int                   # the time retention and the grace were judged at
    newest_seq: int               # the newest manifest when gc started (the orphan rule compares with it)
    mark_seq: int                 # the newest manifest listed after the last tombstoned pack was listed
    known_seqs: list[int]         # the manifests listed when gc started
    kept: dict[int, list[str]]
    expire: list[int]
    unreadable: list[int]
    forks: dict[int, int]         # every fork listed (design §11, "Lineage"), with the checkpoint it was built on
    tombstone: list[TombstoneItem]  # a sample
    tombstone_count: int
    tombstone_bytes: int
    tombstone_kinds: dict[ItemKind, int]
    delete: list[TombstoneItem]   # a sample: manifests first, then packs
    delete_count: int
    bytes_freed: int
    waiting: int                  # orphans named by ripe tombstones, kept until the store moves past mark_seq
    finished_tombstones: list[str]  # a sample
    finished_count: int
    kept_samples: dict[str, str]
    sweep_marked: bool = False    # the sweep took this run's tombstones too (``--grace 0 --yes``)
    forgotten: dict[int, str] = {}  # the checkpoints `journal forget` named, with when
    explained: list[Verdict] = []   # every checkpoint, newest first, when asked (``--explain``)


class GcResult(msgspec.Struct, kw_only=True):
    tombstone_key: str | None = None    # the first tombstone this run wrote
    tombstones_written: int = 0
    tombstoned: int = 0                 # objects the new tombstones name
    deleted: int = 0
    bytes_freed: int = 0
    protected: int = 0                  # planned deletions skipped: a manifest committed meanwhile needs them
    tombstones_removed: int = 0
    tombstones_rewritten: int = 0       # swept tombstones written again with only the items that still wait
    lease_renewals: int = 0
