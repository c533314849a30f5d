#!/usr/bin/env python3
"""Benchmark journal against the legacy design and restic on a generated agent-state workload.

It answers four questions in one run: how much each checkpoint tick uploads, how long
it takes, how fast a restore is, and what it costs in memory.

Systems, all on the same workload and machine, run interleaved (the order rotates
every tick) and always as child processes, so wall and CPU time are measured alike:

* ``journal``: ``journal checkpoint --json`` with a local-directory store;
* ``legacy``: the design journal replaces, as a shell script: ``find -newer stamp``,
  ``rsync -a --files-from`` over the changed files (a Python copy when rsync is
  missing), then ``sqlite3 .backup`` + ``PRAGMA quick_check`` + a copy of each
  changed database, skipped when its stat (db and -wal size and mtime) is unchanged;
* ``restic``: ``restic backup`` of the same trees, when restic is installed.

Bytes and objects "uploaded" are measured the same way for every system: the
destination directory (journal's store, legacy's durable copy, restic's repository)
is listed with sizes, mtimes and inodes before and after a tick, and every file that
is new or changed counts once, at its full size (object storage has no append).
CPU time is the ``getrusage(RUSAGE_CHILDREN)`` delta around each child; peak RSS is
the ``ru_maxrss`` that ``wait4`` returns for that child.

Parts:

* main: the six harness trees (Codex, Claude Code, Gemini CLI, OpenClaw, opencode's
  and Hermes's SQLite databases in WAL mode), an open 8 MB Codex rollout, then
  ``--ticks`` active ticks, one idle tick and a full restore, repeated ``--runs`` times;
* tree: a 20,000-file tree, an idle tick and a one-change tick (journal vs legacy);
* sqlite: a 256 MiB database after 100 small transactions with random keys;
* big: peak RSS of ``journal checkpoint`` and ``journal restore`` of a 2 GiB file;
* gc: ``journal gc --dry-run``, ``journal gc`` (mark) and, past the grace, ``journal gc``
  (sweep) over a store of ``--gc-objects`` keys (1,000,000; and a tenth of that), built
  from real checkpoints plus synthetic garbage packs; then the store reads of ``journal
  restore`` for a transcript of ``--gc-appends`` appends, one per checkpoint, and for a
  store of ``--gc-checkpoints`` checkpoints (the CLI, with every store GET recorded).

Usage::

    .venv/bin/python tools/bench.py                      # the full benchmark (`make bench`)
    .venv/bin/python tools/bench.py --smoke --json out.json
    .venv/bin/python tools/bench.py --parts gc           # gc over 1M objects, bounded restores (~4 min)
    .venv/bin/python tools/bench.py --install-baselines  # apt-get install rsync restic sqlite3 first

Nothing is installed unless ``--install-baselines`` is given.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import marshal
import math
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MIB = 1 << 20
KIB = 1 << 10
SYSTEMS = ("journal", "legacy", "restic")

# The record header of docs/design.md section 4 (read here only to break journal's
# uploaded bytes down by record kind).
_HEADER = struct.Struct(">4sBBHQQ32s")
_KINDS = {1: "chunk", 2: "segment", 3: "page", 4: "manifest", 5: "pagemap", 6: "dbpage"}

# The six harness trees of the main workload, relative to $AM_LOCAL (journal's presets).
MAIN_TREES = ("codex-home", "agent-state/claude", "agent-state/gemini-home/.gemini", "oc-home/.openclaw",
              "opencode-share", "hermes")
MAIN_DBS = ("opencode-share/opencode.db", "hermes/state.db")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------
# Running children and measuring them
# ----------------------------------------------------------------------------------------

class Child:
    """One finished child process: exit code, output, wall and CPU seconds, peak RSS."""

    def __init__(self, rc, out, err, wall, cpu, maxrss_kib):
        self.rc, self.out, self.err = rc, out, err
        self.wall, self.cpu, self.maxrss_kib = wall, cpu, maxrss_kib


# Children are started by a small, long-lived spawner process, not by this one: Linux
# carries a process's RSS high-water mark across exec (signal->maxrss), so a child
# forked from this large Python process would report at least this process's RSS as
# its peak. The spawner stays small (a bare interpreter, ~9 MiB), forks and execs
# each child, measures wall time around fork..wait4, CPU as the RUSAGE_CHILDREN delta
# and peak RSS from wait4, and reports them back over a pipe.
SPAWNER = r"""
import marshal, os, resource, sys, time
rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
os.set_inheritable(rfd, False)
os.set_inheritable(wfd, False)
while True:
    head = os.read(rfd, 8)
    if len(head) < 8:
        break
    n = int.from_bytes(head, "big")
    buf = b""
    while len(buf) < n:
        buf += os.read(rfd, n - len(buf))
    cmd, env, cwd, out, err = marshal.loads(buf)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            if cwd:
                os.chdir(cwd)
            fd = os.open(os.devnull, os.O_RDONLY)
            os.dup2(fd, 0)
            os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
            os.execvpe(cmd[0], cmd, env)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    reply = marshal.dumps((os.waitstatus_to_exitcode(status), wall, cpu, ru.ru_maxrss))
    os.write(wfd, len(reply).to_bytes(8, "big") + reply)
