"""``journal supervise``: the PID-1 timer around an agent server.

Lifecycle: take ``<state_dir>/supervise.lock`` for the whole run (one supervisor per
state directory; ``journal status`` probes it) -> restore (unless told not to; an
incomplete restore never starts CMD) -> start CMD in its own process group, handing it
the terminal when supervise has one -> checkpoint every interval (never overlapping:
the state lock serializes timer, manual and final checkpoints; a tick that comes due
while one runs is skipped; a tick that fails for any reason is recorded and retried,
it never touches CMD) -> on SIGTERM/SIGINT/SIGHUP forward the signal to CMD's group at
once (even while a tick runs), wait up to ``grace`` for the whole group to exit,
SIGKILL what is left, then take the final checkpoint (nothing of CMD's group can
write behind it) and exit with CMD's status, or 128+signal when CMD had to be
killed. When CMD exits on its own: its group gets SIGTERM, ``grace``, SIGKILL; then
the final checkpoint, and exit with CMD's status. Orphaned processes re-parented to us
(as PID 1, or as a child subreaper) are reaped.
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
from ..errors import ConfigError, JournalError, LockBusy, RestoreIncomplete, SupervisorRunning, describe_error
from ..local.state import StateLock
from ..paths import KEY_VARS, SUPERVISE_LOCK
from ..report import SILENT, Reporter
from ..restore.run import restore
from ..local.activity import restore_record
from .inputs import InputSocket
from .metrics import write_metrics
from .status import LastCheckpoint, Status, write_status

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
POLL = 0.05
LOCK_PATIENCE = 1.0  # seconds: ``journal status`` probes supervise.lock for microseconds
KILL_WAIT = 5.0      # seconds to wait for a SIGKILLed group (a process in D state may linger)
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
                 restore_first: bool = True, reporter: Reporter = SILENT, serve_inputs: bool = True,
                 metrics_file: str | None = None, pass_key_env: bool = False):
        self.cfg = cfg
        self.pass_key_env = pass_key_env          # CMD gets the variables that open the store (KEY_VARS)
        self.metrics_file = metrics_file          # Prometheus text format, rewritten with the status
        self.metrics_error: str | None = None     # the last failure to write it, said once
        self.open_store = open_store
        self.cmd = cmd
        self.interval = interval
        self.grace = grace
        self.restore_first = restore_first
        self.reporter = _Unbroken(reporter)
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
        self.inputs = InputSocket(cfg, self.reporter, retry_after=interval) if serve_inputs else None

    def run(self) -> int:
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
            self._record_stop(f"stopped by signal {self.signal} before {self.cmd[0]} started")
            return 128 + self.signal
        env = None
        if self.inputs is not None:
            served = self.inputs.start(stopping=lambda: self.signal is not None)
            self._serve_inputs(served)
            env = {k: v for k, v in os.environ.items() if k != "JOURNAL_INPUT_SOCKET"}
            if served:   # only a path something listens on: CMD never waits on a socket nobody serves
                env["JOURNAL_INPUT_SOCKET"] = self.inputs.path
            if self.signal is not None:   # it came while the server was starting
                self._stop_inputs()
                self._record_stop(f"stopped by signal {self.signal} before {self.cmd[0]} started")
                return 128 + self.signal
        try:
            self.child = subprocess.Popen(self.cmd, process_group=0,
                                          env=cmd_env(os.environ if env is None else env, self.pass_key_env))
        except OSError as err:
            self._stop_inputs()
            self._record_stop(f"start {self.cmd[0]}: {err.strerror or err}")
            self.failure = (self.status.last_error, type(err).__name__)
            self.reporter.warn(f"supervise: cannot start {self.cmd[0]}: {err.strerror or err}")
            return 127
        self._give_terminal()
        self.status.child_pid = self.child.pid
        self._save()
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
        try:
            result = restore(self.cfg, self.open_store(), self.reporter)
            self.status.warnings = (list(self.reporter.recent) + result.warnings)[-10:]
            self.status.restore = restore_record(result)
            if not result.complete:
                lost = [p for t in result.trees for p in t.lost] + [t.error for t in result.trees if t.error]
                raise RestoreIncomplete(lost, [p for t in result.trees for p in t.uncreatable])
        except JournalError as err:
            self._record_stop(f"restore: {err}")
            self.failure = (self.status.last_error, type(err).__name__)
            self.reporter.warn(f"supervise: not starting {self.cmd[0]}: {err}")
            return 2 if isinstance(err, ConfigError) else 1
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
            if time.monotonic() >= next_tick:
                self._checkpoint(final=False)
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
        self._take_terminal_back()
        if self.child.returncode is not None and self.child.returncode < 0:
            self._restore_terminal_modes()  # as a shell does after a job dies of a signal
        self._checkpoint(final=True)
        self._reap()
        self.status.stopped = time.time()
        self._save()
        if self.child_status is not None and not self.killed:
            return self.child_status
        return 128 + (self.signal or signal.SIGKILL)

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
        """Record whether the input socket is served (``status.json``), and why not."""
        self.status.input_socket = self.inputs.path
        self.status.input_error = None if serving else self.inputs.error
        self._save()

    def _stop_inputs(self) -> None:
        if self.inputs is not None and self.inputs.pid is not None:
            self.inputs.stop()
            self.status.input_error = "stopped with CMD"
            self._save()

    def _checkpoint(self, final: bool) -> None:
        started = time.monotonic()
        what = f"{'final ' if final else ''}checkpoint"
        try:
            result = checkpoint(self.cfg, self.open_store(), self.reporter, wait=final)
        except LockBusy:
            self.status.skipped_ticks += 1
            self.reporter.note("supervise: a checkpoint is already running; skipping this tick")
            self._save()
            return
        except Exception as err:  # noqa: BLE001 - PID 1 records a failed tick and keeps CMD running
            self.status.failed_ticks += 1
            self.status.last_error, self.status.last_error_time = describe_error(err), time.time()
            self.reporter.warn(f"supervise: {what} failed: {self.status.last_error}")
            self._save()
            return
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

    def _save(self) -> None:
        try:
            write_status(self.cfg.state_dir, self.status)
        except OSError as err:
            self.reporter.warn(f"supervise: cannot write status: {err}")
        if self.metrics_file is None:
            return
        try:
            write_metrics(self.metrics_file, self.status)
            self.metrics_error = None
        except OSError as err:
            message = f"supervise: cannot write --metrics-file: {describe_error(err)}"
            if message != self.metrics_error:  # once per cause, not on every tick
                self.metrics_error = message
                self.reporter.warn(message)


def cmd_env(env: Mapping[str, str], pass_key_env: bool) -> dict[str, str]:
    """CMD's environment: ``env`` without the variables that open an encrypted store
    (``paths.KEY_VARS``: the agent needs none of them to work, and a passphrase there is
    one ``env`` away from any tool it runs), unless ``pass_key_env``."""
    return {k: v for k, v in env.items() if pass_key_env or k not in KEY_VARS}


class _Unbroken(Reporter):
    """The reporter, minus its I/O errors: a closed stderr pipe (a dead ``| tee``) must
    not kill PID 1 and leave CMD unsupervised. It keeps the last warnings (``recent``)."""

    def __init__(self, inner: Reporter):
        self.inner = inner
        self.recent: collections.deque[str] = collections.deque(maxlen=10)   # for status.json

    def warn(self, message: str) -> None:
        self.recent.append(message)
        with contextlib.suppress(OSError):
            self.inner.warn(message)

    def note(self, message: str) -> None:
        with contextlib.suppress(OSError):
            self.inner.note(message)

    def progress(self, done: int, total: int) -> None:
        with contextlib.suppress(OSError):
            self.inner.progress(done, total)


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
