"""Retention: which manifests a gc keeps, and why.

The newest valid manifest of every tree is always kept, whatever the policy says.
Retention needs only each manifest's sequence, time and tree names (and, for a fork,
its parent): gc holds a ``ManifestInfo`` per manifest, never the decoded manifests
themselves.

A fork (design §11, "Lineage") is off the main line: the policy counts only the main
line's checkpoints, and a fork is kept at least as long as its parent would be: while
its parent is kept, or while it is newer than the oldest main-line checkpoint kept.
"""

from __future__ import annotations

import datetime as _dt

import msgspec

from ..format.model import Manifest
from .errors import NoRetentionPolicy



class ManifestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What retention reads of one manifest (a ``Manifest`` has the same attributes)."""

    seq: int
    created_ns: int
    trees: tuple[str, ...]
    fork_of: int | None = None      # a fork: the checkpoint it was built on (its parent; 0: none)


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    keep_last: int | None = None
    keep_within: float | None = None       # seconds
    keep_hourly: int | None = None
    keep_daily: int | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in (self.keep_last, self.keep_within, self.keep_hourly, self.keep_daily))


def check_policy(policy: Policy, inputs_expire: bool = False) -> None:
    """Refuse a gc told to keep nothing in particular (``NoRetentionPolicy``): no
    checkpoint retention in ``policy``, and no input retention (``inputs_expire``)."""
    if policy.is_empty() and not inputs_expire:
        raise NoRetentionPolicy()


def choose_kept(manifests: list[Manifest] | list[ManifestInfo], policy: Policy, now_ns: int) -> dict[int, list[str]]:
    """Map each kept manifest's seq to the reasons it is kept; ``manifests`` are valid ones
    (``Manifest`` or ``ManifestInfo``: only ``seq``, ``created_ns``, the tree names and
    whether it is a fork are read)."""
    check_policy(policy)
    forks = [m for m in manifests if _fork_of(m) is not None]
    reasons = _main_line([m for m in manifests if _fork_of(m) is None], policy, now_ns)
    oldest_kept = min((m.created_ns for m in manifests if m.seq in reasons), default=None)
    for m in forks:
        parent = _fork_of(m)
        if parent in reasons:
            reasons.setdefault(m.seq, []).append(f"fork of checkpoint {parent}, which is kept")
        elif oldest_kept is not None and m.created_ns >= oldest_kept:
            reasons.setdefault(m.seq, []).append("fork made after the oldest checkpoint kept")
    return reasons


def _fork_of(m) -> int | None:
    """A fork's parent (0: none), or None for a main-line manifest."""
    if isinstance(m, ManifestInfo):
        return m.fork_of
    return (m.parent or 0) if m.is_fork else None


def _main_line(manifests, policy: Policy, now_ns: int) -> dict[int, list[str]]:
    newest_first = sorted(manifests, key=lambda m: m.seq, reverse=True)
    reasons: dict[int, list[str]] = {}

    def keep(m: Manifest | ManifestInfo, why: str) -> None:
        reasons.setdefault(m.seq, []).append(why)

    seen_trees: set[str] = set()
    for m in newest_first:
        fresh = sorted(set(m.trees) - seen_trees)
        if fresh:
            keep(m, f"newest manifest of tree(s) {', '.join(fresh)}")
            seen_trees.update(fresh)
    if policy.keep_last:
        for m in newest_first[: policy.keep_last]:
            keep(m, f"within --keep-last {policy.keep_last}")
    if policy.keep_within is not None:
        cutoff = now_ns - int(policy.keep_within * 1e9)
        for m in newest_first:
            if m.created_ns >= cutoff:
                keep(m, "within --keep-within")
    for count, fmt, flag in ((policy.keep_hourly, "%Y-%m-%dT%H", "--keep-hourly"),
                             (policy.keep_daily, "%Y-%m-%d", "--keep-daily")):
        if count:
            buckets: set[str] = set()
            for m in newest_first:
                bucket = _dt.datetime.fromtimestamp(m.created_ns / 1e9, _dt.timezone.utc).strftime(fmt)
                if bucket not in buckets and len(buckets) < count:
                    buckets.add(bucket)
                    keep(m, f"newest of {bucket} ({flag} {count})")
    return reasons
