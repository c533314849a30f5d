"""A container and the agent that writes it, and what a tree holds, described.

A ``Container`` is a local root with two trees (``agent``: transcripts, WAL
databases, files rewritten, edited in place, created, deleted and linked, a sparse
file, a file with a time no entry holds; ``side``: small files), its own state directory and configuration, on a shared store. Its
operations (``checkpoint``, ``restore``, ``gc``, ``verify``) are functions a forked
child runs (``procs.run_forked``), each returning a small summary.

The ``Agent`` is a forked process that writes the trees on command, as a harness
does: transcripts held open and appended to (a line is sometimes left torn until the
next step), databases in WAL mode committing on a connection held open, files
rewritten whole or in place. ``burst`` makes it write without pause until it is
killed, so a checkpoint can run beside it.

Database content is a function of its commit counter alone (``db_state``): commit
``i`` inserts ``rows_of(i)`` rows of known bytes, rewrites one row of ``kv`` and sets
``meta.c = i``. So a restored database is described exactly by the commit it holds
(``describe_db``: ``("db", c)``), or found bad.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import stat
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

from journal.config import load_config
from journal.errors import JournalError
from journal.report import Collector
from journal.signatures import clamp_mtime

from .faults import fired, open_faulty

TREES = ("agent", "side")
CONFIG = """presets = []
[[trees]]
name = "agent"
path = "agent"
sqlite = ["*.db"]
[[trees]]
name = "side"
path = "side"
"""
#: What an agent may put in a name (design §8, the path rule): escape sequences (an OSC
#: title change ended by BEL, a CSI screen clear, a C1 CSI), a newline, a tab, a
#: backslash, a right-to-left override and a space. Every copy must round-trip them and
#: every message must name them escaped (§11.12); some transcripts, a database, a
#: directory and new files carry them.
HOSTILE = ("\x1b]0;pwned\x07", "\x1b[2J", "\u009b31m", "\n", "\t", "\\", "\u202e", " ")
TRANSCRIPTS = ("sessions/rollout-0.jsonl", "sessions/rollout\x1b]0;pwned\x07\n-1.jsonl")
DATABASES = ("state.db", "\x1b[2Jlogs\u009b.db")
SIDE_FILES = ("a.txt", "b.txt", "c.txt", "dir\x1b]0;d\x07\n/d.txt")
COMPANIONS = ("-wal", "-shm", "-journal")
#: Modification times outside what an entry holds (int64 ns: 1677 to 2262), stored and
#: restored clamped (``signatures.mtime_ns``); and 2300-01-01, ``touch``'s way there.
FAR_TIMES = (10 ** 20, -(10 ** 20), 10_413_792_000 * 10 ** 9)
#: Where the agent says how far each database's commits got (outside the trees).
PROGRESS = "agent-progress.json"


# --- databases whose content is a function of their commit counter --------------------

def rows_of(i: int) -> int:
    """How many rows commit ``i`` inserts."""
    return 1 + (i * 7919) % 4


def row_payload(db: str, rowid: int) -> bytes:
    return hashlib.sha256(f"{db}:{rowid}".encode()).digest() * (1 + rowid % 40)


def kv_value(db: str, i: int) -> bytes:
    return hashlib.sha256(f"{db}:kv:{i}".encode()).digest() * (1 + i % 7)


def db_state(db: str, c: int) -> str:
    """A digest of the content a database holds after commit ``c``."""
    h = hashlib.sha256()
    total = sum(rows_of(i) for i in range(1, c + 1))
    for rowid in range(1, total + 1):
        h.update(b"t%d:" % rowid + row_payload(db, rowid))
    for k in range(10):
        last = max((i for i in range(1, c + 1) if i % 10 == k), default=None)
        if last is not None:
            h.update(b"kv%d:" % k + kv_value(db, last))
    return h.hexdigest()


def commit(con: sqlite3.Connection, db: str, i: int, next_row: int) -> int:
    """Make commit ``i`` (rows from ``next_row``); the next free row id."""
    con.execute("BEGIN IMMEDIATE")
    for rowid in range(next_row, next_row + rows_of(i)):
        con.execute("INSERT INTO t(id, v) VALUES (?, ?)", (rowid, row_payload(db, rowid)))
    con.execute("INSERT OR REPLACE INTO kv(k, v) VALUES (?, ?)", (i % 10, kv_value(db, i)))
    con.execute("UPDATE meta SET c = ?", (i,))
    con.execute("COMMIT")
    return next_row + rows_of(i)


def describe_db(path: str) -> tuple:
    """``("db", c)`` when the database at ``path`` passes integrity_check and holds
    exactly commit ``c``'s content; ``("db-bad", why)`` otherwise. It is read from a
    private copy (with its ``-wal``, which SQLite recovers there), so nothing is
    written beside it and no connection to its inode stays in this process."""
    name = os.path.basename(path)
    with tempfile.TemporaryDirectory(prefix="describe-db-") as tmp:
        copy = os.path.join(tmp, name)
        for suffix in ("", "-wal"):
            if os.path.exists(path + suffix):
                shutil.copyfile(path + suffix, copy + suffix)
        return _describe_copy(copy, name)


def _describe_copy(copy: str, name: str) -> tuple:
    try:
        con = sqlite3.connect(copy)
    except sqlite3.Error as err:
        return ("db-bad", f"does not open: {err}")
    try:
        check = con.execute("PRAGMA integrity_check").fetchall()
        if check != [("ok",)]:
            return ("db-bad", f"integrity_check: {check[:3]}")
        (c,) = con.execute("SELECT c FROM meta").fetchone()
        h = hashlib.sha256()
        for rowid, v in con.execute("SELECT id, v FROM t ORDER BY id"):
            h.update(b"t%d:" % rowid + v)
        for k, v in con.execute("SELECT k, v FROM kv ORDER BY k"):
            h.update(b"kv%d:" % k + v)
        if h.hexdigest() != db_state(name, c):
            return ("db-bad", f"meta says commit {c}, the rows are not that commit's")
        return ("db", c)
    except (sqlite3.Error, TypeError) as err:
        return ("db-bad", f"unreadable: {err}")
    finally:
        con.close()


# --- what a tree holds ---------------------------------------------------------------

def complete_prefix(data: bytes) -> bytes:
    return data[:data.rfind(b"\n") + 1]


def describe_tree(root: str | Path, dbs: dict[str, int] | None = None, skip_tmp: bool = True) -> dict[str, tuple]:
    """path -> what a restore must reproduce: ``("dir", mode)``, ``("link", target)``,
    ``("file", sha256, mode, mtime_ns)`` (the time clamped as an entry holds it),
    ``("jsonl", sha256, length, mode)`` of its
    complete lines (no mtime: a checkpoint that finds only a torn tail added keeps
    the entry it had, with that entry's mtime), and for a database ``("db", c)``: from ``dbs`` (the agent's
    counters: a live database is never opened here) or read (``describe_db``).
    Companions of databases and, with ``skip_tmp``, journal's temp directories
    (``.journal-tmp-*``, a killed restore's) are left out."""
    root = str(root)
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if skip_tmp:
            dirnames[:] = [d for d in dirnames if not d.startswith(".journal-tmp-")]
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            st = os.lstat(full)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode)
            elif name.endswith(COMPANIONS):
                continue
            elif name.endswith(".db"):
                out[rel] = ("db", dbs[name]) if dbs is not None else describe_db(full)
            else:
                data = Path(full).read_bytes()
                if name.endswith(".jsonl"):
                    lines = complete_prefix(data)
                    out[rel] = ("jsonl", hashlib.sha256(lines).hexdigest(), len(lines), mode)
                else:
                    out[rel] = ("file", hashlib.sha256(data).hexdigest(), mode, clamp_mtime(st.st_mtime_ns))
    return out


