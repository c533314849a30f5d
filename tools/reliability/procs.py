"""One journal operation in a forked child: run whole, or killed with SIGKILL.

The child runs ``fn()`` (a journal library call) and sends its outcome back through a
pipe; the parent may kill it at an instant (``kill_after`` seconds) or the child kills
itself at its Nth file-system call (``kill_at``, ``faults.KillHook``). A fork costs a
few milliseconds where a new interpreter importing journal costs ~150, and the child
is a real process dying of a real SIGKILL: whatever it held in memory (an unclosed
hf-mount upload, a half-built pack) is lost as in a crashed container.

The parent must not hold SQLite connections or cloud clients when it forks (SQLite
and obstore's runtime do not survive a fork); the suite's controller never opens a
live database or a store itself: every store operation is a child's.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from journal.errors import JournalError

from .faults import KillHook

OK, ERROR, CRASH, KILLED = "ok", "error", "crash", "killed"
#: What journal's operations import when first used: imported once here, before the
#: first fork, so no child pays for it (an import costs a child more than its work).
WARM = ("journal.checkpoint.run", "journal.restore.run", "journal.gc.run", "journal.verify",
        "journal.sqlite.capture", "journal.sqlite.snapshot", "journal.sqlite.rebuild", "journal.repository.fetch",
        "journal.restore.writer", "journal.restore.export", "concurrent.futures", "sqlite3", "ctypes")


def warm() -> None:
    """Import what the operations need, once, in the process that forks them."""
    import importlib

    for name in WARM:
        importlib.import_module(name)


@dataclass
class Outcome:
    """How a child ended: ``ok`` (``value`` is ``fn``'s result), ``error`` (a
    ``JournalError``: ``error`` names its class, ``message`` its text), ``crash`` (any
    other exception: ``message`` is the traceback) or ``killed`` (SIGKILL, before it
    finished). ``calls`` counts its file-system calls when it was asked to count."""

    status: str
    value: Any = None
    error: str | None = None
    message: str = ""
    calls: int | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK


def limit_memory(budget: int) -> None:
    """Cap this process's address space at what it maps now plus ``budget`` bytes: an
    allocation past it fails (``MemoryError``) instead of taking the machine's memory."""
    import resource

    with open("/proc/self/statm") as fh:
        used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (used + budget, resource.RLIM_INFINITY))


def run_forked(fn: Callable[[], Any], *, kill_after: float | None = None, kill_at: int | None = None,
               count: bool = False, timeout: float = 300.0, memory: int | None = None) -> Outcome:
    """Run ``fn`` in a forked child and return how it ended (see ``Outcome``).

    ``kill_after``: SIGKILL the child that many seconds after the fork unless it has
    finished; ``kill_at``: the child SIGKILLs itself just before its Nth file-system
    call; ``count``: the child counts those calls (``Outcome.calls``); ``memory``: the
    child may map that many bytes more than it has when it starts (``limit_memory``).
    A child still running after ``timeout`` seconds is killed and reported as a crash
    (a hang)."""
    warm()
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(fn, read_end, write_end, kill_at, count, memory)
    os.close(write_end)
    data, done = bytearray(), False
    deadline = started + (kill_after if kill_after is not None else timeout)
    killed = hung = False
    try:
        while not done:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_end], [], [], max(left, 0))
            if ready:
                chunk = os.read(read_end, 1 << 16)
                if chunk:
                    data += chunk
                else:
                    done = True
            elif kill_after is not None and not killed:
                os.kill(pid, signal.SIGKILL)
                killed = True
                deadline = time.monotonic() + timeout
            else:
                os.kill(pid, signal.SIGKILL)
                hung = True
                deadline = time.monotonic() + timeout
    finally:
        os.close(read_end)
        if not done:   # interrupted (a test's timeout, a Ctrl-C): never wait for ever on a child left running
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    if hung:
        return Outcome(CRASH, message=f"the operation still ran after {timeout:.0f}s (a hang): killed",
                       seconds=seconds)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL or not data:
        return Outcome(KILLED, seconds=seconds)
    outcome: Outcome = pickle.loads(bytes(data))
    outcome.seconds = seconds
    return outcome


def _child(fn, read_end: int, write_end: int, kill_at: int | None, count: bool, memory: int | None) -> None:
    code = 0
    try:
        os.close(read_end)
        if memory is not None:
            limit_memory(memory)
        hook = KillHook(kill_at).install() if kill_at is not None or count else None
        try:
            outcome = Outcome(OK, value=fn())
        except JournalError as err:
            outcome = Outcome(ERROR, error=type(err).__name__, message=str(err), extra=getattr(err, "extra", {}))
        except BaseException as err:  # everything else is what the suite looks for
            outcome = Outcome(CRASH, error=type(err).__name__, message=traceback.format_exc())
        if hook is not None:
            hook.remove()
            outcome.calls = hook.count
        try:
            payload = pickle.dumps(outcome)
        except Exception as err:  # a result that cannot be sent is the suite's own bug
            payload = pickle.dumps(Outcome(CRASH, error=type(err).__name__, message=f"unpicklable result: {err}",
                                           calls=outcome.calls))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_end, view):]
    except BaseException:
        code = 70
    finally:
        os._exit(code)
