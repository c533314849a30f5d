"""The errors that keep ``journal supervise`` from starting: another supervisor, no
durable store named."""

from __future__ import annotations

from ..errors import ConfigError, JournalError


class SupervisorRunning(JournalError):
    """Another supervisor holds this state directory's lifetime lock."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"supervise: another supervisor runs on this state directory ({path} is locked); "
                         "stop it first, or give this one its own JOURNAL_STATE_DIR")


class NoStoreNamed(ConfigError):
    """``supervise`` with only the implicit default store: a container's own disk, which
    dies with it."""

    def __init__(self, default: str):
        self.default = default
        super().__init__(f"supervise: no store is named, and the default one ({default}) is on this machine's own "
                         "disk; name a durable store with $JOURNAL_STORE or `store` in the config file")
