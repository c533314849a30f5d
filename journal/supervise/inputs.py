"""The input server a supervisor runs for CMD: ``journal input serve`` in a process of its own.

The server gets its own process, not a thread of the supervisor's: the supervisor's
idle tick forks a helper to check the quiet snapshot only while it runs a single
thread (design §10), and a thread serving the socket would turn that off for good.
As a child it has its own process group (a Ctrl-C at the terminal goes to CMD, not
to it), dies with the supervisor (``PR_SET_PDEATHSIG``), tells the supervisor through
a pipe when it listens (or why it cannot), and is started again should it die while
CMD runs: at once after its first failure (prompts are refused while nothing listens),
then after a delay that doubles with each failure in a row (``restart_delay``), so a
server that cannot serve (a path in the way, a store that refuses it) is not started
in a loop. A server that served for ``STABLE_SECONDS`` before it died starts the count
again. The supervisor stops it after CMD's group is gone (so CMD's last prompts are
stored) and before the final checkpoint.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

#: Seconds the server gets to start listening (Python start-up and the store's opening).
READY_SECONDS = 60.0
#: Seconds it gets to finish the requests in flight when stopped (it allows them 10).
STOP_SECONDS = 15.0
POLL = 0.02
#: The delay before the second restart in a row; each further failure doubles it, up to ``BACKOFF_MAX``.
BACKOFF_FIRST = 1.0
BACKOFF_MAX = 60.0
#: Seconds a server must have served before it died for its restart to count as a first one.
STABLE_SECONDS = 60.0


def restart_delay(failures: int) -> float:
    """Seconds to wait before starting the server again after ``failures`` failures in a
    row: none after the first, then 1, 2, 4 ... up to 60."""
    if failures <= 1:
        return 0.0
    return min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 2))


class InputSocket:
    """The server child. ``error`` says why it does not serve (None while it does);
    ``failures`` how many times in a row it failed, ``retry_in`` the delay until the next
    start that followed the last failure."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.path = cfg.input_socket
        self.pid: int | None = None
        self.error: str | None = None
        self.retry_at: float | None = None
        self.retry_in = 0.0
        self.failures = 0
        self.serving_since: float | None = None   # monotonic
        self.starts = 0

    def start(self, stopping=lambda: False) -> bool:
        """Start the server and wait until it listens; False (and ``error``) if it cannot,
        or if ``stopping()`` turns true meanwhile (a stop signal: CMD is not started)."""
        self.starts += 1
        read_end, write_end = os.pipe()
        args = [sys.executable, "-m", "journal", "input", "serve", "--socket", self.path, "--store", self.cfg.store,
                "--ready-fd", str(write_end), "--parent-pid", str(os.getpid())]
        if self.cfg.source:
            args += ["--config", self.cfg.source]
        try:
            proc = subprocess.Popen(args, pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    process_group=0)
        except OSError as err:
            os.close(read_end)
            return self._failed(f"cannot start the input server: {err.strerror or err}")
        finally:
            os.close(write_end)
        self.pid = proc.pid
        try:
            line = _read_line(read_end, READY_SECONDS, stopping)
        finally:
            os.close(read_end)
        if line == "ready":
            self.error = None
            self.serving_since = time.monotonic()
            return True
        if line is None:  # no word in time (a store that does not answer), or a stop signal came
            self._kill()
            if stopping():
                self.error = "stopped before it listened"
                return False
            return self._failed(f"the input server did not listen on {self.path} within {READY_SECONDS:.0f}s")
        self._reap_now()
        return self._failed(line.removeprefix("error: ") or f"the input server exited before it listened on "
                                                           f"{self.path}")

    def _failed(self, why: str) -> bool:
        now = time.monotonic()
        if self.serving_since is not None and now - self.serving_since >= STABLE_SECONDS:
            self.failures = 0   # it served a while: this failure is a first one
        self.pid = self.serving_since = None
        self.error = why
        self.failures += 1
        self.retry_in = restart_delay(self.failures)
        self.retry_at = now + self.retry_in
        return False

    def exited(self, pid: int, status: int) -> bool:
        """The supervisor reaped ``pid``: True when it was the server (it is started
        again after ``retry_in`` seconds: at once, unless it keeps failing)."""
        if pid != self.pid:
            return False
        self.pid = None
        code = os.waitstatus_to_exitcode(status)
        how = f"died of signal {-code}" if code < 0 else f"exited with status {code}"
        self._failed(f"the input server {how}")
        return True

    def due(self) -> bool:
        """Whether a server that died (or never listened) is to be started again now."""
        return self.pid is None and self.retry_at is not None and time.monotonic() >= self.retry_at

    def stop(self) -> None:
        """SIGTERM; wait for the requests in flight; SIGKILL what is left."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + STOP_SECONDS
        while not self._reap_now(block=False):
            if time.monotonic() >= deadline:
                self._kill()
                break
            time.sleep(POLL)
        self.pid = self.serving_since = None
        self.retry_at = None

    def _kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap_now()
        self.pid = None

    def _reap_now(self, block: bool = True) -> bool:
        """Collect the server's exit; True once it is gone."""
        try:
            pid, _ = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # the supervisor's reaper collected it
            return True
        return pid != 0


def _read_line(fd: int, timeout: float, stopping) -> str | None:
    """One line from ``fd`` (``""`` at end of file), or None when none came in ``timeout``
    or ``stopping()`` turned true."""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or stopping():
            return None
        if not select.select([fd], [], [], min(left, POLL * 5))[0]:
            continue
        piece = os.read(fd, 4096)
        if not piece:
            break
        data += piece
    return data.decode("utf-8", "replace").strip()
