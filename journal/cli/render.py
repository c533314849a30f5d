"""The words every command uses for what a checkpoint did (design §10, "One vocabulary"):

*files* (every entry but directories), *directories*, *deletions* (vanished paths a
checkpoint drops) and *bytes uploaded* (the manifest included), said the same way by
``checkpoint``, ``log`` and ``status``; ``--json`` uses the same names.
"""

from __future__ import annotations

import datetime as _dt
import time

_PLURALS = {"directory": "directories"}


def count(n: int, noun: str) -> str:
    """``1 file``, ``3 files``, ``2 directories``."""
    return f"{n:,} {noun if n == 1 else _PLURALS.get(noun, noun + 's')}"


def changes(files: int, dirs: int, files_deleted: int, dirs_deleted: int) -> str:
    """``3 files and 1 directory changed, 2 files and 0 directories deleted``."""
    deleted = (f"{count(files_deleted, 'file')} and {count(dirs_deleted, 'directory')} deleted"
               if files_deleted or dirs_deleted else "nothing deleted")
    return f"{count(files, 'file')} and {count(dirs, 'directory')} changed, {deleted}"


def uploaded(objects: int, nbytes: int) -> str:
    return f"{count(objects, 'object')} and {count(nbytes, 'byte')} uploaded"


def checkpoint_line(rec) -> str:
    """One committed checkpoint, from a ``CheckpointRecord``."""
    return f"checkpoint {rec.seq}: {checkpoint_did(rec)}"


def checkpoint_did(rec) -> str:
    what = changes(rec.files_changed, rec.directories_changed, rec.files_deleted, rec.directories_deleted)
    return f"{what}; {uploaded(rec.objects_uploaded, rec.bytes_uploaded)} in {rec.seconds:.2f}s"


def held_line(held: int) -> str:
    return (f"held back: {count(held, 'vanished file')} kept in the checkpoint (the warning above says why); "
            "`journal checkpoint --allow-deletions` drops them")


def when(t: float | None, now: float | None = None) -> str:
    """``2026-12-04 20:01:02 UTC (3m ago)``."""
    if t is None:
        return "-"
    stamp = _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({ago((time.time() if now is None else now) - t)})"


def ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def status_lines(rep, now: float | None = None) -> list[str]:
    """``journal status`` as text, from a ``StatusReport``."""
    now = time.time() if now is None else now
    lines = [f"supervisor: {'running, pid ' + str(rep.pid) if rep.running else 'not running'}"]
    rec = rep.last_checkpoint
    if rec is None:
        lines.append("last checkpoint: none recorded")
    else:
        lines.append(f"last checkpoint: {rec.seq} at {when(rec.time, now)}: {checkpoint_did(rec)}")
    lines.append(f"last successful run: {when(rep.last_success, now)}")
    lines.append(f"lag since last success: {'-' if rep.lag_seconds is None else f'{rep.lag_seconds:.1f}s'}")
    err = rep.last_error
    if err is None:
        lines.append("last error: none")
    else:
        after = (f"cleared: a later run succeeded at {when(err.cleared_at, now)}" if err.cleared
                 else "NOT cleared: nothing has succeeded since")
        lines.append(f"last error: {when(err.time, now)}, {err.op}: {err.message}")
        lines.append(f"  {after}")
    rs = rep.restore
    if rs is not None:
        how = "INCOMPLETE" if not rs.complete else "complete from a FALLBACK" if rs.fallback else "complete"
        trees = ", ".join(f"{name} from {'-' if seq is None else seq}" for name, seq in sorted(rs.trees.items()))
        lines.append(f"last restore: {how}, at {when(rs.time, now)}, newest checkpoint "
                     f"{'-' if rs.seq is None else rs.seq}{': ' + trees if trees else ''}")
        lines += [f"  fallback: {note}" for note in rs.notes]
        if rs.lineage == "stale":
            lines.append("  this disk was stale (the store had moved on): the live trees became the newest checkpoint")
        if rs.fork is not None:
            lines.append(f"  FORK {rs.fork}: {rs.fork_note}")
    size = rep.local_state
    lines.append(f"local state: {size.bytes:,} bytes (chunks {size.chunks:,}, sqlite-base {size.sqlite_base:,}, "
                 f"maps {size.maps:,}, pages {size.pages:,})")
    st = rep.status
    if st.input_socket:
        lines.append(f"input socket: {st.input_socket}" + (f" NOT SERVED: {st.input_error}" if st.input_error
                                                            else " (served)"))
    lines += [f"warning: {w}" for w in rep.warnings]
    return lines


def log_lines(entries) -> list[str]:
    """``journal log`` as text, from ``ManifestInfo``s (newest first)."""
    lines = [f"{'seq':>6}  {'time':24}  {'host':16} {'files':>7} {'size':>13} {'uploaded':>11} {'objects':>7}"]
    for e in entries:
        if e.error:
            lines.append(f"{e.seq:>6}  UNREADABLE: {e.error}")
        else:
            lines.append(f"{e.seq:>6}  {e.created:24}  {e.host[:16]:16} {e.files:>7,} {e.size:>13,} "
                         f"{e.bytes_uploaded:>11,} {e.objects_uploaded:>7}")
            if e.fork is not None:
                lines.append(f"{'':>6}  FORK of checkpoint {e.parent or 0}, not on the main line: {e.fork}; "
                             f"`journal ls --at {e.seq}` shows it")
            for name, why in sorted(e.restored.items()):
                lines.append(f"{'':>6}  RESTORED {name}: {why}")
        if e.expired:
            lines.append(f"{'':>6}  EXPIRED: a gc tombstone of {e.expired} names it; a gc after the grace "
                         "period deletes it (`journal restore --at` may still use it until then)")
    return lines
