"""The console path's forked check (quiet._check_parts) in real processes.

`journal checkpoint` runs from cron, systemd timers, supervisors and agent harnesses;
some of them start their children with SIGCHLD ignored, a disposition that survives
exec. The kernel would then reap the forked checker itself and its answer would be
lost: the child answers through a pipe instead, and an idle tick on a
large tree still answers idle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import clean_env
from journal.local import quiet

BIN = Path(__file__).resolve().parent.parent / "bin" / "journal"


def _big_tree(live, names: int) -> None:
    root = live.local / "agent-state" / "claude" / "projects"
    for d in range(names // 100 + 1):
        sub = root / f"-home-p{d:03d}"
        sub.mkdir(parents=True)
        for f in range(100):
            (sub / f"s{f}.jsonl").write_bytes(b'{"d": %d, "f": %d}\n' % (d, f))


def _run(live, *args, ignore_sigchld: bool) -> subprocess.CompletedProcess:
    env = clean_env({"PYTHONPATH": str(BIN.parent.parent), **live.env})
    def pre():
        if ignore_sigchld:
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    return subprocess.run([sys.executable, str(BIN), *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=live.home, preexec_fn=pre)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="the split check needs two CPUs")
def test_idle_console_tick_with_sigchld_ignored_by_the_caller(bare_live):
    live = bare_live
    _big_tree(live, quiet.SPLIT_MIN_NAMES + 500)
    first = _run(live, "checkpoint", ignore_sigchld=False)
    assert first.returncode == 0, first.stderr
    assert quiet.load(live.cfg.state_dir) is not None  # a snapshot large enough to split

    plain = _run(live, "checkpoint", ignore_sigchld=False)
    assert plain.returncode == 0 and plain.stdout.startswith("idle:"), plain.stderr

    ignored = _run(live, "checkpoint", ignore_sigchld=True)
    assert ignored.returncode == 0, ignored.stderr
    assert ignored.stdout.startswith("idle:") or "checkpoint" in ignored.stdout, ignored.stdout