# --- a container ---------------------------------------------------------------------

class Container:
    """One container: ``root/local`` holds the trees and ``.journal`` (its state)."""

    def __init__(self, root: str | Path, store_url: str):
        self.root = Path(root)
        self.local = self.root / "local"
        self.url = store_url
        home = self.root / "home"
        for d in (self.local, home):
            d.mkdir(parents=True, exist_ok=True)
        config = self.root / "journal.toml"
        config.write_text(CONFIG)
        self.env = {"AM_LOCAL": str(self.local), "JOURNAL_STORE": store_url, "HOME": str(home),
                    "JOURNAL_CONFIG": str(config), "XDG_CONFIG_HOME": str(home / ".config")}

    def tree(self, name: str) -> Path:
        return self.local / name

    @property
    def state_dir(self) -> Path:
        return self.local / ".journal"

    def describe(self, dbs: dict[str, int] | None = None) -> dict[str, dict[str, tuple]]:
        """Every tree described (``describe_tree``); a tree not on disk is left out."""
        return {name: describe_tree(self.tree(name), dbs) for name in TREES if self.tree(name).is_dir()}

    # Operations: functions a forked child runs (procs.run_forked). Each opens the
    # store itself (with ``fault`` injected) and returns a small summary.

    def checkpoint(self, fault: str | None = None, allow_deletions: bool = False) -> Callable[[], dict]:
        def run() -> dict:
            from journal.checkpoint.run import checkpoint

            store = open_faulty(self.url, fault)
            reporter = Collector()
            with _noting_fault(store):
                result = checkpoint(load_config(env=self.env), store, reporter, allow_deletions=allow_deletions)
            return {"seq": result.seq, "warnings": reporter.warnings, "fired": fired(store)}
        return run

    def restore(self, at: str | None = None, to: str | None = None) -> Callable[[], dict]:
        def run() -> dict:
            from journal.restore.run import restore

            reporter = Collector()
            result = restore(load_config(env=self.env), open_faulty(self.url, None), reporter, at=at, to=to)
            return {"seq": result.seq, "complete": result.complete, "fallback": result.fallback,
                    "lost": [p for t in result.trees for p in t.lost], "warnings": reporter.warnings,
                    "trees": {t.name: t.seq for t in result.trees}}
        return run

    def gc(self, keep_last: int, grace: float = 0.0, fault: str | None = None) -> Callable[[], dict]:
        def run() -> dict:
            from journal.gc.retention import Policy
            from journal.gc.run import gc
            from journal.repository.repository import Repository

            store = open_faulty(self.url, fault)
            with _noting_fault(store):
                _plan, result = gc(Repository.open(store), Policy(keep_last=keep_last), grace, reporter=Collector())
            return {"deleted": result.deleted if result else 0, "fired": fired(store)}
        return run

    def verify(self, full: bool = True) -> Callable[[], dict]:
        def run() -> dict:
            from journal.repository.repository import Repository
            from journal.verify import verify

            result = verify(Repository.open(open_faulty(self.url, None), audit=True), full=full)
            return {"errors": [(f.kind, f.manifest, f.key, f.detail) for f in result.errors],
                    "warnings": [(f.kind, f.key) for f in result.findings if f.severity != "error"],
                    "manifests": result.manifests}
        return run

    def seqs(self) -> Callable[[], list[int]]:
        def run() -> list[int]:
            from journal.repository.repository import Repository

            return Repository.open(open_faulty(self.url, None)).manifest_seqs()
        return run


