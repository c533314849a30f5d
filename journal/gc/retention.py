"""Retention: which manifests a gc keeps, why, and why each other one goes.

The newest valid manifest of every tree is always kept, whatever the policy says.
Retention needs only each manifest's sequence, time and tree names (and, for a fork,
its parent): gc holds a ``ManifestInfo`` per manifest, never the decoded manifests
themselves.

The period rules are restic's: ``--keep-daily N`` keeps the newest checkpoint of each
of the last N days that have one; hourly, weekly (ISO weeks), monthly and yearly
alike. Periods are UTC.

A fork (design §11, "Lineage") is off the main line: the policy counts only the main
line's checkpoints, and a fork is kept at least as long as its parent would be: while
its parent is kept, or while it is newer than the oldest main-line checkpoint kept.

A checkpoint ``journal forget`` named (``Forget``; a ``forgotten`` tombstone item) is
no input to the rules (``choose`` leaves it out): none keeps it again, not even the
newest rule, and they count without it, as restic's rules count without a snapshot
its ``forget`` removed. ``verdicts`` says of every checkpoint what was decided and why
(``gc --explain``).
"""

from __future__ import annotations

import datetime as _dt
import enum
from typing import NamedTuple

import msgspec

from ..format.model import Manifest
from .errors import ForgetNewest, ForgetUnknown, NoRetentionPolicy


class ManifestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What retention reads of one manifest (a ``Manifest`` has the same attributes)."""

    seq: int
    created_ns: int
    trees: tuple[str, ...]
    fork_of: int | None = None      # a fork: the checkpoint it was built on (its parent; 0: none)


class Period(NamedTuple):
    """A period rule: keep the newest checkpoint of each of the last N periods that have one."""

    field: str      # the ``Policy`` field holding N
    flag: str
    fmt: str        # strftime: the period a UTC time falls in
    unit: str       # the period's name, plural


PERIODS = (Period("keep_hourly", "--keep-hourly", "%Y-%m-%dT%H", "hours"),
           Period("keep_daily", "--keep-daily", "%Y-%m-%d", "days"),
           Period("keep_weekly", "--keep-weekly", "%G-W%V", "weeks"),
           Period("keep_monthly", "--keep-monthly", "%Y-%m", "months"),
           Period("keep_yearly", "--keep-yearly", "%Y", "years"))


class Policy(msgspec.Struct, frozen=True, kw_only=True):
    keep_last: int | None = None
    keep_within: float | None = None       # seconds
    keep_hourly: int | None = None
    keep_daily: int | None = None
    keep_weekly: int | None = None
    keep_monthly: int | None = None
    keep_yearly: int | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in msgspec.structs.astuple(self))


class Forget(msgspec.Struct, frozen=True):
    """The retention of ``journal forget``: every valid checkpoint but ``seqs`` (and those
    forgotten before) is kept; ``seqs`` expire, never to be kept again."""

    seqs: frozenset[int]


class Decision(enum.StrEnum):
    """What retention decided of one checkpoint."""

    KEPT = "kept"
    EXPIRED = "expired"
    UNREADABLE = "unreadable"   # left alone: gc cannot tell what it holds


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint, what retention decided of it, and why (``gc --explain``)."""

    seq: int
    created: str | None         # UTC, to the second (None: unreadable)
    decision: Decision
    why: list[str]


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
    return _Rules(manifests, policy, now_ns).kept()


def choose(infos: list[ManifestInfo], forgotten: dict[int, str], policy: Policy | Forget, now_ns: int,
           listed: set[int], unreadable: list[int]) -> dict[int, list[str]]:
    """What one gc or forget keeps of ``infos`` (the valid manifests), with why: never one
    ``forgotten`` names. A ``Forget`` refuses a checkpoint not ``listed``, ``unreadable``,
    or kept by the newest rule (``check_forget``)."""
    live = [i for i in infos if i.seq not in forgotten]
    if isinstance(policy, Forget):
        missing, bad = sorted(policy.seqs - listed), sorted(policy.seqs & set(unreadable))
        if missing or bad:
            raise ForgetUnknown(missing, bad)
        check_forget(live, policy.seqs)
        return {i.seq: ["not named by this forget"] for i in live if i.seq not in policy.seqs}
    if policy.is_empty():   # only inputs expire (--keep-inputs-within alone)
        return {i.seq: ["no checkpoint retention given"] for i in live}
    return choose_kept(live, policy, now_ns) if live else {}


def verdicts(infos: list[ManifestInfo], kept: dict[int, list[str]], unreadable: list[int], policy: Policy | Forget,
             now_ns: int, forgotten: dict[int, str]) -> list[Verdict]:
    """Every manifest listed (``infos``, the valid ones, and ``unreadable``), newest first,
    with what ``choose`` decided (``kept``) and why."""
    live = [i for i in infos if i.seq not in forgotten]
    plain = isinstance(policy, Policy) and not policy.is_empty()
    why = explain_expired(live, policy, now_ns, kept) if plain else {}
    out = [Verdict(seq=seq, created=None, decision=Decision.UNREADABLE, why=["does not read: left alone"])
           for seq in unreadable]
    for i in infos:
        if i.seq in kept:
            decision, reasons = Decision.KEPT, kept[i.seq]
        elif i.seq in forgotten:
            decision, reasons = Decision.EXPIRED, [f"forgotten by `journal forget` ({forgotten[i.seq]})"]
        else:
            decision, reasons = Decision.EXPIRED, why.get(i.seq) or ["named by this forget"]
        out.append(Verdict(seq=i.seq, created=utc_time(i.created_ns), decision=decision, why=reasons))
    return sorted(out, key=lambda v: v.seq, reverse=True)


