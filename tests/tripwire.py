"""A script that runs the journal CLI and SIGKILLs itself at an exact call.

``JOURNAL_TEST_KILL="fn:N"`` kills the process at the N-th call of ``os.<fn>`` (any
thread); ``N=0`` only counts, and prints ``calls=<count>`` to stderr at exit.
``JOURNAL_TEST_KILL="fn:after:TEXT"`` lets the first call of ``os.<fn>`` with an
argument containing TEXT complete, then kills the process. ``JOURNAL_TEST_SIGNAL`` names
another signal to send instead (``SIGSTOP``: the process stops there, holding what it
held, until the test sends SIGCONT). Tests use it to crash or pause at a precise point
instead of racing a fast operation with a timer.
"""

from __future__ import annotations

from pathlib import Path

TRIPWIRE = r'''
"""Run the journal CLI and SIGKILL this process at the N-th call of os.<fn> (any thread).
JOURNAL_TEST_KILL="fn:N"; N=0 only counts, and prints the count at exit.
JOURNAL_TEST_KILL="fn:after:TEXT": SIGKILL right after the first call naming TEXT."""
import atexit, itertools, os, signal, sys
fn, n = os.environ["JOURNAL_TEST_KILL"].split(":", 1)
after = n[len("after:"):] if n.startswith("after:") else None
n, calls, real = 0 if after is not None else int(n), itertools.count(1), getattr(os, fn)
sig = getattr(signal, os.environ.get("JOURNAL_TEST_SIGNAL", "SIGKILL"))

def tripped(*args, **kwargs):
    if next(calls) == n:
        os.kill(os.getpid(), sig)
    out = real(*args, **kwargs)
    if after is not None and any(after in os.fsdecode(a) for a in args if isinstance(a, (str, bytes, os.PathLike))):
        os.kill(os.getpid(), sig)
    return out

setattr(os, fn, tripped)
atexit.register(lambda: print(f"calls={next(calls) - 1}", file=sys.stderr))
from journal.cli.entry import main
main()
'''


def write_tripwire(directory: Path) -> Path:
    """Write the script into ``directory``; run it as ``[sys.executable, path, *args]``."""
    script = directory / "tripwire.py"
    script.write_text(TRIPWIRE)
    return script
