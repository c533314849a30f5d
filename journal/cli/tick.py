"""The body of ``journal checkpoint`` (what cron or a timer runs every few seconds):
open the store, take the checkpoint, print what it did (one line, or ``--json``).

Both the click command (``commands.checkpoint``) and the launcher (``launch``, for a
busy plain ``journal checkpoint``, without importing click) run it; it imports no click.
"""

from __future__ import annotations

from .base import CliReporter, echo, emit_json, open_context
from .output import count, idle_line


def checkpoint_command(config_path: str | None, store_url: str | None, as_json: bool, *,
                       allow_deletions: bool, wait: bool) -> None:
    from ..checkpoint.run import checkpoint as run_checkpoint

    cfg, store = open_context(config_path, store_url, writes=True)
    result = run_checkpoint(cfg, store, CliReporter(quiet=as_json), allow_deletions=allow_deletions, wait=wait)
    if as_json:
        emit_json(result)
        return
    from ..local.activity import checkpoint_record
    from .render import checkpoint_line, held_line

    rec = checkpoint_record(result)
    if result.seq is None and not result.objects:
        echo(idle_line(len(result.trees)) if not rec.deletions_held else
             f"nothing written: {count(len(result.trees), 'tree')} unchanged but for vanished files held back")
    else:
        echo(checkpoint_line(rec))
    if rec.deletions_held:
        echo(held_line(rec.deletions_held))
