"""The workload: generated, deterministic agent state, and the agents that change it.

Everything here depends only on the seed (and the scale): the same arguments give the
same files, byte for byte, so every system and every run measures the same work.

* ``generate_main``: the six harness trees of the main part (Codex, Claude Code, Gemini
  CLI, OpenClaw, and opencode's and Hermes's SQLite databases in WAL mode);
* ``LiveWorkload``: the agents of one run, appending to open transcripts (the Codex one
  ends torn), rewriting a session index and committing to both databases each tick;
* ``generate_tree``: a Claude Code tree of many small files (the tree part);
* ``write_big_file``: one large incompressible file (the big part).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import random
import sqlite3
import time
import uuid

from .measure import KIB, MIB

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


def new_uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def stamp(base: float, offset: float) -> str:
    t = _dt.datetime.fromtimestamp(base + offset, _dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def lognormal_size(rng: random.Random, median: int, sigma: float, lo: int, hi: int) -> int:
    return int(min(hi, max(lo, rng.lognormvariate(math.log(median), sigma))))


class Lines:
    """JSONL lines in each harness's shape."""

    def __init__(self, text: Text):
        self.t = text

    def _len(self, rng: random.Random) -> int:
        # most messages are short, tool outputs are sometimes long
        return lognormal_size(rng, 60, 1.1, 3, 2500)

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
                "uuid": new_uuid(rng), "timestamp": ts}

    def gemini(self, rng: random.Random, ts: str, i: int) -> dict:
        kind = "user" if i % 2 == 0 else "gemini"
        rec = {"id": new_uuid(rng), "timestamp": ts, "type": kind, "content": self.t.text(rng, self._len(rng))}
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


def dump_line(rec: dict) -> bytes:
    return json.dumps(rec, separators=(",", ":")).encode() + b"\n"


def write_jsonl(path: str, target: int, make_line) -> int:
    """Write lines from ``make_line(i)`` until ``path`` holds at least ``target`` bytes."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    size = 0
    i = 0
    with open(path, "wb") as fh:
        buf = []
        while size < target:
            line = dump_line(make_line(i))
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


def new_db(path: str, schema: str) -> sqlite3.Connection:
    """A new database at ``path`` with ``schema``, in autocommit mode."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript(schema)
    return con


def _db_size(con: sqlite3.Connection) -> int:
    return con.execute("PRAGMA page_count").fetchone()[0] * con.execute("PRAGMA page_size").fetchone()[0]


class OpencodeDB:
    """opencode's session/message/part tables: JSON ``data`` columns, UUID keys."""

    def __init__(self, text: Text):
        self.t = text

    def create(self, path: str, target: int, rng: random.Random) -> dict:
        con = new_db(path, OPENCODE_SCHEMA)
        project = new_uuid(rng)
        con.execute("INSERT INTO project VALUES (?,?,?,?,?)", (project, "/home/node/work", "git", 1796000000000,
                                                               1796000000000))
        sessions: list[str] = []
        now = 1796000000000
        while _db_size(con) < target:
            con.execute("BEGIN")
            session = new_uuid(rng)
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
        mid = new_uuid(rng)
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
        pid = new_uuid(rng)
        n = size if size is not None else lognormal_size(rng, 700, 1.0, 60, 12000)
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
        con = new_db(path, HERMES_SCHEMA)
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
                    (session, role, self.t.sized(rng, lognormal_size(rng, 500, 1.0, 20, 8000)), calls,
                     "terminal" if role == "tool" else None, now, rng.randint(5, 3000)))



# ----------------------------------------------------------------------------------------
# The main workload: six harness trees, then ticks
# ----------------------------------------------------------------------------------------

# The six harness trees of the main workload, relative to $AM_LOCAL (journal's presets).
MAIN_TREES = ("codex-home", "agent-state/claude", "agent-state/gemini-home/.gemini", "oc-home/.openclaw",
              "opencode-share", "hermes")
MAIN_DBS = ("opencode-share/opencode.db", "hermes/state.db")


def generate_main(local: str, seed: int, scale: float) -> dict:
    """Generate the six harness trees under ``local``; returns what the ticks need."""
    trees = MainTrees(local, seed, scale)
    for harness in (trees.codex, trees.claude, trees.gemini, trees.openclaw, trees.databases):
        harness()  # in this order: they draw from one random stream
    trees.info["seed"] = seed
    return trees.info


