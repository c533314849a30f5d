"""SQLite snapshots: real databases, real writer processes, the real CLI.

Every scenario runs against SQLite itself (no mocks): a writer subprocess that keeps
committing in WAL mode, opencode's and Hermes' schemas (FTS5 external content and
trigram indexes included), corrupt and non-database files, stale ``-wal``/``-shm``
companions, hot restarts, and the upload size of a few small transactions on a
database of tens of megabytes. The helpers are self-contained (no conftest fixtures).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from journal.checkpoint.run import checkpoint
from journal.format.model import KIND_SQLITE
from journal.format.objects import HEADER
from journal.repository.repository import pack_key
from journal.format.pagemap import load_snapshot
from journal.report import Collector
from journal.restore.run import restore
from journal.store import open_store
from journal.sqlite.errors import SnapshotFailed
from journal.sqlite.snapshot import STREAM_CACHE_PAGES, quick_check, snapshot_db
from journal.local.tree_tmp import PREFIX as TMP_PREFIX

from conftest import Live, wait_for

PAGE = 4096


# --------------------------------------------------------------------------- helpers


class Databases(Live):
    """A container whose HOME is ``root`` (``$AM_LOCAL``: ``root/local``) and whose live
    trees hold opencode's and Hermes' databases; a tree's dir is made when first named
    (presets are picked by which live paths exist)."""

    def __init__(self, root: Path, store: Path):
        super().__init__(root, store, env={"XDG_DATA_HOME": str(root / ".data")})
        self.root = root

    @property
    def opencode(self) -> Path:
        path = self.local / "opencode-share"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def hermes(self) -> Path:
        path = self.local / "hermes"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def staging(self) -> Path:
        return self.state_dir / "sqlite-staging"

    def restore_to(self, dest: Path) -> subprocess.CompletedProcess:
        return self.run("restore", "--to", str(dest), expect=0)


def connect(path: Path, *, wal: bool = True) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), isolation_level=None, timeout=10)
    if wal:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        con.execute("PRAGMA synchronous=NORMAL")
    return con


def query(path: Path, sql: str, args=()) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def integrity(path: Path) -> list[str]:
    return [r[0] for r in query(path, "PRAGMA integrity_check")]


def intact(path: Path) -> bool:
    try:
        return integrity(path) == ["ok"]
    except sqlite3.DatabaseError:
        return False


def journal_mode(path: Path) -> str:
    return query(path, "PRAGMA journal_mode")[0][0]


def header_modes(path: Path) -> tuple[int, int]:
    """File-format write/read versions (header bytes 18, 19): 1 = rollback journal, 2 = WAL."""
    head = path.read_bytes()[:100]
    return head[18], head[19]


def companions(path: Path) -> list[str]:
    return [path.name + s for s in ("-wal", "-shm", "-journal") if (path.parent / (path.name + s)).exists()]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows_digest(path: Path, table: str, key: str) -> tuple[int, str]:
    rows = query(path, f"SELECT * FROM {table} ORDER BY {key}")
    return len(rows), hashlib.sha256(repr(rows).encode()).hexdigest()


OPENCODE_SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, name TEXT, icon_url TEXT,
    icon_color TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_initialized INTEGER,
    sandboxes TEXT NOT NULL);
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
    parent_id TEXT, slug TEXT NOT NULL, directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL,
    share_url TEXT, summary_additions INTEGER, summary_deletions INTEGER, summary_files INTEGER,
    summary_diffs TEXT, revert TEXT, permission TEXT, time_created INTEGER NOT NULL,
    time_updated INTEGER NOT NULL, time_compacting INTEGER, time_archived INTEGER);
CREATE INDEX session_project_idx ON session (project_id);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
    time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX message_session_idx ON message (session_id);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
    session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX part_message_idx ON part (message_id);
CREATE INDEX part_session_idx ON part (session_id);
CREATE TABLE todo (session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE, content TEXT NOT NULL,
    status TEXT NOT NULL, priority TEXT NOT NULL, position INTEGER NOT NULL, time_created INTEGER NOT NULL,
    time_updated INTEGER NOT NULL, PRIMARY KEY (session_id, position));
CREATE TABLE permission (project_id TEXT PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
    time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
"""

