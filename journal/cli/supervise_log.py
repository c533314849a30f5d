"""``journal supervise``'s log: each event of the supervisor (``supervise/events.py``)
as one line on stderr, where a container's log collects it.

Text (the default) is the line an operator reads, ``error: `` or ``warning: `` before
an error or a warning; ``--log-format json`` prints the same line as one JSON object:
``{"time", "level", "event", "message", "fields"}`` (``time`` in ISO-8601 UTC,
``fields`` the event's data as ``--json`` names it). The level decides what is
printed: errors always; warnings, the start, recoveries and the final checkpoint by
default (``-q``: errors only); every checkpoint that committed, skipped ticks and
notes with ``-v``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import signal
import sys

import msgspec

from ..supervise.events import (Committed, Event, Failed, Final, Level, Noted, Part, Recovered, Skipped, Started,
                                Stopped, Warned, What)
from .base import echo, escape_controls
from .render import checkpoint_did, count


class LogFormat(str, enum.Enum):
    TEXT = "text"
    JSON = "json"


class SuperviseLog:
    """The ``log`` a ``Supervisor`` is given: print each event at ``level`` or above."""

    def __init__(self, level: Level = Level.INFO, fmt: LogFormat = LogFormat.TEXT):
        self.level = level
        self.fmt = fmt

    def __call__(self, ev: Event) -> None:
        if ev.level < self.level:
            return
        message = describe(ev.what)
        if self.fmt is LogFormat.JSON:
            _write_json(ev, message)
        else:
            echo(_PREFIX.get(ev.level, "") + message, err=True)


_PREFIX = {Level.ERROR: "error: ", Level.WARNING: "warning: "}


def _write_json(ev: Event, message: str) -> None:
    fields = msgspec.to_builtins(ev.what)
    name = fields.pop("type")
    stamp = _dt.datetime.fromtimestamp(ev.time, _dt.timezone.utc).isoformat(timespec="milliseconds")
    doc = {"time": stamp.replace("+00:00", "Z"), "level": ev.level.name.lower(), "event": name,
           "message": message, "fields": fields}
    stream = sys.stderr
    if stream is not None:
        stream.write(escape_controls(msgspec.json.encode(doc)).decode() + "\n")
        stream.flush()


def describe(what: What) -> str:
    """The event as one line of text."""
    if isinstance(what, (Noted, Warned)):
        return what.message
    return "supervise: " + _DESCRIBE[type(what)](what)


def _started(w: Started) -> str:
    return f"started {w.cmd} (pid {w.pid}); store {w.store}; {_restored(w)}"


def _restored(w: Started) -> str:
    """Which checkpoint went into which trees, or a fresh start, and how long it took."""
    rec = w.restore
    if rec is None:
        return "no restore (--no-restore)"
    into: dict[int | None, list[str]] = {}
    for name, seq in sorted(rec.trees.items()):
        into.setdefault(seq, []).append(name)
    took = f"{w.restore_seconds:.2f}s"
    if not any(seq is not None for seq in into):
        return f"fresh start: the store holds no checkpoint of a configured tree ({took})"
    parts = [f"checkpoint {seq} into {', '.join(names)}" for seq, names in sorted(
        ((s, n) for s, n in into.items() if s is not None), reverse=True)]
    said = f"restored {', '.join(parts)} in {took}"
    if None in into:
        said += f"; {', '.join(into[None])}: not in the store, starts empty"
    if rec.fallback:
        said += "; from a FALLBACK (see the warning above)"
    if rec.fork is not None:
        said += f"; this disk's local work kept as fork {rec.fork}"
    return said


_FAILED = {Part.RESTORE: "not starting CMD: {}", Part.CMD: "cannot start {}", Part.CHECKPOINT: "checkpoint failed: {}",
           Part.INPUTS: "not serving inputs: {}", Part.STATUS: "cannot write status.json: {}",
           Part.METRICS: "cannot write --metrics-file: {}", Part.COPY: "{}"}


def _failed(w: Failed) -> str:
    said = _FAILED[w.part].format(w.error)
    if w.retry_in is not None:
        said += "; retried at once" if w.retry_in == 0 else f"; retried in {w.retry_in:g}s"
    if w.exit is not None:
        said += f"; exit {w.exit}"
    return said


_RECOVERED = {Part.CHECKPOINT: "checkpoints", Part.INPUTS: "the input server", Part.STATUS: "writing status.json",
              Part.METRICS: "writing --metrics-file", Part.COPY: "the copy (--copy-to)"}


def _recovered(w: Recovered) -> str:
    what = _RECOVERED.get(w.part, w.part.value)
    if w.part is Part.CHECKPOINT:
        what += f" work again (checkpoint {w.seq})"
    elif w.part is Part.INPUTS:
        what += f" serves {w.path} again"
    else:
        what += " works again"
    return f"recovered: {what} after {count(w.failures, 'failure')} in a row"


def _final(w: Final) -> str:
    rec = w.checkpoint
    if rec is None:
        said = f"final checkpoint FAILED: {w.error}"
    elif rec.seq is None:
        said = f"final checkpoint: nothing changed since checkpoint {w.last_seq}"
    else:
        said = f"final checkpoint {rec.seq}: {checkpoint_did(rec)}"
    return f"{said}; {_ending(w)}"


def _ending(w: Final) -> str:
    """How CMD ended, and supervise's exit status."""
    stop = f"stopped by {_signame(w.signal)}, " if w.signal is not None else ""
    if w.killed:
        return f"{stop}CMD outlived --grace and was killed (SIGKILL); exit {w.exit}"
    return f"{stop}CMD exited {w.cmd_status}; exit {w.exit}"


def _signame(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_DESCRIBE = {
    Started: _started,
    Committed: lambda w: f"checkpoint {w.checkpoint.seq}: {checkpoint_did(w.checkpoint)}",
    Skipped: lambda w: "a checkpoint is already running; skipped this tick",
    Failed: _failed,
    Recovered: _recovered,
    Stopped: lambda w: f"stopped by {_signame(w.signal)} before CMD started; exit {w.exit}",
    Final: _final,
}
