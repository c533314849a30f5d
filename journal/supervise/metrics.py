"""``journal supervise --metrics-file PATH``: the supervisor's figures in Prometheus's text format.

The file is rewritten after every tick (and after the startup restore and the final
checkpoint) as a whole: a temp file beside it, renamed over it, so a reader (the
node_exporter textfile collector, a sidecar) never sees half of it. A new file is made
0644 (the collector may run as another user); an existing one keeps its mode, less any
bit beyond 0644 (it holds no secret, but is never made executable or writable by
others). Counters count
from this supervisor's start; a gauge with no value yet (no checkpoint committed) is
left out rather than written as a guess.
"""

from __future__ import annotations

import os

from ..atomic import replace_file
from ..errors import ConfigError

#: (name, type, help, the value from ``Status``; None leaves the metric out)
METRICS = (
    ("journal_last_checkpoint_timestamp_seconds", "gauge",
     "When this supervisor last committed a checkpoint (Unix time).", lambda st: st.last_commit_time),
    ("journal_last_checkpoint_seq", "gauge", "The sequence number of the last checkpoint committed or found unchanged.",
     lambda st: st.last.seq if st.last else None),
    ("journal_last_success_timestamp_seconds", "gauge",
     "When the last tick succeeded, idle or not (Unix time).", lambda st: st.last_success),
    ("journal_tick_duration_seconds", "gauge", "How long the last successful tick took.",
     lambda st: st.last.seconds if st.last else None),
    ("journal_uploaded_bytes_total", "counter", "Bytes uploaded by this supervisor's checkpoints, manifests included.",
     lambda st: st.bytes_uploaded),
    ("journal_uploaded_objects_total", "counter", "Objects uploaded by this supervisor's checkpoints.",
     lambda st: st.objects_uploaded),
    ("journal_checkpoints_total", "counter", "Checkpoints this supervisor committed.", lambda st: st.checkpoints),
    ("journal_tick_errors_total", "counter", "Ticks that failed (recorded and retried).", lambda st: st.failed_ticks),
    ("journal_ticks_skipped_total", "counter", "Ticks skipped because another checkpoint held the lock.",
     lambda st: st.skipped_ticks),
    ("journal_last_error_timestamp_seconds", "gauge", "When the last error was recorded (Unix time).",
     lambda st: st.last_error_time),
    ("journal_restore_complete", "gauge", "1 when the startup restore was complete, 0 when not.",
     lambda st: None if st.restore is None else int(st.restore.complete)),
    ("journal_restore_fallback", "gauge", "1 when the startup restore came (partly) from an older checkpoint.",
     lambda st: None if st.restore is None else int(st.restore.fallback)),
    ("journal_restore_stale", "gauge", "1 when the startup restore found the store had moved past this disk.",
     lambda st: None if st.restore is None else int(st.restore.lineage == "stale")),
    ("journal_restore_fork_seq", "gauge", "The fork the startup restore kept this disk's local work in (0: none).",
     lambda st: None if st.restore is None else (st.restore.fork or 0)),
)


def check_metrics_file(path: str) -> str:
    """The absolute path of a metrics file whose directory exists, else ``ConfigError``."""
    path = os.path.abspath(path)
    where = os.path.dirname(path)
    if not os.path.isdir(where):
        raise ConfigError(f"supervise: metrics file {path}: its directory {where} does not exist; create it first")
    if os.path.isdir(path):
        raise ConfigError(f"supervise: metrics file {path} is a directory; name a file in it")
    return path


def render(status) -> bytes:
    """The text format (version 0.0.4) of every metric that has a value."""
    lines = []
    for name, kind, text, value_of in METRICS:
        value = value_of(status)
        if value is None:
            continue
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {_number(value)}"]
    return ("\n".join(lines) + "\n").encode()


#: The widest mode a metrics file is given: readable by all, written only by its owner.
METRICS_MODE = 0o644


def write_metrics(path: str, status) -> None:
    """Replace ``path`` with the metrics of ``status``: a temp file beside it, renamed over
    it, with the mode the file had (0644 when new), never wider than 0644."""
    try:
        mode = os.stat(path).st_mode & METRICS_MODE
    except OSError:
        mode = METRICS_MODE
    replace_file(path, render(status), mode=mode)


def _number(value) -> str:
    return repr(float(value)) if isinstance(value, float) else str(int(value))