@contextlib.contextmanager
def _noting_fault(store):
    """A ``JournalError`` leaving carries whether the injected fault was hit
    (``err.extra``, which ``procs`` sends back with the outcome)."""
    try:
        yield
    except JournalError as err:
        err.extra = {"fired": fired(store)}
        raise


# --- the agent -----------------------------------------------------------------------

class Agent:
    """A forked process writing a container's trees on command (see the module docstring)."""

    def __init__(self, container: Container, seed: int):
        self.container = container
        self.conn, child = Pipe()
        self.pid = os.fork()
        if self.pid == 0:
            code = 0
            try:
                self.conn.close()
                _AgentLoop(container, seed, child).serve()
            except BaseException:
                code = 70
            finally:
                os._exit(code)
        child.close()
        self.dbs: dict[str, int] = self._call(("hello",))

    def _call(self, message: tuple):
        self.conn.send(message)
        reply = self.conn.recv()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def step(self, **params) -> dict[str, int]:
        """One turn of writes (``params`` pick which); the databases' commit counters."""
        self.dbs = self._call(("step", params))
        return self.dbs

    def burst(self) -> None:
        """Start writing without pause (until ``kill``)."""
        self._call(("burst",))

    def progress(self) -> dict[str, int]:
        """The commits the agent reported done during a burst (each at least that many)."""
        try:
            return json.loads((self.container.root / PROGRESS).read_text())
        except (OSError, ValueError):
            return dict(self.dbs)

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.conn.close()

    def close(self) -> None:
        """Close the agent's files and connections, and let it exit."""
        self._call(("close",))
        os.waitpid(self.pid, 0)
        self.conn.close()


