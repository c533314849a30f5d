"""The tombstones a gc finds when it starts, read one at a time (design §16).

An unreadable tombstone is warned about and skipped (what it names is named again by
the next mark); an unreadable item, or one whose key does not fit its kind, is warned
about and kept named: never deleted, never resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import msgspec

from ..errors import CorruptObject, ObjectNotFound
from ..format.inputs import parse_key as parse_input_key
from ..format.tombstone import (MANIFEST_KINDS, TOMBSTONE_PREFIX, ItemKind, LazyTombstone, TombstoneItem, read_item,
                                read_tombstone)
from ..report import Reporter
from ..repository.repository import Repository, manifest_seq, pack_of
from .delete import named_pack
from .spill import Spill, Table


class Marks(msgspec.Struct, frozen=True, kw_only=True):
    """What the tombstones present when gc started name (their packs are in the spill's
    ``MARKED`` table, their input keys in ``INPUTS_MARKED``)."""

    ripe: list[str]                         # the keys of those older than the grace
    marked_manifests: frozenset[str]        # the manifest keys some tombstone names
    forgotten: dict[int, str]               # the manifests some tombstone names ``forgotten``, with when
    ripe_manifests: list[TombstoneItem]     # the manifest items of the ripe ones


def key_problem(item: TombstoneItem) -> bool:
    """Whether ``item``'s key is of the wrong shape for its kind (never deleted)."""
    if item.kind in MANIFEST_KINDS:
        return manifest_seq(item.key) is None
    if item.kind == ItemKind.INPUT:
        return parse_input_key(item.key) is None
    return pack_of(item.key) is None


def each_tombstone(repo: Repository, keys: Iterable[str], reporter: Reporter) -> Iterator[tuple[str, LazyTombstone]]:
    """Each readable tombstone of ``keys``, one at a time (its items still encoded)."""
    for key in keys:
        try:
            stone = read_tombstone(repo.store.get(key), key, repo.codec)
        except ObjectNotFound as err:
            reporter.warn(f"gc: ignoring unreadable tombstone {key}: {err}")
            continue
        except CorruptObject as err:
            reporter.warn(f"gc: ignoring unreadable tombstone {key}: {err.detail}")
            continue
        yield key, stone
        stone = None  # not held while the next one loads


def raw_items(key: str, stone: LazyTombstone, reporter: Reporter) -> Iterator[tuple[msgspec.Raw, TombstoneItem | None]]:
    """Each item of ``stone`` as encoded, with it decoded (``None``, with a warning,
    when it does not decode)."""
    for raw in stone.items:
        try:
            item = read_item(raw, key)
        except CorruptObject as err:
            reporter.warn(f"gc: tombstone {key}: ignoring an {err.detail}")
            yield raw, None
            continue
        if key_problem(item):
            # A key of the wrong shape for its kind (the store's config, a manifest named
            # as a pack) is never deleted: the item is kept unresolved.
            reporter.warn(f"gc: tombstone {key}: ignoring an item naming {item.key!r} as a {item.kind}")
            yield raw, None
            continue
        yield raw, item


def read_marks(repo: Repository, spill: Spill, cutoff_ns: int, reporter: Reporter, keep: Callable[[], None]) -> Marks:
    """Read every tombstone once: which are ripe (made at or before ``cutoff_ns``), the
    manifests they name, and (into ``spill``) the packs and input keys they name."""
    ripe: list[str] = []
    marked_manifests: set[str] = set()
    forgotten: dict[int, str] = {}
    ripe_manifests: list[TombstoneItem] = []
    for key, stone in each_tombstone(repo, repo.store.list(TOMBSTONE_PREFIX), reporter):
        keep()
        is_ripe = stone.created_ns <= cutoff_ns
        if is_ripe:
            ripe.append(key)
        packs, inputs = [], []  # at most TOMBSTONE_ITEMS
        for _, item in raw_items(key, stone, reporter):
            if item is None:
                continue
            if item.kind == ItemKind.INPUT:
                inputs.append(item.key)
            elif item.kind not in MANIFEST_KINDS:
                packs.append(named_pack(item))
            else:
                marked_manifests.add(item.key)
                if item.kind == ItemKind.FORGOTTEN:
                    forgotten.setdefault(manifest_seq(item.key), stone.created)
                if is_ripe:
                    ripe_manifests.append(item)
        spill.add(Table.MARKED, packs)
        spill.add(Table.INPUTS_MARKED, inputs)
        del stone, packs, inputs  # one tombstone at a time: not this one while the next loads
    return Marks(ripe=ripe, marked_manifests=frozenset(marked_manifests), forgotten=forgotten,
                 ripe_manifests=ripe_manifests)
