"""``journal supervise``: the PID-1 timer around an agent server.

Lifecycle: restore (unless told not to; an incomplete restore never starts CMD) ->
start CMD in its own process group -> checkpoint every interval (never overlapping:
the state lock serializes timer, manual and final checkpoints; a tick that comes due
while one runs is skipped) -> on SIGTERM/SIGINT/SIGHUP forward the signal to CMD's
group, wait up to ``grace`` for it, take the final checkpoint, exit with CMD's status
or 128+signal. When CMD exits on its own: final checkpoint, exit with its status.
Orphaned processes re-parented to us (as PID 1, or as a child subreaper) are reaped.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time

from .checkpoint import checkpoint
from .errors import JournalError, LockBusy, RestoreIncomplete
from .report import SILENT, Reporter
from .restore import restore
from .status import LastCheckpoint, Status, write_status

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL = 0.05
_PR_SET_CHILD_SUBREAPER = 36


class Supervisor:
    """One supervised run. ``run()`` returns the exit status for the process."""

    def __init__(self, cfg, open_store, cmd: list[str], *, interval: float, grace: float = 1.0,
                 restore_first: bool = True, reporter: Reporter = SILENT):
        self.cfg = cfg
        self.open_store = open_store
        self.cmd = cmd
        self.interval = interval
        self.grace = grace
        self.restore_first = restore_first
        self.reporter = reporter
        self.status = Status(pid=os.getpid(), started=time.time(), interval=interval)
        self.signal: int | None = None
        self.child: subprocess.Popen | None = None
        self.child_status: int | None = None

    def run(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        _become_subreaper()
        self._save()
        if self.restore_first and not self._restore():
            return 1
        if self.signal is not None:
            return 128 + self.signal
        try:
            self.child = subprocess.Popen(self.cmd, process_group=0)
        except OSError as err:
            self.status.last_error = f"start {self.cmd[0]}: {err.strerror or err}"
            self.status.last_error_time = self.status.stopped = time.time()
            self._save()
            self.reporter.warn(f"supervise: cannot start {self.cmd[0]}: {err.strerror or err}")
            return 127
        self.status.child_pid = self.child.pid
        self._save()
        self._loop()
        return self._stop()

    def _on_signal(self, signum, _frame) -> None:
        if self.signal is None:
            self.signal = signum

    def _restore(self) -> bool:
        try:
            result = restore(self.cfg, self.open_store(), self.reporter)
            if not result.complete:
                lost = [p for t in result.trees for p in t.lost] + [t.error for t in result.trees if t.error]
                raise RestoreIncomplete(lost)
        except JournalError as err:
            self.status.last_error, self.status.last_error_time = f"restore: {err}", time.time()
            self.status.stopped = time.time()
            self._save()
            self.reporter.warn(f"supervise: not starting {self.cmd[0]}: {err}")
            return False
        return True

    def _loop(self) -> None:
        next_tick = time.monotonic() + self.interval
        while self.signal is None and self.child_status is None:
            self._reap()
            if time.monotonic() >= next_tick:
                self._checkpoint(final=False)
                next_tick = time.monotonic() + self.interval
            time.sleep(POLL)

    def _stop(self) -> int:
        if self.signal is not None and self.child_status is None:
            try:
                os.killpg(self.child.pid, self.signal)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + self.grace
            while self.child_status is None and time.monotonic() < deadline:
                self._reap()
                time.sleep(POLL / 2)
        for sig in STOP_SIGNALS:  # a second signal must not interrupt the final checkpoint
            signal.signal(sig, signal.SIG_IGN)
        self._checkpoint(final=True)
        if self.child_status is None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.child.pid, 0)
        self._reap()
        self.status.stopped = time.time()
        self._save()
        if self.child_status is not None:
            return self.child_status
        return 128 + (self.signal or signal.SIGTERM)

    def _reap(self) -> None:
        """Collect every exited child: CMD's status, and orphans handed to us."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.child is not None and pid == self.child.pid:
                self.child.returncode = os.waitstatus_to_exitcode(status)
                code = self.child.returncode
                self.child_status = 128 - code if code < 0 else code

    def _checkpoint(self, final: bool) -> None:
        started = time.monotonic()
        try:
            result = checkpoint(self.cfg, self.open_store(), self.reporter, wait=final)
        except LockBusy:
            self.status.skipped_ticks += 1
            self.reporter.note("supervise: a checkpoint is already running; skipping this tick")
            self._save()
            return
        except JournalError as err:
            self.status.failed_ticks += 1
            self.status.last_error, self.status.last_error_time = str(err), time.time()
            self.reporter.warn(f"supervise: {'final ' if final else ''}checkpoint failed: {err}")
            self._save()
            return
        now = time.time()
        idle = result.seq is None
        seq = self.status.last.seq if idle and self.status.last else result.seq
        self.status.last = LastCheckpoint(seq=seq, time=now, seconds=time.monotonic() - started,
                                          bytes=result.bytes, objects=result.objects, idle=idle)
        self.status.last_success = now
        self.status.warnings = list(result.warnings)[-10:]
        self._save()

    def _save(self) -> None:
        try:
            write_status(self.cfg.state_dir, self.status)
        except OSError as err:
            self.reporter.warn(f"supervise: cannot write status: {err}")


def _become_subreaper() -> None:
    """Ask Linux to re-parent orphaned descendants to us, so we can reap them (as PID 1 does)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
