"""``journal supervise``: the PID-1 timer around an agent server.

Lifecycle: refuse the implicit default store (a container's own disk) -> take
``<state_dir>/supervise.lock`` for the whole run (one supervisor per state directory;
``journal status`` probes it) -> restore (unless told not to; an
incomplete restore never starts CMD) -> start CMD in its own process group, handing it
the terminal when supervise has one -> checkpoint every interval (never overlapping:
the state lock serializes timer, manual and final checkpoints; a tick that comes due
while one runs is skipped; a tick that fails for any reason is recorded and retried,
it never touches CMD; with ``--copy-to``, a copy of the store on a timer of its own, ``copying.py``)
-> on SIGTERM/SIGINT/SIGHUP forward the signal to CMD's group at
once (even while a tick runs), wait up to ``grace`` for the whole group to exit,
SIGKILL what is left, then take the final checkpoint (nothing of CMD's group can
write behind it) and exit with CMD's status, or 137 (128+SIGKILL) when CMD had to be
killed. When CMD exits on its own: its group gets SIGTERM, ``grace``, SIGKILL; then
the final checkpoint, and exit with CMD's status. Orphaned processes re-parented to us
(as PID 1, or as a child subreaper) are reaped. What happens is said as events
(``events.py``) to the ``log`` the caller gives; nothing here prints.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import subprocess
import termios
import time
from collections.abc import Mapping

import msgspec

from ..checkpoint.run import checkpoint
from ..errors import JournalError
from ..heap import one_arena, release_freed
from ..local.errors import LockBusy
from ..os_errors import describe_error
from ..restore.errors import RestoreIncomplete
from .errors import NoStoreNamed, SupervisorRunning
from ..local.state import StateLock
from ..local.watch import Watch
from ..paths import KEY_VARS, SUPERVISE_LOCK
from ..report import Reporter
from ..restore.run import restore
from ..local.activity import checkpoint_record, restore_record
from .events import (Committed, Failed, Final, Level, Log, Noted, Part, Recovered, Skipped, Started, Stopped, Warned,
                     What, event, ignore)
from .copying import Copier, CopySchedule
from .inputs import InputSocket
from .metrics import write_metrics
from .status import LastCheckpoint, Status, write_status

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL = 0.05
LOCK_PATIENCE = 1.0  # seconds: ``journal status`` probes supervise.lock for microseconds
KILL_WAIT = 5.0      # seconds to wait for a SIGKILLed group (a process in D state may linger)
KILLED = 128 + signal.SIGKILL   # the exit status when CMD outlived the grace and was killed
#: Parts whose failure is said once per cause (they fail on every save); the others every time.
ONCE_PER_CAUSE = frozenset({Part.STATUS, Part.METRICS})
_PR_SET_CHILD_SUBREAPER = 36


class SuperviseResult(msgspec.Struct, kw_only=True):
    """``journal supervise --json``: the exit status, why CMD never started (if so), the status file."""

    exit: int
    error: str | None = None
    kind: str | None = None
    status: Status


class Supervisor:
    """One supervised run. ``run()`` returns the exit status for the process."""

    def __init__(self, cfg, open_store, cmd: list[str], *, interval: float, grace: float = 1.0,
                 restore_first: bool = True, log: Log = ignore, serve_inputs: bool = True,
                 metrics_file: str | None = None, pass_key_env: bool = False, copy: CopySchedule | None = None,
                 watch: bool = True):
        self.cfg = cfg
        self.pass_key_env = pass_key_env          # CMD gets the variables that open the store (KEY_VARS)
        self.metrics_file = metrics_file          # Prometheus text format, rewritten with the status
        self.log = log
        self.failing: dict[Part, tuple[int, str]] = {}   # what fails now: (failures in a row, the last error)
        self.open_store = open_store
        self.cmd = cmd
        self.interval = interval
        self.grace = grace
        self.restore_first = restore_first
        self.reporter = _Reporting(self._say)
        self.status = Status(pid=os.getpid(), started=time.time(), interval=interval)
        self.signal: int | None = None
        self.stop_deadline: float | None = None   # monotonic; set with the stop signal
        self.forwarded = False
        self.child: subprocess.Popen | None = None
        self.child_status: int | None = None
        self.killed = False                       # CMD itself outlived the grace
        self.tty: int | None = None               # the terminal handed to CMD's group
        self.tty_modes: list | None = None        # its modes before CMD had it (termios)
        self.continued = False                    # SIGCONT came: a shell resumed us (``fg``/``bg``)
        self.failure: tuple[str, str] | None = None  # (message, kind) when CMD never started
        self.restore_seconds = 0.0
        self.inputs = InputSocket(cfg) if serve_inputs else None
        self.copier = Copier(cfg, copy) if copy is not None else None
        self.watch = Watch() if watch else None   # inotify between the timer's ticks (local/watch.py)
        self.watch_said = False
        one_arena()   # before its restore and ticks start threads: none leaves an arena of its own behind

    def run(self) -> int:
        """Supervise CMD; the exit status. ``NoStoreNamed`` when no store was named: the
        implicit default store lives on this machine's disk, which a container loses."""
        if self.cfg.default_store:
            raise NoStoreNamed(self.cfg.store)
        try:
            lifetime = StateLock(self.cfg.state_dir, name=SUPERVISE_LOCK, patience=LOCK_PATIENCE).__enter__()
        except LockBusy as err:
            raise SupervisorRunning(err.path) from None
        try:
            return self._run()
        finally:
            lifetime.__exit__(None, None, None)

    def _run(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGCONT, self._on_continue)
        _become_subreaper()
        self._save()
        if self.restore_first:
            refused = self._restore()
            if refused is not None:
                return refused
        if self.signal is not None:
            return self._stopped_early()
        env = None
        if self.inputs is not None:
            served = self.inputs.start(stopping=lambda: self.signal is not None)
            self._serve_inputs(served)
            env = {k: v for k, v in os.environ.items() if k != "JOURNAL_INPUT_SOCKET"}
            if served:   # only a path something listens on: CMD never waits on a socket nobody serves
                env["JOURNAL_INPUT_SOCKET"] = self.inputs.path
            if self.signal is not None:   # it came while the server was starting
                self._stop_inputs()
                return self._stopped_early()
        try:
            self.child = subprocess.Popen(self.cmd, process_group=0,
                                          env=cmd_env(os.environ if env is None else env, self.pass_key_env))
        except OSError as err:
            self._stop_inputs()
            self._record_stop(f"start {self.cmd[0]}: {err.strerror or err}")
            self.failure = (self.status.last_error, type(err).__name__)
            self._fail(Part.CMD, f"{self.cmd[0]}: {err.strerror or err}", exit=127)
            return 127
        self._give_terminal()
        self.status.child_pid = self.child.pid
        self._save()
        self._say(Level.INFO, Started(store=self.cfg.store, cmd=self.cmd[0], pid=self.child.pid,
                                      restore=self.status.restore, restore_seconds=self.restore_seconds))
        if self.signal is not None:   # it came while CMD was starting
            self._forward()
        try:
            self._loop()
        except BaseException:
            self._stop()  # CMD's group is never left running unsupervised
            raise
        return self._stop()

    def _on_signal(self, signum, _frame) -> None:
        """Forward at once, even in the middle of a tick: the runtime's stop timeout runs."""
        if self.signal is None:
            self.signal = signum
            self.stop_deadline = time.monotonic() + self.grace
            if self.child is not None and self.child_status is None:
                self._forward()

    def _on_continue(self, _signum, _frame) -> None:
        self.continued = True

    def _forward(self) -> None:
        if not self.forwarded:
            self.forwarded = True
            self._signal_group(self.signal)
            self._signal_group(signal.SIGCONT)  # a stopped CMD (Ctrl-Z, SIGSTOP) must get to handle it

    def _signal_group(self, sig: int) -> bool:
        """Send ``sig`` to CMD's process group; False when no process of it is left."""
        try:
            os.killpg(self.child.pid, sig)
        except ProcessLookupError:
            return False
        except PermissionError:   # a member changed its credentials; it is still there
            return True
        return True

    def _stopped_early(self) -> int:
        """A stop signal came before CMD started: record it, say it; the exit status."""
        self._record_stop(f"stopped by signal {self.signal} before {self.cmd[0]} started")
        self._say(Level.INFO, Stopped(signal=self.signal, exit=128 + self.signal))
        return 128 + self.signal

    def _record_stop(self, why: str) -> None:
        self.status.last_error = why
        self.status.last_error_time = self.status.stopped = time.time()
        self._save()

    def _restore(self) -> int | None:
        """The startup restore: None when CMD may start, else supervise's exit status
        (2 for a configuration error, as every command exits, else 1). A restore that
        is complete but fell back to older checkpoints starts CMD (availability), and
        says so: a warning, ``status.json`` and the next checkpoint's manifest."""
        self.reporter.recent.clear()
        started = time.monotonic()
        try:
            result = restore(self.cfg, self.open_store(), self.reporter)
            release_freed()
            self.restore_seconds = time.monotonic() - started
            self.status.warnings = (list(self.reporter.recent) + result.warnings)[-10:]
            self.status.restore = restore_record(result)
            if not result.complete:
                lost = [p for t in result.trees for p in t.lost] + [t.error for t in result.trees if t.error]
                raise RestoreIncomplete(lost, [p for t in result.trees for p in t.uncreatable])
        except JournalError as err:
            self._record_stop(f"restore: {err}")
            self.failure = (self.status.last_error, type(err).__name__)
            code = err.exit_code
            self._fail(Part.RESTORE, str(err), exit=code)
            return code
        if result.fallback:
            self.reporter.warn(f"supervise: the restore fell back to older checkpoints "
                               f"({'; '.join(self.status.restore.notes)}); starting {self.cmd[0]} anyway "
                               "(`journal status` shows it, and the next checkpoint records it)")
        return None

    def summary(self, code: int) -> SuperviseResult:
        """What ``journal supervise --json`` prints when it exits."""
        error, kind = self.failure or (None, None)
        return SuperviseResult(exit=code, error=error, kind=kind, status=self.status)

    def _loop(self) -> None:
        next_tick = time.monotonic() + self.interval
        while self.signal is None and self.child_status is None:
            self._reap()
            if self.continued:
                self._resume()
            if self.inputs is not None and self.inputs.due():
                self._serve_inputs(self.inputs.start())
            if self.copier is not None and self.copier.due():
                self._copy()
            if time.monotonic() >= next_tick:
                self._tick()
                next_tick = time.monotonic() + self.interval
            time.sleep(POLL)

    def _stop(self) -> int:
        """Stop CMD's whole group (grace, then SIGKILL), then take the final checkpoint."""
        if self.signal is not None:
            self._forward()
            deadline = self.stop_deadline
        else:  # CMD exited: what is left of its group gets the same treatment
            self._signal_group(signal.SIGTERM)
            self._signal_group(signal.SIGCONT)
            deadline = time.monotonic() + self.grace
        self._wait_group(deadline)
        if self._signal_group(signal.SIGKILL):
            self._wait_group(time.monotonic() + KILL_WAIT)
            # CMD's own death by that SIGKILL, not an exit that raced it
            self.killed = self.child_status is None or self.child.returncode == -signal.SIGKILL
        for sig in STOP_SIGNALS:  # a second signal must not interrupt the final checkpoint
            signal.signal(sig, signal.SIG_IGN)
        self._stop_inputs()  # after CMD's group: its last prompts are stored
        if self.copier is not None:
            self.copier.stop()   # resumable: the next copy completes it
        self._take_terminal_back()
        if self.child.returncode is not None and self.child.returncode < 0:
            self._restore_terminal_modes()  # as a shell does after a job dies of a signal
        # CMD's own status, unless it had to be killed: then 128+SIGKILL, as a shell reports a
        # job SIGKILL ended (not 128+the stop signal, which CMD never died of).
        code = self.child_status if self.child_status is not None and not self.killed else KILLED
        self._final(code)
        self._reap()
        self.status.stopped = time.time()
        self._save()
        return code

    def _wait_group(self, deadline: float) -> None:
        while True:
            self._reap()
            if not self._signal_group(0) or time.monotonic() >= deadline:
                return
            time.sleep(POLL / 2)

    def _reap(self) -> None:
        """Collect every exited child: CMD's status, and orphans handed to us."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.inputs is not None and self.inputs.exited(pid, status):
                self._serve_inputs(False)
                continue
            if self.copier is not None and (copied := self.copier.exited(pid, status)) is not None:
                self._copied(copied)
                continue
            if self.child is None or pid != self.child.pid:
                continue
            if os.WIFSTOPPED(status):
                self._suspend()
                continue
            self.child.returncode = os.waitstatus_to_exitcode(status)
            code = self.child.returncode
            self.child_status = 128 - code if code < 0 else code

    def _give_terminal(self) -> None:
        """When supervise runs in the foreground of a terminal (``docker run -it``, a
        shell), make CMD's group the foreground group, as a shell or tini does: an
        agent TUI reading its terminal from a background group would be stopped."""
        try:
            if not os.isatty(0) or os.tcgetpgrp(0) != os.getpgrp():
                return
            if self.tty_modes is None:
                self.tty_modes = termios.tcgetattr(0)
            with _no_sigttou():
                os.tcsetpgrp(0, self.child.pid)
        except (OSError, termios.error):
            return
        self.tty = 0
        # CMD may have read the terminal before it was its own; a stopped read resumes.
        self._signal_group(signal.SIGCONT)

    def _take_terminal_back(self) -> None:
        """Make our group the terminal's foreground again, if CMD's group still holds it
        (never take it from a shell that put us in the background)."""
        if self.tty is not None:
            with contextlib.suppress(OSError), _no_sigttou():
                if os.tcgetpgrp(self.tty) == self.child.pid:
                    os.tcsetpgrp(self.tty, os.getpgrp())
            self.tty = None

    def _restore_terminal_modes(self) -> None:
        """Put the terminal's modes back as they were before CMD had it: a TUI killed
        in raw mode leaves a terminal that echoes nothing."""
        if self.tty_modes is None:
            return
        with contextlib.suppress(OSError, termios.error), _no_sigttou():
            if os.tcgetpgrp(0) == os.getpgrp():
                termios.tcsetattr(0, termios.TCSADRAIN, self.tty_modes)

    def _suspend(self) -> None:
        """CMD stopped (Ctrl-Z on the terminal it holds): stop with it, as a job does, so
        the shell gets its prompt back; ``fg`` or ``bg`` resumes us and ``_resume`` it.
        Where nobody can resume us (an orphaned process group, PID 1 of a container)
        the kernel drops our SIGTSTP, and CMD is resumed at once."""
        if self.tty is None:
            return  # not the terminal's job: whoever stopped CMD resumes it
        self._take_terminal_back()
        os.kill(os.getpid(), signal.SIGTSTP)
        self._resume()

    def _resume(self) -> None:
        self.continued = False
        self._give_terminal()
        self._signal_group(signal.SIGCONT)

    def _serve_inputs(self, serving: bool) -> None:
        """Record whether the input socket is served (``status.json``), and why not; say
        a failure, and the first success after one (not while stopping)."""
        self.status.input_socket = self.inputs.path
        self.status.input_error = None if serving else self.inputs.error
        self._save()
        if self.signal is not None:
            return
        if serving:
            self._ok(Part.INPUTS, path=self.inputs.path)
        else:
            self._fail(Part.INPUTS, self.inputs.error, retry_in=self.inputs.retry_in)

    def _stop_inputs(self) -> None:
        if self.inputs is not None and self.inputs.pid is not None:
            self.inputs.stop()
            self.status.input_error = "stopped with CMD"
            self._save()

    def _copy(self) -> None:
        """Start the copy that is due (``--copy-to``); a failure to start is said."""
        error = self.copier.start()
        if error is not None:
            self._fail(Part.COPY, error, retry_in=self.copier.retry_in())

    def _copied(self, outcome) -> None:
        """A copy ended: said when it failed, as a note when it did its work."""
        if outcome.error is not None:
            self._fail(Part.COPY, outcome.error, retry_in=self.copier.retry_in())
            return
        self._ok(Part.COPY)
        self._say(Level.DEBUG, Noted(message=outcome.summary))

    def _tick(self) -> None:
        """A timer checkpoint: said when it committed one (debug), when it failed, and
        when it succeeded after failures."""
        result, error = self._checkpoint(final=False)
        self._watch_limited()
        release_freed()   # what the tick freed goes back to the kernel: the RSS stays flat over weeks
        if error is not None:
            self._fail(Part.CHECKPOINT, error, retry_in=self.interval)
        elif result is not None:
            self._ok(Part.CHECKPOINT, seq=self.status.last.seq)
            if result.seq is not None:
                self._say(Level.DEBUG, Committed(checkpoint=_record(result)))

    def _watch_limited(self) -> None:
        """Say once that some directories could not be watched: they are checked at every tick."""
        if self.watch is not None and self.watch.limited and not self.watch_said:
            self.watch_said = True
            self._say(Level.WARNING, Noted(message="watch: some directories could not be watched with inotify "
                                                   "(fs.inotify.max_user_watches, or no inotify here); they are "
                                                   "checked in full at every tick"))

    def _final(self, code: int) -> None:
        """The final checkpoint, said in one line with the exit status ``code``."""
        result, error = self._checkpoint(final=True)
        final = Final(checkpoint=_record(result) if result is not None else None, error=error,
                      last_seq=self.status.last.seq if self.status.last else None, cmd_status=self.child_status,
                      signal=self.signal, killed=self.killed, exit=code)
        self._say(Level.ERROR if error else Level.INFO, final)

    def _checkpoint(self, final: bool):
        """One checkpoint, recorded in the status: ``(result, None)``, ``(None, error)``,
        or ``(None, None)`` for a tick skipped because another checkpoint runs."""
        started = time.monotonic()
        try:
            result = checkpoint(self.cfg, self.open_store(), self.reporter, wait=final,
                                watch=None if final else self.watch)
        except LockBusy:
            self.status.skipped_ticks += 1
            self._say(Level.DEBUG, Skipped())
            self._save()
            return None, None
        except Exception as err:  # noqa: BLE001 - PID 1 records a failed tick and keeps CMD running
            self.status.failed_ticks += 1
            self.status.last_error, self.status.last_error_time = describe_error(err), time.time()
            self._save()
            return None, self.status.last_error
        now = time.time()
        idle = result.seq is None
        seq = self.status.last.seq if idle and self.status.last else result.seq
        self.status.last = LastCheckpoint(seq=seq, time=now, seconds=time.monotonic() - started,
                                          bytes=result.bytes, objects=result.objects, idle=idle)
        self.status.last_success = now
        self.status.bytes_uploaded += result.bytes
        self.status.objects_uploaded += result.objects
        if not idle:
            self.status.checkpoints += 1
            self.status.last_commit_time = now
        self.status.warnings = list(result.warnings)[-10:]
        self._save()
        return result, None

    def _save(self) -> None:
        try:
            write_status(self.cfg.state_dir, self.status)
            self._ok(Part.STATUS)
        except OSError as err:
            self._fail(Part.STATUS, describe_error(err))
        if self.metrics_file is None:
            return
        try:
            write_metrics(self.metrics_file, self.status)
            self._ok(Part.METRICS)
        except OSError as err:
            self._fail(Part.METRICS, describe_error(err))

    def _say(self, level: Level, what: What) -> None:
        """Hand one event to the log; an error there (a closed stderr pipe, a dead
        ``| tee``) must not kill PID 1 and leave CMD unsupervised."""
        with contextlib.suppress(OSError):
            self.log(event(level, what))

    def _fail(self, part: Part, error: str, **fields) -> None:
        """Say a failure of ``part``: every time, or once per cause for ``ONCE_PER_CAUSE``."""
        failures, last = self.failing.get(part, (0, None))
        self.failing[part] = (failures + 1, error)
        if part not in ONCE_PER_CAUSE or error != last:
            self._say(Level.ERROR, Failed(part=part, error=error, **fields))

    def _ok(self, part: Part, **fields) -> None:
        """``part`` worked: say so when it had failed."""
        if part in self.failing:
            failures, _ = self.failing.pop(part)
            self._say(Level.INFO, Recovered(part=part, failures=failures, **fields))


def cmd_env(env: Mapping[str, str], pass_key_env: bool) -> dict[str, str]:
    """CMD's environment: ``env`` without the variables that open an encrypted store
    (``paths.KEY_VARS``: the agent needs none of them to work, and a passphrase there is
    one ``env`` away from any tool it runs), unless ``pass_key_env``."""
    return {k: v for k, v in env.items() if pass_key_env or k not in KEY_VARS}


class _Reporting(Reporter):
    """What the operations supervise runs (restore, checkpoint) report, as events:
    warnings at warning level, notes at debug level. It keeps the last warnings
    (``recent``, for status.json)."""

    def __init__(self, say):
        self.say = say
        self.recent: collections.deque[str] = collections.deque(maxlen=10)

    def warn(self, message: str) -> None:
        self.recent.append(message)
        self.say(Level.WARNING, Warned(message=message))

    def note(self, message: str) -> None:
        self.say(Level.DEBUG, Noted(message=message))


def _record(result):
    """A checkpoint's record, for an event: its warnings are said as events of their own."""
    return msgspec.structs.replace(checkpoint_record(result), warnings=[])


@contextlib.contextmanager
def _no_sigttou():
    """A background process changing the terminal's foreground group gets SIGTTOU."""
    old = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTTOU, old)


def _become_subreaper() -> None:
    """Ask Linux to re-parent orphaned descendants to us, so we can reap them (as PID 1 does)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
