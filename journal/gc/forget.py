"""``journal forget``: expire chosen checkpoints for good (design §16, "Forget").

Forget is gc's mark with the named checkpoints for its policy: under the gc lease it
tombstones each as ``forgotten``, and every pack no other checkpoint reaches, and it
deletes nothing. A later gc past its grace deletes them. No policy keeps a forgotten
checkpoint again, and gc's rules count without it: restic's ``forget``, where the
snapshot is gone at once and ``prune`` frees the space.

Before writing anything it refuses a checkpoint the store does not hold or cannot read,
and the newest checkpoint of a tree or of the main line. A fork's parent may be
forgotten: the fork then lives by gc's other rule for forks (kept while newer than the
oldest checkpoint kept), and ``forks`` names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import msgspec

from ..format.tombstone import ItemKind
from ..report import SILENT, Reporter
from ..repository.repository import Repository
from .lease import LEASE_SECONDS
from .retention import Forget
from .run import gc


class Forgotten(msgspec.Struct, kw_only=True):
    """What one forget did (or, ``dry_run``, would do)."""

    dry_run: bool
    forgotten: list[int]            # the checkpoints this forget tombstoned
    already: list[int]              # named, but forgotten before: nothing new
    forks: dict[int, int]           # forks whose parent it forgets (fork -> parent): now kept only while newer
    tombstoned: int                 # objects its tombstones name: the checkpoints, and packs only they reach
    tombstone_bytes: int
    tombstone_kinds: dict[ItemKind, int]
    tombstone_key: str | None = None    # the first tombstone it wrote


def forget(repo: Repository, seqs: Iterable[int], *, dry_run: bool = False, reporter: Reporter = SILENT,
           lease_seconds: float = LEASE_SECONDS, lease_clock: Callable[[], int] = time.time_ns) -> Forgotten:
    """Tombstone the checkpoints ``seqs`` as forgotten, holding the gc lease (unless
    ``dry_run``, which changes nothing); ``ForgetUnknown`` or ``ForgetNewest`` (nothing
    written) for a checkpoint that may not be forgotten."""
    named = frozenset(seqs)
    plan, result = gc(repo, Forget(named), 0.0, dry_run=dry_run, reporter=reporter, lease_seconds=lease_seconds,
                      lease_clock=lease_clock)
    already = named & set(plan.forgotten)
    return Forgotten(dry_run=dry_run, forgotten=sorted(named - already), already=sorted(already),
                     forks={f: p for f, p in sorted(plan.forks.items())
                            if p in named and f not in named and f not in plan.forgotten},
                     tombstoned=plan.tombstone_count, tombstone_bytes=plan.tombstone_bytes,
                     tombstone_kinds=plan.tombstone_kinds, tombstone_key=result.tombstone_key if result else None)