HERMES_SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
    message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0, input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0, title TEXT, FOREIGN KEY (parent_session_id) REFERENCES sessions(id));
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT);
CREATE INDEX idx_messages_session ON messages (session_id, timestamp);
CREATE TABLE system_prompts (hash TEXT PRIMARY KEY, content TEXT NOT NULL, created_at REAL NOT NULL);
CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='id');
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, content='messages', content_rowid='id',
    tokenize='trigram');
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END;
"""

WORDS = ("checkpoint sqlite wal backup restore journal page snapshot agent tool call diff patch commit "
         "branch merge rebase review python rust typescript shell docker bucket mount upload manifest "
         "transcript session message part todo permission index trigger vacuum pragma schema").split()


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def fill_opencode(con: sqlite3.Connection, rng: random.Random, sessions: int = 12, messages: int = 20) -> None:
    """opencode-like content: projects, sessions, messages and parts with JSON ``data``."""
    con.executescript(OPENCODE_SCHEMA)
    now = 1_770_000_000_000
    con.execute("BEGIN")
    for p in range(3):
        pid = f"prj_{uuid.UUID(int=rng.getrandbits(128)).hex}"
        con.execute("INSERT INTO project VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (pid, f"/home/node/work/repo{p}", "git", f"repo{p}", None, "blue", now, now, now, "[]"))
        con.execute("INSERT INTO permission VALUES (?,?,?,?)",
                    (pid, now, now, json.dumps([{"permission": "bash", "pattern": "git *", "action": "allow"}])))
        for s in range(sessions // 3):
            sid = f"ses_{uuid.UUID(int=rng.getrandbits(128)).hex}"
            con.execute("INSERT INTO session (id, project_id, slug, directory, title, version, time_created, "
                        "time_updated) VALUES (?,?,?,?,?,?,?,?)",
                        (sid, pid, f"slug-{p}-{s}", f"/home/node/work/repo{p}", sentence(rng, 5), "1.2.3", now, now))
            for i in range(4):
                con.execute("INSERT INTO todo VALUES (?,?,?,?,?,?,?)",
                            (sid, sentence(rng, 6), rng.choice(["pending", "completed"]), "high", i, now, now))
            for m in range(messages):
                mid = f"msg_{uuid.UUID(int=rng.getrandbits(128)).hex}"
                role = "user" if m % 2 == 0 else "assistant"
                con.execute("INSERT INTO message VALUES (?,?,?,?,?)",
                            (mid, sid, now + m, now + m, json.dumps({"role": role, "time": {"created": now + m},
                                                                      "modelID": "claude-sonnet-4", "cost": 0.01})))
                for k in range(3):
                    con.execute("INSERT INTO part VALUES (?,?,?,?,?,?)",
                                (f"prt_{uuid.UUID(int=rng.getrandbits(128)).hex}", mid, sid, now + m, now + m,
                                 json.dumps({"type": "text", "text": sentence(rng, 40)})))
    con.execute("COMMIT")


def fill_hermes(con: sqlite3.Connection, rng: random.Random, messages: int = 400) -> None:
    """Hermes-like content, FTS5 kept up to date by triggers (inserts, updates and deletes)."""
    con.executescript(HERMES_SCHEMA)
    con.execute("BEGIN")
    for s in range(8):
        prompt = "You are Hermes. " + sentence(rng, 30)
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        con.execute("INSERT OR IGNORE INTO system_prompts VALUES (?,?,?)", (digest, prompt, 1.7e9))
        con.execute("INSERT INTO sessions (id, source, model, system_prompt, started_at, title) VALUES (?,?,?,?,?,?)",
                    (f"sess-{s}", "cli", "hermes-4", digest, 1.7e9 + s, sentence(rng, 4)))
    for i in range(messages):
        calls = json.dumps([{"id": f"call_{i}", "function": {"name": "terminal", "arguments": "{\"cmd\": \"ls\"}"}}])
        con.execute("INSERT INTO messages (session_id, role, content, tool_calls, timestamp) VALUES (?,?,?,?,?)",
                    (f"sess-{i % 8}", rng.choice(["user", "assistant", "tool"]), sentence(rng, 25),
                     calls if i % 3 == 0 else None, 1.7e9 + i))
    con.execute("COMMIT")
    con.execute("UPDATE messages SET content = content || ' online backup' WHERE id % 7 = 0")
    con.execute("DELETE FROM messages WHERE id % 11 = 0")


FTS_QUERIES = [
    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'checkpoint' ORDER BY rowid",
    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'sqlite AND wal NOT docker' ORDER BY rowid",
    "SELECT rowid FROM messages_fts WHERE messages_fts MATCH '\"online backup\"' ORDER BY rowid",
    "SELECT rowid, highlight(messages_fts, 0, '[', ']') FROM messages_fts WHERE messages_fts MATCH 'rebase' "
    "ORDER BY rank, rowid LIMIT 20",
    "SELECT rowid FROM messages_fts_trigram WHERE messages_fts_trigram MATCH 'ackup' ORDER BY rowid",
    "SELECT rowid FROM messages_fts_trigram WHERE content LIKE '%eckpoi%' ORDER BY rowid",
    "SELECT m.id, m.session_id FROM messages_fts f JOIN messages m ON m.id = f.rowid "
    "WHERE messages_fts MATCH 'manifest' ORDER BY m.id",
]

#: A writer process: WAL, synchronous=NORMAL, random UUID keys, count published after each commit.
WRITER = r"""
import json, os, sqlite3, sys, uuid
db, counter, stop = sys.argv[1:4]
con = sqlite3.connect(db, isolation_level=None, timeout=30)
assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
con.execute("PRAGMA synchronous=NORMAL")
con.execute("CREATE TABLE IF NOT EXISTS message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data JSON)")
con.execute("CREATE INDEX IF NOT EXISTS message_session_idx ON message(session_id, time_created)")
n = con.execute("SELECT count(*) FROM message").fetchone()[0]
sessions = [uuid.uuid4().hex for _ in range(20)]
while not os.path.exists(stop):
    con.execute("BEGIN IMMEDIATE")
    for _ in range(3):
        n += 1
        con.execute("INSERT INTO message VALUES (?, ?, ?, ?)",
                    (str(uuid.uuid4()), sessions[n % 20], n,
                     json.dumps({"seq": n, "role": "assistant", "text": os.urandom(60).hex()})))
    con.execute("COMMIT")
    tmp = counter + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(str(n))
    os.replace(tmp, counter)
