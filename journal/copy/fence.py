"""Which checkpoints a copy writes, and the target's fencing.

A copy keeps the source's sequence numbers: the source's checkpoint N is the target's
checkpoint N. The target is a replica, so it MUST hold nothing but the source's
checkpoints, and a copy MUST NOT write into a target that has moved on (a writer of its
own, a copy of another store):

* the target's newest checkpoint T is the source's: the same stored bytes (``Mode.SAME``)
  or the same checkpoint re-sealed (``Mode.RESEAL``: the same sequence, parent, writer,
  host, pid, creation time, fork and trees' counts). When the source's gc expired T,
  the source's first main-line checkpoint after T must name T as its parent, with T's
  id (``Mode.SAME`` only: a re-sealed T has another id); else ``TargetUnproven``;
* the source's checkpoints above T are copied, in ascending order, each manifest put
  only if absent after every object it names is in the target: a manifest found there
  must be the same checkpoint (another copy got there first), else ``TargetMovedOn``.

Checkpoints at or below T that the target lacks are not copied again: the target's
own gc expired them, or they were never copied.
"""

from __future__ import annotations

from typing import NamedTuple

from ..errors import CorruptObject, ObjectNotFound
from ..format.model import Manifest
from ..repository.repository import Repository, manifest_key
from .errors import TargetMovedOn, TargetUnproven
from .target import Mode


class Identity(NamedTuple):
    """What a re-sealed manifest keeps of its source: all but ids and packs."""

    version: int
    seq: int
    parent: int | None
    created_ns: int
    host: str
    pid: int
    writer: str
    fork: object
    trees: tuple

    @classmethod
    def of(cls, m: Manifest) -> "Identity":
        return cls(m.version, m.seq, m.parent, m.created_ns, m.host, m.pid, m.writer, m.fork,
                   tuple((name, t.files, t.bytes) for name, t in sorted(m.trees.items())))


def checkpoints_to_copy(source: Repository, target: Repository | None, mode: Mode) -> list[int]:
    """The source's checkpoints the target lacks above its newest, ascending; raises
    ``TargetMovedOn`` or ``TargetUnproven`` when the target's newest is not the source's."""
    seqs = source.manifest_seqs()
    held = target.manifest_seqs() if target is not None else []
    if not held:
        return seqs
    top = held[-1]
    where = target.store.location
    if not seqs or top > seqs[-1]:
        newest = f"the source's newest is {seqs[-1]}" if seqs else "the source holds none"
        raise TargetMovedOn(where, f"it holds checkpoint {top} ({_who(target, top)}), and {newest}")
    if top in seqs:
        if not same_checkpoint(source, target, top, mode):
            raise TargetMovedOn(where, f"its checkpoint {top} ({_who(target, top)}) is not the source's "
                                            f"checkpoint {top} ({_who(source, top)})")
    elif mode is not Mode.SAME or not _named_by_child(source, target, top, seqs):
        raise TargetUnproven(where, top)
    return [s for s in seqs if s > top]


def same_checkpoint(source: Repository, target: Repository, seq: int, mode: Mode) -> bool:
    """Whether the target's manifest ``seq`` is the source's (as ``mode`` copies it)."""
    key = manifest_key(seq)
    if mode is Mode.SAME:
        return source.store.get(key) == target.store.get(key)
    try:
        mine, theirs = source.load_manifest(seq)[0], target.load_manifest(seq)[0]
    except (CorruptObject, ObjectNotFound):
        return False
    return Identity.of(mine) == Identity.of(theirs)


def _named_by_child(source: Repository, target: Repository, top: int, seqs: list[int]) -> bool:
    """Whether the source's first main-line checkpoint after ``top`` built on it: its
    parent is ``top`` and its parent id the target's manifest ``top``'s."""
    try:
        top_id = target.load_manifest(top)[1]
    except (CorruptObject, ObjectNotFound):
        return False
    for seq in (s for s in seqs if s > top):
        try:
            child = source.load_manifest(seq)[0]
        except (CorruptObject, ObjectNotFound):
            continue
        if not child.is_fork:
            return child.parent == top and child.parent_id == top_id
    return False


def _who(repo: Repository, seq: int) -> str:
    """Who committed ``seq`` in ``repo``, for messages."""
    try:
        m = repo.load_manifest(seq)[0]
    except (CorruptObject, ObjectNotFound) as err:
        return f"unreadable: {err}"
    return f"host {m.host} pid {m.pid} at {m.created}"
