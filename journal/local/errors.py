"""The errors of this machine's side: the state directory and its lock, journal's own
local files, and the path rule (a path that would escape its tree)."""

from __future__ import annotations

from ..errors import JournalError
from ..os_errors import describe_os_error, os_error_hint


class UnsafePath(JournalError):
    """A manifest names a path that would escape its tree."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"restore: refusing manifest path {path!r}: {reason}")


class LockBusy(JournalError):
    """Another checkpoint or restore holds the local lock."""

    def __init__(self, path: str):
        self.path = path
        super().__init__(f"lock state: another journal operation holds {path}; try again when it ends")


class StateDirUnusable(JournalError):
    """The local state directory cannot be created or locked."""

    def __init__(self, state_dir: str, err: OSError):
        self.state_dir = state_dir
        where = err.filename or state_dir
        super().__init__(f"lock state: cannot use {state_dir} as the state directory ({where}: {err.strerror}); "
                         f"{os_error_hint(err, where)}, or set JOURNAL_STATE_DIR (or AM_LOCAL) to a writable "
                         "directory")


class LocalWriteError(JournalError):
    """journal could not write one of its own local files (a spooled pack, a cached
    copy): never to be taken for a live path that cannot be read."""

    def __init__(self, what: str, err: OSError, path: str):
        self.path = path
        self.errno = err.errno
        super().__init__(f"{what}: {describe_os_error(err, err.filename or path)}")
