"""``journal supervise --copy-to URL --copy-every DURATION``: the store copied to a second
one on a timer (``journal copy``, design §23), so that no cron job is needed.

The copy runs as ``journal copy --to URL --json`` in a process of its own, as the input
server does (``inputs.py``): a copy of an hour's checkpoints may take minutes, and a
tick must not wait for it; the idle tick's quiet check forks only while the supervisor
runs a single thread. The first copy starts with CMD, each next one ``every`` after the
last one started, never two at once (one still running when the next is due delays
it). Its output goes to unnamed temporary files, read when it exits: the supervisor
says a failure (an error event with the copy's own error line) and a success (a note,
with what it copied). At the stop the copy is ended (SIGTERM, then SIGKILL), before the
final checkpoint: a copy is resumable, and the next one completes it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

COPY_TO_ENV = "JOURNAL_COPY_TO"
COPY_EVERY_ENV = "JOURNAL_COPY_EVERY"
EVERY = 3600.0
#: Seconds a copy gets to stop after SIGTERM before SIGKILL.
STOP_SECONDS = 5.0
POLL = 0.02


class CopySchedule(NamedTuple):
    """Where to copy the store, and how often (seconds between two starts)."""

    to: str
    every: float


def copy_schedule(env) -> CopySchedule | None:
    """The schedule ``$JOURNAL_COPY_TO`` and ``$JOURNAL_COPY_EVERY`` say (None: no copy);
    ``ConfigError`` for a duration that is not one, or one without a target."""
    from ..config import parse_duration
    from ..errors import ConfigError

    to, every = env.get(COPY_TO_ENV) or None, env.get(COPY_EVERY_ENV) or None
    if to is None:
        if every is not None:
            raise ConfigError(f"supervise: a copy interval is set (${COPY_EVERY_ENV}={every}) without a store to "
                              f"copy to (${COPY_TO_ENV}); name the store to copy to, or drop the interval")
        return None
    seconds = EVERY if every is None else parse_duration(every, f"${COPY_EVERY_ENV}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigError(f"supervise: the copy interval ${COPY_EVERY_ENV}={every} is not a positive duration; "
                          "write e.g. 30m or 1h")
    return CopySchedule(to, seconds)


class CopyOutcome(NamedTuple):
    """How one copy ended: ``error`` (None: it copied everything), else what it said."""

    error: str | None
    summary: str


class Copier:
    """The copy child. ``pid`` while one runs; ``next_at`` (monotonic) when the next starts."""

    def __init__(self, cfg, schedule: CopySchedule):
        self.cfg = cfg
        self.schedule = schedule
        self.pid: int | None = None
        self.next_at = time.monotonic()    # the first copy starts with CMD
        self._out = self._err = None

    def due(self) -> bool:
        return self.pid is None and time.monotonic() >= self.next_at

    def retry_in(self) -> float:
        return max(0.0, self.next_at - time.monotonic())

    def start(self) -> str | None:
        """Start a copy; the reason it could not start, else None."""
        self.next_at = time.monotonic() + self.schedule.every
        args = [sys.executable, "-m", "journal", "copy", "--to", self.schedule.to, "--json",
                "--store", self.cfg.store]
        if self.cfg.source:
            args += ["--config", self.cfg.source]
        self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                    process_group=0)
        except OSError as err:
            self._close()
            return f"cannot start the copy to {self.schedule.to}: {err.strerror or err}"
        self.pid = proc.pid
        return None

    def exited(self, pid: int, status: int) -> CopyOutcome | None:
        """The supervisor reaped ``pid``: how the copy ended when it was the copy, else None."""
        if pid != self.pid or os.WIFSTOPPED(status):
            return None
        self.pid = None
        code = os.waitstatus_to_exitcode(status)
        outcome = self._outcome(code)
        self._close()
        return outcome

    def stop(self) -> None:
        """End a copy that runs (it is resumable): SIGTERM, then SIGKILL."""
        if self.pid is None:
            return
        deadline = time.monotonic() + STOP_SECONDS
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                break
            while time.monotonic() < deadline and not self._gone():
                time.sleep(POLL)
            if self._gone():
                break
            deadline = time.monotonic() + STOP_SECONDS
        self.pid = None
        self._close()

    def _gone(self) -> bool:
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:   # the supervisor's reaper collected it
            return True
        return pid != 0

    def _outcome(self, code: int) -> CopyOutcome:
        to = self.schedule.to
        try:
            self._out.seek(0)
            said = json.loads(self._out.read() or b"{}")
        except ValueError:
            said = {}
        if code < 0:
            return CopyOutcome(f"the copy to {to} died of signal {-code}", "")
        if "error" in said:
            return CopyOutcome(f"copy to {to}: {said['error']}", "")
        done = (f"copy to {to}: {len(said.get('checkpoints', []))} checkpoint(s), {said.get('objects', 0)} "
                f"object(s) of {said.get('bytes', 0):,} bytes copied, {said.get('inputs', 0)} input-journal "
                "object(s)")
        refused = said.get("refused") or []
        if code or refused:
            first = refused[0] if refused else self._last_line() or f"it exited with status {code}"
            return CopyOutcome(f"{done}; {len(refused) or 1} failure(s): {first}", done)
        return CopyOutcome(None, done)

    def _last_line(self) -> str:
        self._err.seek(0)
        lines = self._err.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else ""

    def _close(self) -> None:
        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None