class MainTrees:
    """The six harness trees of the main workload, generated one harness at a time from
    one random stream (``{seed}:main``), so the content depends only on seed and scale."""

    def __init__(self, local: str, seed: int, scale: float):
        self.local, self.seed, self.scale = local, seed, scale
        self.text = text_for(seed)
        self.lines = Lines(self.text)
        self.rng = random.Random(f"{seed}:main")
        self.info: dict = {"open": {}}

    def count(self, n: float, lo: int = 1) -> int:
        return max(lo, round(n * self.scale))

    def codex(self) -> None:
        """Closed rollouts spread over November, plus the open 8 MB one of today."""
        local, rng, lines, text, count = self.local, self.rng, self.lines, self.text, self.count
        codex = os.path.join(local, "codex-home")
        for i in range(count(30, 2)):
            day = 1 + i * 29 // max(1, count(30, 2))
            base = BASE_TIME + (day - 1) * 86400 + rng.randint(0, 40000)
            sid = new_uuid(rng)
            when = time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime(base))
            path = os.path.join(codex, f"sessions/2026/11/{day:02d}/rollout-{when}-{sid}.jsonl")
            size = lognormal_size(rng, 250 * KIB, 1.0, 8 * KIB, 3 * MIB)
            write_jsonl(path, size, lambda j, b=base, s=sid: (
                {"timestamp": stamp(b, 0), "type": "session_meta", "payload": {"id": s, "cwd": "/home/node/work",
                 "originator": "codex_cli_rs", "cli_version": "0.104.0", "model_provider": "openai"}} if j == 0
                else lines.codex(rng, stamp(b, j * 1.7), s)))
        open_base = BASE_TIME + 30 * 86400
        open_sid = new_uuid(rng)
        open_rollout = f"codex-home/sessions/2026/12/02/rollout-2026-12-02T09-00-00-{open_sid}.jsonl"
        self.info["open"]["codex"] = open_rollout
        write_jsonl(os.path.join(local, open_rollout), max(64 * KIB, int(8 * MIB * min(1.0, self.scale * 4))),
                    lambda j: lines.codex(rng, stamp(open_base, j * 0.9), open_sid))
        write_jsonl(os.path.join(codex, "history.jsonl"), count(120 * KIB, 4 * KIB), lambda j: {
            "session_id": open_sid, "ts": 1796000000 + j * 40, "text": text.text(rng, rng.randint(4, 40))})
        write_file(os.path.join(codex, "config.toml"),
                   'model = "gpt-5.1-codex"\napproval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
                   '[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "docs-mcp"]\n')
        write_file(os.path.join(codex, "version.json"), json.dumps({"latest_version": "0.104.0",
                                                                   "last_checked_at": "2026-12-01T08:00:00Z"}))
        write_file(os.path.join(codex, "AGENTS.md"), "# Agents\n\n" + text.text(rng, 400) + "\n")
        write_file(os.path.join(codex, "log/codex-tui.log"), "".join(
            f"2026-12-02T09:{j // 60 % 60:02d}:{j % 60:02d}Z INFO {text.text(rng, 12)}\n"
            for j in range(count(2000, 50))))

    def claude(self) -> None:
        """projects/<dir>/<uuid>.jsonl (some with subagents), todos, settings."""
        local, rng, lines, text, count = self.local, self.rng, self.lines, self.text, self.count
        claude = os.path.join(local, "agent-state/claude")
        for p in range(count(8)):
            pdir = f"projects/-home-node-work-{text.text(rng, 1).replace('/', '')}-{p}"
            for s in range(rng.randint(1, 6) if p else 3):
                sid = new_uuid(rng)
                base = BASE_TIME + rng.randint(0, 29 * 86400)
                size = lognormal_size(rng, 300 * KIB, 1.0, 10 * KIB, 4 * MIB)
                parent = [None]

                def make(j, sid=sid, base=base, parent=parent):
                    rec = lines.claude(rng, stamp(base, j * 2.3), sid, parent[0], "/home/node/work")
                    parent[0] = rec["uuid"]
                    return rec
                rel = f"agent-state/claude/{pdir}/{sid}.jsonl"
                write_jsonl(os.path.join(local, rel), size, make)
                if p == 0 and s == 2:
                    self.info["open"]["claude"] = rel
                if rng.random() < 0.3:
                    write_jsonl(os.path.join(claude, pdir, sid, f"subagents/agent-{rng.getrandbits(28):07x}.jsonl"),
                                lognormal_size(rng, 60 * KIB, 1.0, 4 * KIB, MIB), make)
        for _ in range(count(30)):
            write_file(os.path.join(claude, f"todos/{new_uuid(rng)}-agent-{new_uuid(rng)}.json"), json.dumps(
                [{"content": text.text(rng, 8), "status": rng.choice(["completed", "pending", "in_progress"]),
                  "activeForm": text.text(rng, 6)} for _ in range(rng.randint(0, 8))]))
        write_file(os.path.join(claude, "settings.json"), json.dumps({"permissions": {"allow": ["Bash(*)"]},
                                                                      "model": "sonnet", "statusLine": None}))

    def gemini(self) -> None:
        """tmp/<project hash>/chats/session-*.jsonl, logs.json, settings."""
        local, rng, lines, text, count = self.local, self.rng, self.lines, self.text, self.count
        gemini = os.path.join(local, "agent-state/gemini-home/.gemini")
        for p in range(count(3)):
            phash = f"{rng.getrandbits(256):064x}"
            for c in range(rng.randint(1, 5) if p else 2):
                base = BASE_TIME + rng.randint(0, 29 * 86400)
                cid = f"{rng.getrandbits(32):08x}"
                rel = (f"agent-state/gemini-home/.gemini/tmp/{phash}/chats/session-"
                       f"{time.strftime('%Y-%m-%dT%H-%M', time.gmtime(base))}-{cid}.jsonl")
                write_jsonl(os.path.join(local, rel), lognormal_size(rng, 100 * KIB, 1.0, 4 * KIB, 2 * MIB),
                            lambda j, b=base: lines.gemini(rng, stamp(b, j * 4.1), j))
                if p == 0 and c == 1:
                    self.info["open"]["gemini"] = rel
            write_file(os.path.join(gemini, f"tmp/{phash}/logs.json"), json.dumps(
                [{"sessionId": new_uuid(rng), "messageId": j, "type": "user", "message": text.text(rng, 10),
                  "timestamp": stamp(BASE_TIME, j)} for j in range(rng.randint(5, 60))]))
        write_file(os.path.join(gemini, "settings.json"), json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}},
             "general": {"checkpointing": {"enabled": True}}}))
        write_file(os.path.join(gemini, "installation_id"), new_uuid(rng))

    def openclaw(self) -> None:
        """agents/main/sessions/<uuid>.jsonl, the sessions.json index, openclaw.json."""
        local, rng, lines, text, count = self.local, self.rng, self.lines, self.text, self.count
        oc = os.path.join(local, "oc-home/.openclaw")
        index = {}
        for s in range(count(12, 2)):
            sid = new_uuid(rng)
            base = BASE_TIME + rng.randint(0, 29 * 86400)
            rel = f"oc-home/.openclaw/agents/main/sessions/{sid}.jsonl"
            write_jsonl(os.path.join(local, rel), lognormal_size(rng, 400 * KIB, 1.0, 8 * KIB, 3 * MIB),
                        lambda j, b=base, sid=sid: {"type": "session", "id": sid, "timestamp": stamp(b, 0),
                                                    "cwd": "/home/node/work", "provider": "anthropic",
                                                    "modelId": "claude-sonnet-4-5"} if j == 0
                        else lines.openclaw(rng, stamp(b, j * 3.0), int((b + j * 3.0) * 1000)))
            key = f"agent:main:{rng.choice(['telegram', 'discord', 'main'])}:{rng.getrandbits(40)}"
            index[key] = {"sessionId": sid, "updatedAt": int(base * 1000), "systemSent": True, "abortedLastRun": False,
                          "chatType": "direct", "inputTokens": rng.randint(0, 90000),
                          "outputTokens": rng.randint(0, 9000), "totalTokens": rng.randint(0, 99000),
                          "model": "claude-sonnet-4-5", "contextTokens": 200000,
                          "sessionFile": os.path.join("/home/node/local", rel), "label": text.text(rng, 4)}
            if s == 1:
                self.info["open"]["openclaw"] = rel
                self.info["openclaw_key"] = key
        self.info["sessions_json"] = "oc-home/.openclaw/agents/main/sessions/sessions.json"
        self.info["sessions_index"] = index
        write_file(os.path.join(local, self.info["sessions_json"]), json.dumps(index, indent=2))
        write_file(os.path.join(oc, "openclaw.json"), json.dumps(
            {"agents": {"defaults": {"model": {"primary": "anthropic/claude-sonnet-4-5"},
                                     "workspace": "/home/node/work"}}, "gateway": {"port": 18789}}, indent=2))

    def databases(self) -> None:
        """opencode and Hermes: SQLite in WAL mode, each from its own random stream."""
        local, rng, text, seed = self.local, self.rng, self.text, self.seed
        self.info["opencode"] = OpencodeDB(text).create(os.path.join(local, MAIN_DBS[0]), int(20 * MIB * self.scale),
                                                        random.Random(f"{seed}:opencode"))
        write_file(os.path.join(local, "opencode-share/log/2026-12-02T090000.log"),
                   "".join(f"INFO 2026-12-02T09:00:{j % 60:02d} service=session {text.text(rng, 10)}\n"
                           for j in range(200)))
        self.info["hermes"] = HermesDB(text).create(os.path.join(local, MAIN_DBS[1]), int(10 * MIB * self.scale),
                                                    random.Random(f"{seed}:hermes"))
        write_file(os.path.join(local, "hermes/config.yaml"),
                   "model:\n  default: hermes-4-405b\nterminal:\n  backend: local\n")
        write_file(os.path.join(local, "hermes/memories/MEMORY.md"), "# Memory\n\n" + text.text(rng, 300) + "\n")


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
            out += dump_line(make(i))
            i += 1
        if torn:
            line = dump_line(make(i))
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
        self._append("codex", rng, rng.randint(3 * KIB, 6 * KIB), lambda j: L.codex(rng, stamp(base, j * 0.2), "open"),
                     torn=True)
        self._append("claude", rng, rng.randint(2 * KIB, 4 * KIB),
                     lambda j: L.claude(rng, stamp(base, j * 0.3), "open", None, "/home/node/work"))
        self._append("gemini", rng, rng.randint(1 * KIB, 3 * KIB), lambda j: L.gemini(rng, stamp(base, j * 0.5), j))
        self._append("openclaw", rng, rng.randint(2 * KIB, 4 * KIB),
                     lambda j: L.openclaw(rng, stamp(base, j * 0.4), int((base + j) * 1000)))
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

    def light_tick(self, t: int) -> None:
        """A quiet tick: one event appended to the open Codex rollout (its torn line
        completed first, the new one torn again), nothing else."""
        rng = random.Random(f"{self.seed}:light:{t}")
        base = BASE_TIME + 30 * 86400 + 3600 + t * 15
        self._append("codex", rng, 1, lambda j: self.lines.codex(rng, stamp(base, j * 0.2), "open"), torn=True)

    def close(self) -> None:
        for fh in self.handles.values():
            fh.close()
        self.opencode.close()
        self.hermes.close()



