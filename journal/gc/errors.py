"""The errors of a gc: no retention policy, another holds the lease, a plan gone stale,
a kept checkpoint that is damaged; and of a forget: a checkpoint that may not go."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class GcBusy(JournalError):
    """Another gc holds the store's gc lease."""

    def __init__(self, holder: str, expires: str):
        self.holder = holder
        self.expires = expires
        super().__init__(f"gc: another gc ({holder}) holds the store's lease until {expires}; "
                         "try again after it ends (a lease left by a crashed gc is taken over once it expires)")


class GcPlanStale(JournalError):
    """The store no longer gives the decisions of the gc plan being executed."""

    def __init__(self, planned: list[int], now: list[int]):
        self.planned = planned
        self.now = now
        super().__init__(f"gc: the store changed since this plan was made (it listed {len(planned)} manifest(s) up "
                         f"to {planned[-1] if planned else 'none'}, the store now holds {len(now)} up to "
                         f"{now[-1] if now else 'none'}); nothing was changed: make a new plan")


class GcBlocked(JournalError):
    """A manifest gc keeps needs an object the store does not hold (or holds damaged):
    gc cannot know what that object would have kept, so it deletes nothing."""

    def __init__(self, seq: int, tree: str, detail: str):
        self.seq = seq
        self.tree = tree
        super().__init__(f"gc: checkpoint {seq} (tree {tree}) needs an object that is missing or damaged ({detail}); "
                         "gc deletes nothing while a checkpoint it keeps is damaged: run `journal verify --full` "
                         "to see every damaged file, then replace the damaged checkpoints (restore an older one "
                         "with `journal restore --at` and checkpoint again)")


class NoRetentionPolicy(ConfigError):
    """A gc told to keep nothing in particular: it never guesses what to keep."""

    def __init__(self):
        super().__init__("gc: no retention policy given (which checkpoints to keep: the newest N, those within a "
                         "duration, one per hour, day, week, month or year; or how long to keep inputs); "
                         "gc never guesses")


class SweepNeedsNoGrace(ConfigError):
    """A gc told to delete what it tombstones itself, with a grace that keeps it waiting."""

    def __init__(self, grace_seconds: float):
        self.grace_seconds = grace_seconds
        super().__init__(f"gc: a run deletes what it tombstones itself only with a zero grace, not {grace_seconds:g} "
                         "s; with a grace, what it tombstones waits for a later run")


class ForgetNewest(ConfigError):
    """``journal forget`` named a checkpoint the newest rule keeps."""

    def __init__(self, seq: int, trees: list[str]):
        self.seq = seq
        what = f"the newest checkpoint of tree(s) {', '.join(trees)}" if trees else "the newest checkpoint"
        super().__init__(f"forget: checkpoint {seq} is {what}, which is never forgotten; take a newer checkpoint "
                         "first (`journal checkpoint`), then forget this one")


class ForgetUnknown(ConfigError):
    """``journal forget`` named checkpoints the store does not hold, or cannot read."""

    def __init__(self, missing: list[int], unreadable: list[int]):
        self.missing = missing
        self.unreadable = unreadable
        said = []
        if missing:
            said.append(f"no checkpoint {', '.join(map(str, missing))} in the store")
        if unreadable:
            said.append(f"checkpoint {', '.join(map(str, unreadable))} does not read (`journal verify` says why)")
        super().__init__(f"forget: {'; '.join(said)}; nothing was forgotten (`journal log` lists the checkpoints)")