con.close()
"""


def read_count(path: Path) -> int:
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return 0


def check_restored_db(path: Path) -> None:
    """A restored database: intact, in rollback-journal mode, with no companions beside it."""
    assert path.is_file(), path
    assert integrity(path) == ["ok"]
    assert journal_mode(path) == "delete"
    assert header_modes(path) == (1, 1)
    assert companions(path) == []
    assert not list(path.parent.glob(TMP_PREFIX + "*")), "restore's temp directory is removed"


def garbage(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def json_restore(box: Databases, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    r = box.run("restore", "--json", *extra)
    return r, json.loads(r.stdout)


def tree_actions(result: dict, tree: str) -> dict:
    return next(t["actions"] for t in result["trees"] if t["name"] == tree)


# --------------------------------------------------------------------------- 1. busy writer


def test_busy_wal_writer_every_committed_row_before_a_checkpoint_is_restored(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    counter, stop = tmp_path / "count", tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db), str(counter), str(stop)])
    floors: list[tuple[int, int]] = []  # (rows committed before the checkpoint began, its seq)
    try:
        wait_for(lambda: read_count(counter) >= 300, 60, "the writer's first commits")
        for _ in range(3):
            before = read_count(counter)
            result = box.checkpoint_ok()
            assert result["seq"] is not None, result
            floors.append((before, result["seq"]))
            after = read_count(counter)
            wait_for(lambda: read_count(counter) > after, 60, "the writer to keep committing")
        assert writer.poll() is None, "the writer died while checkpoints ran"
    finally:
        stop.touch()
        try:
            writer.wait(20)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, "the writer hit an error (e.g. SQLITE_BUSY) while journal read the database"
    assert [s for _, s in floors] == sorted({s for _, s in floors})

    assert box.entries("opencode").keys() == {"opencode.db"}, "companions must never be stored as files"
    dest = tmp_path / "restored"
    box.restore_to(dest)
    restored = dest / "opencode" / "opencode.db"
    check_restored_db(restored)
    count, top = query(restored, "SELECT count(*), max(json_extract(data, '$.seq')) FROM message")[0]
    assert count >= floors[-1][0]
    assert top == count, "the snapshot is not a transaction-consistent prefix of the writer's commits"
    assert count <= read_count(counter)

    # every earlier checkpoint is also a consistent snapshot holding its floor
    for before, seq in floors[:-1]:
        at = tmp_path / f"at-{seq}"
        restore(box.cfg, open_store(str(box.store_path)), at=str(seq), to=str(at))
        older = at / "opencode" / "opencode.db"
        check_restored_db(older)
        count, top = query(older, "SELECT count(*), max(json_extract(data, '$.seq')) FROM message")[0]
        assert count >= before and top == count


# --------------------------------------------------------------------------- 2. realistic schemas


def test_opencode_and_hermes_schemas_restore_intact_with_fts_and_modes(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    rng = random.Random(7)
    oc_db = box.opencode / "opencode.db"
    (box.opencode / "auth.json").write_text('{"anthropic": {"type": "api", "key": "sk-test"}}')
    oc = connect(oc_db)
    oc.execute("PRAGMA wal_autocheckpoint=0")  # the newest data lives only in the WAL, as in a busy app
    fill_opencode(oc, rng)

    hermes_db = box.hermes / "state.db"
    os.close(os.open(hermes_db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    os.chmod(hermes_db, 0o600)
    hm = connect(hermes_db)
    hm.execute("PRAGMA wal_autocheckpoint=0")
    fill_hermes(hm, rng)
    (box.hermes / "config.yaml").write_text("model: hermes-4\n")
    assert (box.hermes / "state.db-wal").stat().st_size > 0
    assert (box.opencode / "opencode.db-wal").stat().st_size > 0

    expected_fts = {q: query(hermes_db, q) for q in FTS_QUERIES}
    assert all(expected_fts[q] for q in FTS_QUERIES), "every FTS query should match something"
    tables = {"project": "id", "session": "id", "message": "id", "part": "id", "todo": "session_id, position",
              "permission": "project_id"}
    expected_oc = {t: rows_digest(oc_db, t, k) for t, k in tables.items()}
    expected_hm = {t: rows_digest(hermes_db, t, k) for t, k in
                   {"sessions": "id", "messages": "id", "system_prompts": "hash"}.items()}

    box.checkpoint_ok()  # the app keeps both databases open, as it would
    assert box.entries("hermes").keys() == {"config.yaml", "state.db"}
    assert box.entries("hermes")["state.db"].kind == KIND_SQLITE
    assert box.entries("opencode").keys() == {"auth.json", "opencode.db"}
    oc.close()
    hm.close()

    dest = tmp_path / "restored"
    box.restore_to(dest)
    r_oc, r_hm = dest / "opencode" / "opencode.db", dest / "hermes" / "state.db"
    check_restored_db(r_oc)
    check_restored_db(r_hm)
    assert {t: rows_digest(r_oc, t, k) for t, k in tables.items()} == expected_oc
    assert {t: rows_digest(r_hm, t, k) for t, k in
            {"sessions": "id", "messages": "id", "system_prompts": "hash"}.items()} == expected_hm
    assert query(r_oc, "SELECT count(*) FROM part WHERE json_extract(data, '$.type') = 'text'")[0][0] == 12 * 20 * 3
    for q in FTS_QUERIES:
        assert query(r_hm, q) == expected_fts[q], q
    con = sqlite3.connect(r_hm, isolation_level=None)
    try:
        con.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
        con.execute("INSERT INTO messages_fts_trigram(messages_fts_trigram) VALUES ('integrity-check')")
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('sess-1', 'user', "
                    "'zebra quagga', 2e9)")
        assert con.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'quagga'").fetchone()[0] == 1
    finally:
        con.close()
    assert (r_hm.stat().st_mode & 0o777) == 0o600
    assert (r_oc.stat().st_mode & 0o777) == (oc_db.stat().st_mode & 0o777)


# --------------------------------------------------------------------------- 3. corrupt live database


def make_closed_db(path: Path, rows: int = 400, *, wal: bool = True) -> set[str]:
    """A database with ``rows`` UUID-keyed messages, every connection closed. Returns the ids."""
    con = connect(path, wal=wal)
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data JSON)")
    con.execute("CREATE INDEX message_session_idx ON message(session_id, time_created)")
    ids = {str(uuid.uuid4()) for _ in range(rows)}
    con.execute("BEGIN")
    con.executemany("INSERT INTO message VALUES (?, ?, ?, ?)",
                    [(i, f"ses_{n % 7}", n, json.dumps({"text": "x" * 200})) for n, i in enumerate(sorted(ids))])
    con.execute("COMMIT")
    con.close()
    assert companions(path) == []
    return ids


def ids_of(path: Path) -> set[str]:
    return {r[0] for r in query(path, "SELECT id FROM message")}


def corrupt_pages(path: Path, start: int = PAGE * 2, end: int = PAGE * 4, seed: int = 1) -> None:
    with open(path, "r+b") as fh:
        fh.seek(start)
        fh.write(garbage(end - start, seed))


def test_corrupt_live_db_fails_closed_and_the_rest_is_checkpointed(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    ids = make_closed_db(db)
    (box.opencode / "auth.json").write_text('{"v": 1}')
    (box.hermes / "config.yaml").write_text("model: a\n")
    first = box.checkpoint_ok()["seq"]

    assert db.stat().st_size > PAGE * 5
    corrupt_pages(db)
    assert not intact(db)  # precondition: SQLite itself sees the damage
    (box.opencode / "auth.json").write_text('{"v": 2, "changed": true}')
    (box.hermes / "memories").mkdir()
    (box.hermes / "memories" / "user.md").write_text("likes small diffs\n")

    r = box.run("checkpoint")
    assert r.returncode != 0, r.stdout
    assert f"snapshot database: {db}" in r.stderr, r.stderr
    assert "quick_check of the copy failed" in r.stderr and "btreeInitPage" in r.stderr, r.stderr  # SQLite's words
    assert box.seqs()[-1] == first + 1, "the other changes must still be committed in the failing run"
    assert not box.staging.exists() or not os.listdir(box.staging)

    dest = tmp_path / "restored"
    box.restore_to(dest)
    assert (dest / "opencode" / "auth.json").read_text() == '{"v": 2, "changed": true}'
    assert (dest / "hermes" / "memories" / "user.md").read_text() == "likes small diffs\n"
    check_restored_db(dest / "opencode" / "opencode.db")
    assert ids_of(dest / "opencode" / "opencode.db") == ids, "the previous good snapshot must stay"

    # still corrupt on the next tick: still failing, nothing new to commit, the good snapshot stays
    r = box.run("checkpoint")
    assert r.returncode != 0 and str(db) in r.stderr
    assert box.seqs()[-1] == first + 1
    assert box.entries("opencode")["opencode.db"] == box.entries("opencode", first)["opencode.db"]


def test_a_snapshots_pages_are_read_from_the_copy_as_checked_and_published(tmp_path):
    """``while_checking`` (the checkpoint's page hashing) runs during quick_check over
    the finished copy: already in rollback-journal mode (header bytes 18-19 are 1), the
    bytes the checkpoint publishes."""
    db = tmp_path / "live.db"
    make_closed_db(db)
    seen = []

    def read(staging: str) -> str:
        data = Path(staging).read_bytes()
        seen.append(data[18:20])
        return hashlib.sha256(data).hexdigest()

    staging, got = snapshot_db(str(db), str(tmp_path / "staging"), while_checking=read)

    assert seen == [b"\x01\x01"]
    assert got == hashlib.sha256(Path(staging).read_bytes()).hexdigest()
    assert quick_check(staging) is None


@pytest.mark.parametrize("name", ["a b.db", "q?mode=memory.db", "h#x.db", "p%41.db", "ü é.db"])
def test_a_database_whose_name_needs_quoting_in_a_uri_is_snapshotted_itself(tmp_path, name):
    """The snapshot opens the live file and its copy by ``file:`` URI: a name with a
    space, ``?``, ``#``, ``%`` or non-ASCII letters is percent-encoded, so SQLite opens
    that very file (never a database named by the part before ``?`` or ``#``, never an
    empty in-memory one), and the copy holds its rows."""
    d = tmp_path / "d"
    d.mkdir()
    db = d / name
    make_closed_db(db)
    staging, _ = snapshot_db(str(db), str(tmp_path / "staging"))
    with sqlite3.connect(staging) as con, sqlite3.connect(db) as live:
        rows = "select id from message order by id"
        assert con.execute(rows).fetchall() == live.execute(rows).fetchall() != []
    assert all(p.name.startswith(name) for p in d.iterdir())   # no other database made beside it (its -wal, -shm)


def test_a_snapshot_opens_three_connections(tmp_path, monkeypatch):
    """The live database, the copy (backed up and switched to rollback-journal mode on
    the one connection) and the check."""
    db = tmp_path / "live.db"
    make_closed_db(db)
    opened = []
    connect = sqlite3.connect

    def counting(*args, **kwargs):
        opened.append(args[0])
        return connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", counting)
    staging, _ = snapshot_db(str(db), str(tmp_path / "staging"), while_checking=len)
    assert len(opened) == 3
    assert quick_check(staging) is None and Path(staging).read_bytes()[18:20] == b"\x01\x01"


def test_a_snapshots_backup_and_check_cache_a_few_pages_not_two_mib(tmp_path, monkeypatch):
    """The backup's two connections and quick_check's each read a page about once: each
    asks SQLite for a cache of ``STREAM_CACHE_PAGES`` pages before it reads, instead of
    filling its default 2 MiB (new memory in every tick's process)."""
    db = tmp_path / "live.db"
    make_closed_db(db, rows=3000)
    statements: list[list[str]] = []
    connect = sqlite3.connect

    def tracing(*args, **kwargs):
        con = connect(*args, **kwargs)
        seen: list[str] = []
        statements.append(seen)
        con.set_trace_callback(seen.append)
        return con

    monkeypatch.setattr(sqlite3, "connect", tracing)
    staging, _ = snapshot_db(str(db), str(tmp_path / "staging"))
    monkeypatch.undo()
    cache = f"PRAGMA cache_size={STREAM_CACHE_PAGES}"
    assert STREAM_CACHE_PAGES * PAGE < 2 << 20
    assert len(statements) == 3 and all(cache in seen for seen in statements), statements
    src, dst, check = statements
    assert src.index(cache) < src.index("COMMIT") and dst.index(cache) < dst.index("PRAGMA journal_mode=DELETE")
    assert check.index(cache) == len(check) - 2 and check[-1].startswith("PRAGMA quick_check")
    assert quick_check(staging) is None and ids_of(Path(staging)) == ids_of(db)


def test_a_snapshot_failing_quick_check_discards_what_was_read_meanwhile(tmp_path):
    db = tmp_path / "live.db"
    make_closed_db(db)
    corrupt_pages(db)
    staging_dir = tmp_path / "staging"
    calls = []

    with pytest.raises(SnapshotFailed, match="quick_check of the copy failed"):
        snapshot_db(str(db), str(staging_dir), while_checking=calls.append)

    assert len(calls) == 1 and os.listdir(staging_dir) == []


def test_quick_check_failure_in_a_wal_database_is_reported_with_sqlites_message(tmp_path):
    """A WAL database whose table pages are damaged but whose schema still loads."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    make_closed_db(db, rows=2000)
    box.checkpoint_ok()
    pages = db.stat().st_size // PAGE
    corrupt_pages(db, PAGE * (pages // 2), PAGE * (pages // 2 + 2), seed=5)
    r = box.run("checkpoint")
    assert r.returncode != 0
    assert f"snapshot database: {db}" in r.stderr
    assert "stays authoritative" in r.stderr


@pytest.mark.parametrize("content", ["random", "header-then-garbage", "truncated-header"])
def test_a_file_that_is_not_a_database_is_never_published(tmp_path, content):
    box = Databases(tmp_path / "a", tmp_path / "store")
    (box.opencode / "auth.json").write_text("{}")
    db = box.opencode / "opencode.db"
    if content == "random":
        db.write_bytes(garbage(3 * PAGE, 11))
    elif content == "header-then-garbage":
        db.write_bytes(b"SQLite format 3\x00" + bytes([0x10, 0x00, 1, 1]) + garbage(3 * PAGE - 20, 12))
    else:
        db.write_bytes(b"SQLite format 3\x00\x10\x00")
    other = box.opencode / "opencode-beta.db"
    other.write_bytes(garbage(PAGE, 13))

    for _ in range(2):
        r = box.run("checkpoint")
        assert r.returncode != 0
        assert str(db) in r.stderr and str(other) in r.stderr, r.stderr
        assert f"snapshot database: {other}: SQLite says: file is not a database" in r.stderr
        entries = box.entries("opencode")
        assert "auth.json" in entries
        assert "opencode.db" not in entries and "opencode-beta.db" not in entries
        assert not box.staging.exists() or not os.listdir(box.staging)
    dest = tmp_path / "restored"
    box.restore_to(dest)
    assert sorted(os.listdir(dest / "opencode")) == ["auth.json"]


#: The CLI with SQLite's busy wait cut from 2 s to 0.2 s a try (the tries, the pauses
#: between them and the failure are the same): a lock nobody lets go costs 0.6 s, not 6.
SHORT_BUSY_WAIT = [sys.executable, "-c", "import sys\nfrom journal.sqlite import snapshot\n"
                   "snapshot.BUSY_TIMEOUT = 0.2\nfrom journal.cli.launch import main\nsys.exit(main())"]


def test_a_database_held_under_an_exclusive_lock_is_skipped_and_the_rest_committed(tmp_path):
    """A writer that never lets go: a bounded wait, then fail closed for this tick only."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    ids = make_closed_db(db, rows=50, wal=False)
    box.checkpoint_ok()
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("INSERT INTO message VALUES ('committed', 's', 0, '{}')")  # the db changed on disk
        ids.add("committed")
        holder.execute("BEGIN EXCLUSIVE")  # rollback-journal mode: readers are locked out
        holder.execute("INSERT INTO message VALUES ('held', 's', 0, '{}')")
        (box.opencode / "auth.json").write_text("{}")
        r = box.run("checkpoint", cmd=SHORT_BUSY_WAIT)
        assert r.returncode != 0
        assert str(db) in r.stderr and ("busy" in r.stderr or "locked" in r.stderr), r.stderr
        assert "auth.json" in box.entries("opencode")
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert box.entries("opencode")["opencode.db"] == box.entries("opencode", 1)["opencode.db"]
    box.checkpoint_ok()
    dest = tmp_path / "restored"
    box.restore_to(dest)
    assert ids_of(dest / "opencode" / "opencode.db") == ids


# --------------------------------------------------------------------------- 4. stale companions


def foreign_wal(tmp_path: Path) -> tuple[bytes, bytes]:
    """The -wal and -shm of some other live database, holding committed frames for some of its pages.

    (Its older pages were checkpointed into its own file, so the WAL alone is not a database.)
    """
    other = tmp_path / "other" / "other.db"
    other.parent.mkdir()
    con = connect(other)
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY, other TEXT)")
    con.executemany("INSERT INTO message VALUES (?, ?)", [(f"x{i:04d}", "y" * 300) for i in range(200)])
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.executemany("INSERT INTO message VALUES (?, ?)", [(f"z{i:04d}", "w" * 300) for i in range(40)])
    wal, shm = Path(str(other) + "-wal").read_bytes(), Path(str(other) + "-shm").read_bytes()
    con.close()
    assert len(wal) > PAGE
    return wal, shm


@pytest.mark.parametrize("local_db", ["none", "garbage"])
def test_restore_removes_stale_wal_and_shm_so_the_db_opens_and_switches_to_wal(tmp_path, local_db):
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    ids = make_closed_db(db)
    box.checkpoint_ok()

    wal, shm = foreign_wal(tmp_path)
    fresh = Databases(tmp_path / "b", tmp_path / "store")   # a container whose local disk kept stale files
    target = fresh.opencode / "opencode.db"
    Path(str(target) + "-wal").write_bytes(wal)
    Path(str(target) + "-shm").write_bytes(shm)
    bad = garbage(2 * PAGE, 21)
    if local_db == "garbage":
        target.write_bytes(bad)
    r = fresh.run("restore")
    assert r.returncode == 0, r.stdout + r.stderr

    check_restored_db(target)
    assert ids_of(target) == ids
    con = sqlite3.connect(target, isolation_level=None)
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        assert {r[0] for r in con.execute("SELECT id FROM message")} == ids
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.execute("INSERT INTO message VALUES ('new', 's', 1, '{}')")
    finally:
        con.close()
    assert len(ids_of(target)) == len(ids) + 1
    if local_db == "garbage":
        moved = list(fresh.state_dir.glob("invalid/*/opencode/opencode.db"))
        assert len(moved) == 1, list(fresh.state_dir.rglob("*"))
        assert moved[0].read_bytes() == bad
        assert Path(str(moved[0]) + "-wal").read_bytes() == wal
        assert Path(str(moved[0]) + "-shm").exists()  # its bytes: see test_moved_aside_shm_is_left_untouched


def test_restore_over_stale_companions_in_the_live_tree(tmp_path):
    """A fresh container whose opencode dir kept only a -wal/-shm (the db itself was lost)."""
    a = Databases(tmp_path / "a", tmp_path / "store")
    ids = make_closed_db(a.opencode / "opencode.db")
    a.checkpoint_ok()
    wal, shm = foreign_wal(tmp_path)

    b = Databases(tmp_path / "b", tmp_path / "store")
    db = b.opencode / "opencode.db"
    Path(str(db) + "-wal").write_bytes(wal)
    Path(str(db) + "-shm").write_bytes(shm)
    r, result = json_restore(b)
    assert r.returncode == 0, r.stderr
    assert tree_actions(result, "opencode") == {"write": 1}
    check_restored_db(db)
    con = sqlite3.connect(db, isolation_level=None)
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        assert {r[0] for r in con.execute("SELECT id FROM message")} == ids
    finally:
        con.close()


# --------------------------------------------------------------------------- 5. hot restart


def test_hot_restart_keeps_a_valid_local_db_even_when_the_store_differs(tmp_path):
    a = Databases(tmp_path / "a", tmp_path / "store")
    stored_ids = make_closed_db(a.opencode / "opencode.db")
    a.checkpoint_ok()

    b = Databases(tmp_path / "b", tmp_path / "store")
    db = b.opencode / "opencode.db"
    con = connect(db)
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data JSON)")
    con.executemany("INSERT INTO message VALUES (?, 's', 0, '{}')", [(f"local-{i}",) for i in range(5)])
    con.close()
    before = sha(db)

    r, result = json_restore(b)
    assert r.returncode == 0, r.stderr
    assert tree_actions(result, "opencode") == {"keep-valid-db": 1}
    assert sha(db) == before
    assert ids_of(db) == {f"local-{i}" for i in range(5)}
    assert not list(b.state_dir.glob("invalid/**/opencode.db"))

    # the kept database is authoritative: the next checkpoint publishes it
    b.checkpoint_ok()
    dest = tmp_path / "restored"
    b.restore_to(dest)
    assert ids_of(dest / "opencode" / "opencode.db") == {f"local-{i}" for i in range(5)}
    restore(a.cfg, open_store(str(a.store_path)), at="1", to=str(tmp_path / "at1"))
    assert ids_of(tmp_path / "at1" / "opencode" / "opencode.db") == stored_ids