def explain_expired(manifests: list[ManifestInfo], policy: Policy, now_ns: int,
                    kept: dict[int, list[str]]) -> dict[int, list[str]]:
    """Map each manifest of ``manifests`` not in ``kept`` (``choose_kept``'s answer) to
    why each rule of ``policy`` lets it go."""
    rules = _Rules(manifests, policy, now_ns)
    return {m.seq: rules.why_not(m, kept) for m in manifests if m.seq not in kept}


def check_forget(manifests: list[ManifestInfo], seqs: frozenset[int]) -> None:
    """Refuse to forget a checkpoint the newest rule keeps (``ForgetNewest``): the newest
    of a tree, or the newest of the main line."""
    main = _newest_first([m for m in manifests if _fork_of(m) is None])
    newest = dict(_newest_of_trees(main))
    if main and main[0].seq not in newest:
        newest[main[0].seq] = []
    refused = sorted(seqs & set(newest))
    if refused:
        raise ForgetNewest(refused[0], newest[refused[0]])


def _fork_of(m) -> int | None:
    """A fork's parent (0: none), or None for a main-line manifest."""
    if isinstance(m, ManifestInfo):
        return m.fork_of
    return (m.parent or 0) if m.is_fork else None


def _newest_first(manifests):
    return sorted(manifests, key=lambda m: m.seq, reverse=True)


def _newest_of_trees(newest_first) -> list[tuple[int, list[str]]]:
    """``(seq, trees)`` of each manifest that is the newest of some trees (those trees)."""
    seen: set[str] = set()
    out = []
    for m in newest_first:
        fresh = sorted(set(m.trees) - seen)
        if fresh:
            out.append((m.seq, fresh))
            seen.update(fresh)
    return out


def utc_time(ns: int, fmt: str = "%Y-%m-%dT%H:%M:%SZ") -> str:
    """``ns`` (since the epoch) as a UTC time in ``fmt`` (to the second: ``2027-01-15T08:00:00Z``)."""
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).strftime(fmt)


class _Rules:
    """One policy applied to one set of manifests: what each rule keeps, and why not the rest."""

    def __init__(self, manifests, policy: Policy, now_ns: int):
        self.policy = policy
        self.main = _newest_first([m for m in manifests if _fork_of(m) is None])
        self.forks = [m for m in manifests if _fork_of(m) is not None]
        self.cutoff = None if policy.keep_within is None else now_ns - int(policy.keep_within * 1e9)
        # Each period rule given: (rule, N, the periods it keeps -> the checkpoint kept for each).
        self.periods = [(p, n, self._chosen(p, n)) for p in PERIODS if (n := getattr(policy, p.field)) is not None]

    def _chosen(self, period: Period, count: int) -> dict[str, int]:
        chosen: dict[str, int] = {}
        for m in self.main:
            bucket = utc_time(m.created_ns, period.fmt)
            if bucket not in chosen and len(chosen) < count:
                chosen[bucket] = m.seq
        return chosen

    def kept(self) -> dict[int, list[str]]:
        reasons: dict[int, list[str]] = {}

        def keep(seq: int, why: str) -> None:
            reasons.setdefault(seq, []).append(why)

        for seq, trees in _newest_of_trees(self.main):
            keep(seq, f"newest manifest of tree(s) {', '.join(trees)}")
        for m in self.main[: self.policy.keep_last or 0]:
            keep(m.seq, f"within --keep-last {self.policy.keep_last}")
        if self.cutoff is not None:
            for m in self.main:
                if m.created_ns >= self.cutoff:
                    keep(m.seq, "within --keep-within")
        for period, count, chosen in self.periods:
            for bucket, seq in chosen.items():
                keep(seq, f"newest of {bucket} ({period.flag} {count})")
        self._keep_forks(reasons)
        return reasons

    def _keep_forks(self, reasons: dict[int, list[str]]) -> None:
        oldest_kept = min((m.created_ns for m in self.main if m.seq in reasons), default=None)
        for m in self.forks:
            parent = _fork_of(m)
            if parent in reasons:
                reasons.setdefault(m.seq, []).append(f"fork of checkpoint {parent}, which is kept")
            elif oldest_kept is not None and m.created_ns >= oldest_kept:
                reasons.setdefault(m.seq, []).append("fork made after the oldest checkpoint kept")

    def why_not(self, m, kept: dict[int, list[str]]) -> list[str]:
        """Why no rule keeps ``m``, rule by rule."""
        if _fork_of(m) is not None:
            oldest = min((k for k in self.main if k.seq in kept), key=lambda k: k.created_ns, default=None)
            made = f"made before the oldest checkpoint kept ({oldest.seq})" if oldest else "no checkpoint is kept"
            return [f"fork of checkpoint {_fork_of(m)}, which is not kept, and {made}"]
        policy, why = self.policy, []
        if policy.keep_last is not None:
            why.append(f"not among the newest {policy.keep_last} (--keep-last {policy.keep_last})")
        if self.cutoff is not None:
            why.append(f"made {utc_time(m.created_ns)}, before {utc_time(self.cutoff)} (--keep-within)")
        for period, count, chosen in self.periods:
            bucket = utc_time(m.created_ns, period.fmt)
            if bucket in chosen:
                why.append(f"not the newest of {bucket}: checkpoint {chosen[bucket]} is ({period.flag} {count})")
            else:
                why.append(f"{bucket} is not among the last {count} {period.unit} with a checkpoint "
                           f"({period.flag} {count})")
        return why