"""


class Spawner:
    def __init__(self, tmpdir: str):
        self.tmpdir = tmpdir
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", SPAWNER, str(req_r), str(rep_w)],
                                     pass_fds=(req_r, rep_w), stdin=subprocess.DEVNULL)
        os.close(req_r)
        os.close(rep_w)

    def run(self, cmd: list[str], env: dict | None, cwd: str | None) -> tuple[int, str, str, float, float, int]:
        out, err = os.path.join(self.tmpdir, "child.out"), os.path.join(self.tmpdir, "child.err")
        req = marshal.dumps((list(cmd), dict(os.environ if env is None else env), cwd, out, err))
        os.write(self.req_w, len(req).to_bytes(8, "big") + req)
        head = self._read(8)
        rc, wall, cpu, maxrss = marshal.loads(self._read(int.from_bytes(head, "big")))
        with open(out, "rb") as fh:
            stdout = fh.read().decode(errors="replace")
        with open(err, "rb") as fh:
            stderr = fh.read().decode(errors="replace")
        return rc, stdout, stderr, wall, cpu, maxrss

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            piece = os.read(self.rep_r, n - len(buf))
            if not piece:
                raise RuntimeError("the spawner process died")
            buf += piece
        return buf

    def close(self) -> None:
        os.close(self.req_w)
        self.proc.wait()
        os.close(self.rep_r)


_SPAWNER: Spawner | None = None


def run_child(cmd: list[str], env: dict | None = None, cwd: str | None = None, check: bool = True) -> Child:
    """Run ``cmd`` to completion through the spawner; see SPAWNER."""
    child = Child(*_SPAWNER.run(cmd, env, cwd))
    if check and child.rc != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... exited {child.rc}:\n{child.err[-2000:]}\n{child.out[-1000:]}")
    return child


def snapshot(root: str, skip: tuple[str, ...] = (".tmp", "locks")) -> dict[str, tuple[int, int, int]]:
    """Every regular file under ``root``: relative path -> (size, mtime_ns, inode)."""
    found: dict[str, tuple[int, int, int]] = {}
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            it = os.scandir(os.path.join(root, rel) if rel else root)
        except FileNotFoundError:
            continue
        with it:
            for d in it:
                path = f"{rel}/{d.name}" if rel else d.name
                if not rel and d.name in skip:
                    continue
                if d.is_dir(follow_symlinks=False):
                    stack.append(path)
                elif d.is_file(follow_symlinks=False):
                    st = d.stat(follow_symlinks=False)
                    found[path] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return found


def uploaded(before: dict, after: dict) -> tuple[int, int, list[str]]:
    """(objects, bytes, paths) created or changed between two snapshots, at full size."""
    paths = sorted(p for p, sig in after.items() if before.get(p) != sig)
    return len(paths), sum(after[p][0] for p in paths), paths


def figure(child: Child, objects: int | None = None, nbytes: int | None = None, **extra) -> dict:
    fig = {"bytes": nbytes, "objects": objects, "wall_s": round(child.wall, 6), "cpu_s": round(child.cpu, 6),
           "maxrss_kib": child.maxrss_kib}
    fig.update(extra)
    return fig


def tree_stats(root: str, skip_names: tuple[str, ...] = ()) -> tuple[int, int]:
    """(regular files, bytes) under ``root``."""
    files = size = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip_names]
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if os.path.isfile(os.path.join(dirpath, name)) and not os.path.islink(os.path.join(dirpath, name)):
                files += 1
                size += st.st_size
    return files, size


def copy_tree(src: str, dst: str) -> None:
    """A faithful copy (mtimes, modes) of a template tree, outside any measurement."""
    if shutil.which("cp"):
        subprocess.run(["cp", "-a", src, dst], check=True)
    else:
        shutil.copytree(src, dst, symlinks=True)


def rmtree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ----------------------------------------------------------------------------------------
# Generated, deterministic agent-state content
# ----------------------------------------------------------------------------------------

_COMMON = ("the a to of and in is that for it with as on be this are by file test function we can not "
           "or from at have an will if which value error return line code should use run new when all "
           "there now then check change config path data list make need one so update type but add "
           "step plan call result output input string build module import class method fix issue "
           "because also only into first next after before where does more read write open close "
           "tool shell command exit status true false null none self args kwargs json yaml toml src "
           "tests docs main index server client request response cache store session token model").split()


class Text:
    """Word-level pseudo-English with a Zipf vocabulary: compresses about like real transcripts."""

    def __init__(self, seed: int):
        rng = random.Random(f"{seed}:vocab")
        sylls = ["ka", "to", "re", "mi", "an", "el", "or", "un", "is", "at", "en", "pro", "con", "de", "tra",
                 "ver", "ment", "ion", "ly", "er", "st", "qu", "ix", "al", "im", "sh", "ph", "ble", "ous", "ing"]
        words = list(_COMMON)
        seen = set(words)
        while len(words) < 4000:
            w = "".join(rng.choice(sylls) for _ in range(rng.randint(1, 4)))
            if rng.random() < 0.08:
                w = w + rng.choice(["_id", ".py", ".ts", "()", "/", "_test", ".json", ":"])
            if w not in seen:
                seen.add(w)
                words.append(w)
        acc, cum = 0.0, []
        for rank in range(1, len(words) + 1):
            acc += 1.0 / rank ** 1.05
            cum.append(acc)
        # One long Zipf-distributed word stream; text is a random window of it (drawing
        # every word afresh is what made generation slow).
        self.stream = rng.choices(words, cum_weights=cum, k=self.STREAM)
        self.chars = " ".join(self.stream[: self.STREAM // 2])

    STREAM = 1 << 21

    def text(self, rng: random.Random, nwords: int) -> str:
        n = min(max(1, nwords), self.STREAM - 1)
        i = rng.randrange(self.STREAM - n)
        return " ".join(self.stream[i:i + n])

    def sized(self, rng: random.Random, nbytes: int) -> str:
        n = min(max(1, nbytes), len(self.chars) - 1)
        i = rng.randrange(len(self.chars) - n)
        return self.chars[i:i + n]


_TEXTS: dict[int, Text] = {}


def text_for(seed: int) -> Text:
    if seed not in _TEXTS:
        _TEXTS[seed] = Text(seed)
    return _TEXTS[seed]


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _ts(base: float, offset: float) -> str:
    t = _dt.datetime.fromtimestamp(base + offset, _dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _lognormal_size(rng: random.Random, median: int, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


class Lines:
    """JSONL lines in each harness's shape."""

    def __init__(self, text: Text):
        self.t = text

    def _len(self, rng: random.Random) -> int:
        # most messages are short, tool outputs are sometimes long
        return _lognormal_size(rng, 60, 1.1, 3, 2500)

    def codex(self, rng: random.Random, ts: str, session: str) -> dict:
        r = rng.random()
        if r < 0.35:
            role = rng.choice(["assistant", "user", "assistant"])
            kind = "output_text" if role == "assistant" else "input_text"
            payload = {"type": "message", "role": role, "content": [{"type": kind, "text": self.t.text(rng, self._len(rng))}]}
            return {"timestamp": ts, "type": "response_item", "payload": payload}
        if r < 0.55:
            call = f"call_{rng.getrandbits(96):024x}"
            args = json.dumps({"command": ["bash", "-lc", self.t.text(rng, rng.randint(3, 14))],
                               "workdir": "/home/node/work", "timeout_ms": 120000})
            return {"timestamp": ts, "type": "response_item",
                    "payload": {"type": "function_call", "name": "shell", "arguments": args, "call_id": call}}
        if r < 0.75:
            out = json.dumps({"output": self.t.text(rng, self._len(rng) * 2), "metadata": {"exit_code": rng.choice([0, 0, 0, 1]),
                              "duration_seconds": round(rng.random() * 3, 1)}})
            return {"timestamp": ts, "type": "response_item",
                    "payload": {"type": "function_call_output", "call_id": f"call_{rng.getrandbits(96):024x}", "output": out}}
        if r < 0.9:
            n = rng.randint(1000, 200000)
            return {"timestamp": ts, "type": "event_msg", "payload": {"type": "token_count", "info": {
                "total_token_usage": {"input_tokens": n, "cached_input_tokens": n // 2, "output_tokens": n // 9,
                                      "reasoning_output_tokens": n // 20, "total_tokens": n + n // 9},
                "model_context_window": 272000}, "rate_limits": {"primary": {"used_percent": rng.random() * 40}}}}
        return {"timestamp": ts, "type": "response_item", "payload": {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": self.t.text(rng, self._len(rng))}], "encrypted_content": None}}

    def claude(self, rng: random.Random, ts: str, session: str, parent: str | None, cwd: str) -> dict:
        role = rng.choice(["user", "assistant", "assistant"])
        if role == "assistant":
            content = [{"type": "text", "text": self.t.text(rng, self._len(rng))}]
            if rng.random() < 0.4:
                content.append({"type": "tool_use", "id": f"toolu_{rng.getrandbits(96):024x}", "name": rng.choice(
                    ["Bash", "Read", "Edit", "Grep"]), "input": {"command": self.t.text(rng, rng.randint(3, 12))}})
            msg = {"id": f"msg_{rng.getrandbits(96):024x}", "type": "message", "role": "assistant",
                   "model": "claude-sonnet-4-5", "content": content, "stop_reason": "end_turn",
                   "usage": {"input_tokens": rng.randint(1, 9000), "output_tokens": rng.randint(1, 3000)}}
        else:
            if rng.random() < 0.5:
                content = [{"type": "tool_result", "tool_use_id": f"toolu_{rng.getrandbits(96):024x}",
                            "content": self.t.text(rng, self._len(rng) * 2)}]
            else:
                content = self.t.text(rng, self._len(rng) // 2)
            msg = {"role": "user", "content": content}
        return {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                "sessionId": session, "version": "2.1.39", "gitBranch": "main", "type": role, "message": msg,
                "uuid": _uuid(rng), "timestamp": ts}

    def gemini(self, rng: random.Random, ts: str, i: int) -> dict:
        kind = "user" if i % 2 == 0 else "gemini"
        rec = {"id": _uuid(rng), "timestamp": ts, "type": kind, "content": self.t.text(rng, self._len(rng))}
        if kind == "gemini":
            rec["thoughts"] = [{"subject": self.t.text(rng, 4), "description": self.t.text(rng, 30), "timestamp": ts}]
            rec["tokens"] = {"input": rng.randint(100, 90000), "output": rng.randint(10, 4000), "cached": 0,
                             "thoughts": rng.randint(0, 900), "tool": 0, "total": rng.randint(100, 95000)}
            rec["model"] = "gemini-2.5-pro"
        return rec

    def openclaw(self, rng: random.Random, ts: str, ms: int) -> dict:
        role = rng.choice(["user", "assistant", "assistant", "toolResult"])
        msg: dict = {"role": role, "timestamp": ms}
        if role == "assistant":
            msg["content"] = [{"type": "text", "text": self.t.text(rng, self._len(rng))}]
            msg.update({"api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
                        "usage": {"input": rng.randint(1, 9000), "output": rng.randint(1, 2000), "cacheRead": 0,
                                  "cacheWrite": 0, "cost": {"total": round(rng.random() / 10, 5)}},
                        "stopReason": "stop"})
        elif role == "toolResult":
            msg.update({"toolCallId": f"toolu_{rng.getrandbits(64):016x}", "toolName": "bash",
                        "content": [{"type": "text", "text": self.t.text(rng, self._len(rng) * 2)}], "isError": False})
        else:
            msg["content"] = [{"type": "text", "text": self.t.text(rng, self._len(rng) // 2)}]
        return {"type": "message", "timestamp": ts, "message": msg}


def _dump(rec: dict) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def write_jsonl(path: str, target: int, make_line) -> int:
    """Write lines from ``make_line(i)`` until ``path`` holds at least ``target`` bytes."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    size = 0
    i = 0
    with open(path, "wb") as fh:
        buf = []
        while size < target:
            line = _dump(make_line(i))
            buf.append(line)
            size += len(line)
            i += 1
            if len(buf) >= 512:
                fh.write(b"".join(buf))
                buf.clear()
        fh.write(b"".join(buf))
    return size


def write_file(path: str, data: bytes | str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)


OPENCODE_SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, time_created INTEGER NOT NULL,
                      time_updated INTEGER NOT NULL);
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id), parent_id TEXT,
                      title TEXT NOT NULL, version TEXT NOT NULL, time_created INTEGER NOT NULL,
                      time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX session_project_idx ON session(project_id);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
                      time_created INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX message_session_idx ON message(session_id, time_created);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
                   session_id TEXT NOT NULL, time_created INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX part_message_idx ON part(message_id);
CREATE INDEX part_session_idx ON part(session_id);
"""

HERMES_SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
                       system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
                       end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
                       input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0, title TEXT);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
                       role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
                       timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT);
CREATE INDEX idx_messages_session ON messages(session_id, timestamp);
CREATE INDEX idx_sessions_started ON sessions(started_at DESC);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content=messages, content_rowid=id);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content); END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
  INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
  INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content); END;
"""

BASE_TIME = _dt.datetime(2026, 11, 2, 9, 0, tzinfo=_dt.timezone.utc).timestamp()


def _db_size(con: sqlite3.Connection) -> int:
    return con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]


class OpencodeDB:
    """opencode's session/message/part tables: JSON ``data`` columns, UUID keys."""

    def __init__(self, text: Text):
        self.t = text

    def create(self, path: str, target: int, rng: random.Random) -> dict:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        con = sqlite3.connect(path, isolation_level=None)
        con.executescript(OPENCODE_SCHEMA)
        project = _uuid(rng)
        con.execute("INSERT INTO project VALUES (?,?,?,?,?)", (project, "/home/node/work", "git", 1796000000000,
                                                               1796000000000))
        sessions: list[str] = []
        now = 1796000000000
        while _db_size(con) < target:
            con.execute("BEGIN")
            session = _uuid(rng)
            sessions.append(session)
            con.execute("INSERT INTO session VALUES (?,?,?,?,?,?,?,?)", self._session(rng, session, project, now))
            for _ in range(rng.randint(10, 60)):
                now += rng.randint(500, 30000)
                self.add_message(con, rng, session, now)
            con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        return {"project": project, "session": sessions[-1], "sessions": len(sessions), "now": now}

    def _session(self, rng, session, project, now):
        data = json.dumps({"title": self.t.text(rng, 6), "summary": {"additions": rng.randint(0, 400),
                           "deletions": rng.randint(0, 200), "files": rng.randint(0, 30)}, "share": None})
        return (session, project, None, self.t.text(rng, 5), "1.1.20", now, now, data)

    def add_message(self, con, rng, session, now, parts: tuple[int, int] = (1, 5), size: int | None = None) -> str:
        mid = _uuid(rng)
        role = rng.choice(["user", "assistant", "assistant"])
        mdata = {"role": role, "time": {"created": now, "completed": now + rng.randint(100, 9000)},
                 "modelID": "claude-sonnet-4-5", "providerID": "anthropic", "mode": "build",
                 "cost": round(rng.random() / 20, 5), "tokens": {"input": rng.randint(1, 9000),
                 "output": rng.randint(1, 3000), "reasoning": 0, "cache": {"read": rng.randint(0, 90000), "write": 0}}}
        con.execute("INSERT INTO message VALUES (?,?,?,?)", (mid, session, now, json.dumps(mdata)))
        for _ in range(rng.randint(*parts)):
            self.add_part(con, rng, session, mid, now, size)
        return mid

    def add_part(self, con, rng, session, mid, now, size: int | None = None) -> str:
        pid = _uuid(rng)
        n = size if size is not None else _lognormal_size(rng, 700, 1.0, 60, 12000)
        if rng.random() < 0.5:
            pdata = {"type": "text", "text": self.t.sized(rng, n), "time": {"start": now, "end": now + 50}}
        else:
            pdata = {"type": "tool", "tool": rng.choice(["bash", "read", "edit", "grep"]), "callID": f"toolu_{rng.getrandbits(64):016x}",
                     "state": {"status": "completed", "input": {"command": self.t.text(rng, 8)},
                               "output": self.t.sized(rng, n), "time": {"start": now, "end": now + 900}}}
        con.execute("INSERT INTO part VALUES (?,?,?,?,?)", (pid, mid, session, now, json.dumps(pdata)))
        return pid


class HermesDB:
    """Hermes's state.db: sessions and messages, with an FTS5 index kept by triggers."""

    def __init__(self, text: Text):
        self.t = text

    def create(self, path: str, target: int, rng: random.Random) -> dict:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        con = sqlite3.connect(path, isolation_level=None)
        con.executescript(HERMES_SCHEMA)
        now = BASE_TIME
        session = ""
        n = 0
        while _db_size(con) < target:
            con.execute("BEGIN")
            session = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now)) + f"_{rng.getrandbits(24):06x}"
            con.execute("INSERT INTO sessions (id, source, user_id, model, started_at, title) VALUES (?,?,?,?,?,?)",
                        (session, rng.choice(["cli", "telegram", "discord"]), "u1", "hermes-4-405b", now,
                         self.t.text(rng, 5)))
            for _ in range(rng.randint(8, 50)):
                now += rng.randint(2, 120)
                self.add_message(con, rng, session, now)
                n += 1
            con.execute("UPDATE sessions SET message_count = ?, ended_at = ? WHERE id = ?", (n, now, session))
            con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        return {"session": session, "now": now}

    def add_message(self, con, rng, session, now) -> None:
        role = rng.choice(["user", "assistant", "assistant", "tool"])
        calls = None
        if role == "assistant" and rng.random() < 0.4:
            calls = json.dumps([{"id": f"call_{rng.getrandbits(64):016x}", "type": "function", "function": {
                "name": "terminal", "arguments": json.dumps({"command": self.t.text(rng, 8)})}}])
        con.execute("INSERT INTO messages (session_id, role, content, tool_calls, tool_name, timestamp, token_count)"
                    " VALUES (?,?,?,?,?,?,?)",
                    (session, role, self.t.sized(rng, _lognormal_size(rng, 500, 1.0, 20, 8000)), calls,
                     "terminal" if role == "tool" else None, now, rng.randint(5, 3000)))


# ----------------------------------------------------------------------------------------
# The main workload: six harness trees, then ticks
# ----------------------------------------------------------------------------------------