class _AgentLoop:
    """The agent's side: it owns the open transcripts and database connections."""

    def __init__(self, container: Container, seed: int, conn: Connection):
        self.c = container
        self.rng = random.Random(seed)
        self.conn = conn
        self.agent = container.tree("agent")
        self.side = container.tree("side")
        for d in (self.agent / "sessions", self.agent / "files", self.side):
            d.mkdir(parents=True, exist_ok=True)
        self.fds: dict[str, int] = {}
        self.torn: dict[str, bytes] = {}
        self.lines = 0
        for rel in TRANSCRIPTS:
            path = self.agent / rel
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            if not complete_prefix(path.read_bytes()) == path.read_bytes():
                os.write(fd, b"\n")  # a killed writer's torn line: end it before appending
            self.fds[rel] = fd
        self.cons: dict[str, sqlite3.Connection] = {}
        self.counters: dict[str, int] = {}
        self.next_row: dict[str, int] = {}
        for name in DATABASES:
            con = sqlite3.connect(self.agent / name, isolation_level=None, timeout=30)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)")
            con.execute("CREATE TABLE IF NOT EXISTS kv(k INTEGER PRIMARY KEY, v BLOB)")
            con.execute("CREATE TABLE IF NOT EXISTS meta(c INTEGER)")
            if con.execute("SELECT count(*) FROM meta").fetchone()[0] == 0:
                con.execute("INSERT INTO meta(c) VALUES (0)")
            self.counters[name] = con.execute("SELECT c FROM meta").fetchone()[0]
            self.next_row[name] = con.execute("SELECT coalesce(max(id), 0) + 1 FROM t").fetchone()[0]
            self.cons[name] = con
        for name in SIDE_FILES:
            if not (self.side / name).exists():
                (self.side / name).parent.mkdir(exist_ok=True)
                (self.side / name).write_bytes(self._text(40, 400))
        self.made = sorted(p.name for p in (self.agent / "files").iterdir())

    def serve(self) -> None:
        while True:
            op, *args = self.conn.recv()
            try:
                if op == "close":
                    self._close()
                    self.conn.send(None)
                    return
                if op == "burst":
                    self.conn.send(None)
                    self._burst()
                    return
                if op == "step":
                    self._step(**args[0])
                self.conn.send(dict(self.counters))
            except Exception as err:  # reported to the controller, which fails the trial
                self.conn.send(RuntimeError(f"agent: {op}: {type(err).__name__}: {err}"))

    def _text(self, low: int, high: int) -> bytes:
        return self.rng.randbytes(self.rng.randint(low, high) // 2).hex().encode()

    def _line(self) -> bytes:
        self.lines += 1
        big = self.rng.random() < 0.02
        pad = "x" * (self.rng.randint(60_000, 200_000) if big else self.rng.randint(10, 2000))
        return json.dumps({"n": self.lines, "t": time.time_ns(), "pad": pad}).encode() + b"\n"

    def _append(self, rel: str, count: int, tear: bool) -> None:
        fd = self.fds[rel]
        if rel in self.torn:
            os.write(fd, self.torn.pop(rel))
        for _ in range(count):
            os.write(fd, self._line())
        if tear:
            line = self._line()
            cut = self.rng.randint(1, len(line) - 1)
            os.write(fd, line[:cut])
            self.torn[rel] = line[cut:]

    def _commit(self, name: str) -> None:
        i = self.counters[name] + 1
        self.next_row[name] = commit(self.cons[name], name, i, self.next_row[name])
        self.counters[name] = i

    def _step(self, appends: int = 3, tear: bool = False, commits: int = 2, files: bool = True) -> None:
        rng = self.rng
        for rel in TRANSCRIPTS:
            if rng.random() < 0.8:
                self._append(rel, rng.randint(0, appends), tear and rng.random() < 0.5)
        for name in DATABASES:
            for _ in range(rng.randint(0, commits)):
                self._commit(name)
        if files:
            self._files()

    def _files(self) -> None:
        rng, agent = self.rng, self.agent
        if rng.random() < 0.6:  # a settings file rewritten whole, as harnesses do
            tmp = agent / ".config.json.tmp"
            tmp.write_bytes(json.dumps({"turn": self.lines, "model": "m", "notes": self._text(20, 3000).decode()})
                            .encode())
            os.replace(tmp, agent / "config.json")
        if rng.random() < 0.4:  # a binary file edited in place
            path = agent / "blob.bin"
            if not path.exists():
                path.write_bytes(rng.randbytes(rng.choice((3000, 300_000, 1_300_000))))
            fd = os.open(path, os.O_WRONLY)
            try:
                size = os.fstat(fd).st_size
                os.pwrite(fd, rng.randbytes(64), rng.randint(0, max(size - 64, 0)))
            finally:
                os.close(fd)
        if rng.random() < 0.2:
            self._sparse()
        if rng.random() < 0.2:  # a time no entry holds (``touch -d 2300-01-01``, a bogus tar timestamp)
            path = agent / "far-time.txt"
            path.write_bytes(self._text(0, 200))
            ns = rng.choice(FAR_TIMES)
            os.utime(path, ns=(ns, ns))
        if rng.random() < 0.4:
            name = f"f-{rng.randint(0, 10**6):07d}{rng.choice(('',) + HOSTILE)}.txt"
            (agent / "files" / name).write_bytes(self._text(0, 5000))
            self.made.append(name)
        if len(self.made) > 4 and rng.random() < 0.3:  # one at a time: never most of a tree
            name = self.made.pop(rng.randrange(len(self.made)))
            (agent / "files" / name).unlink()
        if self.made and not (agent / "latest").is_symlink():
            os.symlink(f"files/{self.made[-1]}", agent / "latest")
        if rng.random() < 0.3:
            (self.side / rng.choice(SIDE_FILES)).write_bytes(self._text(0, 800))
        if rng.random() < 0.1:
            path = self.side / rng.choice(SIDE_FILES)
            path.chmod(rng.choice((0o600, 0o640, 0o644)))

    def _sparse(self) -> None:
        """A sparse file (design §6, "Holes"): made with holes (one spanning several
        chunks, the size past the last data), or a few bytes written into a hole."""
        rng, path = self.rng, self.agent / "sparse.bin"
        if not path.exists() or rng.random() < 0.2:
            with open(path, "wb") as fh:
                fh.truncate(rng.choice((3, 12)) * (1 << 20) + rng.randint(0, 4096))
        fd = os.open(path, os.O_WRONLY)
        try:
            size = os.fstat(fd).st_size
            for _ in range(rng.randint(1, 3)):
                os.pwrite(fd, rng.randbytes(rng.randint(1, 5000)), rng.randint(0, size - 5000))
        finally:
            os.close(fd)

    def _burst(self) -> None:
        """Append and commit until killed; after each commit, the counters go to PROGRESS."""
        rng = self.rng
        progress = self.c.root / PROGRESS
        while True:
            rel = rng.choice(TRANSCRIPTS)
            line = self._line()
            fd = self.fds[rel]
            if rng.random() < 0.3:  # a line written in two pieces: a kill may fall between them
                cut = rng.randint(1, len(line) - 1)
                os.write(fd, line[:cut])
                time.sleep(0.0005)
                os.write(fd, line[cut:])
            else:
                os.write(fd, line)
            name = rng.choice(DATABASES)
            self._commit(name)
            tmp = progress.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.counters))
            os.replace(tmp, progress)
            time.sleep(rng.random() * 0.002)

    def _close(self) -> None:
        for rel, rest in self.torn.items():
            os.write(self.fds[rel], rest)
        self.torn.clear()
        for fd in self.fds.values():
            os.close(fd)
        for con in self.cons.values():
            con.close()