def test_a_valid_local_db_whose_check_constraint_calls_a_function_this_sqlite_lacks_is_kept(tmp_path):
    """OpenClaw 2026.9's schema calls ``octet_length()`` (SQLite 3.43) in CHECK
    constraints. A read-write ``quick_check`` evaluates them and fails ("unknown
    function") on an older SQLite; the live check recovers its private copy read-write,
    then checks it read-only, as every snapshot is checked, so the newer valid local
    database is kept, never moved into invalid/."""
    a = Databases(tmp_path / "a", tmp_path / "store")
    make_closed_db(a.opencode / "opencode.db")
    a.checkpoint_ok()

    b = Databases(tmp_path / "b", tmp_path / "store")
    db = b.opencode / "opencode.db"
    con = connect(db)
    con.create_function("octet_length", 1, lambda text: len(text.encode()))  # this writer's SQLite has it
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY CHECK (octet_length(id) < 64), data JSON)")
    con.executemany("INSERT INTO message VALUES (?, '{}')", [(f"local-{i}",) for i in range(5)])
    con.close()
    before = sha(db)

    r, result = json_restore(b)
    assert r.returncode == 0, r.stderr
    assert tree_actions(result, "opencode") == {"keep-valid-db": 1}
    assert sha(db) == before
    assert not list(b.state_dir.glob("invalid/**/opencode.db"))