def generate_main(local: str, seed: int, scale: float) -> dict:
    """Generate the six harness trees under ``local``; returns what the ticks need."""
    text = text_for(seed)
    lines = Lines(text)
    rng = random.Random(f"{seed}:main")
    info: dict = {"open": {}}

    def count(n: float, lo: int = 1) -> int:
        return max(lo, round(n * scale))

    # Codex: closed rollouts spread over November, plus the open 8 MB one of today.
    codex = os.path.join(local, "codex-home")
    for i in range(count(30, 2)):
        day = 1 + i * 29 // max(1, count(30, 2))
        base = BASE_TIME + (day - 1) * 86400 + rng.randint(0, 40000)
        sid = _uuid(rng)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(base))
        path = os.path.join(codex, f"sessions/2026/11/{day:02d}/rollout-{stamp}-{sid}.jsonl")
        size = _lognormal_size(rng, 250 * KIB, 1.0, 8 * KIB, 3 * MIB)
        write_jsonl(path, size, lambda j, b=base, s=sid: (
            {"timestamp": _ts(b, 0), "type": "session_meta", "payload": {"id": s, "cwd": "/home/node/work",
             "originator": "codex_cli_rs", "cli_version": "0.104.0", "model_provider": "openai"}} if j == 0
            else lines.codex(rng, _ts(b, j * 1.7), s)))
    open_base = BASE_TIME + 30 * 86400
    open_sid = _uuid(rng)
    open_rollout = f"codex-home/sessions/2026/12/02/rollout-2026-12-02T09-00-00-{open_sid}.jsonl"
    info["open"]["codex"] = open_rollout
    write_jsonl(os.path.join(local, open_rollout), max(64 * KIB, int(8 * MIB * min(1.0, scale * 4))),
                lambda j: lines.codex(rng, _ts(open_base, j * 0.9), open_sid))
    write_jsonl(os.path.join(codex, "history.jsonl"), count(120 * KIB, 4 * KIB), lambda j: {
        "session_id": open_sid, "ts": 1796000000 + j * 40, "text": text.text(rng, rng.randint(4, 40))})
    write_file(os.path.join(codex, "config.toml"),
               'model = "gpt-5.1-codex"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
               '[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "docs-mcp"]\n')
    write_file(os.path.join(codex, "version.json"), json.dumps({"latest_version": "0.104.0",
                                                               "last_checked_at": "2026-12-01T08:00:00Z"}))
    write_file(os.path.join(codex, "AGENTS.md"), "# Agents\n\n" + text.text(rng, 400) + "\n")
    write_file(os.path.join(codex, "log/codex-tui.log"), "".join(
        f"2026-12-02T09:{j // 60 % 60:02d}:{j % 60:02d}Z INFO {text.text(rng, 12)}\n" for j in range(count(2000, 50))))

    # Claude Code: projects/<dir>/<uuid>.jsonl (some with subagents), todos, settings.
    claude = os.path.join(local, "agent-state/claude")
    for p in range(count(8)):
        pdir = f"projects/-home-node-work-{text.text(rng, 1).replace('/', '')}-{p}"
        for s in range(rng.randint(1, 6) if p else 3):
            sid = _uuid(rng)
            base = BASE_TIME + rng.randint(0, 29 * 86400)
            size = _lognormal_size(rng, 300 * KIB, 1.0, 10 * KIB, 4 * MIB)
            parent = [None]

            def make(j, sid=sid, base=base, parent=parent):
                rec = lines.claude(rng, _ts(base, j * 2.3), sid, parent[0], "/home/node/work")
                parent[0] = rec["uuid"]
                return rec
            rel = f"agent-state/claude/{pdir}/{sid}.jsonl"
            write_jsonl(os.path.join(local, rel), size, make)
            if p == 0 and s == 2:
                info["open"]["claude"] = rel
            if rng.random() < 0.3:
                write_jsonl(os.path.join(claude, pdir, sid, f"subagents/agent-{rng.getrandbits(28):07x}.jsonl"),
                            _lognormal_size(rng, 60 * KIB, 1.0, 4 * KIB, MIB), make)
    for _ in range(count(30)):
        write_file(os.path.join(claude, f"todos/{_uuid(rng)}-agent-{_uuid(rng)}.json"), json.dumps(
            [{"content": text.text(rng, 8), "status": rng.choice(["completed", "pending", "in_progress"]),
              "activeForm": text.text(rng, 6)} for _ in range(rng.randint(0, 8))]))
    write_file(os.path.join(claude, "settings.json"), json.dumps({"permissions": {"allow": ["Bash(*)"]},
                                                                  "model": "sonnet", "statusLine": None}))

    # Gemini CLI: tmp/<project hash>/chats/session-*.jsonl, logs.json, settings.
    gemini = os.path.join(local, "agent-state/gemini-home/.gemini")
    for p in range(count(3)):
        phash = f"{rng.getrandbits(256):064x}"
        for c in range(rng.randint(1, 5) if p else 2):
            base = BASE_TIME + rng.randint(0, 29 * 86400)
            cid = f"{rng.getrandbits(32):08x}"
            rel = (f"agent-state/gemini-home/.gemini/tmp/{phash}/chats/session-"
                   f"{time.strftime('%Y-%m-%dT%H-%M', time.gmtime(base))}-{cid}.jsonl")
            write_jsonl(os.path.join(local, rel), _lognormal_size(rng, 100 * KIB, 1.0, 4 * KIB, 2 * MIB),
                        lambda j, b=base: lines.gemini(rng, _ts(b, j * 4.1), j))
            if p == 0 and c == 1:
                info["open"]["gemini"] = rel
        write_file(os.path.join(gemini, f"tmp/{phash}/logs.json"), json.dumps(
            [{"sessionId": _uuid(rng), "messageId": j, "type": "user", "message": text.text(rng, 10),
              "timestamp": _ts(BASE_TIME, j)} for j in range(rng.randint(5, 60))]))
    write_file(os.path.join(gemini, "settings.json"), json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}},
                                                                  "general": {"checkpointing": {"enabled": True}}}))
    write_file(os.path.join(gemini, "installation_id"), _uuid(rng))

    # OpenClaw: agents/main/sessions/<uuid>.jsonl, the sessions.json index, openclaw.json.
    oc = os.path.join(local, "oc-home/.openclaw")
    index = {}
    for s in range(count(12, 2)):
        sid = _uuid(rng)
        base = BASE_TIME + rng.randint(0, 29 * 86400)
        rel = f"oc-home/.openclaw/agents/main/sessions/{sid}.jsonl"
        write_jsonl(os.path.join(local, rel), _lognormal_size(rng, 400 * KIB, 1.0, 8 * KIB, 3 * MIB),
                    lambda j, b=base, sid=sid: {"type": "session", "id": sid, "timestamp": _ts(b, 0),
                                                "cwd": "/home/node/work", "provider": "anthropic",
                                                "modelId": "claude-sonnet-4-5"} if j == 0
                    else lines.openclaw(rng, _ts(b, j * 3.0), int((b + j * 3.0) * 1000)))
        key = f"agent:main:{rng.choice(['telegram', 'discord', 'main'])}:{rng.getrandbits(40)}"
        index[key] = {"sessionId": sid, "updatedAt": int(base * 1000), "systemSent": True, "abortedLastRun": False,
                      "chatType": "direct", "inputTokens": rng.randint(0, 90000), "outputTokens": rng.randint(0, 9000),
                      "totalTokens": rng.randint(0, 99000), "model": "claude-sonnet-4-5", "contextTokens": 200000,
                      "sessionFile": os.path.join("/home/node/local", rel), "label": text.text(rng, 4)}
        if s == 1:
            info["open"]["openclaw"] = rel
            info["openclaw_key"] = key
    info["sessions_json"] = "oc-home/.openclaw/agents/main/sessions/sessions.json"
    info["sessions_index"] = index
    write_file(os.path.join(local, info["sessions_json"]), json.dumps(index, indent=2))
    write_file(os.path.join(oc, "openclaw.json"), json.dumps({"agents": {"defaults": {"model": {"primary":
               "anthropic/claude-sonnet-4-5"}, "workspace": "/home/node/work"}}, "gateway": {"port": 18789}}, indent=2))

    # opencode and Hermes: SQLite in WAL mode.
    info["opencode"] = OpencodeDB(text).create(os.path.join(local, MAIN_DBS[0]), int(20 * MIB * scale),
                                               random.Random(f"{seed}:opencode"))
    write_file(os.path.join(local, "opencode-share/log/2026-12-02T090000.log"),
               "".join(f"INFO 2026-12-02T09:00:{j % 60:02d} service=session {text.text(rng, 10)}\n" for j in range(200)))
    info["hermes"] = HermesDB(text).create(os.path.join(local, MAIN_DBS[1]), int(10 * MIB * scale),
                                           random.Random(f"{seed}:hermes"))
    write_file(os.path.join(local, "hermes/config.yaml"), "model:\n  default: hermes-4-405b\nterminal:\n  backend: local\n")
    write_file(os.path.join(local, "hermes/memories/MEMORY.md"), "# Memory\n\n" + text.text(rng, 300) + "\n")
    info["seed"] = seed
    return info


class LiveWorkload:
    """The agents of one run: open transcripts, open database writers, and the ticks."""

    def __init__(self, local: str, info: dict, seed: int):
        self.local = local
        self.info = info
        self.seed = seed
        self.text = text_for(seed)
        self.lines = Lines(self.text)
        self.handles = {name: open(os.path.join(local, rel), "ab") for name, rel in info["open"].items()}
        self.opencode = sqlite3.connect(os.path.join(local, MAIN_DBS[0]), isolation_level=None)
        self.hermes = sqlite3.connect(os.path.join(local, MAIN_DBS[1]), isolation_level=None)
        self.pending_tail = b""
        self.index = json.loads(json.dumps(info["sessions_index"]))
        self.appended = 0

    def _append(self, name: str, rng: random.Random, nbytes: int, make, torn: bool = False) -> None:
        out = bytearray(self.pending_tail if name == "codex" else b"")
        i = 0
        while len(out) < nbytes:
            out += _dump(make(i))
            i += 1
        if torn:
            line = _dump(make(i))
            cut = rng.randint(10, len(line) - 2)
            out += line[:cut]
            self.pending_tail = line[cut:]
        elif name == "codex":
            self.pending_tail = b""
        fh = self.handles[name]
        fh.write(out)
        fh.flush()
        self.appended += len(out)

    def tick(self, t: int) -> None:
        """One active tick: appends to four open transcripts (the Codex one ends torn),
        rewrites the OpenClaw session index, and commits three times in each database."""
        rng = random.Random(f"{self.seed}:tick:{t}")
        base = BASE_TIME + 30 * 86400 + 3600 + t * 15
        L = self.lines
        self._append("codex", rng, rng.randint(3 * KIB, 6 * KIB), lambda j: L.codex(rng, _ts(base, j * 0.2), "open"),
                     torn=True)
        self._append("claude", rng, rng.randint(2 * KIB, 4 * KIB),
                     lambda j: L.claude(rng, _ts(base, j * 0.3), "open", None, "/home/node/work"))
        self._append("gemini", rng, rng.randint(1 * KIB, 3 * KIB), lambda j: L.gemini(rng, _ts(base, j * 0.5), j))
        self._append("openclaw", rng, rng.randint(2 * KIB, 4 * KIB),
                     lambda j: L.openclaw(rng, _ts(base, j * 0.4), int((base + j) * 1000)))
        entry = self.index[self.info["openclaw_key"]]
        entry["updatedAt"] = int(base * 1000)
        entry["totalTokens"] += rng.randint(100, 4000)
        entry["inputTokens"] += rng.randint(100, 3000)
        path = os.path.join(self.local, self.info["sessions_json"])
        with open(path + ".tmp", "w") as fh:
            json.dump(self.index, fh, indent=2)
        os.replace(path + ".tmp", path)  # a rewrite: a new inode, like the real app
        # opencode: a message, its parts, the session's time_updated: three commits.
        oc = OpencodeDB(self.text)
        session = self.info["opencode"]["session"]
        now = self.info["opencode"]["now"] + (t + 1) * 15000
        self.opencode.execute("BEGIN")
        mid = oc.add_message(self.opencode, rng, session, now, parts=(0, 0))
        self.opencode.execute("COMMIT")
        self.opencode.execute("BEGIN")
        for _ in range(rng.randint(2, 4)):
            oc.add_part(self.opencode, rng, session, mid, now)
        self.opencode.execute("COMMIT")
        self.opencode.execute("UPDATE session SET time_updated = ? WHERE id = ?", (now, session))
        # Hermes: user message, assistant message (FTS5 triggers index both), session counters.
        hm = HermesDB(self.text)
        hs = self.info["hermes"]["session"]
        hnow = self.info["hermes"]["now"] + (t + 1) * 15
        for _ in range(2):
            self.hermes.execute("BEGIN")
            hm.add_message(self.hermes, rng, hs, hnow)
            self.hermes.execute("COMMIT")
        self.hermes.execute("UPDATE sessions SET message_count = message_count + 2, output_tokens = output_tokens + ?"
                            " WHERE id = ?", (rng.randint(10, 900), hs))

    def close(self) -> None:
        for fh in self.handles.values():
            fh.close()
        self.opencode.close()
        self.hermes.close()


# ----------------------------------------------------------------------------------------
# The systems
# ----------------------------------------------------------------------------------------

LEGACY_SCRIPT = r"""#!/usr/bin/env bash
# The legacy design, one tick. Every file changed since the last tick is copied whole
# (find -newer stamp, then rsync -a --files-from); every database whose stat (db and
# -wal size and mtime) changed is copied whole after sqlite3 .backup + quick_check.
# usage: legacy_tick.sh SRC DEST STATE
# env:   LEGACY_TREES, LEGACY_DBS (relative to SRC), LEGACY_COPY=rsync|python,
#        LEGACY_SQLITE=cli|python, LEGACY_PYTHON, LEGACY_HELPER
set -euo pipefail
src=$1 dest=$2 state=$3
mkdir -p "$dest/files" "$dest/db" "$state"
cd "$src"
touch "$state/stamp.next"
newer=()
if [ -e "$state/stamp" ]; then newer=(-newer "$state/stamp"); fi
trees=()
for t in $LEGACY_TREES; do if [ -e "$t" ]; then trees+=("$t"); fi; done
: > "$state/changed"
if [ ${#trees[@]} -gt 0 ]; then
  find "${trees[@]}" "${newer[@]}" \( -type f -o -type l \) ! -name '*.db' ! -name '*.db-wal' \
       ! -name '*.db-shm' ! -name '*.db-journal' -print0 > "$state/changed"
fi
if [ -s "$state/changed" ]; then
  if [ "$LEGACY_COPY" = rsync ]; then
    rsync -a --from0 --files-from="$state/changed" ./ "$dest/files/"
  else
    "$LEGACY_PYTHON" "$LEGACY_HELPER" copy "$state/changed" . "$dest/files"
  fi
fi
for db in $LEGACY_DBS; do
  [ -e "$db" ] || continue
  sig=$(stat -c '%s %.9Y' "$db" "$db-wal" 2>/dev/null || true)
  sigfile="$state/sig.${db//\//_}"
  if [ -e "$sigfile" ] && [ "$(cat "$sigfile")" = "$sig" ]; then continue; fi
  tmp="$state/backup.db"
  rm -f "$tmp"
  if [ "$LEGACY_SQLITE" = cli ]; then
    sqlite3 "$db" ".backup '$tmp'"
    check=$(sqlite3 "$tmp" 'PRAGMA quick_check;')
  else
    check=$("$LEGACY_PYTHON" "$LEGACY_HELPER" backup "$db" "$tmp")
  fi
  if [ "$check" != ok ]; then echo "legacy: quick_check of $db failed: $check" >&2; exit 1; fi
  mkdir -p "$dest/db/$(dirname "$db")"
  cp "$tmp" "$dest/db/$db"
  rm -f "$tmp"
  printf '%s' "$sig" > "$sigfile"
done
mv "$state/stamp.next" "$state/stamp"
"""

