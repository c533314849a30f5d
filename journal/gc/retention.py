"""Retention: which manifests a gc keeps, and why.

The newest valid manifest of every tree is always kept, whatever the policy says.
Retention needs only each manifest's sequence, time and tree names: gc holds a
``ManifestInfo`` per manifest, never the decoded manifests themselves.
"""

from __future__ import annotations

import datetime as _dt

import msgspec

from ..errors import ConfigError
from ..format.model import Manifest



class ManifestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What retention reads of one manifest (a ``Manifest`` has the same attributes)."""

    seq: int
    created_ns: int
    trees: tuple[str, ...]


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    keep_last: int | None = None
    keep_within: float | None = None       # seconds
    keep_hourly: int | None = None
    keep_daily: int | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in (self.keep_last, self.keep_within, self.keep_hourly, self.keep_daily))


def choose_kept(manifests: list[Manifest] | list[ManifestInfo], policy: Policy, now_ns: int) -> dict[int, list[str]]:
    """Map each kept manifest's seq to the reasons it is kept; ``manifests`` are valid ones
    (``Manifest`` or ``ManifestInfo``: only ``seq``, ``created_ns`` and the tree names are read)."""
    if policy.is_empty():
        raise ConfigError("gc: no retention policy given; pass at least one of --keep-last N, "
                          "--keep-within DURATION, --keep-hourly N, --keep-daily N")
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
