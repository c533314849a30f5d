"""The supervisor's memory over many ticks (issue 46; ``journal/heap.py``): bounded by
counts, never by how long it has run.

Under ``journal supervise`` the RSS grew with every tick while the Python heap stayed
flat: the ticks' threads (the database backup, the page-group encoders, the uploads)
each got a malloc arena of their own, and every arena kept its freed memory and its
fragments. The supervisor now keeps every thread in one arena and gives the freed
pages back after each tick. This runs the supervisor's own timer tick
(``Supervisor._tick``) in a fresh process, over a transcript and a database that
change at every tick, and counts: the malloc arenas (glibc's ``malloc_info``), the
objects the process holds between ticks, and the entries of every cache journal
keeps in a process from one tick to the next.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import Live

TICKS = 16
#: Objects the process may hold after the last tick beyond what it held after the
#: warm-up's (a tick's own records are replaced, never added to).
SLACK = 50

SCRIPT = r"""
import ctypes, gc, json, os, sqlite3, sys, tempfile

from journal.checkpoint.capture import TAILS
from journal.config import load_config
from journal.local import quiet, state
from journal.store import open_store
from journal.supervise.run import Supervisor

local, ticks = sys.argv[1], int(sys.argv[2])
rollout = os.path.join(local, "codex-home", "sessions", "2026", "01", "02", "rollout-2026-01-02T00-00-00-a.jsonl")
db = sqlite3.connect(os.path.join(local, "opencode-share", "opencode.db"), isolation_level=None)


def work(t):
    with open(rollout, "a") as fh:
        fh.write(json.dumps({"type": "event", "n": t, "pad": "x" * (200 + t)}) + "\n")
    db.execute("INSERT INTO part VALUES (?, ?)", (t, os.urandom(3000).hex()))


def arenas():
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        fp = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        return open(out.name).read().count("<heap nr=")


cfg = load_config()
sup = Supervisor(cfg, lambda: open_store(cfg.store), ["true"], interval=1.0, serve_inputs=False)
assert sup._restore() is None, sup.status.last_error
held = []
for t in range(ticks):
    work(t)
    sup._tick()
    assert sup.status.failed_ticks == 0, sup.status.last_error
    if t in (ticks // 2 - 1, ticks - 1):
        gc.collect()
        held.append(len(gc.get_objects()))
print(json.dumps({"seq": sup.status.last.seq, "arenas": arenas(), "held": held,
                  "tails": len(TAILS._tails), "tails_keep": TAILS.keep, "states": len(state._memo),
                  "quiet": len(quiet._memo) + len(quiet._checked)}))
"""


def _glibc() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL(None), "malloc_info")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc(), reason="counts malloc arenas through glibc's malloc_info")
def test_supervisor_ticks_keep_one_malloc_arena_and_hold_no_more_objects(bare_live: Live):
    """16 timer ticks, each after an append to a Codex rollout and a commit in an
    opencode database (so each starts the backup, encoding and upload threads): every
    tick commits a checkpoint; afterwards the process has one malloc arena (the old
    supervisor had one per thread that ever allocated, each keeping what it freed);
    between the 8th and the 16th tick the objects it holds grow by at most ``SLACK``;
    and each cache kept between ticks holds at most its bound (the anchors' tails
    ``TAILS.keep``, one state and one quiet snapshot for the one state directory)."""
    live = bare_live
    live.write("codex-home/sessions/2026/01/02/rollout-2026-01-02T00-00-00-a.jsonl", b'{"type":"start"}\n')
    import sqlite3

    (live.local / "opencode-share").mkdir()
    con = sqlite3.connect(live.local / "opencode-share" / "opencode.db")
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE part (id INTEGER PRIMARY KEY, data TEXT)")
    con.close()
    live.run("init", expect=0)

    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(live.local), str(TICKS)], env=live.env,
                          capture_output=True, text=True, timeout=120)

    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["seq"] == TICKS, got
    assert got["arenas"] == 1, got
    before, after = got["held"]
    assert after - before <= SLACK, got
    assert got["tails"] <= got["tails_keep"] and got["states"] <= 1 and got["quiet"] <= 2, got