LEGACY_HELPER = r'''"""Fallbacks of the legacy script when rsync or the sqlite3 CLI is missing."""
import os, shutil, sqlite3, sys

def copy(listfile, src, dest):
    with open(listfile, "rb") as fh:
        names = [n for n in fh.read().split(b"\0") if n]
    for name in names:
        s, d = os.path.join(os.fsencode(src), name), os.path.join(os.fsencode(dest), name)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        tmp = d + b".legacy-tmp"
        if os.path.islink(s):
            os.symlink(os.readlink(s), tmp)
        else:
            shutil.copy2(s, tmp)
        os.replace(tmp, d)

def backup(db, tmp):
    src, dst = sqlite3.connect(db), sqlite3.connect(tmp)
    src.backup(dst)
    dst.close(); src.close()
    con = sqlite3.connect(tmp)
    print(con.execute("PRAGMA quick_check").fetchone()[0])
    con.close()

def tree(src, dest):
    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)

if __name__ == "__main__":
    {"copy": copy, "backup": backup, "tree": tree}[sys.argv[1]](*sys.argv[2:])
'''


class Tools:
    """Which baselines are available, and how the legacy system copies."""

    def __init__(self, install: bool):
        if install:
            self.install()
        self.rsync = shutil.which("rsync")
        self.restic = shutil.which("restic")
        self.sqlite3 = shutil.which("sqlite3")
        self.legacy_copy = "rsync" if self.rsync else "python"
        self.legacy_sqlite = "cli" if self.sqlite3 else "python"
        self.journal = [str(Path(sys.executable).parent / "journal")]
        if not os.access(self.journal[0], os.X_OK):
            self.journal = [sys.executable, "-m", "journal"]

    @staticmethod
    def install() -> None:
        log("--install-baselines: apt-get install -y rsync restic sqlite3")
        cmd = ["apt-get", "install", "-y", "rsync", "restic", "sqlite3"]
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(["apt-get", "update"], stdout=subprocess.DEVNULL, check=True)
            subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)

    def versions(self) -> dict:
        def first_line(cmd):
            try:
                return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0].strip()
            except (OSError, IndexError):
                return None
        return {"rsync": first_line(["rsync", "--version"]) if self.rsync else None,
                "restic": first_line(["restic", "version"]) if self.restic else None,
                "sqlite3_cli": first_line(["sqlite3", "--version"]) if self.sqlite3 else None,
                "sqlite3_python": sqlite3.sqlite_version,
                "journal": first_line(self.journal + ["--version"]),
                "legacy_copy": self.legacy_copy, "legacy_sqlite": self.legacy_sqlite}


def journal_breakdown(store: str, paths: list[str]) -> dict[str, int]:
    """Bytes of the new store objects by record kind (data pack, index pack, manifest)."""
    kinds: dict[str, int] = {}
    for rel in paths:
        full = os.path.join(store, rel)
        if not rel.startswith(("packs/", "manifests/")):
            kinds["other"] = kinds.get("other", 0) + os.path.getsize(full)
            continue
        with open(full, "rb") as fh:
            pos, size = 0, os.fstat(fh.fileno()).st_size
            while pos + _HEADER.size <= size:
                fh.seek(pos)
                magic, _v, kind, _f, _raw, stored, _d = _HEADER.unpack(fh.read(_HEADER.size))
                if magic != b"JRNL":
                    break
                name = _KINDS.get(kind, "other")
                kinds[name] = kinds.get(name, 0) + _HEADER.size + stored
                pos += _HEADER.size + stored
    return kinds


class JournalSys:
    name = "journal"

    def __init__(self, tools: Tools, local: str, store: str, home: str):
        self.tools = tools
        self.local, self.store, self.home = local, store, home
        os.makedirs(home, exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8",
                    "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_DATA_HOME": os.path.join(home, ".data"),
                    "AM_LOCAL": local, "JOURNAL_STORE": store}

    def tick(self) -> dict:
        before = snapshot(self.store)
        child = run_child(self.tools.journal + ["checkpoint", "--json"], env=self.env)
        objects, nbytes, paths = uploaded(before, snapshot(self.store))
        rep = json.loads(child.out)
        return figure(child, objects, nbytes, reported={"objects": rep.get("objects"), "bytes": rep.get("bytes"),
                                                        "seq": rep.get("seq"), "seconds": rep.get("seconds")},
                      by_kind=journal_breakdown(self.store, paths))

    def restore(self, dest: str) -> dict:
        child = run_child(self.tools.journal + ["restore", "--to", dest, "--json"], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size)

    def _library(self):
        """``(journal module, config, store)`` for a call through the library in this
        process, as `journal supervise` makes it; None when journal is not importable here."""
        try:
            import journal.checkpoint.run
            import journal.restore.run
            from journal.config import load_config
            from journal.store import open_store
        except ImportError:
            return None
        cfg = load_config(env=self.env)
        return journal, cfg, open_store(cfg.store)

    def in_process_idle(self) -> float | None:
        """A steady-state idle checkpoint through the library, in this process, as
        `journal supervise` runs its timer ticks (the second of two: the first loads the state)."""
        lib = self._library()
        if lib is None:
            return None
        journal, cfg, store = lib
        checkpoint = journal.checkpoint.run.checkpoint
        checkpoint(cfg, store)  # supervise's first tick loads the local state; later ticks reuse it
        t0 = time.perf_counter()
        result = checkpoint(cfg, store)
        wall = time.perf_counter() - t0
        return round(wall, 6) if result.objects == 0 else None

    def in_process_restore(self, dest: str) -> float | None:
        """A full restore into ``dest`` through the library, in this process, as
        `journal supervise` restores at start-up (no interpreter start, no imports)."""
        lib = self._library()
        if lib is None:
            return None
        journal, cfg, store = lib
        t0 = time.perf_counter()
        result = journal.restore.run.restore(cfg, store, to=dest)
        wall = time.perf_counter() - t0
        return round(wall, 6) if result.complete else None


class LegacySys:
    name = "legacy"

    def __init__(self, tools: Tools, work: str, local: str, dest: str, state: str, trees, dbs):
        self.tools = tools
        self.local, self.dest, self.state = local, dest, state
        script = os.path.join(work, "legacy_tick.sh")
        helper = os.path.join(work, "legacy_helper.py")
        if not os.path.exists(script):
            write_file(script, LEGACY_SCRIPT)
            os.chmod(script, 0o755)
            write_file(helper, LEGACY_HELPER)
        self.script, self.helper = script, helper
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
                    "LEGACY_TREES": " ".join(trees), "LEGACY_DBS": " ".join(dbs),
                    "LEGACY_COPY": tools.legacy_copy, "LEGACY_SQLITE": tools.legacy_sqlite,
                    "LEGACY_PYTHON": sys.executable, "LEGACY_HELPER": helper}

    def tick(self) -> dict:
        before = snapshot(self.dest)
        child = run_child(["bash", self.script, self.local, self.dest, self.state], env=self.env)
        objects, nbytes, _ = uploaded(before, snapshot(self.dest))
        return figure(child, objects, nbytes)

    def restore(self, dest: str) -> dict:
        """``rsync -a`` of the durable copy back into an empty directory."""
        if self.tools.rsync:
            child = run_child(["rsync", "-a", self.dest + "/", dest + "/"], env=self.env)
        else:
            child = run_child([sys.executable, self.helper, "tree", self.dest, dest], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size, tool=self.tools.legacy_copy)


class ResticSys:
    name = "restic"

    def __init__(self, tools: Tools, repo: str, cache: str, paths: list[str]):
        self.repo, self.paths = repo, paths
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": cache, "RESTIC_PASSWORD": "bench",
                    "RESTIC_REPOSITORY": repo, "RESTIC_CACHE_DIR": cache, "LANG": "C.UTF-8"}
        run_child(["restic", "init", "--repository-version", "2"], env=self.env)

    def tick(self) -> dict:
        before = snapshot(self.repo)
        child = run_child(["restic", "backup", "--host", "bench", "--quiet", "--exclude", "*-shm"] + self.paths,
                          env=self.env)
        objects, nbytes, _ = uploaded(before, snapshot(self.repo))
        return figure(child, objects, nbytes)

    def restore(self, dest: str) -> dict:
        child = run_child(["restic", "restore", "latest", "--target", dest], env=self.env)
        files, size = tree_stats(dest)
        return figure(child, files=files, restored_bytes=size)


def rotate(items: list, k: int) -> list:
    k %= len(items)
    return items[k:] + items[:k]


def settle() -> None:
    """Let file timestamps move on (find -newer compares mtimes at the kernel's clock granularity)."""
    time.sleep(0.02)


# ----------------------------------------------------------------------------------------
# Parts
# ----------------------------------------------------------------------------------------

def part_main(args, tools: Tools, work: str) -> dict:
    tpl = os.path.join(work, "tpl-main")
    local_tpl = os.path.join(tpl, "local")
    t0 = time.perf_counter()
    info = generate_main(local_tpl, args.seed, args.scale)
    files, size = tree_stats(local_tpl)
    log(f"main: generated {files} files, {size / MIB:.1f} MiB in {time.perf_counter() - t0:.1f}s")
    workload = {"files": files, "bytes": size, "trees": {}, "open_transcripts": info["open"],
                "open_rollout_bytes": os.path.getsize(os.path.join(local_tpl, info["open"]["codex"])),
                "databases": {db: os.path.getsize(os.path.join(local_tpl, db)) for db in MAIN_DBS},
                "ticks": args.ticks}
    for tree in MAIN_TREES:
        workload["trees"][tree] = dict(zip(("files", "bytes"), tree_stats(os.path.join(local_tpl, tree))))
    runs = []
    for r in range(args.runs):
        rd = os.path.join(work, f"main-run{r}")
        rmtree(rd)
        os.makedirs(rd)
        local = os.path.join(rd, "local")
        copy_tree(local_tpl, local)
        live = LiveWorkload(local, info, args.seed)
        systems = [JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home")),
                   LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                             MAIN_TREES, MAIN_DBS)]
        if tools.restic:
            systems.append(ResticSys(tools, os.path.join(rd, "restic-repo"), os.path.join(rd, "restic-cache"),
                                     [os.path.join(local, t) for t in MAIN_TREES]))
        run: dict = {s.name: {"initial": None, "ticks": [], "idle": None, "restore": None} for s in systems}
        run["appended_bytes"] = []
        for s in rotate(systems, r):
            run[s.name]["initial"] = s.tick()
        for t in range(args.ticks):
            settle()
            before = live.appended
            live.tick(t)
            run["appended_bytes"].append(live.appended - before)
            settle()
            for s in rotate(systems, r + t + 1):
                run[s.name]["ticks"].append(s.tick())
        settle()
        for s in rotate(systems, r + args.ticks + 1):
            run[s.name]["idle"] = s.tick()
        run["journal"]["idle_in_process_s"] = systems[0].in_process_idle()
        live.close()
        for s in rotate(systems, r):
            dest = os.path.join(rd, f"restore-{s.name}")
            run[s.name]["restore"] = s.restore(dest)
            rmtree(dest)
            if isinstance(s, JournalSys):
                run["journal"]["restore_in_process_s"] = s.in_process_restore(dest)
                rmtree(dest)
        j = run["journal"]
        log(f"main run {r + 1}/{args.runs}: journal tick "
            f"{statistics.mean(f['bytes'] for f in j['ticks']) / KIB:.1f} KiB, legacy "
            f"{statistics.mean(f['bytes'] for f in run['legacy']['ticks']) / KIB:.0f} KiB"
            + (f", restic {statistics.mean(f['bytes'] for f in run['restic']['ticks']) / KIB:.0f} KiB"
               if "restic" in run else "")
            + f"; idle journal {j['idle']['wall_s'] * 1000:.0f} ms, legacy {run['legacy']['idle']['wall_s'] * 1000:.0f} ms;"
            f" restore journal {j['restore']['wall_s']:.2f}s, rsync {run['legacy']['restore']['wall_s']:.2f}s")
        runs.append(run)
        rmtree(rd)
    rmtree(tpl)
    return {"workload": workload, "runs": runs}


