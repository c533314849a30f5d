"""The supervise trial: ``journal supervise`` runs a writer, then both die of SIGKILL.

The loss bound (design §15) is counted in ticks, not in seconds, so a slow machine
cannot fail it: a line written before manifest ``s`` was listed is in manifest
``s + 2``, whose tick began after ``s + 1`` committed. The trial samples, over a
random time, how many lines (and database commits) the writer had done and then which
manifest was newest; after the kill, everything sampled at least two manifests
before the newest must be restored.

Run as ``python -m tools.reliability.supervised TREE PROGRESS`` this module is the
writer: it appends a numbered line to a transcript and makes one database commit
(``world.commit``) every few milliseconds, recording its counts and its pid in PROGRESS
after each.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .procs import run_forked
from .world import Container, commit, complete_prefix, describe_tree

INTERVAL = 0.2
TRANSCRIPT = "sessions/supervised.jsonl"
DB = "supervised.db"
ROOT = Path(__file__).resolve().parents[2]


def run_supervised(a: Container, rng, base: Path) -> tuple[list[str], bool]:
    """Run the trial in container ``a``; returns (violations, whether a kill landed)."""
    problems: list[str] = []
    progress = base / "supervised-progress.json"
    env = {**os.environ, **a.env, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    tree = a.tree("agent")
    (tree / "sessions").mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "journal", "supervise", "--interval", str(INTERVAL), "--",
           sys.executable, "-m", "tools.reliability.supervised", str(tree), str(progress)]
    err = (base / "supervise.err").open("wb")
    sup = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    samples: list[tuple[int, int, int]] = []   # (lines, commits, newest manifest listed after them)
    writer = None
    try:
        if not _wait(lambda: len(_seqs(a)) >= 2 and _progress(progress)[2], sup, 60):
            problems.append(f"supervise committed no two checkpoints in 60 s (exit {sup.poll()}); see "
                            f"{base / 'supervise.err'}")
            return problems, False
        writer = _progress(progress)[2]
        stop = time.monotonic() + rng.uniform(0.3, 1.5)
        while time.monotonic() < stop:
            lines, commits, _ = _progress(progress)
            seqs = _seqs(a)
            samples.append((lines, commits, seqs[-1] if seqs else 0))
            time.sleep(0.02)
    finally:
        # The container dies: supervise, and its writer, which supervise runs in a
        # process group of its own (so the writer leads it: its pid is the group's).
        os.killpg(sup.pid, signal.SIGKILL)
        writer = writer or _progress(progress)[2]
        if writer:
            try:
                os.killpg(writer, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sup.wait()
        err.close()
    if writer and not _wait(lambda: not _running(writer), None, 30):
        problems.append(f"the supervised writer {writer} survived its SIGKILL")
        return problems, True
    newest = _seqs(a)[-1]
    safe = [(lines, commits) for lines, commits, seen in samples if seen + 2 <= newest]
    must_lines = max((s[0] for s in safe), default=0)
    must_commits = max((s[1] for s in safe), default=0)
    fresh = Container(base / "c", a.url)
    out = run_forked(fresh.restore())
    if not out.ok or not out.value["complete"]:
        problems.append(f"a new container's restore after supervise was killed: {out.status} {out.message[-200:]}")
        return problems, True
    live = (tree / TRANSCRIPT).read_bytes()
    got = (fresh.tree("agent") / TRANSCRIPT).read_bytes()
    if not live.startswith(got) or got != complete_prefix(got):
        problems.append("the restored transcript is not a complete-line prefix of the live one")
    restored_lines = got.count(b"\n")
    if restored_lines < must_lines:
        problems.append(f"supervise lost lines older than its interval: {restored_lines} restored, "
                        f"{must_lines} were written two checkpoints before the newest ({newest})")
    db = describe_tree(fresh.tree("agent")).get(DB)
    if db is None or db[0] != "db" or db[1] < must_commits:
        problems.append(f"supervise lost database commits older than its interval: restored {db}, "
                        f"{must_commits} were done two checkpoints before the newest ({newest})")
    after = Container(base / "a", a.url)  # the same container, restarted: it checkpoints what is left
    out = run_forked(after.checkpoint())
    if not out.ok:
        problems.append(f"the checkpoint after supervise was killed: {out.status} {out.error}: {out.message[-200:]}")
        return problems, True
    verify = run_forked(after.verify())
    if not verify.ok or verify.value["errors"]:
        problems.append(f"verify --full after supervise was killed: {verify.value['errors'][:3] if verify.ok else verify.message[-200:]}")
    return problems, True


def _wait(pred, proc: subprocess.Popen | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.02)
    return False


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _seqs(a: Container) -> list[int]:
    out = run_forked(a.seqs())
    return out.value if out.ok else []


def _progress(path: Path) -> tuple[int, int, int]:
    """The writer's (lines, commits, pid), as it last recorded them."""
    try:
        data = json.loads(path.read_text())
        return data["lines"], data["commits"], data["pid"]
    except (OSError, ValueError, KeyError):
        return 0, 0, 0


def _writer(tree: str, progress: str) -> None:
    path = Path(tree) / TRANSCRIPT
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    con = sqlite3.connect(Path(tree) / DB, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    for ddl in ("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)",
                "CREATE TABLE IF NOT EXISTS kv(k INTEGER PRIMARY KEY, v BLOB)", "CREATE TABLE IF NOT EXISTS meta(c INTEGER)"):
        con.execute(ddl)
    con.execute("INSERT INTO meta(c) VALUES (0)")
    lines = commits = 0
    next_row = 1
    tmp = progress + ".tmp"
    while True:
        lines += 1
        os.write(fd, json.dumps({"n": lines, "t": time.time_ns(), "pad": "y" * (lines % 300)}).encode() + b"\n")
        commits += 1
        next_row = commit(con, DB, commits, next_row)
        with open(tmp, "w") as fh:
            fh.write(json.dumps({"lines": lines, "commits": commits, "pid": os.getpid()}))
        os.replace(tmp, progress)
        time.sleep(0.003)


if __name__ == "__main__":
    _writer(sys.argv[1], sys.argv[2])