def test_a_restart_says_it_kept_the_local_db_only_when_it_differs_from_the_checkpoint(tmp_path):
    """Every `journal supervise` start restores first: a database unchanged since its
    checkpoint is the checkpoint's copy (no note, no quick_check); one changed since is
    kept, and that is said."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    make_closed_db(db)
    box.checkpoint_ok()

    same = box.run("restore")
    _, same_json = json_restore(box)

    assert same.returncode == 0 and "kept the valid local database" not in same.stderr, same.stderr
    assert tree_actions(same_json, "opencode") == {"same": 1}
    con = connect(db)
    con.execute("INSERT INTO message VALUES ('local-1', 's', 0, '{}')")
    con.close()

    changed = box.run("restore")
    _, changed_json = json_restore(box)

    assert changed.returncode == 0 and f"kept the valid local database {db}" in changed.stderr
    assert tree_actions(changed_json, "opencode") == {"keep-valid-db": 1}
    assert "local-1" in ids_of(db)


def test_a_restart_says_nothing_of_a_db_whose_file_changed_but_not_its_pages(tmp_path):
    """The application still had its database open at the checkpoint and closed it
    afterwards, writing its WAL back: the file changed, its content is the checkpoint's.
    Restore finds its pages are the snapshot's: `same`, no note (design §7)."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    make_closed_db(db)
    con = connect(db)
    con.execute("INSERT INTO message VALUES ('open-1', 's', 0, '{}')")
    box.checkpoint_ok()
    con.close()   # the WAL goes back into the database file
    assert companions(db) == []

    restored = box.run("restore", expect=0)
    _, again = json_restore(box)

    assert "kept the valid local database" not in restored.stderr, restored.stderr
    assert ": 1 file (1 same)" in restored.stdout, restored.stdout
    assert tree_actions(again, "opencode") == {"same": 1}
    assert "open-1" in ids_of(db)