def generate_tree(root: str, seed: int, nfiles: int) -> list[str]:
    """A Claude Code tree of ``nfiles`` files: many small session transcripts plus todos."""
    text = text_for(seed)
    lines = Lines(text)
    rng = random.Random(f"{seed}:tree")
    paths = []
    ntodo = max(1, nfiles // 100)
    ndirs = max(1, nfiles // 100)
    for i in range(nfiles - ntodo):
        sid = _uuid(rng)
        rel = f"projects/-home-node-work-p{i % ndirs:03d}/{sid}.jsonl"
        recs = [lines.claude(rng, _ts(BASE_TIME, i + j), sid, None, "/home/node/work") for j in range(rng.randint(1, 4))]
        write_file(os.path.join(root, rel), b"".join(_dump(x) for x in recs))
        paths.append(rel)
    for _ in range(ntodo):
        write_file(os.path.join(root, f"todos/{_uuid(rng)}-agent-{_uuid(rng)}.json"),
                   json.dumps([{"content": text.text(rng, 8), "status": "pending"}]))
    return paths


def part_tree(args, tools: Tools, work: str) -> dict:
    rd = os.path.join(work, "tree")
    rmtree(rd)
    local = os.path.join(rd, "local")
    t0 = time.perf_counter()
    jsonl = generate_tree(os.path.join(local, "agent-state/claude"), args.seed, args.tree_files)
    files, size = tree_stats(local)
    log(f"tree: generated {files} files, {size / MIB:.1f} MiB in {time.perf_counter() - t0:.1f}s")
    journal = JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home"))
    legacy = LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                       ["agent-state/claude"], [])
    systems = [journal, legacy]
    out: dict = {"files": files, "bytes": size, "initial": {}, "runs": []}
    for s in systems:
        out["initial"][s.name] = s.tick()
    lines = Lines(text_for(args.seed))
    for r in range(args.runs):
        run: dict = {"journal": {}, "legacy": {}}
        settle()
        for s in rotate(systems, r):
            run[s.name]["idle"] = s.tick()
        run["journal"]["idle_in_process_s"] = journal.in_process_idle()
        settle()
        rng = random.Random(f"{args.seed}:tree-change:{r}")
        rel = jsonl[rng.randrange(len(jsonl))]
        with open(os.path.join(local, "agent-state/claude", rel), "ab") as fh:
            fh.write(_dump(lines.claude(rng, _ts(BASE_TIME, 10 ** 6 + r), "x", None, "/home/node/work")))
        settle()
        for s in rotate(systems, r + 1):
            run[s.name]["change"] = s.tick()
        out["runs"].append(run)
        log(f"tree run {r + 1}/{args.runs}: idle journal {run['journal']['idle']['wall_s'] * 1000:.0f} ms, "
            f"legacy {run['legacy']['idle']['wall_s'] * 1000:.0f} ms; one change journal "
            f"{run['journal']['change']['wall_s'] * 1000:.0f} ms / {run['journal']['change']['bytes'] / KIB:.1f} KiB, "
            f"legacy {run['legacy']['change']['wall_s'] * 1000:.0f} ms / {run['legacy']['change']['bytes'] / KIB:.1f} KiB")
    rmtree(rd)
    return out


def part_sqlite(args, tools: Tools, work: str) -> dict:
    tpl = os.path.join(work, "tpl-sqlite")
    rmtree(tpl)
    db_rel = "opencode-share/opencode.db"
    t0 = time.perf_counter()
    text = text_for(args.seed)
    info = OpencodeDB(text).create(os.path.join(tpl, db_rel), args.db_mib * MIB, random.Random(f"{args.seed}:bigdb"))
    size = os.path.getsize(os.path.join(tpl, db_rel))
    log(f"sqlite: generated a {size / MIB:.0f} MiB database in {time.perf_counter() - t0:.1f}s")
    out: dict = {"db_bytes": size, "transactions": args.db_txns, "runs": []}
    for r in range(args.db_runs):
        rd = os.path.join(work, f"sqlite-run{r}")
        rmtree(rd)
        os.makedirs(rd)
        local = os.path.join(rd, "local")
        copy_tree(tpl, local)
        con = sqlite3.connect(os.path.join(local, db_rel), isolation_level=None)
        systems = [JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home")),
                   LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                             ["opencode-share"], [db_rel])]
        run: dict = {"journal": {}, "legacy": {}}
        for s in rotate(systems, r):
            run[s.name]["initial"] = s.tick()
        settle()
        # 100 small transactions with random keys: insert a part under a new random UUID,
        # and update a random existing part (by random rowid).
        rng = random.Random(f"{args.seed}:txns")
        oc = OpencodeDB(text)
        nrows = con.execute("SELECT max(rowid) FROM part").fetchone()[0]
        for i in range(args.db_txns):
            con.execute("BEGIN")
            oc.add_part(con, rng, info["session"], _uuid(rng), info["now"] + i, size=rng.randint(200, 1200))
            con.execute("UPDATE part SET time_created = time_created + 1 WHERE rowid = ?", (rng.randint(1, nrows),))
            con.execute("COMMIT")
        settle()
        for s in rotate(systems, r + 1):
            run[s.name]["tick"] = s.tick()
        con.close()
        out["runs"].append(run)
        log(f"sqlite run {r + 1}/{args.db_runs}: after {args.db_txns} transactions journal uploaded "
            f"{run['journal']['tick']['bytes'] / KIB:.0f} KiB in {run['journal']['tick']['wall_s']:.2f}s, legacy "
            f"{run['legacy']['tick']['bytes'] / MIB:.1f} MiB in {run['legacy']['tick']['wall_s']:.2f}s")
        rmtree(rd)
    rmtree(tpl)
    return out


