"""A script that runs the journal CLI and SIGKILLs itself at an exact call.

``JOURNAL_TEST_KILL="fn:N"`` kills the process at the N-th call of ``os.<fn>`` (any
thread); ``N=0`` only counts, and prints ``calls=<count>`` to stderr at exit. Tests
use it to crash at a precise point instead of racing a fast operation with a timer.
"""

from __future__ import annotations

from pathlib import Path

TRIPWIRE = r'''
"""Run the journal CLI and SIGKILL this process at the N-th call of os.<fn> (any thread).
JOURNAL_TEST_KILL="fn:N"; N=0 only counts, and prints the count at exit."""
import atexit, itertools, os, signal, sys
fn, n = os.environ["JOURNAL_TEST_KILL"].split(":")
n, calls, real = int(n), itertools.count(1), getattr(os, fn)

def tripped(*args, **kwargs):
    if next(calls) == n:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)

setattr(os, fn, tripped)
atexit.register(lambda: print(f"calls={next(calls) - 1}", file=sys.stderr))
from journal.cli import main
main()
'''


def write_tripwire(directory: Path) -> Path:
    """Write the script into ``directory``; run it as ``[sys.executable, path, *args]``."""
    script = directory / "tripwire.py"
    script.write_text(TRIPWIRE)
    return script
