"""What the command line adds to a library error: the option of the command that was
run that fixes it.

A library message names no bare option (``--wait``): the library does not know how it
was called (a supervisor, a socket client or a test calls it too). It may name a whole
command (```journal verify --full```), which is advice wherever the message is shown.
``base.command_errors`` looks an error up here (its class, else the nearest base that
has a hint) and says the hint after its message, as ``JournalError.hints``.
"""

from __future__ import annotations

from ..errors import JournalError
from ..gc.errors import NoRetentionPolicy, SweepNeedsNoGrace
from ..local.errors import LockBusy
from ..supervise.errors import NoStoreNamed

#: The option that fixes an error, by the error's class.
FLAG_HINTS: dict[type[JournalError], str] = {
    LockBusy: "pass --wait to wait for it (`journal checkpoint --wait`)",
    NoStoreNamed: "or pass --store URL",
    NoRetentionPolicy: "pass at least one of --keep-last N, --keep-within DURATION, --keep-hourly N, --keep-daily N, "
                       "--keep-weekly N, --keep-monthly N, --keep-yearly N, --keep-inputs-within DURATION",
    SweepNeedsNoGrace: "--yes needs --grace 0: add it, or drop --yes",
}


def with_flag_hint(err: JournalError) -> JournalError:
    """``err``, with the hint ``FLAG_HINTS`` has for it (once)."""
    hint = next((FLAG_HINTS[cls] for cls in type(err).__mro__ if cls in FLAG_HINTS), None)
    return err if hint is None or hint in err.hints else err.with_hint(hint)