def write_big_file(path: str, size: int, seed: int) -> None:
    """Incompressible, never-repeating content, written in 1 MiB blocks."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    block = random.Random(f"{seed}:big").randbytes(MIB)
    with open(path, "wb") as fh:
        done = 0
        i = 0
        while done < size:
            piece = (i.to_bytes(8, "big") + block[8:])[:size - done]
            fh.write(piece)
            done += len(piece)
            i += 1


def part_big(args, tools: Tools, work: str) -> dict:
    rd = os.path.join(work, "big")
    rmtree(rd)
    local = os.path.join(rd, "local")
    size = args.big_file_mib * MIB
    path = os.path.join(local, "fx-home/artifacts/model-weights.bin")
    t0 = time.perf_counter()
    write_big_file(path, size, args.seed)
    log(f"big: wrote a {size / MIB:.0f} MiB file in {time.perf_counter() - t0:.1f}s")
    out: dict = {"file_bytes": size, "runs": []}
    for r in range(args.big_runs):
        for sub in ("store", "restore", "legacy-dest", "legacy-state", "restore-rsync"):
            rmtree(os.path.join(rd, sub))
        rmtree(os.path.join(local, ".journal"))
        journal = JournalSys(tools, local, os.path.join(rd, "store"), os.path.join(rd, "home"))
        legacy = LegacySys(tools, work, local, os.path.join(rd, "legacy-dest"), os.path.join(rd, "legacy-state"),
                           ["fx-home"], [])
        run = {"journal": {}, "legacy": {}}
        run["journal"]["checkpoint"] = journal.tick()
        rmtree(os.path.join(rd, "spool"))
        run["journal"]["restore"] = journal.restore(os.path.join(rd, "restore"))
        ok = os.path.getsize(os.path.join(rd, "restore/fx/artifacts/model-weights.bin")) == size
        run["journal"]["restore"]["size_ok"] = ok
        rmtree(os.path.join(rd, "restore"))
        rmtree(os.path.join(rd, "store"))
        run["legacy"]["checkpoint"] = legacy.tick()
        run["legacy"]["restore"] = legacy.restore(os.path.join(rd, "restore-rsync"))
        for sub in ("legacy-dest", "restore-rsync"):
            rmtree(os.path.join(rd, sub))
        out["runs"].append(run)
        log(f"big run {r + 1}/{args.big_runs}: journal checkpoint peak RSS "
            f"{run['journal']['checkpoint']['maxrss_kib'] / KIB:.0f} MiB in {run['journal']['checkpoint']['wall_s']:.1f}s,"
            f" restore {run['journal']['restore']['maxrss_kib'] / KIB:.0f} MiB in {run['journal']['restore']['wall_s']:.1f}s")
    rmtree(rd)
    return out


# ----------------------------------------------------------------------------------------
# gc over many objects, and bounded restores (issue 6)
# ----------------------------------------------------------------------------------------

#: The peak RSS a `journal gc` over the full --gc-objects may reach.
GC_RSS_LIMIT_KIB = 200 * KIB
#: Data records (file contents); every other record, and every non-pack object, is metadata.
_DATA_KINDS = ("chunk", "segment", "dbpage")

# The real CLI, with LocalStore's get, head and list wrapped to record what they are
# asked (key and byte range); the record is written to $BENCH_STORE_LOG at exit.
COUNTING_CLI = r'''"""`journal ...` recording every store read (tools/bench.py, part gc)."""
import atexit, json, os, sys
from journal.store.local import LocalStore

_log = {"gets": [], "heads": [], "lists": []}
_get, _head, _list = LocalStore.get, LocalStore.head, LocalStore.list

def _counted_get(self, key, start=0, end=None):
    _log["gets"].append([key, start, end])
    return _get(self, key, start, end)

def _counted_head(self, key):
    _log["heads"].append(key)
    return _head(self, key)

def _counted_list(self, prefix=""):
    _log["lists"].append(prefix)
    return _list(self, prefix)

LocalStore.get, LocalStore.head, LocalStore.list = _counted_get, _counted_head, _counted_list

@atexit.register
def _dump():
    with open(os.environ["BENCH_STORE_LOG"], "w") as fh:
        json.dump(_log, fh)

from journal.cli.launch import main
sys.exit(main())
'''

_GC_OUTPUT = {
    "kept": re.compile(r"^keep (\d+) checkpoint", re.M),
    "expired": re.compile(r"^expire (\d+) checkpoint", re.M),
    "tombstoned": re.compile(r"^tombstone (\d+) object", re.M),
    "tombstoned_bytes": re.compile(r"^tombstone \d+ object\(s\) \(([\d,]+) bytes\)", re.M),
    "planned_deletes": re.compile(r"^delete (\d+) object", re.M),
    "deleted": re.compile(r"^done: tombstone \S+, deleted (\d+) object", re.M),
    "bytes_freed": re.compile(r"^done: .* deleted \d+ object\(s\), ([\d,]+) bytes freed", re.M),
    "tombstones_resolved": re.compile(r"^done: .* (\d+) tombstone\(s\) resolved", re.M),
}


def parse_gc_output(text: str) -> dict:
    """The counts `journal gc` prints (its text output: --json would print every item)."""
    out = {}
    for name, rx in _GC_OUTPUT.items():
        m = rx.search(text)
        out[name] = int(m.group(1).replace(",", "")) if m else None
    return out


def fs_type(path: str) -> str | None:
    try:
        return subprocess.run(["df", "--output=fstype", path], capture_output=True, text=True).stdout.split()[-1]
    except (OSError, IndexError):
        return None


def scratch_dir(args, work: str, files: int) -> str:
    """Where a many-object store is built: --gc-dir, else /dev/shm when it has room, else ``work``.

    On tmpfs, creating a file costs ~15 us instead of 50-250 us on the shared ext4 disk,
    and fsync is free: the store builds in seconds. The gc figures that matter here (CPU,
    peak RSS, objects) do not depend on it; its wall times are those of a fast disk.
    """
    if args.gc_dir:
        os.makedirs(args.gc_dir, exist_ok=True)
        return tempfile.mkdtemp(prefix="journal-bench-gc-", dir=args.gc_dir)
    shm = "/dev/shm"
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_favail > 2 * files + 100_000 and st.f_bavail * st.f_frsize > 2 << 30:
            return tempfile.mkdtemp(prefix="journal-bench-gc-", dir=shm)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix="gc-", dir=work)


def count_keys(store: str) -> dict[str, int]:
    """Store keys by top-level prefix (names starting with "." are not keys), and "total"."""
    counts: dict[str, int] = {}
    stack = [(store, None)]
    while stack:
        path, top = stack.pop()
        with os.scandir(path) as it:
            for d in it:
                if d.name.startswith("."):
                    continue
                if d.is_dir(follow_symlinks=False):
                    stack.append((d.path, top or d.name))
                else:
                    counts[top or d.name] = counts.get(top or d.name, 0) + 1
    counts["total"] = sum(counts.values())
    return counts


class LibJournal:
    """journal through the library, in this process: the fast way to build a long history
    (a checkpoint costs ~4 ms on tmpfs, against ~150 ms for a CLI start)."""

    def __init__(self, tools: Tools, root: str):
        from journal.checkpoint.run import checkpoint
        from journal.config import load_config
        from journal.store import open_store
        self.local = os.path.join(root, "local")
        self.tree = os.path.join(self.local, "codex-home")
        os.makedirs(self.tree)
        self.sys = JournalSys(tools, self.local, os.path.join(root, "store"), os.path.join(root, "home"))
        self.env = self.sys.env
        self.store_root = self.sys.store
        self._checkpoint = checkpoint
        self.cfg = load_config(env=self.env)
        self.store = open_store(self.store_root)

    def checkpoint(self) -> int:
        return self._checkpoint(self.cfg, self.store).seq


def build_gc_store(lib: LibJournal, n_objects: int, seed: int) -> dict:
    """A store of ~``n_objects`` keys: real checkpoints, then synthetic garbage packs.

    ``real`` checkpoints (n/1000, at least 10) of a Codex tree (an appended rollout and
    20 rotating notes) give real manifests, index pages and data packs; ``--keep-last
    real/10`` keeps a tenth of them. The rest of the keys are synthetic packs written
    straight into the local store's layout (``packs/<hh>/<sha256>``, sparse files of
    realistic sizes: gc only lists them, sizes included): 99% named in the ``packs`` field of
    the expired manifests (each expired manifest is re-encoded naming its share, as if
    that checkpoint had uploaded them), 1% named by no manifest (a crashed checkpoint's
    orphans).
    """
    import hashlib

    import msgspec
    from journal.repository.repository import Repository, encode_manifest, manifest_key

    text = text_for(seed)
    lines = Lines(text)
    rng = random.Random(f"{seed}:gc:{n_objects}")
    real = max(10, n_objects // 1000)
    keep = max(2, real // 10)
    rollout = os.path.join(lib.tree, "sessions/2026/12/02/rollout-gc.jsonl")
    os.makedirs(os.path.dirname(rollout), exist_ok=True)
    t0 = time.perf_counter()
    with open(rollout, "ab") as fh:
        for i in range(real):
            fh.write(_dump(lines.codex(rng, _ts(BASE_TIME, i * 10.0), "gc")))
            fh.flush()
            write_file(os.path.join(lib.tree, f"notes/n{i % 20:02d}.md"), text.text(rng, rng.randint(200, 600)))
            lib.checkpoint()
    checkpoints_s = time.perf_counter() - t0
    real_keys = count_keys(lib.store_root)
    synthetic = max(0, n_objects - real_keys["total"])
    orphans = synthetic // 100
    named = synthetic - orphans
    expired = real - keep
    t1 = time.perf_counter()
    packs_dir = os.path.join(lib.store_root, "packs")
    for hh in range(256):
        os.makedirs(os.path.join(packs_dir, f"{hh:02x}"), exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    made = [0, 0]

    def make_pack() -> str:
        pid = hashlib.sha256(f"{seed}:{n_objects}:{made[0]}".encode()).hexdigest()
        size = _lognormal_size(rng, 48 * KIB, 1.2, 2 * KIB, 64 * MIB)
        fd = os.open(os.path.join(packs_dir, pid[:2], pid), flags, 0o644)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
        made[0] += 1
        made[1] += size
        return pid

    repo = Repository.open(lib.store)
    tmp = os.path.join(lib.store_root, ".tmp", "bench-manifest")
    for j, seq in enumerate(range(1, expired + 1)):
        share = named * (j + 1) // expired - named * j // expired
        ids = tuple(make_pack() for _ in range(share))
        manifest, _ = repo.load_manifest(seq)
        _, record = encode_manifest(msgspec.structs.replace(manifest, packs=manifest.packs + ids))
        write_file(tmp, record)
        os.replace(tmp, os.path.join(lib.store_root, *manifest_key(seq).split("/")))
    for _ in range(orphans):
        make_pack()
    keys = count_keys(lib.store_root)
    return {"objects": keys["total"], "keys": keys, "real_checkpoints": real, "keep_last": keep,
            "expired_checkpoints": expired, "real_objects": real_keys["total"], "synthetic_packs": made[0],
            "synthetic_named": named, "synthetic_orphans": orphans, "synthetic_bytes": made[1],
            "manifest_bytes": sum(e.stat().st_size for e in os.scandir(os.path.join(lib.store_root, "manifests"))),
            "checkpoints_s": round(checkpoints_s, 1), "synthetic_s": round(time.perf_counter() - t1, 1)}


def gc_scale_run(args, tools: Tools, work: str, n_objects: int) -> dict:
    """Build a store of ``n_objects`` keys; run `gc --dry-run`, `gc` (mark) and, past the grace, `gc` (sweep)."""
    root = scratch_dir(args, work, n_objects)
    try:
        lib = LibJournal(tools, root)
        t0 = time.perf_counter()
        store = build_gc_store(lib, n_objects, args.seed)
        store["build_s"] = round(time.perf_counter() - t0, 1)
        store["fs"] = fs_type(root)
        log(f"gc: built a store of {store['objects']:,} objects ({store['real_checkpoints']} real checkpoints, "
            f"{store['synthetic_packs']:,} synthetic packs) on {store['fs']} in {store['build_s']:.0f}s")
        policy = ["--keep-last", str(store["keep_last"])]
        out: dict = {"n_objects": n_objects, "store": store}

        def gc_run(name: str, extra: list[str]) -> dict:
            before = count_keys(lib.store_root)["total"]
            child = run_child(tools.journal + ["gc"] + policy + extra, env=lib.env)
            fig = figure(child, before, None, **parse_gc_output(child.out))
            fig["objects_after"] = count_keys(lib.store_root)["total"]
            log(f"gc {n_objects:,}: {name}: {before:,} objects -> {fig['objects_after']:,}, tombstoned "
                f"{fig['tombstoned']}, deleted {fig['deleted']}; {child.wall:.1f}s wall, {child.cpu:.1f}s CPU, "
                f"peak RSS {child.maxrss_kib / KIB:.0f} MiB")
            return fig

        out["dry_run"] = gc_run("gc --dry-run", ["--dry-run"])
        out["mark"] = gc_run("gc (mark)", [])
        marked = time.monotonic()
        # A checkpoint after the mark: the store moves past its mark_seq, so the orphans
        # may go too (docs/design.md section 16).
        with open(os.path.join(lib.tree, "notes/n00.md"), "a") as fh:
            fh.write("one more checkpoint after the mark\n")
        lib.checkpoint()
        grace = 0 if args.smoke else 1  # seconds; the smoke run does not wait
        time.sleep(max(0.0, grace + 0.05 - (time.monotonic() - marked)))
        out["grace"] = f"{grace}s"
        out["sweep"] = gc_run(f"gc --grace {grace}s (sweep)", ["--grace", f"{grace}s"])
        check = run_child(tools.journal + ["verify"], env=lib.env, check=False)
        out["verify_ok"] = check.rc == 0
        out["keys_after"] = count_keys(lib.store_root)
        return out
    finally:
        rmtree(root)


def classify_reads(store_root: str, gets: list) -> dict:
    """Store GETs by what they read: the record kind at the start of a pack range, or the object."""
    by_kind: dict[str, int] = {}
    objects: set[str] = set()
    meta_objects: set[str] = set()
    for key, start, _end in gets:
        objects.add(key)
        if key.startswith("packs/"):
            kind = "other"
            try:
                with open(os.path.join(store_root, *key.split("/")), "rb") as fh:
                    fh.seek(start)
                    head = fh.read(_HEADER.size)
                if len(head) == _HEADER.size and head[:4] == b"JRNL":
                    kind = _KINDS.get(_HEADER.unpack(head)[2], "other")
            except OSError:
                pass
        else:
            kind = key.split("/", 1)[0]           # manifests, config, ...
        by_kind[kind] = by_kind.get(kind, 0) + 1
        if kind not in _DATA_KINDS:
            meta_objects.add(key)
    return {"gets": len(gets), "objects": len(objects), "packs": sum(1 for k in objects if k.startswith("packs/")),
            "by_kind": dict(sorted(by_kind.items())),
            "metadata_gets": sum(n for k, n in by_kind.items() if k not in _DATA_KINDS),
            "metadata_objects": len(meta_objects)}


def counted_restore(lib: LibJournal, work: str, dest: str) -> dict:
    """`journal restore --to DEST` through the real CLI, every store read recorded."""
    script = os.path.join(work, "counting_journal.py")
    if not os.path.exists(script):
        write_file(script, COUNTING_CLI)
    record = os.path.join(work, "store-reads.json")
    child = run_child([sys.executable, script, "restore", "--to", dest, "--json"],
                      env=dict(lib.env, BENCH_STORE_LOG=record))
    with open(record) as fh:
        reads = json.load(fh)
    os.unlink(record)
    files, size = tree_stats(dest)
    fig = figure(child, files=files, restored_bytes=size, **classify_reads(lib.store_root, reads["gets"]))
    fig["heads"] = len(reads["heads"])
    fig["manifest_lists"] = sum(1 for p in reads["lists"] if p.startswith("manifests/") or "manifests/".startswith(p))
    return fig


def restore_bounds(args, tools: Tools, work: str) -> dict:
    """A transcript of --gc-appends appends (one per checkpoint), restored; then the same
    store carried on to --gc-checkpoints checkpoints (20 notes rewritten too), restored."""
    root = scratch_dir(args, work, 10 * args.gc_checkpoints)
    try:
        lib = LibJournal(tools, root)
        rng = random.Random(f"{args.seed}:restore-bounds")
        text = text_for(args.seed)
        lines = Lines(text)
        rel = "sessions/2026/12/02/rollout-long.jsonl"
        path = os.path.join(lib.tree, rel)
        os.makedirs(os.path.dirname(path))
        out: dict = {"fs": fs_type(root), "appends": args.gc_appends, "checkpoints": args.gc_checkpoints}
        with open(path, "ab") as fh:
            t0 = time.perf_counter()
            for i in range(args.gc_appends):
                fh.write(_dump(lines.codex(rng, _ts(BASE_TIME, i * 5.0), "long")))
                fh.flush()
                lib.checkpoint()
            out["appends_build_s"] = round(time.perf_counter() - t0, 1)
            dest = os.path.join(root, "restore-appends")
            fig = counted_restore(lib, work, dest)
            with open(path, "rb") as live, open(os.path.join(dest, "codex", rel), "rb") as back:
                fig["same_bytes"] = live.read() == back.read()
            fig["transcript_bytes"] = os.path.getsize(path)
            out["transcript"] = fig
            rmtree(dest)
            log(f"restore bounds: a transcript of {args.gc_appends:,} appends ({fig['transcript_bytes'] / MIB:.1f} MiB, "
                f"built in {out['appends_build_s']:.0f}s) restores from {fig['objects']} objects, {fig['packs']} packs, "
                f"{fig['gets']} GETs ({fig['by_kind']})")
            t0 = time.perf_counter()
            for i in range(args.gc_appends, args.gc_checkpoints):
                fh.write(_dump(lines.codex(rng, _ts(BASE_TIME, i * 5.0), "long")))
                fh.flush()
                if i % 10 == 0:
                    write_file(os.path.join(lib.tree, f"notes/n{i // 10 % 40:02d}.md"), text.text(rng, rng.randint(20, 200)))
                seq = lib.checkpoint()
            out["checkpoints_build_s"] = round(time.perf_counter() - t0, 1)
        out["newest_seq"] = seq if args.gc_checkpoints > args.gc_appends else args.gc_appends
        dest = os.path.join(root, "restore-checkpoints")
        fig = counted_restore(lib, work, dest)
        with open(path, "rb") as live, open(os.path.join(dest, "codex", rel), "rb") as back:
            fig["same_bytes"] = live.read() == back.read()
        out["history"] = fig
        out["store_objects"] = count_keys(lib.store_root)["total"]
        log(f"restore bounds: a store of {out['newest_seq']:,} checkpoints ({out['store_objects']:,} objects, built in "
            f"{out['checkpoints_build_s']:.0f}s more) restores with {fig['metadata_gets']} metadata GETs "
            f"({fig['by_kind']}), {fig['manifest_lists']} listing(s) of manifests/")
        return out
    finally:
        rmtree(root)


def part_gc(args, tools: Tools, work: str) -> dict:
    sizes = sorted({max(100, args.gc_objects // 10), args.gc_objects})
    out: dict = {"sizes": [gc_scale_run(args, tools, work, n) for n in sizes]}
    out["restore"] = restore_bounds(args, tools, work)
    return out


# ----------------------------------------------------------------------------------------
# Summary, ratios, targets
# ----------------------------------------------------------------------------------------

def med(values) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def med_fig(figs: list[dict | None]) -> dict | None:
    figs = [f for f in figs if f]
    if not figs:
        return None
    keys = ("bytes", "objects", "wall_s", "cpu_s", "maxrss_kib")
    return {k: med(f.get(k) for f in figs) for k in keys}


def tick_fig(ticks: list[dict]) -> dict:
    """One run's active ticks: mean bytes, wall and CPU per tick; mean and max objects."""
    return {"bytes": statistics.mean(f["bytes"] for f in ticks),
            "objects": statistics.mean(f["objects"] for f in ticks),
            "objects_max": max(f["objects"] for f in ticks),
            "wall_s": statistics.mean(f["wall_s"] for f in ticks),
            "cpu_s": statistics.mean(f["cpu_s"] for f in ticks),
            "maxrss_kib": max(f["maxrss_kib"] for f in ticks)}


def ratio(a, b) -> float | None:
    return a / b if a is not None and b else None