@pytest.mark.parametrize("kind", ["garbage", "truncated"])
def test_hot_restart_moves_an_invalid_local_db_aside_with_its_companions(tmp_path, kind):
    a = Databases(tmp_path / "a", tmp_path / "store")
    stored_ids = make_closed_db(a.opencode / "opencode.db", rows=1500)
    a.checkpoint_ok()

    c = Databases(tmp_path / "c", tmp_path / "store")
    db = c.opencode / "opencode.db"
    if kind == "garbage":
        db.write_bytes(garbage(5 * PAGE, 31))
    else:
        make_closed_db(db, rows=1500, wal=False)
        with open(db, "r+b") as fh:
            fh.truncate(db.stat().st_size // 2)
        assert not intact(db)
    side = {"": db.read_bytes(), "-wal": garbage(9000, 32), "-shm": garbage(32768, 33)}
    Path(str(db) + "-wal").write_bytes(side["-wal"])
    Path(str(db) + "-shm").write_bytes(side["-shm"])

    r = c.run("restore")
    assert r.returncode == 0, r.stderr
    assert ": 1 file (1 replace);" in r.stdout, r.stdout
    check_restored_db(db)
    assert ids_of(db) == stored_ids
    moved = list(c.state_dir.glob("invalid/*/opencode/opencode.db"))
    assert len(moved) == 1, sorted(str(p) for p in c.state_dir.rglob("*"))
    assert moved[0].read_bytes() == side[""]
    assert Path(str(moved[0]) + "-wal").read_bytes() == side["-wal"]
    assert Path(str(moved[0]) + "-shm").exists()  # its bytes: see test_moved_aside_shm_is_left_untouched
    assert "moved it" in r.stderr and str(moved[0]) in r.stderr, r.stderr


def test_moved_aside_shm_is_left_untouched(tmp_path):
    """Never deleted and never modified: the -shm moved aside with an invalid database keeps its bytes.

    Restore decides "invalid" by running quick_check on the live file; SQLite's WAL
    recovery then rewrites the -shm (the wal-index) in place, even on a read-only
    connection, before the file is moved aside.
    """
    a = Databases(tmp_path / "a", tmp_path / "store")
    make_closed_db(a.opencode / "opencode.db", rows=100)
    a.checkpoint_ok()

    c = Databases(tmp_path / "c", tmp_path / "store")
    db = c.opencode / "opencode.db"
    side = {"": garbage(5 * PAGE, 41), "-wal": garbage(9000, 42), "-shm": garbage(32768, 43)}
    for suffix, data in side.items():
        Path(str(db) + suffix).write_bytes(data)
    r, result = json_restore(c)
    assert r.returncode == 0, r.stderr
    assert tree_actions(result, "opencode") == {"replace": 1}
    moved = list(c.state_dir.glob("invalid/*/opencode/opencode.db"))
    assert len(moved) == 1
    for suffix, data in side.items():
        assert Path(str(moved[0]) + suffix).read_bytes() == data, f"moved {suffix or 'db'} bytes changed"


# --------------------------------------------------------------------------- 6. upload size


def test_small_transactions_on_a_large_db_upload_a_small_fraction(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    rng = random.Random(3)
    app = connect(db)  # the app keeps the database open throughout, as opencode does
    app.execute("CREATE TABLE message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data JSON)")
    app.execute("CREATE INDEX message_session_idx ON message(session_id, time_created)")
    sessions = [f"ses_{rng.getrandbits(64):016x}" for _ in range(200)]

    def row(n):
        return (str(uuid.UUID(int=rng.getrandbits(128))), rng.choice(sessions), rng.getrandbits(40),
                json.dumps({"role": "assistant", "text": rng.randbytes(150).hex()}))

    app.execute("BEGIN")
    app.executemany("INSERT INTO message VALUES (?, ?, ?, ?)", (row(n) for n in range(40_000)))
    app.execute("COMMIT")
    app.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = db.stat().st_size
    assert 16 << 20 <= size <= 32 << 20, size

    store = open_store(str(box.store_path))
    first = checkpoint(box.cfg, store)
    assert first.seq == 1 and first.bytes > size // 4

    puts, put_bytes = store.puts, store.put_bytes
    idle = checkpoint(box.cfg, store)
    assert (store.puts, store.put_bytes) == (puts, put_bytes), "an unchanged database must cause no store write"
    assert idle.seq is None and idle.objects == 0

    for n in range(20):
        app.execute("BEGIN")
        app.execute("INSERT INTO message VALUES (?, ?, ?, ?)", row(n))
        app.execute("COMMIT")
    puts, put_bytes = store.puts, store.put_bytes
    small = checkpoint(box.cfg, store)
    assert small.seq == 2
    assert small.objects == 3 and store.puts - puts == 3
    assert small.bytes < size * 0.05, (small.bytes, size)
    assert store.put_bytes - put_bytes < size * 0.05
    refs = box.entries("opencode")["opencode.db"].refs
    assert len(refs) == 2, "a few changed pages should be described by a delta map over the full one"

    puts = store.puts
    again = checkpoint(box.cfg, store)
    assert store.puts == puts and again.objects == 0

    # twenty more: the delta stays cumulative against the same full map, and small
    for n in range(20):
        app.execute("INSERT INTO message VALUES (?, ?, ?, ?)", row(n))
    puts = store.puts
    third = checkpoint(box.cfg, store)
    assert third.objects == 3 and store.puts - puts == 3 and third.bytes < size * 0.05
    assert box.entries("opencode")["opencode.db"].refs[0] == refs[0]
    expected = rows_digest(db, "message", "id")
    app.close()

    dest = tmp_path / "restored"
    restore(box.cfg, open_store(str(box.store_path)), to=str(dest))
    check_restored_db(dest / "opencode" / "opencode.db")
    assert rows_digest(dest / "opencode" / "opencode.db", "message", "id") == expected


def test_an_idle_db_left_by_a_crashed_writer_settles_to_zero_writes(tmp_path):
    """A writer killed with its WAL full of frames: journal may fold the WAL once, then stays idle."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    script = ("import os, signal, sqlite3, sys\n"
              "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "con.execute('PRAGMA journal_mode=WAL'); con.execute('PRAGMA wal_autocheckpoint=0')\n"
              "con.execute('CREATE TABLE t(id TEXT PRIMARY KEY, v)')\n"
              "for i in range(300): con.execute('INSERT INTO t VALUES (?, ?)', (os.urandom(16).hex(), i))\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", script, str(db)])
    assert proc.returncode == -signal.SIGKILL
    assert Path(str(db) + "-wal").stat().st_size > 0
    store = open_store(str(box.store_path))
    checkpoint(box.cfg, store)
    puts = store.puts
    checkpoint(box.cfg, store)
    checkpoint(box.cfg, store)
    assert store.puts == puts, "a database nobody writes to must settle to zero store writes"
    dest = tmp_path / "restored"
    restore(box.cfg, store, to=str(dest))
    assert query(dest / "opencode" / "opencode.db", "SELECT count(*) FROM t")[0][0] == 300


# --------------------------------------------------------------------------- 7. files before the DB


def test_ordinary_files_are_checkpointed_before_the_database_exists(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    (box.hermes / "auth.json").write_text('{"provider": "nous"}')
    (box.hermes / "config.yaml").write_text("model: hermes-4\n")
    (box.opencode / "auth.json").write_text('{"anthropic": {}}')
    first = box.checkpoint_ok()
    assert first["seq"] == 1
    assert box.entries("hermes").keys() == {"auth.json", "config.yaml"}
    assert box.entries("opencode").keys() == {"auth.json"}

    con = connect(box.hermes / "state.db")
    fill_hermes(con, random.Random(5), messages=60)
    con.close()
    ids = {r[0] for r in query(box.hermes / "state.db", "SELECT id FROM messages")}
    second = box.checkpoint_ok()
    assert second["seq"] == 2
    entries = box.entries("hermes")
    assert entries.keys() == {"auth.json", "config.yaml", "state.db"}
    assert entries["state.db"].kind == KIND_SQLITE

    dest = tmp_path / "restored"
    box.restore_to(dest)
    check_restored_db(dest / "hermes" / "state.db")
    assert {r[0] for r in query(dest / "hermes" / "state.db", "SELECT id FROM messages")} == ids
    assert (dest / "hermes" / "config.yaml").read_text() == "model: hermes-4\n"
    restore(box.cfg, open_store(str(box.store_path)), at="1", to=str(tmp_path / "at1"))
    assert sorted(os.listdir(tmp_path / "at1" / "hermes")) == ["auth.json", "config.yaml"]


# --------------------------------------------------------------------------- 8. staging files


def test_staging_files_never_accumulate(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    make_closed_db(db)
    hermes_db = box.hermes / "state.db"
    con = connect(hermes_db)
    fill_hermes(con, random.Random(9), messages=50)

    def staged() -> list[str]:
        return sorted(os.listdir(box.staging)) if box.staging.exists() else []

    box.checkpoint_ok()
    assert staged() == []
    con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('sess-1', 'user', 'hi', 1)")
    box.checkpoint_ok()
    assert staged() == []

    # a crashed run's leftovers are cleared at the start of the next one
    box.staging.mkdir(parents=True, exist_ok=True)
    for name in ("0123abcd.db", "0123abcd.db-journal", "4567ef.db"):
        (box.staging / name).write_bytes(b"left by a crash")
    corrupt_pages(db)
    r = box.run("checkpoint")
    assert r.returncode != 0 and str(db) in r.stderr
    assert staged() == []
    con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('sess-2', 'user', 'yo', 2)")
    r = box.run("checkpoint")
    assert r.returncode != 0
    assert staged() == []
    con.close()


# --------------------------------------------------------------------------- 9. verify --full


def verify_findings(box: Databases) -> tuple[int, list[dict]]:
    r = box.run("verify", "--full", "--json")
    return r.returncode, json.loads(r.stdout)["findings"]


def test_verify_full_finds_a_corrupt_page_blob_of_a_snapshot(tmp_path):
    box = Databases(tmp_path / "a", tmp_path / "store")
    make_closed_db(box.opencode / "opencode.db", rows=300)
    (box.opencode / "auth.json").write_text("{}")
    box.checkpoint_ok()
    assert verify_findings(box) == (0, [])

    repo = box.repo()
    entry = box.entries("opencode")["opencode.db"]
    ref = load_snapshot(entry.refs, repo.read_blob).pages[2].rec  # the record of a b-tree page
    pack = box.store_path / pack_key(ref.pack)
    data = bytearray(pack.read_bytes())
    data[ref.offset + HEADER.size + (ref.length - HEADER.size) // 2] ^= 0xFF
    pack.write_bytes(bytes(data))

    code, findings = verify_findings(box)
    assert code == 1
    kinds = {f["kind"] for f in findings}
    assert "bad-snapshot" in kinds, findings
    assert any(f["kind"] == "bad-snapshot" and f["key"] == "opencode/opencode.db" for f in findings)


def test_verify_full_runs_integrity_check_on_each_rebuilt_snapshot(tmp_path):
    """An index out of step with its table passes quick_check (so it is published) but not integrity_check."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    con = connect(db)
    con.execute("CREATE TABLE t(a, b)")
    con.execute("CREATE INDEX t_idx ON t(a)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, 1000 - i) for i in range(300)])
    con.execute("PRAGMA writable_schema=ON")
    version = con.execute("PRAGMA schema_version").fetchone()[0]
    con.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX t_idx ON t(b)' WHERE name = 't_idx'")
    con.execute(f"PRAGMA schema_version={version + 1}")
    con.close()
    assert query(db, "PRAGMA quick_check") == [("ok",)]
    assert integrity(db) != ["ok"]
    box.checkpoint_ok()

    code, findings = verify_findings(box)
    assert code == 1
    assert [f["kind"] for f in findings] == ["bad-snapshot"], findings
    assert findings[0]["key"] == "opencode/opencode.db" and "t_idx" in findings[0]["detail"]


# --------------------------------------------------------------------------- more shapes of database


@pytest.mark.parametrize("page_size", [512, 65536])
def test_every_snapshot_of_a_changing_database_restores_exactly(tmp_path, page_size):
    """Odd page sizes, growth, a delta, a shrinking VACUUM and a page-size change, each restorable."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    con = sqlite3.connect(db, isolation_level=None)
    con.execute(f"PRAGMA page_size={page_size}")
    con.execute("CREATE TABLE message(id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER, data JSON)")
    con.execute("CREATE INDEX message_session_idx ON message(session_id, time_created)")
    rng = random.Random(page_size)

    def add(n: int) -> None:
        con.execute("BEGIN")
        con.executemany("INSERT INTO message VALUES (?, ?, ?, ?)",
                        [(str(uuid.UUID(int=rng.getrandbits(128))), f"s{rng.randrange(9)}", i,
                          json.dumps({"t": rng.randbytes(100).hex()})) for i in range(n)])
        con.execute("COMMIT")

    expected: dict[int, tuple[int, str]] = {}

    def tick() -> None:
        seq = checkpoint(box.cfg, open_store(str(box.store_path))).seq
        assert seq is not None
        expected[seq] = rows_digest(db, "message", "id")

    add(1500)
    tick()
    add(5)  # a few pages: a delta map
    tick()
    con.execute("DELETE FROM message WHERE rowid % 3 != 0")
    size = db.stat().st_size
    con.execute("VACUUM")
    assert db.stat().st_size < size
    tick()
    con.execute("PRAGMA page_size=4096")
    con.execute("VACUUM")
    assert query(db, "PRAGMA page_size")[0][0] == 4096
    tick()
    con.close()
    assert sorted(expected) == [1, 2, 3, 4]
    store = open_store(str(box.store_path))
    for seq, digest in expected.items():
        dest = tmp_path / f"at-{seq}"
        restore(box.cfg, store, at=str(seq), to=str(dest))
        check_restored_db(dest / "opencode" / "opencode.db")
        assert rows_digest(dest / "opencode" / "opencode.db", "message", "id") == digest, f"checkpoint {seq}"
    code, findings = verify_findings(box)
    assert (code, findings) == (0, [])


def test_a_hot_rollback_journal_left_by_a_crashed_writer_is_not_snapshotted_half_done(tmp_path):
    """Rollback-journal mode: a writer killed mid-transaction, its changes already spilled into the file."""
    box = Databases(tmp_path / "a", tmp_path / "store")
    db = box.opencode / "opencode.db"
    ids = make_closed_db(db, rows=300, wal=False)
    script = ("import os, signal, sqlite3, sys\n"
              "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "con.execute('PRAGMA cache_size=5')\n"
              "con.execute('BEGIN')\n"
              "con.execute(\"UPDATE message SET data = json_object('text', hex(randomblob(300)))\")\n"
              "con.execute(\"INSERT INTO message SELECT id || '-copy', session_id, time_created, data FROM message\")\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    before = sha(db)
    proc = subprocess.run([sys.executable, "-c", script, str(db)])
    assert proc.returncode == -signal.SIGKILL
    assert Path(str(db) + "-journal").stat().st_size > 0, "the transaction should have left a hot journal"
    assert sha(db) != before, "the transaction should have spilled pages into the database file"

    box.checkpoint_ok()
    dest = tmp_path / "restored"
    box.restore_to(dest)
    check_restored_db(dest / "opencode" / "opencode.db")
    assert ids_of(dest / "opencode" / "opencode.db") == ids


def test_a_database_restored_into_a_fresh_container_is_not_uploaded_again(tmp_path):
    a = Databases(tmp_path / "a", tmp_path / "store")
    make_closed_db(a.opencode / "opencode.db", rows=500)
    con = connect(a.hermes / "state.db")
    fill_hermes(con, random.Random(2), messages=80)
    con.close()
    a.checkpoint_ok()

    b = Databases(tmp_path / "b", tmp_path / "store")
    for home in ("opencode-share", "hermes"):  # the fresh container's (empty) harness homes
        (b.local / home).mkdir()
    result = restore(b.cfg, open_store(str(b.store_path)), Collector())
    assert result.complete
    check_restored_db(b.opencode / "opencode.db")
    check_restored_db(b.hermes / "state.db")
    store = open_store(str(b.store_path))
    idle = checkpoint(b.cfg, store)
    assert store.puts == 0 and idle.seq is None, "restored databases must not be re-uploaded"


# --------------------------------------------------------------------------- a long-lived process


def test_ticks_in_one_process_leave_no_thread_descriptor_or_staging_copy_behind(tmp_path):
    """`journal supervise` checkpoints in one process for days: every thread a tick
    starts (backup, check, page encoders, pack hasher and uploads) is joined and every
    descriptor closed by the time the tick returns, and no staging copy or spooled
    pack is left on disk, tick after tick, busy or idle. (The writers here close their
    connections before each tick: while a connection of this process holds a lock on a
    database, SQLite keeps the descriptors other connections closed on it open, as POSIX
    locks are per process; an agent writes from its own process.)"""
    import threading

    box = Databases(tmp_path / "a", tmp_path / "store")
    make_closed_db(box.opencode / "opencode.db", rows=300)
    con = connect(box.hermes / "state.db")
    fill_hermes(con, random.Random(4), messages=40)
    con.close()
    store = open_store(str(box.store_path))
    rng = random.Random(9)
    threads, fds = threading.active_count(), _open_files()
    for tick in range(12):
        con = connect(box.hermes / "state.db")
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?,?,?,?)",
                    ("sess-1", "user", sentence(rng, 20), 1.8e9 + tick))
        con.close()
        con = connect(box.opencode / "opencode.db")
        con.execute("INSERT INTO message VALUES (?,?,?,?)",  # now and then a record encoded ahead (64 KiB+)
                    (uuid.uuid4().hex, "s", tick, os.urandom(rng.choice((100, 90_000))).hex()))
        con.close()
        busy = checkpoint(box.cfg, store)
        idle = checkpoint(box.cfg, store)
        assert busy.seq is not None and idle.seq is None, (tick, busy, idle)
        assert threading.active_count() == threads, f"tick {tick}: {threading.enumerate()}"
        assert _open_files() == fds, f"tick {tick}: descriptors left open"
        assert not any((box.state_dir / "sqlite-staging").iterdir()), f"tick {tick}: a staging copy was left"
        assert not any((box.state_dir / "spool").iterdir()), f"tick {tick}: a spooled pack was left"


def _open_files() -> list[str]:
    """What this process's descriptors name, sorted (a descriptor's number may be reused)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # the listing's own descriptor, closed already
    return sorted(found)