#: Files per directory of the tree part's tree: 400 directories of 500 at 200,000 files.
TREE_DIR_FILES = 500


def generate_tree(root: str, seed: int, nfiles: int, per_dir: int = TREE_DIR_FILES) -> list[str]:
    """A Claude Code tree of ``nfiles`` files in directories of ``per_dir``: small session
    transcripts, and one directory of todos (1% of the files, at most ``per_dir``).
    Returns the transcripts' paths."""
    text = text_for(seed)
    lines = Lines(text)
    rng = random.Random(f"{seed}:tree")
    paths = []
    ntodo = max(1, min(per_dir, nfiles // 100))
    for i in range(nfiles - ntodo):
        sid = new_uuid(rng)
        rel = f"projects/-home-node-work-p{i // per_dir:04d}/{sid}.jsonl"
        recs = [lines.claude(rng, stamp(BASE_TIME, i + j), sid, None, "/home/node/work") for j in range(rng.randint(1, 4))]
        write_file(os.path.join(root, rel), b"".join(dump_line(x) for x in recs))
        paths.append(rel)
    for _ in range(ntodo):
        write_file(os.path.join(root, f"todos/{new_uuid(rng)}-agent-{new_uuid(rng)}.json"),
                   json.dumps([{"content": text.text(rng, 8), "status": "pending"}]))
    return paths


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