def summarize(res: dict) -> tuple[dict, dict, dict]:
    """(summary, ratios, per-run ratios). A ratio is the median of its per-run ratios."""
    summary: dict = {}
    spread: dict = {}
    main = res.get("main")
    if main:
        runs = main["runs"]
        sm: dict = {}
        for name in SYSTEMS:
            if not all(name in r for r in runs):
                sm[name] = None
                continue
            per_run = [tick_fig(r[name]["ticks"]) for r in runs]
            tick = med_fig(per_run)
            tick["objects_max"] = max(p["objects_max"] for p in per_run)
            nt = len(runs[0][name]["ticks"])
            sm[name] = {"initial": med_fig([r[name]["initial"] for r in runs]), "tick": tick,
                        "per_tick": [med_fig([r[name]["ticks"][t] for r in runs]) for t in range(nt)],
                        "idle": med_fig([r[name]["idle"] for r in runs]),
                        "restore": med_fig([r[name]["restore"] for r in runs])}
        kinds: dict[str, list[float]] = {}
        for r in runs:
            for f in r["journal"]["ticks"]:
                for k, v in f["by_kind"].items():
                    kinds.setdefault(k, []).append(v)
        nticks = sum(len(r["journal"]["ticks"]) for r in runs)
        sm["journal"]["tick_bytes_by_kind"] = {k: sum(v) / nticks for k, v in sorted(kinds.items())}
        sm["journal"]["idle_in_process_s"] = med(r["journal"].get("idle_in_process_s") for r in runs)
        sm["journal"]["restore_in_process_s"] = med(r["journal"].get("restore_in_process_s") for r in runs)
        sm["appended_bytes_per_tick"] = statistics.mean(b for r in runs for b in r["appended_bytes"])
        summary["main"] = sm

        def per_run_ratio(fn_a, fn_b):
            return [ratio(fn_a(r), fn_b(r)) for r in runs]
        tb = lambda n: (lambda r: tick_fig(r[n]["ticks"])["bytes"] if n in r else None)  # noqa: E731
        tw = lambda n: (lambda r: tick_fig(r[n]["ticks"])["wall_s"] if n in r else None)  # noqa: E731
        tc = lambda n: (lambda r: tick_fig(r[n]["ticks"])["cpu_s"] if n in r else None)  # noqa: E731
        fig = lambda n, part, k: (lambda r: r[n][part][k] if n in r else None)  # noqa: E731
        spread.update({
            "tick_bytes_journal_over_legacy": per_run_ratio(tb("journal"), tb("legacy")),
            "tick_bytes_journal_over_restic": per_run_ratio(tb("journal"), tb("restic")),
            "tick_wall_journal_over_legacy": per_run_ratio(tw("journal"), tw("legacy")),
            "tick_wall_journal_over_restic": per_run_ratio(tw("journal"), tw("restic")),
            "tick_cpu_journal_over_legacy": per_run_ratio(tc("journal"), tc("legacy")),
            "tick_cpu_journal_over_restic": per_run_ratio(tc("journal"), tc("restic")),
            "initial_bytes_journal_over_legacy": per_run_ratio(fig("journal", "initial", "bytes"),
                                                               fig("legacy", "initial", "bytes")),
            "initial_bytes_journal_over_restic": per_run_ratio(fig("journal", "initial", "bytes"),
                                                               fig("restic", "initial", "bytes")),
            "initial_wall_journal_over_legacy": per_run_ratio(fig("journal", "initial", "wall_s"),
                                                              fig("legacy", "initial", "wall_s")),
            "initial_wall_journal_over_restic": per_run_ratio(fig("journal", "initial", "wall_s"),
                                                              fig("restic", "initial", "wall_s")),
            "idle_wall_journal_over_legacy": per_run_ratio(fig("journal", "idle", "wall_s"), fig("legacy", "idle", "wall_s")),
            "idle_wall_journal_over_restic": per_run_ratio(fig("journal", "idle", "wall_s"), fig("restic", "idle", "wall_s")),
            "restore_wall_journal_over_rsync": per_run_ratio(fig("journal", "restore", "wall_s"),
                                                             fig("legacy", "restore", "wall_s")),
            "restore_wall_journal_over_restic": per_run_ratio(fig("journal", "restore", "wall_s"),
                                                              fig("restic", "restore", "wall_s")),
        })
    tree = res.get("tree")
    if tree:
        st = {"files": tree["files"], "bytes": tree["bytes"]}
        for name in ("journal", "legacy"):
            st[name] = {"initial": tree["initial"][name],
                        "idle": med_fig([r[name]["idle"] for r in tree["runs"]]),
                        "change": med_fig([r[name]["change"] for r in tree["runs"]])}
        st["journal"]["idle_in_process_s"] = med(r["journal"].get("idle_in_process_s") for r in tree["runs"])
        summary["tree"] = st
        for part in ("idle", "change"):
            for k in ("wall_s", "cpu_s", "bytes"):
                spread[f"tree_{part}_{k.split('_')[0]}_journal_over_legacy"] = [
                    ratio(r["journal"][part][k], r["legacy"][part][k]) for r in tree["runs"]]
    sq = res.get("sqlite")
    if sq:
        ss = {"db_bytes": sq["db_bytes"], "transactions": sq["transactions"]}
        for name in ("journal", "legacy"):
            ss[name] = {"initial": med_fig([r[name]["initial"] for r in sq["runs"]]),
                        "tick": med_fig([r[name]["tick"] for r in sq["runs"]])}
        summary["sqlite"] = ss
        for k in ("bytes", "wall_s", "cpu_s"):
            spread[f"sqlite_tick_{k.split('_')[0]}_journal_over_legacy"] = [
                ratio(r["journal"]["tick"][k], r["legacy"]["tick"][k]) for r in sq["runs"]]
    big = res.get("big")
    if big:
        summary["big_file"] = {
            "file_bytes": big["file_bytes"],
            "journal": {"checkpoint": med_fig([r["journal"]["checkpoint"] for r in big["runs"]]),
                        "restore": med_fig([r["journal"]["restore"] for r in big["runs"]]),
                        "checkpoint_maxrss_kib": max(r["journal"]["checkpoint"]["maxrss_kib"] for r in big["runs"]),
                        "restore_maxrss_kib": max(r["journal"]["restore"]["maxrss_kib"] for r in big["runs"])},
            "legacy": {"checkpoint": med_fig([r["legacy"]["checkpoint"] for r in big["runs"]]),
                       "restore": med_fig([r["legacy"]["restore"] for r in big["runs"]])}}
    gcp = res.get("gc")
    if gcp:
        keys = ("n_objects", "store", "dry_run", "mark", "grace", "sweep", "verify_ok")
        summary["gc"] = {"sizes": [{k: s[k] for k in keys} for s in gcp["sizes"]], "restore": gcp["restore"]}
    ratios = {k: med(v) for k, v in spread.items()}
    return summary, ratios, spread


def targets(summary: dict, ratios: dict, res: dict) -> list[dict]:
    out = []

    def add(name, ok, detail):
        out.append({"name": name, "pass": ok, "detail": detail,
                    "line": f"{'SKIP' if ok is None else 'PASS' if ok else 'FAIL'}  {name}: {detail}"})

    main = summary.get("main")
    if main:
        rl, rr = ratios["tick_bytes_journal_over_legacy"], ratios["tick_bytes_journal_over_restic"]
        ok_l = rl is not None and rl <= 1 / 300
        ok_r = None if rr is None else rr <= 1 / 20
        detail = (f"journal/legacy = 1/{1 / rl:.0f} (need <= 1/300)" if rl else "journal/legacy = n/a")
        if rr:
            per = [x for x in res["ratios_per_run"]["tick_bytes_journal_over_restic"] if x]
            detail += (f", journal/restic = 1/{1 / rr:.1f} (need <= 1/20; per run 1/{1 / max(per):.1f} .. "
                       f"1/{1 / min(per):.1f}, {sum(x <= 1 / 20 for x in per)} of {len(per)} runs within)")
        else:
            detail += ", restic not installed: not compared"
        add("active-tick bytes <= 1/300 of legacy and <= 1/20 of restic", ok_l and ok_r is not False, detail)
        omax = max(f["objects"] for r in res["main"]["runs"] for f in r["journal"]["ticks"])
        add("<= 4 objects per active tick", omax <= 4, f"journal max {omax} objects per active tick")
        jidle = [r["journal"]["idle"] for r in res["main"]["runs"]]
        iobj = max(f["objects"] for f in jidle)
        iw = ratios["idle_wall_journal_over_legacy"]
        add("idle tick: 0 objects, and wall <= legacy", iobj == 0 and iw is not None and iw <= 1.0,
            f"journal {iobj} objects; wall journal {main['journal']['idle']['wall_s'] * 1000:.0f} ms vs legacy "
            f"{main['legacy']['idle']['wall_s'] * 1000:.0f} ms = {iw:.2f}x")
        inproc = main["journal"].get("idle_in_process_s")
        if inproc is not None:
            add("idle tick as `journal supervise` runs it (in-process): wall <= legacy",
                inproc <= main["legacy"]["idle"]["wall_s"],
                f"journal {inproc * 1000:.1f} ms vs legacy {main['legacy']['idle']['wall_s'] * 1000:.0f} ms")
        rw = ratios["restore_wall_journal_over_rsync"]
        add("restore <= 1.0x the `rsync -a` time", rw is not None and rw <= 1.0,
            f"journal {main['journal']['restore']['wall_s']:.2f} s vs {res['meta']['tools']['legacy_copy']} "
            f"{main['legacy']['restore']['wall_s']:.2f} s = {rw:.2f}x")
        inproc = main["journal"].get("restore_in_process_s")
        if inproc is not None:
            lw = main["legacy"]["restore"]["wall_s"]
            add("restore as `journal supervise` runs it (in-process): wall <= 1.0x the `rsync -a` time",
                inproc <= lw, f"journal {inproc:.2f} s vs {res['meta']['tools']['legacy_copy']} {lw:.2f} s "
                f"= {inproc / lw:.2f}x")
    big = summary.get("big_file")
    if big:
        peak = max(big["journal"]["checkpoint_maxrss_kib"], big["journal"]["restore_maxrss_kib"])
        add(f"a {big['file_bytes'] / MIB:.0f} MiB file: peak RSS <= 100 MiB", peak <= 100 * KIB,
            f"checkpoint {big['journal']['checkpoint_maxrss_kib'] / KIB:.1f} MiB, restore "
            f"{big['journal']['restore_maxrss_kib'] / KIB:.1f} MiB")
    tree = summary.get("tree")
    if tree:
        tw = ratios["tree_idle_wall_journal_over_legacy"]
        add(f"a {tree['files']:,}-file idle tick: wall <= legacy", tw is not None and tw <= 1.0,
            f"journal {tree['journal']['idle']['wall_s'] * 1000:.0f} ms vs legacy "
            f"{tree['legacy']['idle']['wall_s'] * 1000:.0f} ms = {tw:.2f}x")
        inproc = tree["journal"].get("idle_in_process_s")
        if inproc is not None:
            add(f"a {tree['files']:,}-file idle tick as `journal supervise` runs it: wall <= legacy",
                inproc <= tree["legacy"]["idle"]["wall_s"],
                f"journal {inproc * 1000:.0f} ms vs legacy {tree['legacy']['idle']['wall_s'] * 1000:.0f} ms")
    g = summary.get("gc")
    if g:
        full = g["sizes"][-1]
        runs = ("dry_run", "mark", "sweep")
        peak = max(full[k]["maxrss_kib"] for k in runs)
        detail = (f"dry-run {full['dry_run']['maxrss_kib'] / KIB:.0f} MiB, mark {full['mark']['maxrss_kib'] / KIB:.0f} MiB, "
                  f"sweep {full['sweep']['maxrss_kib'] / KIB:.0f} MiB")
        if len(g["sizes"]) > 1:
            small = g["sizes"][0]
            speak = max(small[k]["maxrss_kib"] for k in runs)
            detail += (f"; {speak / KIB:.0f} MiB at {small['n_objects']:,} objects (x{peak / speak:.1f} for "
                       f"x{full['n_objects'] / small['n_objects']:.0f} the objects)")
        if not full["verify_ok"]:
            detail += "; `journal verify` FAILED after the sweep"
        add(f"gc over {full['n_objects']:,} objects: peak RSS < {GC_RSS_LIMIT_KIB // KIB} MiB",
            peak < GC_RSS_LIMIT_KIB and full["verify_ok"], detail)
        rb = g["restore"]
        t = rb["transcript"]
        add(f"a transcript of {rb['appends']:,} appends restores from <= 32 objects", t["objects"] <= 32 and t["same_bytes"],
            f"{t['objects']} objects (config, manifest and {t['packs']} packs), {t['gets']} GETs: "
            + ", ".join(f"{k} {v}" for k, v in t["by_kind"].items())
            + ("" if t["same_bytes"] else "; the restored transcript DIFFERS"))
        h = rb["history"]
        add(f"restore of a store with {rb['newest_seq']:,} checkpoints reads <= 64 metadata objects",
            h["metadata_gets"] <= 64 and h["same_bytes"],
            f"{h['metadata_gets']} metadata GETs ({h['metadata_objects']} objects: "
            + ", ".join(f"{k} {v}" for k, v in h["by_kind"].items() if k not in _DATA_KINDS)
            + f"), {h['manifest_lists']} listing of manifests/; {t['metadata_gets']} at {rb['appends']:,} checkpoints")
    return out


def fmt_bytes(n) -> str:
    if n is None:
        return "n/a"
    if n >= 10 * MIB:
        return f"{n / MIB:,.1f} MiB"
    if n >= 10 * KIB:
        return f"{n / KIB:,.1f} KiB"
    return f"{n:,.0f} B"


def fmt_s(s) -> str:
    if s is None:
        return "n/a"
    return f"{s:.2f} s" if s >= 1 else f"{s * 1000:.0f} ms"


