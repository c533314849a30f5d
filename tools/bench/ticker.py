"""The supervisor's ticks in a child process of their own (the history part, issue 46).

``Ticker`` starts ``python -m tools.bench.ticker`` with the store's environment: the
child builds a ``journal supervise`` ``Supervisor`` (no CMD, no input socket), runs
its start-up restore, and then, for each ``tick T`` line it reads, sets the simulated
clock to tick ``T`` and runs one timer tick through the supervisor's own code
(``Supervisor._tick``: the checkpoint, the status file, the events), as its loop does
when a tick comes due. It answers each with one JSON line: the checkpoint, the tick's
CPU (every thread) and wall, and the child's RSS and peak RSS (``VmRSS``, ``VmHWM`` of
``/proc/self/status``: the supervisor's memory alone, neither the bench's nor the
workload's). A ``peak`` line starts the peak again from the RSS now (Linux's
``clear_refs``), so each figure is the peak since the last. The agents' work between
ticks is done by the parent.

The child imports only journal and this module: what it holds is what a supervisor holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

DAY_S = 86400


class SimClock:
    """The week's time: tick ``t`` at ``start + t * step`` seconds, the last a day before
    now (or from ``start_ns``, another clock's start)."""

    def __init__(self, ticks: int, step: float, start_ns: int | None = None):
        self.step_ns = int(step * 1e9)
        self.start_ns = time.time_ns() - ticks * self.step_ns - DAY_S * 10 ** 9 if start_ns is None else start_ns
        self.tick = 0

    def time_ns(self) -> int:
        return self.start_ns + self.tick * self.step_ns

    def __getattr__(self, name):   # the rest of the ``time`` module, as it is
        return getattr(time, name)


def memory_kib() -> tuple[int, int]:
    """``(VmRSS, VmHWM)`` of this process, in KiB."""
    got = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                got[line.split(":")[0]] = int(line.split()[1])
    return got["VmRSS"], got["VmHWM"]


class Ticker:
    """The parent's end: start the child, ask for ticks, stop it."""

    def __init__(self, env: dict, ticks: int, step: float, start_ns: int):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen([sys.executable, "-m", "tools.bench.ticker", str(ticks), str(step), str(start_ns)],
                                     env={**env, "PYTHONPATH": root}, cwd=root, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.started = self._answer()

    def tick(self, t: int) -> dict:
        """Checkpoint tick ``t`` (0-based) through the supervisor; its figures."""
        self.proc.stdin.write(f"tick {t}\n")
        return self._answer()

    def reset_peak(self) -> None:
        """Start the child's peak RSS again from its RSS now."""
        self.proc.stdin.write("peak\n")
        self._answer()

    def _answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"history: the supervisor child exited {self.proc.wait()}")
        got = json.loads(line)
        if got.get("error"):
            raise RuntimeError(f"history: the supervisor child: {got['error']}")
        return got

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


def serve(ticks: int, step: float, start_ns: int) -> None:
    """The child's end (see the module docstring)."""
    import resource

    import journal.checkpoint.commit as commit
    from journal.config import load_config
    from journal.store import open_store
    from journal.supervise.run import Supervisor

    clock = SimClock(ticks, step, start_ns)
    commit.time = clock   # manifests carry the simulated time
    cfg = load_config()
    sup = Supervisor(cfg, lambda: open_store(cfg.store), ["true"], interval=step, serve_inputs=False)
    refused = sup._restore()
    say({"error": sup.status.last_error if refused is not None else None, "rss_kib": memory_kib()[0]})
    for line in sys.stdin:
        if line.startswith("peak"):
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            say({"hwm_kib": memory_kib()[1]})
            continue
        clock.tick = int(line.split()[1])
        r0, failed = resource.getrusage(resource.RUSAGE_SELF), sup.status.failed_ticks
        t0 = time.perf_counter()
        sup._tick()
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        last = sup.status.last
        rss, hwm = memory_kib()
        error = sup.status.last_error if sup.status.failed_ticks > failed else None
        say({"seq": last.seq if last else None, "bytes": last.bytes if last else 0, "error": error,
             "wall_s": wall, "cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
             "rss_kib": rss, "hwm_kib": hwm})


def say(what: dict) -> None:
    sys.stdout.write(json.dumps(what) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]))
