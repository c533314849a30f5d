"""The errors of opening a store and following its history: no store, not a store, a
damaged or replaced config, another store or a lost history than the local state
knows, a writer that lost the race, no readable checkpoint."""

from __future__ import annotations

from ..errors import ConfigError, JournalError, StoreError


class NotAStore(StoreError):
    """A location holds data that is not a journal store."""

    def __init__(self, location: str):
        self.location = location
        super().__init__(
            f"open store: {location} is not empty and is not a journal store; "
            "point JOURNAL_STORE at an empty directory or an existing store"
        )


class NoStore(StoreError):
    """The store location is absent or empty and the operation does not create one.
    ``missing_parent``: the store's parent directory, when it does not exist either."""

    def __init__(self, location: str, missing_parent: str | None = None):
        self.location = location
        hint = (f"its parent directory {missing_parent} does not exist either (is the volume mounted?); mount it, "
                "or fix JOURNAL_STORE" if missing_parent else
                "run `journal init` or `journal checkpoint` to create it")
        super().__init__(f"open store: no journal store at {location}; {hint}")


class StoreVanished(StoreError):
    """The store this machine checkpointed to is absent or empty now."""

    def __init__(self, location: str, store_id: str | None, seq: int | None, missing_parent: str | None = None,
                 unreadable_state: str | None = None):
        self.location = location
        hint = (f"its parent directory {missing_parent} does not exist: mount the volume there, or fix "
                "JOURNAL_STORE if it names the wrong place" if missing_parent else
                "is the volume mounted? To start a new, empty store there on purpose, run `journal init`, "
                "then `journal takeover`")
        known = (f"this machine's local state {unreadable_state} exists but cannot be read, so it may have "
                 "checkpointed to a store there" if unreadable_state is not None else
                 f"this machine has checkpointed up to {seq} to store {store_id}")
        super().__init__(f"open store: no journal store at {location}, but {known}; {hint}")


class DamagedConfig(StoreError):
    """The store's ``config`` object is missing or fails its checks while the store holds data."""

    def __init__(self, location: str, problem: str):
        self.location = location
        self.problem = problem
        super().__init__(f"open store: {location}/config {problem}; the store's config object is damaged: "
                         "copy it back from a backup of the store (nothing was changed)")


class NotEncrypted(ConfigError):
    """A key is configured, but the store's config says it is not encrypted: journal
    never writes in the clear while a key is set (the config may have been replaced)."""

    def __init__(self, location: str, source: str):
        self.location = location
        super().__init__(f"open store: {location} is not encrypted, yet {source} is set: journal never writes a "
                         "store in the clear while a key is set (someone who can write the store may have replaced "
                         "its config with a plain one); nothing was written: point JOURNAL_STORE at the encrypted "
                         "store this key opens, or start one at a new location with `journal init --encrypt`")


class Downgraded(JournalError):
    """A store whose config says it is plain, which this machine's local state or the
    store's own key objects show was encrypted: its config may have been replaced so
    that journal writes in the clear (design §22)."""

    def __init__(self, location: str, evidence: str):
        self.location = location
        super().__init__(f"open store: {location}'s config says it is not encrypted, but {evidence}: someone who can "
                         "write the store may have replaced its config so that journal writes in the clear; nothing "
                         "was written: copy the store's encrypted config back from a backup (design §22), and check "
                         "that JOURNAL_STORE names the right store")


class ForeignStore(JournalError):
    """The local state follows one store; the store configured now is another one."""

    def __init__(self, op: str, location: str, store_id: str, state_path: str, followed: str, seq: int):
        self.store_id = store_id
        self.followed = followed
        super().__init__(
            f"{op}: {location} is store {store_id}, but this machine's local state ({state_path}) follows "
            f"store {followed} (up to checkpoint {seq}); a {op} here would mix the two histories. Point "
            f"JOURNAL_STORE back at store {followed}, export this one with `journal restore --to DIR`, make "
            f"this container continue store {store_id} with `journal takeover` (local files are kept), or "
            f"remove {state_path} on purpose; nothing was changed")


class HistoryLost(JournalError):
    """The store no longer holds the checkpoint the local state was built on, nor a later one."""

    def __init__(self, op: str, location: str, state_path: str, seq: int, key: str, newest: int | None):
        self.seq = seq
        self.newest = newest
        held = f"its newest is checkpoint {newest}" if newest else "it holds no checkpoint at all"
        then = f"continue from checkpoint {newest}" if newest else "start its history again"
        super().__init__(
            f"{op}: store {location} no longer holds checkpoint {seq} ({key}), the last one this machine's "
            f"local state ({state_path}) knows, nor any later one ({held}): its manifests were deleted or the "
            f"store was rolled back. Copy the missing manifests back from a backup of the store, or run "
            f"`journal takeover` to {then} with this container's files (`journal restore --to DIR` exports "
            f"what the store still holds); nothing was changed")


class ManifestConflict(JournalError):
    """Another writer already committed the sequence this writer wanted: the store moved
    on past this writer's last checkpoint."""

    def __init__(self, seq: int, other: str):
        self.seq = seq
        self.other = other
        super().__init__(
            f"checkpoint: the store moved on: checkpoint {seq} was committed by {other}, which this container "
            "never saw, so this container publishes nothing over it; run `journal restore`: it keeps this "
            "container's unpublished work as a fork (`journal log` lists it) and makes the live trees the "
            "store's newest checkpoint (or use another store prefix for a separate history, or `journal "
            "takeover` to make this container's files the next checkpoint)"
        )


class HistoryWithoutState(JournalError):
    """The store has history but this machine's local state does not know it."""

    def __init__(self, state_path: str, latest_seq: int):
        self.state_path = state_path
        self.latest_seq = latest_seq
        super().__init__(
            f"checkpoint: the store already holds checkpoint {latest_seq} but the local state "
            f"({state_path}) is missing or unreadable; run `journal restore` first "
            "(it keeps newer local files and adopts the store's history)"
        )


class NoReadableCheckpoint(JournalError):
    """Every checkpoint a restore could come from is unreadable: nothing can be restored."""

    def __init__(self, op: str, count: int, newest_key: str, cause: str):
        done = "nothing was restored" if op == "restore" else "nothing to show"
        super().__init__(
            f"{op}: none of the {count} checkpoint(s) in the store can be read (the newest, {newest_key}: "
            f"{cause}); {done}. Run `journal verify` to see the damage, and restore the store's "
            f"manifests from a backup")
