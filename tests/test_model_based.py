"""A model-based test (hypothesis's stateful testing): random sequences of what an agent
and an operator do to one tree, and a model that predicts every restore exactly.

Operations: write a file (in place or as a new inode), append complete lines, append
a torn line, rewrite a transcript, truncate, delete, rename, chmod, commit to a WAL
database; checkpoint, gc (``--keep-last N --grace 0``, twice: a mark and a sweep),
``restore --at`` any kept checkpoint into a new directory, a hot restore of the
newest into the live tree, ``restore --at N --rollback`` into the live tree (local work
kept as a fork first), and a restore into a new container (which then carries on as
the live one). The live tree is compared with the model after every
step, and every restore with what the model says that checkpoint holds: bytes, mode
and mtime of each file (mtimes come from a clock the test sets), the complete lines of
each transcript, and each database's rows.

The model encodes journal's deliberate rules rather than avoiding them:

* the mass-deletion guard (design §16): when a checkpoint would drop more than half of
  the tree's files, or all of them, it keeps their last entries;
* a transcript whose only change is a torn tail keeps its entry as it was (its mtime
  too), unless the tree is being re-uploaded after a rollback (§6);
* a hot restore's rules (§6, §11.8): a missing path is written; a file of the same size
  and mtime, or the same bytes, is left as it is (its mode too); a transcript that
  extends the checkpointed bytes is kept, one that is a strict prefix of them is
  completed; a newer file is kept; anything else is replaced; a valid local database
  is kept; nothing else is touched;
* a rollback (design §11, "Lineage") first commits a fork exactly when the tree holds
  local work the chosen checkpoint lacks (a file whose content, mode included, is
  neither the last checkpoint's nor the chosen one's, or a file deleted here that the
  chosen one holds as the last did), holding what a checkpoint would; then the tree is
  exactly the chosen checkpoint: every file with other bytes or another mode is
  written (its mtime too), every other path taken out, the database closed first (an
  agent does not run during a restore);
* after a restore the local state holds the restored checkpoint's entries (the guard
  counts against them); after a rollback to an older checkpoint the next checkpoint
  re-reads everything; gc's policy counts only the main line, and keeps a fork while
  its parent is kept or while it is newer than the oldest checkpoint kept.

What the rules make ambiguous is avoided instead: transcripts stay far below the 4 MiB
rolling window of the in-place rule (§6), so every in-place edit is seen at once;
every write moves the file's mtime (a test clock), so no change hides inside the
timestamp granularity; and every mode keeps the owner's read bit (the unreadable-path
rule is ``tests/test_checkpoint.py``'s).

``make test`` runs a short, derandomized form; the ``long`` form runs many more and
longer random sequences (``make test-long``).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from conftest import Live

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, settings, strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule  # noqa: E402

from journal.checkpoint.run import checkpoint  # noqa: E402
from journal.gc.retention import Policy  # noqa: E402
from journal.gc.run import gc  # noqa: E402
from journal.report import Collector  # noqa: E402
from journal.repository.repository import Repository  # noqa: E402
from journal.restore.run import restore  # noqa: E402
from journal.store import open_store  # noqa: E402

PLAIN = ("a.txt", "b.bin", "sub/c.txt", "sub/d.json")
TRANSCRIPTS = ("log.jsonl", "sub/chat.jsonl", "sub/more.jsonl")
NAMES = PLAIN + TRANSCRIPTS
DB = "state.db"
MODES = (0o600, 0o640, 0o644, 0o444, 0o755)
CONFIG = 'presets = []\n[[trees]]\nname = "t"\npath = "t"\nsqlite = ["*.db"]\n'
SECOND = 1_000_000_000

text = st.binary(max_size=400).map(lambda b: b.replace(b"\n", b" "))
lines = st.lists(text, min_size=1, max_size=4).map(lambda ls: b"".join(line + b"\n" for line in ls))


def complete(data: bytes) -> bytes:
    return data[:data.rfind(b"\n") + 1]


class Container(Live):
    """A live tree ``root/local/t`` with its state (config ``root/journal.toml``), on the
    shared store."""

    def __init__(self, root: Path, store: Path):
        (root / "journal.toml").parent.mkdir(parents=True, exist_ok=True)
        (root / "journal.toml").write_text(CONFIG)
        super().__init__(root / "home", store, local=root / "local", env={"JOURNAL_CONFIG": str(root / "journal.toml")})
        self.root = root
        self.tree = self.local / "t"
        (self.tree / "sub").mkdir(parents=True)
        (self.tree / "sub").chmod(0o755)


def describe(tree: Path, with_torn: bool) -> dict[str, tuple]:
    """What a tree holds, as the model states it (``with_torn``: a live tree, whose
    transcripts may end in a torn line; a restored one holds complete lines only)."""
    out: dict[str, tuple] = {}
    for path in sorted(tree.rglob("*")):
        rel = str(path.relative_to(tree))
        st_ = path.lstat()
        mode = st_.st_mode & 0o7777
        if path.is_dir():
            out[rel] = ("dir", mode)
        elif rel.endswith(("-wal", "-shm", "-journal")):
            continue
        elif rel == DB:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                out[rel] = ("db", tuple(v for (v,) in con.execute("SELECT v FROM t ORDER BY id")))
            finally:
                con.close()
        else:
            data = path.read_bytes()
            kind = "jsonl" if rel.endswith(".jsonl") else "file"
            out[rel] = (kind, data if with_torn or kind == "file" else complete(data), mode, st_.st_mtime_ns)
    return out


def local_work(scan: dict[str, tuple], base: dict[str, tuple], chosen: dict[str, tuple]) -> list[str]:
    """What a rollback to ``chosen`` keeps as a fork: see the module docstring."""
    def content(entry):
        return None if entry is None else entry[:3] if entry[0] in ("file", "jsonl") else entry

    work = [p for p, e in scan.items() if e[0] != "dir" and content(e) not in (content(base.get(p)),
                                                                           content(chosen.get(p)))]
    work += [p for p, e in base.items() if e[0] != "dir" and p not in scan and content(chosen.get(p)) == content(e)]
    return work


class JournalModel(RuleBasedStateMachine):
    """One container's tree, the store, and the model of both (see the module docstring)."""

    def __init__(self):
        super().__init__()
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        self.tmp = Path(tempfile.mkdtemp(prefix="journal-model-", dir=base))
        self.store = self.tmp / "store"
        self.containers = 0
        self.c = self.make_container()
        self.clock = 1_600_000_000 * SECOND
        self.live: dict[str, tuple[bytes, int, int]] = {}   # path -> (bytes, mode, mtime_ns)
        self.rows: list[int] | None = None                   # the database's rows; None: no database
        self.con: sqlite3.Connection | None = None
        self.manifests: dict[int, dict[str, tuple]] = {}     # seq -> what it holds
        self.present: list[int] = []                         # seqs in the store
        self.forks: dict[int, int] = {}                      # the forks among them, with their parents
        self.base = 0                                        # the last checkpoint this disk wrote or restored
        self.rolled: int | None = None                       # a rollback no checkpoint has published yet
        self.cache: dict[str, tuple] = {}                    # the local state's entries
        self.reupload = False                                # the next checkpoint re-reads everything

    def make_container(self) -> Container:
        self.containers += 1
        return Container(self.tmp / f"c{self.containers}", self.store)

    def teardown(self):
        if self.con is not None:
            self.con.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tick(self) -> int:
        self.clock += SECOND
        return self.clock

    def path(self, name: str) -> Path:
        return self.c.tree / name

    def reporter(self) -> Collector:
        return Collector()

    # --- the model of a checkpoint and of a hot restore --------------------------------

    def expected_manifest(self) -> dict[str, tuple]:
        out: dict[str, tuple] = {"sub": ("dir", 0o755)}
        for name, (data, mode, mtime) in self.live.items():
            if name.endswith(".jsonl"):
                lines_ = complete(data)
                cached = self.cache.get(name)
                if not self.reupload and cached is not None and cached[0] == "jsonl" and cached[1] == lines_ \
                        and cached[2] == mode:
                    out[name] = cached  # only a torn tail changed: the entry stays as it was
                else:
                    out[name] = ("jsonl", lines_, mode, mtime)
            else:
                out[name] = ("file", data, mode, mtime)
        if self.rows is not None:
            out[DB] = ("db", tuple(self.rows))
        gone = [p for p in self.cache if p not in out]
        before = sum(1 for e in self.cache.values() if e[0] != "dir")
        dropped = sum(1 for p in gone if self.cache[p][0] != "dir")
        if dropped and (dropped > before * 0.5 or dropped == before):
            for p in gone:  # the mass-deletion guard keeps them
                out[p] = self.cache[p]
        return out

    def apply_restore(self, manifest: dict[str, tuple]) -> None:
        """What a hot restore of ``manifest`` does to the live tree (the model)."""
        for name, entry in manifest.items():
            if entry[0] == "dir":
                continue
            if entry[0] == "db":
                if self.rows is None:
                    self.rows = list(entry[1])
                continue
            _, data, mode, mtime = entry
            local = self.live.get(name)
            if local is None:
                self.live[name] = (data, mode, mtime)
                continue
            ldata, _lmode, lmtime = local
            if len(ldata) == len(data) and (lmtime == mtime or ldata == data):
                continue  # same: left as it is (its mode too)
            if entry[0] == "jsonl" and len(ldata) > len(data) and ldata.startswith(data):
                continue  # extends the checkpoint: kept
            if entry[0] == "jsonl" and len(ldata) < len(data) and data.startswith(ldata):
                self.live[name] = (data, mode, mtime)  # a strict prefix: completed
                continue
            if lmtime > mtime:
                continue  # newer: kept
            self.live[name] = (data, mode, mtime)

    # --- the agent's writes --------------------------------------------------------------

    def _stamp(self, name: str, mode: int) -> None:
        path = self.path(name)
        os.chmod(path, mode)
        mtime = self.tick()
        os.utime(path, ns=(mtime, mtime))
        self.live[name] = (path.read_bytes(), mode, mtime)

    @initialize(data=st.binary(max_size=300), chat=lines)
    def start(self, data, chat):
        self.path("a.txt").write_bytes(data)
        self._stamp("a.txt", 0o644)
        self.path("log.jsonl").write_bytes(chat)
        self._stamp("log.jsonl", 0o600)
        self.checkpoint()

    @rule(name=st.sampled_from(PLAIN), data=st.binary(max_size=3000), new_inode=st.booleans())
    def write_file(self, name, data, new_inode):
        mode = self.live[name][1] if name in self.live else 0o644
        if new_inode:
            tmp = self.path(name + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, self.path(name))
        else:
            if name in self.live and not mode & 0o200:
                os.chmod(self.path(name), mode | 0o200)
            self.path(name).write_bytes(data)
        self._stamp(name, mode)

    @rule(name=st.sampled_from(TRANSCRIPTS), chunk=lines)
    def append(self, name, chunk):
        self._append(name, chunk)

    @rule(name=st.sampled_from(TRANSCRIPTS), chunk=text.filter(bool))
    def torn_append(self, name, chunk):
        self._append(name, chunk)

    def _append(self, name: str, chunk: bytes) -> None:
        mode = self.live[name][1] if name in self.live else 0o600
        path = self.path(name)
        if name in self.live and not mode & 0o200:
            os.chmod(path, mode | 0o200)
        with open(path, "ab") as fh:
            fh.write(chunk)
        self._stamp(name, mode)

    @precondition(lambda self: any(n in self.live for n in TRANSCRIPTS))
    @rule(data=st.data(), chat=lines)
    def rewrite(self, data, chat):
        name = data.draw(st.sampled_from(sorted(n for n in self.live if n.endswith(".jsonl"))))
        mode = self.live[name][1]
        os.chmod(self.path(name), mode | 0o200)
        self.path(name).write_bytes(chat)  # in place: the same inode
        self._stamp(name, mode)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def truncate(self, data):
        name = data.draw(st.sampled_from(sorted(self.live)))
        size = data.draw(st.integers(0, max(len(self.live[name][0]) - 1, 0)))
        os.truncate(self.path(name), size)
        self._stamp(name, self.live[name][1])

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def delete(self, data):
        name = data.draw(st.sampled_from(sorted(self.live)))
        self.path(name).unlink()
        del self.live[name]

    @precondition(lambda self: self.live and len(self.live) < len(NAMES))
    @rule(data=st.data())
    def rename(self, data):
        src = data.draw(st.sampled_from(sorted(self.live)))
        dst = data.draw(st.sampled_from(sorted(set(NAMES) - set(self.live))))
        os.rename(self.path(src), self.path(dst))
        self.live[dst] = self.live.pop(src)  # the same inode, mode and mtime

    @precondition(lambda self: self.live)
    @rule(data=st.data(), mode=st.sampled_from(MODES))
    def chmod(self, data, mode):
        name = data.draw(st.sampled_from(sorted(self.live)))
        os.chmod(self.path(name), mode)
        data_, _, mtime = self.live[name]
        self.live[name] = (data_, mode, mtime)

    @rule(rows=st.integers(1, 20))
    def commit(self, rows):
        if self.con is None:
            self.con = sqlite3.connect(self.path(DB), isolation_level=None)
            self.con.execute("PRAGMA journal_mode=WAL")
            self.con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v INTEGER)")
            self.rows = self.rows if self.rows is not None else []
        start = len(self.rows)
        self.con.execute("BEGIN")
        self.con.executemany("INSERT INTO t(v) VALUES (?)", [(start + i,) for i in range(rows)])
        self.con.execute("COMMIT")
        self.rows += [start + i for i in range(rows)]

    # --- journal ------------------------------------------------------------------------

    @rule()
    def checkpoint(self):
        expected = self.expected_manifest()
        result = checkpoint(self.c.cfg, open_store(str(self.store)), self.reporter())
        if result.seq is None:
            newest = self.manifests.get(self.base) if self.present else None
            assert expected == newest, "a checkpoint found nothing to publish, but the tree changed"
            return
        self.manifests[result.seq] = expected
        self.present.append(result.seq)
        self.cache = dict(expected)
        self.reupload = False
        self.rolled = None
        self.base = result.seq

    @precondition(lambda self: len(self.present) > 1)
    @rule(keep=st.integers(1, 3))
    def collect(self, keep):
        repo = Repository.open(open_store(str(self.store)))
        for _ in range(2):  # a mark, then a sweep of what it marked
            gc(repo, Policy(keep_last=keep), 0.0)
        main = [s for s in self.present if s not in self.forks][-keep:]
        self.present = [s for s in self.present if s in main or (s in self.forks and (
            self.forks[s] in main or s > main[0]))]
        self.forks = {s: p for s, p in self.forks.items() if s in self.present}
        assert repo.manifest_seqs() == self.present

    @precondition(lambda self: self.present)
    @rule(data=st.data())
    def export(self, data):
        seq = data.draw(st.sampled_from(self.present))
        to = self.tmp / f"export-{seq}-{self.tick()}"
        result = restore(self.c.cfg, open_store(str(self.store)), self.reporter(), at=str(seq), to=str(to))
        assert result.complete and not result.fallback and result.seq == seq
        assert describe(to / "t", with_torn=False) == self.manifests[seq]

    @precondition(lambda self: self.present)
    @rule()
    def restore_live(self):
        """A hot restore: of the newest checkpoint, newer local state kept; after a
        rollback no checkpoint has published yet, of the rolled-back checkpoint again
        (left as it is when a gc deleted that checkpoint since)."""
        newest = self.main()[-1]
        result = restore(self.c.cfg, open_store(str(self.store)), self.reporter())
        assert result.complete and not result.fallback and result.lineage == "hot" and result.fork is None
        source = self.rolled if self.rolled is not None else newest
        if source in self.present:
            self.apply_restore(self.manifests[source])
            self.cache = dict(self.manifests[source])
        self.base = newest

    @precondition(lambda self: self.present)
    @rule(data=st.data())
    def rollback(self, data):
        """``restore --at N --rollback``: local work kept as a fork, then the tree is exactly N."""
        main = self.main()
        seq = main[data.draw(st.integers(0, 1 << 16)) % len(main)]   # a draw that never depends on the state
        if self.con is not None:  # the agent is stopped for a restore
            self.con.close()
            self.con = None
        scan = self.expected_manifest()
        work = local_work(scan, self.manifests.get(self.base, {}), self.manifests[seq])
        result = restore(self.c.cfg, open_store(str(self.store)), self.reporter(), at=str(seq), rollback=True)
        assert result.complete and not result.fallback and result.rollback
        assert (result.fork.seq is not None) == bool(work), (work, result.fork)
        if result.fork.seq is not None:
            self.manifests[result.fork.seq] = scan
            self.present.append(result.fork.seq)
            self.forks[result.fork.seq] = self.base
        chosen = self.manifests[seq]
        live = {}
        for name, entry in chosen.items():
            if entry[0] in ("file", "jsonl"):
                mine = self.live.get(name)
                same = mine is not None and mine[0] == entry[1] and mine[1] == entry[2]
                live[name] = mine if same else (entry[1], entry[2], entry[3])
        self.live = live
        self.rows = list(chosen[DB][1]) if DB in chosen else None
        self.cache = dict(chosen)
        self.reupload = seq != self.main()[-1]
        self.rolled = seq if self.reupload else None
        self.base = self.main()[-1]

    def main(self) -> list[int]:
        return [s for s in self.present if s not in self.forks]

    @precondition(lambda self: self.present)
    @rule()
    def new_container(self):
        """The container is replaced: a new one restores the newest checkpoint and goes on."""
        old = self.c
        self.c = self.make_container()
        result = restore(self.c.cfg, open_store(str(self.store)), self.reporter())
        assert result.complete and not result.fallback and result.lineage == "fresh"
        self.base = self.main()[-1]
        manifest = self.manifests[self.base]
        assert describe(self.c.tree, with_torn=False) == manifest
        if self.con is not None:
            self.con.close()
            self.con = None
        shutil.rmtree(old.root)
        self.live = {p: (e[1], e[2], e[3]) for p, e in manifest.items() if e[0] in ("file", "jsonl")}
        self.rows = list(manifest[DB][1]) if DB in manifest else None
        self.cache = dict(manifest)
        self.reupload = False
        self.rolled = None

    @invariant()
    def live_tree_is_the_model(self):
        want = {p: ("jsonl" if p.endswith(".jsonl") else "file", d, m, t) for p, (d, m, t) in self.live.items()}
        want["sub"] = ("dir", 0o755)
        if self.rows is not None:
            want[DB] = ("db", tuple(self.rows))
        assert describe(self.c.tree, with_torn=True) == want


SHORT = settings(max_examples=12, stateful_step_count=18, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=200, stateful_step_count=50, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def test_the_model_predicts_every_restore():
    """Short and derandomized: the same sequences on every run (``make test``)."""
    JournalModel.TestCase.settings = SHORT
    JournalModel.TestCase().runTest()


@pytest.mark.long
@pytest.mark.timeout(7200)
def test_the_model_predicts_every_restore_long():
    """Many more and longer random sequences (``make test-long``, ``make torture``)."""
    JournalModel.TestCase.settings = LONG
    JournalModel.TestCase().runTest()