def report(res: dict) -> str:
    """The human-readable tables (markdown)."""
    s, r = res["summary"], res["ratios"]
    out = []
    main = s.get("main")
    if main:
        out.append("| main workload | system | bytes | objects | wall | CPU | peak RSS |")
        out.append("|---|---|---:|---:|---:|---:|---:|")
        for what, key in (("initial checkpoint", "initial"), ("active tick (mean)", "tick"), ("idle tick", "idle"),
                          ("full restore", "restore")):
            for name in SYSTEMS:
                f = main.get(name) and main[name][key]
                if not f:
                    continue
                label = name
                if name == "legacy" and key == "restore":
                    label = "rsync -a" if res["meta"]["tools"]["legacy_copy"] == "rsync" else "python copytree"
                objs = f"{f['objects']:.1f} (max {f['objects_max']})" if key == "tick" else (
                    "" if f["objects"] is None else f"{f['objects']:.0f}")
                out.append(f"| {what} | {label} | {fmt_bytes(f['bytes']) if key != 'restore' else ''} | "
                           f"{objs if key != 'restore' else ''} | {fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | "
                           f"{f['maxrss_kib'] / KIB:.0f} MiB |")
        out.append("")
        out.append("| tick | " + " | ".join(f"{n} bytes | {n} objects | {n} wall" for n in SYSTEMS if main.get(n)) + " |")
        out.append("|---|" + "---:|" * (3 * sum(1 for n in SYSTEMS if main.get(n))))
        for t in range(len(main["journal"]["per_tick"])):
            cells = []
            for n in SYSTEMS:
                if main.get(n):
                    f = main[n]["per_tick"][t]
                    cells += [fmt_bytes(f["bytes"]), f"{f['objects']:.0f}", fmt_s(f["wall_s"])]
            out.append(f"| {t + 1} | " + " | ".join(cells) + " |")
        out.append("")
        if main["journal"].get("idle_in_process_s") is not None:
            out.append(f"journal's idle tick in-process (no interpreter start, as `journal supervise` runs it): "
                       f"{fmt_s(main['journal']['idle_in_process_s'])}")
            out.append("")
        if main["journal"].get("restore_in_process_s") is not None:
            out.append(f"journal's full restore in-process (no interpreter start, as `journal supervise` restores at "
                       f"start-up): {fmt_s(main['journal']['restore_in_process_s'])}")
            out.append("")
        out.append("journal's active-tick bytes by record kind (mean per tick): " + ", ".join(
            f"{k} {fmt_bytes(v)}" for k, v in main["journal"]["tick_bytes_by_kind"].items()))
        out.append("")
    tree = s.get("tree")
    if tree:
        out.append(f"| {tree['files']:,}-file tree | system | bytes | objects | wall | CPU |")
        out.append("|---|---|---:|---:|---:|---:|")
        for what, key in (("initial checkpoint", "initial"), ("idle tick", "idle"), ("one-change tick", "change")):
            for name in ("journal", "legacy"):
                f = tree[name][key]
                out.append(f"| {what} | {name} | {fmt_bytes(f['bytes'])} | {f['objects']:.0f} | {fmt_s(f['wall_s'])} | "
                           f"{fmt_s(f['cpu_s'])} |")
        out.append("")
        if tree["journal"].get("idle_in_process_s") is not None:
            out.append(f"journal's {tree['files']:,}-file idle tick in-process: {fmt_s(tree['journal']['idle_in_process_s'])}")
            out.append("")
    sq = s.get("sqlite")
    if sq:
        out.append(f"| {sq['db_bytes'] / MIB:.0f} MiB SQLite database | system | bytes | objects | wall | CPU |")
        out.append("|---|---|---:|---:|---:|---:|")
        for what, key in (("initial checkpoint", "initial"), (f"after {sq['transactions']} transactions", "tick")):
            for name in ("journal", "legacy"):
                f = sq[name][key]
                out.append(f"| {what} | {name} | {fmt_bytes(f['bytes'])} | {f['objects']:.0f} | {fmt_s(f['wall_s'])} | "
                           f"{fmt_s(f['cpu_s'])} |")
        out.append("")
    big = s.get("big_file")
    if big:
        out.append(f"| {big['file_bytes'] / MIB:,.0f} MiB file | wall | CPU | peak RSS |")
        out.append("|---|---:|---:|---:|")
        for label, f in (("journal checkpoint", big["journal"]["checkpoint"]), ("journal restore", big["journal"]["restore"]),
                         (f"legacy tick ({res['meta']['tools']['legacy_copy']})", big["legacy"]["checkpoint"]),
                         ("rsync -a back" if res["meta"]["tools"]["legacy_copy"] == "rsync" else "python copytree back",
                          big["legacy"]["restore"])):
            out.append(f"| {label} | {fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | {f['maxrss_kib'] / KIB:.1f} MiB |")
        out.append("")
    g = s.get("gc")
    if g:
        out.extend(gc_tables(g))
    def show(v):
        return f"{v:.4f}" + (f" (1/{1 / v:,.1f})" if 0 < v < 0.1 else "")
    out.append("| ratio (median of per-run ratios) | value | per run, min .. max |")
    out.append("|---|---:|---:|")
    for k, v in r.items():
        if v is not None:
            vals = [x for x in res["ratios_per_run"][k] if x is not None]
            out.append(f"| {k} | {show(v)} | {show(min(vals))} .. {show(max(vals))} |")
    return "\n".join(out)


def gc_tables(g: dict) -> list[str]:
    """The gc part's tables (markdown)."""
    out = ["| gc run | store objects | tombstoned | deleted | objects after | wall | CPU | peak RSS |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size in g["sizes"]:
        for label, key in (("gc --dry-run", "dry_run"), ("gc (mark: tombstones)", "mark"),
                           (f"gc --grace {size['grace']} (sweep)", "sweep")):
            f = size[key]
            dele = f"{f['planned_deletes']:,} (would)" if key == "dry_run" else f"{f['deleted']:,}"
            out.append(f"| {size['n_objects']:,} objects: {label} | {f['objects']:,} | {f['tombstoned']:,} | {dele} | "
                       f"{f['objects_after']:,} | {fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | "
                       f"{f['maxrss_kib'] / KIB:.0f} MiB |")
    out.append("")
    for size in g["sizes"]:
        st = size["store"]
        out.append(f"{size['n_objects']:,}-object store: {st['real_checkpoints']:,} real checkpoints (`--keep-last "
                   f"{st['keep_last']}`; {st['real_objects']:,} objects), {st['synthetic_packs']:,} synthetic packs "
                   f"({st['synthetic_named']:,} named by the {st['expired_checkpoints']:,} expired manifests, "
                   f"{st['synthetic_orphans']:,} orphans; {fmt_bytes(st['synthetic_bytes'])} apparent, sparse), "
                   f"built in {st['build_s']:.0f} s on {st['fs']}; `journal verify` after the sweep: "
                   f"{'ok' if size['verify_ok'] else 'FAILED'}.")
    out.append("")
    rb = g["restore"]
    out.append("| bounded restore | checkpoints | objects read | packs read | GETs | metadata GETs | wall | CPU | peak RSS |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, key, n in ((f"a transcript of {rb['appends']:,} appends", "transcript", rb["appends"]),
                          (f"a store of {rb['newest_seq']:,} checkpoints", "history", rb["newest_seq"])):
        f = rb[key]
        out.append(f"| {label} | {n:,} | {f['objects']} | {f['packs']} | {f['gets']} | {f['metadata_gets']} | "
                   f"{fmt_s(f['wall_s'])} | {fmt_s(f['cpu_s'])} | {f['maxrss_kib'] / KIB:.0f} MiB |")
    out.append("")
    for label, key in (("transcript", "transcript"), ("store", "history")):
        f = rb[key]
        out.append(f"GETs of the {label} restore by what they read: " + ", ".join(f"{k} {v}" for k, v in f["by_kind"].items()))
    out.append(f"(histories built in-process on {rb['fs']}: {rb['appends_build_s']:.0f} s for the first "
               f"{rb['appends']:,} checkpoints, {rb['checkpoints_build_s']:.0f} s for the rest)")
    out.append("")
    return out


def code_state() -> dict:
    """The journal code measured: the commit, and files with uncommitted changes (git status only)."""
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    commit = next((ln.split()[2] for ln in out.splitlines() if ln.startswith("# branch.oid")), None)
    changed = sorted(ln.split()[-1] for ln in out.splitlines() if ln[:1] in "12" and ln.split()[-1].startswith("journal/"))
    return {"commit": commit, "uncommitted_journal_files": changed}


def machine_info(work: str) -> dict:
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * KIB
    except OSError:
        pass
    cpu = None
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), None)
    except OSError:
        pass
    disk = None
    try:
        df = subprocess.run(["df", "-hT", work], capture_output=True, text=True).stdout.splitlines()[1].split()
        disk = {"device": df[0], "fstype": df[1], "size": df[2], "avail": df[4]}
    except (OSError, IndexError):
        pass
    return {"nproc": os.cpu_count(), "cpu": cpu, "mem_bytes": mem, "disk": disk, "python": platform.python_version(),
            "kernel": platform.release(), "platform": platform.platform()}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    p.add_argument("--scale", type=float, default=1.0, help="main workload scale (default 1.0: ~65 MiB of state)")
    p.add_argument("--runs", type=int, default=5, help="runs of the main and tree parts (default 5)")
    p.add_argument("--ticks", type=int, default=5, help="active ticks per main run (default 5)")
    p.add_argument("--big-file-mib", type=int, default=2048, help="size of the big file (default 2048)")
    p.add_argument("--big-runs", type=int, default=2,
                   help="runs of the big-file part (default 2: each moves ~8 GiB through the disk)")
    p.add_argument("--tree-files", type=int, default=20000, help="files in the large tree (default 20000)")
    p.add_argument("--db-mib", type=int, default=256, help="size of the large SQLite database (default 256)")
    p.add_argument("--db-runs", type=int, default=None, help="runs of the SQLite part (default: --runs)")
    p.add_argument("--db-txns", type=int, default=100, help="small transactions before the SQLite tick (default 100)")
    p.add_argument("--gc-objects", type=int, default=1_000_000,
                   help="objects in the store of the gc part (default 1,000,000; it also runs at a tenth of that)")
    p.add_argument("--gc-appends", type=int, default=5000,
                   help="appends (one per checkpoint) to the transcript of the gc part's restore (default 5000)")
    p.add_argument("--gc-checkpoints", type=int, default=10000,
                   help="checkpoints in the store of the gc part's second restore (default 10000)")
    p.add_argument("--gc-dir", metavar="DIR",
                   help="where the gc part builds its stores (default: /dev/shm when it has room, else the work dir)")
    p.add_argument("--parts", default="main,tree,sqlite,big,gc", help="parts to run (default: all)")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny version (small scale, 1 run, small files) that produces every figure and judges no "
                        "target: its figures are too small to mean anything")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    p.add_argument("--markdown", metavar="FILE", help="write the result tables to FILE")
    p.add_argument("--workdir", metavar="DIR", help="work directory (default: a new temp dir, removed after)")
    p.add_argument("--install-baselines", action="store_true", help="apt-get install -y rsync restic sqlite3 first")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target fails")
    args = p.parse_args(argv)
    if args.smoke and args.strict:
        p.error("--strict judges the targets; a --smoke run judges none")
    if args.smoke:
        args.scale, args.runs, args.ticks = 0.02, 1, 2
        args.big_file_mib, args.tree_files, args.db_mib, args.db_txns = 8, 300, 2, 20
        args.gc_objects, args.gc_appends, args.gc_checkpoints = 3000, 100, 200
    if args.smoke:
        args.big_runs = 1
    args.db_runs = args.db_runs or args.runs
    args.parts = [x for x in args.parts.split(",") if x]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    tools = Tools(args.install_baselines)
    work = args.workdir or tempfile.mkdtemp(prefix="journal-bench-")
    os.makedirs(work, exist_ok=True)
    global _SPAWNER
    spawn_dir = tempfile.mkdtemp(prefix="spawn-", dir=work)
    _SPAWNER = Spawner(spawn_dir)
    floor = run_child(["true"]).maxrss_kib  # the lowest peak RSS a child can report here
    res: dict = {"meta": {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]) if argv is None else " ".join(argv),
        "args": {k: v for k, v in vars(args).items()}, "machine": machine_info(work), "tools": tools.versions(),
        "code": code_state(), "loadavg_start": os.getloadavg()}}
    notes = []
    if not tools.rsync:
        notes.append("rsync is not installed: the legacy system copies with Python (shutil.copy2) instead, "
                     "and its restore baseline is a Python copytree, not `rsync -a`")
    if not tools.restic:
        notes.append("restic is not installed: the restic system was skipped (use --install-baselines)")
    if not tools.sqlite3:
        notes.append("the sqlite3 CLI is not installed: the legacy system backs up through Python's sqlite3")
    res["meta"]["notes"] = notes
    for n in notes:
        log(n)
    try:
        parts = {"main": part_main, "tree": part_tree, "sqlite": part_sqlite, "big": part_big, "gc": part_gc}
        for name in ("main", "tree", "sqlite", "big", "gc"):
            if name in args.parts:
                t0 = time.perf_counter()
                res[name] = parts[name](args, tools, work)
                res[name]["seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        _SPAWNER.close()
        if not args.workdir:
            rmtree(work)
        else:
            rmtree(spawn_dir)
    res["meta"]["rss_floor_kib"] = floor
    res["summary"], res["ratios"], res["ratios_per_run"] = summarize(res)
    res["targets"] = targets(res["summary"], res["ratios"], res)
    if args.smoke:  # far too small to judge a target: the figures only, no verdicts
        res["targets"] = [{"name": t["name"], "detail": t["detail"]} for t in res["targets"]]
    res["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    res["meta"]["loadavg_end"] = os.getloadavg()
    tables = report(res)
    print(tables)
    print()
    if args.smoke:
        print(f"smoke run: the figures of {len(res['targets'])} targets are produced; none is judged "
              "(a smoke run is too small; `make bench` judges them)")
    else:
        for t in res["targets"]:
            print(t["line"])
    print(f"\n({res['meta']['seconds']:.0f} s; {'; '.join(notes) if notes else 'all baselines installed'})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(tables + "\n\n" + "".join(t["line"] + "\n" for t in res["targets"] if "line" in t))
    failed = any(t.get("pass") is False for t in res["targets"])
    return 1 if (failed and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
