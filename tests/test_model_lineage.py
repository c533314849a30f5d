"""A model-based test of lineage (hypothesis's stateful testing): two or three
containers on one local directory store, and an oracle that no line or row is lost and
no command reports what it did not do (design §11, "Lineage: stale disks, refused
writers, rollbacks").

Each container is its own ``$AM_LOCAL`` and state directory (a ``Live``) holding the
``hermes`` preset's tree: a transcript ``hermes/chat.jsonl`` and a real SQLite
database ``hermes/state.db`` (WAL) with a table of rows. Every line and row written is
unique, so the oracle follows each one.

Steps: start a container fresh (an empty disk and a restore; in a slot already taken
the old disk is thrown away), restart one (a restore on its own disk: hot, or stale
when others committed while it stood), write lines, insert rows (some by a writer
SIGKILLed right after its commit, leaving its WAL), checkpoint (refused on a stale
disk: that is recorded, not a failure), ``journal checkpoint`` as a process SIGKILLed
at a hook (``test_fencing.KILLER``: after the data pack, before or after the
manifest) or just before its Nth file-system call that changes something (N drawn;
``tools/reliability/faults.KillHook``), ``journal restore --json`` as a process,
``restore --at N --rollback``, ``takeover``, kill -9 of a container (its disk stays as
it is, its process is gone: the next thing it does is restart), and gc
(``--keep-last K --grace 0``, twice: a mark and a sweep).

The oracle, after every step (what ``journal log`` lists, each checkpoint read by an
export ``restore --at N --to DIR``, once per manifest id):

* conservation: every line and row ever written is in some listed checkpoint (a fork
  too) or still on some container's disk, unless it was only on a disk thrown away, or
  only in checkpoints gc expired by the policy the test applied (the test predicts
  exactly which manifests a gc keeps) and on disks only as their copy of such a
  checkpoint (no local work: a stale restore replaces it); what a checkpoint ever held
  stays in one;
* each disk is what the model says: the test's writes, and each restore by its case:
  *fresh* the newest checkpoint exactly; *hot* nothing changed (after a takeover, which
  adopts a checkpoint without its content, the hot rules: a transcript that is a prefix
  of the checkpoint's completed, one that extends it kept, a diverged one the newer;
  the valid local database kept); *stale* the newest checkpoint's database and
  transcript, unless the local transcript extends it (kept, for the next checkpoint to
  publish); a rollback exactly checkpoint N;
* a restore says the case the model predicts (the disk's last checkpoint against the
  store's newest main-line one), ``complete`` and the checkpoint it made the trees
  into; a fork it reports is listed, a fork, of this disk's last checkpoint, onto that
  checkpoint, and holds the disk as it was;
* a checkpoint is refused exactly when the disk is stale (the store's newest main-line
  checkpoint is not its last one); one that succeeds leaves as the newest main-line
  checkpoint exactly the disk (everything it had published, restored and written); a
  killed one commits at most a state the disk had (a prefix of its lines, a subset of
  its rows), which then counts as its last checkpoint;
* a manifest never changes nor vanishes but by gc; a main-line manifest's parent is on
  the main line; takeover adopts the newest main-line checkpoint (a writer builds only
  on the main line).

``make test`` runs a short, derandomized form; the ``long`` form runs many more and
longer random sequences (``make test-long``); ``tools/torture.py --lineage N`` runs N
examples with a seed (``tools/reliability/lineage.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers.container import Live
from test_fencing import KILLER  # journal checkpoint, SIGKILLed at the moment JOURNAL_TEST_KILL names

hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, settings, strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule  # noqa: E402

from journal.checkpoint.takeover import takeover  # noqa: E402
from journal.repository.errors import ManifestConflict  # noqa: E402
from journal.gc.retention import Policy  # noqa: E402
from journal.gc.run import gc  # noqa: E402
from journal.repository.history import list_history  # noqa: E402
from journal.repository.repository import Repository  # noqa: E402
from journal.store import open_store  # noqa: E402

TREE = "hermes"                      # the hermes preset: $AM_LOCAL/hermes, its database state.db
CHAT = "chat.jsonl"
DB = "state.db"
SLOTS = 3
#: Where ``kill_checkpoint`` SIGKILLs ``journal checkpoint``: at one of ``KILLER``'s hooks,
#: or just before its Nth file-system call that changes something ("call", N drawn; a
#: moment in the run hypothesis can draw again, as a timer's is not).
MOMENTS = ("after-data-pack", "before-manifest", "after-manifest", "call")
ROOT = Path(__file__).resolve().parent.parent
KILL_AT = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from tools.reliability.faults import KillHook
KillHook(int(os.environ["JOURNAL_TEST_KILL_AT"])).install()
sys.argv[0] = "journal"
from journal.cli.entry import main
main()
"""


@dataclass(frozen=True)
class Content:
    """What a tree holds, as the oracle reads it: the transcript's lines in order and
    the database's rows (their values, sorted)."""

    lines: tuple[bytes, ...] = ()
    rows: tuple[str, ...] = ()

    def tokens(self) -> frozenset:
        return frozenset([("line", x) for x in self.lines] + [("row", r) for r in self.rows])

    def extends(self, other: "Content") -> bool:
        """Whether this could be ``other`` after appends and inserts only."""
        return self.lines[:len(other.lines)] == other.lines and set(other.rows) <= set(self.rows)

    def short(self) -> str:
        return f"{len(self.lines)} lines {[x.decode().strip() for x in self.lines]}, rows {list(self.rows)}"


def read_tree(tree: Path, scratch: Path) -> Content:
    """The lines and rows of ``tree``, its database read from a copy (with its WAL, not
    its -shm), so the reader changes nothing there."""
    chat = tree / CHAT
    lines = tuple(chat.read_bytes().splitlines(keepends=True)) if chat.exists() else ()
    rows: tuple[str, ...] = ()
    if (tree / DB).exists():
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        for suffix in ("", "-wal"):
            if (tree / (DB + suffix)).exists():
                shutil.copyfile(tree / (DB + suffix), scratch / (DB + suffix))
        con = sqlite3.connect(scratch / DB)
        try:
            has = con.execute("SELECT 1 FROM sqlite_master WHERE name = 't'").fetchone()
            rows = tuple(sorted(v for (v,) in con.execute("SELECT v FROM t"))) if has else ()
        finally:
            con.close()
        shutil.rmtree(scratch)
    return Content(lines, rows)


def insert_rows(db: Path, values: list[str], crash: bool) -> None:
    """Commit ``values`` to the database; with ``crash`` by a writer SIGKILLed right
    after its commit (its WAL left as it is, not checkpointed into the database)."""
    def write() -> None:
        con = sqlite3.connect(db, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO t(v) VALUES (?)", [(v,) for v in values])
        con.execute("COMMIT")
        if not crash:
            con.close()

    if not crash:
        write()
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            write()
            os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"the writer failed: {status}"


@dataclass
class Info:
    """One listed manifest, as the oracle needs it."""

    id: str
    fork: bool
    parent: int | None
    onto: int | None
    created_ns: int


@dataclass
class Box:
    """One container slot: its ``Live``, and the model of its disk and its lineage."""

    name: str
    live: Live
    content: Content = field(default_factory=Content)   # what its disk holds (the model)
    base: int = 0          # the last main-line checkpoint its disk wrote or restored (0: none yet)
    held: Content = field(default_factory=Content)      # what checkpoint ``base`` holds
    adopted: bool = False  # took over ``base`` without its content: the disk need not descend from it
    up: bool = True        # its process runs (a kill -9 stops it: it restarts next)

    @property
    def tree(self) -> Path:
        return self.live.local / TREE


@dataclass
class Tally:
    """Counts over a run (``tools/torture.py --lineage``)."""

    examples: int = 0
    steps: int = 0
    kills: int = 0          # checkpoint processes the SIGKILL landed on
    refusals: int = 0       # refused checkpoints (a stale disk)
    stale: int = 0          # restores of a stale disk
    forks: int = 0          # forks restores made
    rollbacks: int = 0
    expired: int = 0        # manifests gc expired


class LineageModel(RuleBasedStateMachine):
    """Two or three containers on one store, and the oracle (see the module docstring)."""

    #: Counts over the examples (``tools/reliability/lineage.py`` sets one).
    tally: Tally | None = None

    def __init__(self):
        super().__init__()
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None   # journal fsyncs what it publishes
        self.tmp = Path(tempfile.mkdtemp(prefix="journal-lineage-", dir=base))
        self.store = self.tmp / "store"
        self.scratch = self.tmp / "scratch"
        self.boxes: dict[int, Box] = {}
        self.made = 0
        self.written = 0
        self.reader = Live(self.tmp / "reader" / "home", self.store, local=self.tmp / "reader" / "local")
        self.infos: dict[int, Info] = {}               # the listing as last checked
        self.contents: dict[str, Content] = {}         # manifest id -> what it holds
        self.alive: set = set()        # every line and row that must be kept somewhere
        self.published: set = set()    # every line and row a listed checkpoint held
        if self.tally is not None:
            self.tally.examples += 1

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the store, as journal log lists it ---------------------------------------------

    def repo(self) -> Repository:
        return Repository.open(open_store(str(self.store)))

    def listing(self) -> dict[int, Info]:
        if not self.store.exists():   # before the first checkpoint made it
            return {}
        repo = self.repo()
        out = {}
        for h in list_history(repo):
            assert h.error is None, f"journal log lists checkpoint {h.seq} as unreadable: {h.error}"
            manifest, mid = repo.load_manifest(h.seq)
            assert (h.fork is not None) == manifest.is_fork and h.parent == manifest.parent
            out[h.seq] = Info(mid, manifest.is_fork, manifest.parent,
                              manifest.fork.onto if manifest.is_fork else None, manifest.created_ns)
        assert sorted(out) == repo.manifest_seqs()
        return dict(sorted(out.items()))

    @staticmethod
    def newest_main(infos: dict[int, Info]) -> int:
        return max((s for s, i in infos.items() if not i.fork), default=0)

    def content(self, seq: int, info: Info, fresh: bool = False) -> Content:
        """What checkpoint ``seq`` holds, read by an export (once per manifest id)."""
        if fresh or info.id not in self.contents:
            to = self.tmp / f"export-{seq}"
            result = self.reader.restore(to=str(to), at=str(seq))
            assert result.complete and not result.fallback and result.seq == seq, \
                f"checkpoint {seq} does not export whole: {result}"
            got = read_tree(to / TREE, self.scratch)
            shutil.rmtree(to)
            if info.id in self.contents:
                assert got == self.contents[info.id], f"checkpoint {seq} now holds {got.short()}, " \
                                                     f"not {self.contents[info.id].short()}"
            self.contents[info.id] = got
        return self.contents[info.id]

    def stored(self, infos: dict[int, Info]) -> set:
        out: set = set()
        for seq, info in infos.items():
            out |= self.content(seq, info).tokens()
        return out

    def on_disks(self) -> set:
        out: set = set()
        for box in self.boxes.values():
            out |= box.content.tokens()
        return out

    # --- containers ---------------------------------------------------------------------

    def make_box(self) -> Box:
        self.made += 1
        name = f"c{self.made}"
        root = self.tmp / name
        return Box(name, Live(root / "home", self.store, local=root / "local"))

    def disk(self, box: Box) -> Content:
        return read_tree(box.tree, self.scratch)

    def pick(self, data, up: bool = False, only=None) -> Box:
        slots = sorted(s for s, b in self.boxes.items() if (not up or b.up) and (only is None or only(b)))
        return self.boxes[data.draw(st.sampled_from(slots), label="container")]

    def has_up(self) -> bool:
        return any(b.up for b in self.boxes.values())

    def set_base(self, box: Box, seq: int, infos: dict[int, Info]) -> None:
        box.base, box.held = seq, self.content(seq, infos[seq])

    def stale_boxes(self) -> bool:
        newest = self.newest_main(self.infos)
        return any(b.base != newest for b in self.boxes.values())

    def count(self, what: str, n: int = 1) -> None:
        if self.tally is not None:
            setattr(self.tally, what, getattr(self.tally, what) + n)

    def line(self, box: Box) -> bytes:
        self.written += 1
        return json.dumps({"container": box.name, "n": self.written, "text": "x" * (self.written % 7)}).encode() + b"\n"

    # --- the agents' writes -------------------------------------------------------------

    @initialize(lines=st.integers(1, 3), rows=st.integers(1, 3), others=st.integers(1, SLOTS - 1))
    def start(self, lines, rows, others):
        """The first container writes and checkpoints; one or two more start fresh on it."""
        box = self.boxes[0] = self.make_box()
        box.tree.mkdir(parents=True)
        self._append(box, lines)
        self._insert(box, rows, crash=False)
        self.checkpoint_box(box)
        assert box.base == 1
        for slot in range(1, others + 1):
            self.fresh(slot)

    def _append(self, box: Box, n: int) -> None:
        new = [self.line(box) for _ in range(n)]
        with open(box.tree / CHAT, "ab") as fh:
            fh.write(b"".join(new))
        box.content = Content(box.content.lines + tuple(new), box.content.rows)
        self.alive |= Content(tuple(new)).tokens()

    def _insert(self, box: Box, n: int, crash: bool) -> None:
        values = []
        for _ in range(n):
            self.written += 1
            values.append(f"{box.name}-row-{self.written}")
        insert_rows(box.tree / DB, values, crash)
        box.content = Content(box.content.lines, tuple(sorted(box.content.rows + tuple(values))))
        self.alive |= Content(rows=tuple(values)).tokens()

    @precondition(has_up)
    @rule(data=st.data(), n=st.integers(1, 3))
    def append(self, data, n):
        self._append(self.pick(data, up=True), n)

    @precondition(has_up)
    @rule(data=st.data(), n=st.integers(1, 3), crash=st.booleans())
    def insert(self, data, n, crash):
        self._insert(self.pick(data, up=True), n, crash)

    @precondition(has_up)
    @rule(data=st.data(), n=st.integers(0, 3), rows=st.integers(0, 2))
    def turn(self, data, n, rows):
        """An agent's turn, then its tick: lines, rows, a checkpoint (refused when stale)."""
        box = self.pick(data, up=True)
        if n:
            self._append(box, n)
        if rows:
            self._insert(box, rows, crash=False)
        self.checkpoint_box(box)

    @precondition(has_up)
    @rule(data=st.data())
    def kill_container(self, data):
        """kill -9 of the container: its disk stays as it is; it restarts next."""
        self.pick(data, up=True).up = False

    # --- checkpoints --------------------------------------------------------------------

    def checkpoint_box(self, box: Box) -> None:
        before = self.listing()
        newest = self.newest_main(before)
        stale = box.base != newest
        try:
            result = box.live.checkpoint()
        except ManifestConflict as err:
            assert stale, f"a checkpoint of a hot disk (its last checkpoint {box.base} is the newest) was " \
                          f"refused: {err}"
            assert self.listing() == before, "a refused checkpoint changed the store's manifests"
            self.count("refusals")
            return
        assert not stale, f"a stale disk (its last checkpoint {box.base}, the store's newest {newest}) published: " \
                          f"checkpoint {result.seq}"
        after = self.listing()
        new = sorted(set(after) - set(before))
        assert set(before) <= set(after), "a checkpoint removed a manifest"
        assert all(not after[s].fork for s in new), f"a checkpoint wrote a fork: {new}"
        if result.seq is not None:   # new, or the pending one a killed run of this disk left (§13)
            assert result.seq == (max(new) if new else box.base), \
                f"the checkpoint reported {result.seq}, the store has new manifests {new}"
            assert result.manifest_id == after[result.seq].id
        top = self.newest_main(after)
        disk = self.disk(box)
        held = self.content(top, after[top])
        assert held == disk, f"after a checkpoint of {box.name} the newest checkpoint {top} holds {held.short()}, " \
                             f"not the disk's {disk.short()}"
        self.set_base(box, top, after)
        box.adopted = False

    @precondition(has_up)
    @rule(data=st.data())
    def checkpoint(self, data):
        self.checkpoint_box(self.pick(data, up=True))

    @precondition(has_up)
    @rule(data=st.data(), moment=st.sampled_from(MOMENTS), call=st.integers(1, 80))
    def kill_checkpoint(self, data, moment, call):
        """``journal checkpoint`` in a process, SIGKILLed at a hook or before its ``call``-th
        file-system call (it may end first: done, idle or refused)."""
        box = self.pick(data, up=True)
        before = self.listing()
        stale = box.base != self.newest_main(before)
        if moment == "call":
            proc = box.live.popen("checkpoint", cmd=[sys.executable, "-c", KILL_AT],
                                  env={"JOURNAL_TEST_KILL_AT": str(call)})
        else:
            proc = box.live.popen("checkpoint", cmd=[sys.executable, "-c", KILLER], env={"JOURNAL_TEST_KILL": moment})
        _, err = proc.communicate(timeout=120)
        code = proc.returncode
        assert code in (0, 1, -signal.SIGKILL), f"journal checkpoint exited {code}: {err}"
        if code == 1:
            assert stale and "the store moved on" in err, f"a checkpoint refused on a hot disk: {err}"
            self.count("refusals")
        elif code == 0:
            assert not stale, f"a checkpoint of a stale disk succeeded: {err}"
        else:
            self.count("kills")
        after = self.listing()
        new = sorted(set(after) - set(before))
        assert set(before) <= set(after), "a checkpoint removed a manifest"
        assert all(not after[s].fork for s in new), f"a checkpoint wrote a fork: {new}"
        disk = self.disk(box)
        if stale:
            assert not new, f"a checkpoint of a stale disk published {new}"
            return
        for seq in new:
            held = self.content(seq, after[seq])
            assert disk.extends(held), f"the killed checkpoint committed {seq} holding {held.short()}, which " \
                                       f"the disk never had (it holds {disk.short()})"
        if new:
            self.set_base(box, max(new), after)
            box.adopted = False
        if code == 0:
            top = self.newest_main(after)
            assert self.content(top, after[top]) == disk, "after a checkpoint the newest one is not the disk"
            self.set_base(box, top, after)
            box.adopted = False

    # --- restores -----------------------------------------------------------------------

    def restore_box(self, box: Box, *, at: int | None = None, cli: bool = False) -> None:
        """A restore into ``box``'s live trees (a restart; ``at``: a rollback), checked
        against the model."""
        before = self.listing()
        newest = self.newest_main(before)
        target = at if at is not None else newest
        case = "fresh" if box.base == 0 else "hot" if box.base == newest else "stale"
        disk = self.disk(box)
        assert disk == box.content
        if case == "stale" or at is not None:
            # This disk's copy of its last checkpoint is no local work (§11 Lineage 3): what
            # only it and checkpoints gc expired held goes with it, by the retention policy.
            others = set().union(*(b.content.tokens() for b in self.boxes.values() if b is not box))
            self.alive -= (disk.tokens() & box.held.tokens()) - self.stored(before) - others
        if cli:
            args = ["restore", "--json"] + (["--at", str(at), "--rollback"] if at is not None else [])
            ran = box.live.run(*args, expect=None)
            assert ran.returncode == 0, f"journal {' '.join(args)} exited {ran.returncode}: {ran.stderr}"
            result = json.loads(ran.stdout)
            fork = result["fork"]
            fork_seq = fork["seq"] if fork else None
            log = json.loads(box.live.run("log", "--json", expect=0).stdout)
        else:
            got = box.live.restore(at=str(at), rollback=True) if at is not None else box.live.restore()
            result = {"complete": got.complete, "fallback": got.fallback, "seq": got.seq, "lineage": got.lineage,
                      "rollback": got.rollback}
            fork_seq = got.fork.seq if got.fork is not None else None
            log = None
        after = self.listing()
        if log is not None:
            assert [e["seq"] for e in log] == sorted(after, reverse=True), "journal log lists other checkpoints"
        what = f"restore of {box.name} ({case}{f', rollback to {at}' if at is not None else ''})"
        assert result["complete"] and not result["fallback"], f"{what}: {result}"
        assert result["seq"] == target, f"{what} restored {result['seq']}, not {target}"
        assert result["lineage"] == case, f"{what} says the disk is {result['lineage']}"
        assert bool(result["rollback"]) == (at is not None)
        new = sorted(set(after) - set(before))
        assert set(before) <= set(after), f"{what} removed a manifest"
        assert new == ([fork_seq] if fork_seq is not None else []), f"{what} reported fork {fork_seq}, new {new}"
        if fork_seq is not None:
            info = after[fork_seq]
            assert case != "fresh" and (case == "stale" or at is not None), f"{what} made fork {fork_seq}"
            assert info.fork and info.parent == box.base and info.onto == target, \
                f"{what}: fork {fork_seq} is {info} (this disk's last checkpoint {box.base}, onto {target})"
            held = self.content(fork_seq, info)
            assert held == disk, f"{what}: fork {fork_seq} holds {held.short()}, not the disk's {disk.short()}"
            self.count("forks")
        want = self.content(target, before[target])
        now = self.disk(box)
        if at is not None:
            expected = want
            self.count("rollbacks")
        elif case == "fresh":
            expected = want
        elif case == "hot" and not box.adopted:
            expected = disk
        elif case == "hot":   # after a takeover: the hot rules against a checkpoint this disk did not write
            if want.lines[:len(disk.lines)] == disk.lines:
                lines = want.lines       # a prefix: completed
            elif disk.lines[:len(want.lines)] == want.lines:
                lines = disk.lines       # extends it: kept
            else:                        # neither: the newer file (by mtime) stays, whichever it is
                lines = now.lines if now.lines in (disk.lines, want.lines) else want.lines
            expected = Content(lines, disk.rows)   # a valid local database is kept
        else:
            keep = disk.lines[:len(want.lines)] == want.lines
            expected = Content(disk.lines if keep else want.lines, want.rows)
        self.count("stale", case == "stale")
        assert now == expected, f"{what} left the disk holding {now.short()}, not {expected.short()}"
        box.content = now
        self.set_base(box, newest, after)
        box.adopted = box.adopted and case == "hot" and at is None
        box.up = True

    @rule(data=st.data())
    def restart(self, data):
        """A restart: restore on its own disk (hot, or stale if others committed)."""
        self.restore_box(self.pick(data))

    @precondition(stale_boxes)
    @rule(data=st.data())
    def restart_stale(self, data):
        """A restart of a container that stood while others committed."""
        newest = self.newest_main(self.infos)
        self.restore_box(self.pick(data, only=lambda b: b.base != newest))

    @rule(data=st.data())
    def restore_cli(self, data):
        """``journal restore --json`` in a process (and ``journal log --json``)."""
        self.restore_box(self.pick(data), cli=True)

    @rule(data=st.data(), cli=st.booleans())
    def rollback(self, data, cli):
        """``restore --at N --rollback`` to any listed checkpoint (a fork too)."""
        box = self.pick(data)
        at = data.draw(st.sampled_from(sorted(self.infos)), label="at")
        self.restore_box(box, at=at, cli=cli)

    @rule(slot=st.integers(0, SLOTS - 1))
    def fresh(self, slot):
        """A container started on an empty disk (replacing the slot's: that disk is gone)."""
        old = self.boxes.get(slot)
        if old is not None:
            del self.boxes[slot]
            kept = self.stored(self.listing()) | self.on_disks()
            self.alive -= old.content.tokens() - kept   # only on that disk: never published
            shutil.rmtree(old.live.home.parent)
        box = self.boxes[slot] = self.make_box()
        self.restore_box(box)

    @precondition(has_up)
    @rule(data=st.data())
    def takeover(self, data):
        box = self.pick(data, up=True)
        before = self.listing()
        result = takeover(box.live.cfg, open_store(str(self.store)))
        newest = self.newest_main(before)
        assert self.listing() == before, "takeover changed the store's manifests"
        assert self.disk(box) == box.content, "takeover changed the live trees"
        assert result.seq == newest, f"takeover adopted checkpoint {result.seq}, not the newest main-line " \
                                     f"checkpoint {newest} (a fork: {before[result.seq].fork})"
        self.set_base(box, newest, before)
        box.adopted = True

    # --- gc -----------------------------------------------------------------------------

    @rule(keep=st.integers(1, 3))
    def collect(self, keep):
        """gc --keep-last K --grace 0, twice (a mark, then a sweep); exactly what the
        retention rules expire goes (design §11 Lineage 7)."""
        before = self.listing()
        main = sorted((s for s, i in before.items() if not i.fork), reverse=True)
        kept = set(main[:keep])
        oldest = min(before[s].created_ns for s in kept)
        kept |= {s for s, i in before.items() if i.fork and (i.parent in kept or i.created_ns >= oldest)}
        repo = self.repo()
        for _ in range(2):
            gc(repo, Policy(keep_last=keep), 0.0)
        after = self.listing()
        forks = [s for s, i in before.items() if i.fork]
        assert set(after) == kept, \
            f"gc --keep-last {keep} of {sorted(before)} (forks {forks}) left {sorted(after)}, not {sorted(kept)}"
        for seq, info in after.items():   # what is kept still exports whole, and the same
            self.content(seq, info, fresh=True)
        stored = self.stored(after)
        self.published &= stored
        self.alive &= stored | self.on_disks()   # what only expired checkpoints held: gone by the policy
        self.infos = after
        self.count("expired", len(before) - len(after))

    # --- the oracle ---------------------------------------------------------------------

    @invariant()
    def nothing_lost(self):
        if not self.boxes:
            return
        if self.tally is not None:
            self.tally.steps += 1
        for box in self.boxes.values():
            disk = self.disk(box)
            assert disk == box.content, f"{box.name}'s disk holds {disk.short()}, not {box.content.short()}"
        infos = self.listing()
        gone = sorted(set(self.infos) - set(infos))
        assert not gone, f"checkpoints {gone} vanished, not by gc"
        for seq in set(self.infos) & set(infos):
            assert infos[seq].id == self.infos[seq].id, f"manifest {seq} changed"
        for seq, info in infos.items():
            if info.parent in infos and not info.fork:
                assert not infos[info.parent].fork, f"main-line checkpoint {seq} is built on fork {info.parent}"
        self.infos = infos
        stored = self.stored(infos)
        lost = self.published - stored
        assert not lost, f"lines or rows a checkpoint held are in none now: {sorted(lost)}"
        self.published |= stored
        lost = self.alive - stored - self.on_disks()
        assert not lost, f"lines or rows in no listed checkpoint and on no disk: {sorted(lost)}"


# --- sequences the model found, pinned (each fails on the journal it was found on) ---------


class Draws:
    """Stands in for hypothesis's ``data`` in a replay: hands out the given draws (a
    container's slot, then a checkpoint for ``rollback``), in order."""

    def __init__(self, *values):
        self.values = list(values)

    def draw(self, strategy, label=None):
        return self.values.pop(0)


def replay(*steps: tuple[str, dict]) -> None:
    """Run ``steps`` (a rule's name, its arguments) on a new machine, the oracle after
    each, as hypothesis printed them."""
    machine = LineageModel()
    try:
        for name, kwargs in steps:
            getattr(machine, name)(**kwargs)
            machine.nothing_lost()
    finally:
        machine.teardown()


def test_found_checkpoints_after_a_takeover_restore_whole():
    """Takeover adopts the newest checkpoint's index pages but not the bases of those
    stored as deltas; the checkpoint after it keeps such a page, and the next one stores
    its replacement as a delta of that delta: the index no reader can decode
    ("a page delta read without its base"), every later checkpoint unusable."""
    replay(("start", dict(lines=1, rows=1, others=1)),
           ("turn", dict(data=Draws(0), n=1, rows=0)),
           ("takeover", dict(data=Draws(0))),
           ("checkpoint", dict(data=Draws(0))),
           ("turn", dict(data=Draws(0), n=2, rows=2)))


def test_found_a_fork_of_a_disk_whose_last_checkpoint_gc_expired_restores_whole():
    """The first container's checkpoints 1 and 2 expire (another committed 3, gc keeps
    one); its restart forks its unpublished line and row onto 3, building on what its
    local state remembers of 2: the fork names an index page in a pack gc deleted, so
    the fork does not restore and the row, taken off the live database, is lost."""
    replay(("start", dict(lines=2, rows=1, others=2)),
           ("restart", dict(data=Draws(0))),
           ("turn", dict(data=Draws(0), n=0, rows=1)),
           ("restart", dict(data=Draws(2))),
           ("turn", dict(data=Draws(2), n=0, rows=1)),
           ("collect", dict(keep=1)),
           ("turn", dict(data=Draws(0), n=2, rows=1)),
           ("restart", dict(data=Draws(0))))


def test_found_a_restart_after_a_checkpoint_killed_above_a_fork_is_hot():
    """A checkpoint whose next sequence a fork holds commits past it (4 over fork 3) and
    is killed before its manifest; the restart takes the pending manifest's sequence
    less one (the fork) for this disk's last checkpoint: a hot disk called stale, its
    newer rows forked and its live database made the older checkpoint's."""
    replay(("start", dict(lines=2, rows=2, others=1)),
           ("turn", dict(data=Draws(0), n=2, rows=0)),
           ("insert", dict(data=Draws(1), n=2, crash=False)),
           ("restart", dict(data=Draws(1))),
           ("append", dict(data=Draws(1), n=1)),
           ("kill_checkpoint", dict(data=Draws(1), call=1, moment="before-manifest")),
           ("restart", dict(data=Draws(1))))


def test_found_a_writer_killed_before_its_manifest_restarts_after_gc_expired_its_checkpoint():
    """The second container's checkpoint 2 is killed before its manifest; the first
    commits 2 and gc keeps only that. The second's restart drops its pending manifest
    and then reads its parent, checkpoint 1, which gc deleted: every ``journal
    restore`` fails ("manifests/000000000001 does not exist"), and its checkpoint is
    refused, saying to run ``journal restore``: the container cannot recover."""
    replay(("start", dict(lines=1, rows=1, others=1)),
           ("insert", dict(data=Draws(1), n=1, crash=False)),
           ("kill_checkpoint", dict(data=Draws(1), call=1, moment="before-manifest")),
           ("turn", dict(data=Draws(0), n=1, rows=0)),
           ("collect", dict(keep=1)),
           ("restart", dict(data=Draws(1))))


def test_found_an_idle_checkpoint_is_refused_when_gc_deleted_the_next_sequence_another_writer_committed():
    """The second container commits 2 and 3 over the first's checkpoint 1, and gc keeps
    only 3. The first container's idle checkpoint reports "idle" (the quiet snapshot
    finds manifest 2 absent again: gc took it), not that the store moved on (design §11,
    Lineage 5)."""
    replay(("start", dict(lines=1, rows=1, others=1)),
           ("turn", dict(data=Draws(1), n=0, rows=1)),
           ("turn", dict(data=Draws(1), n=0, rows=1)),
           ("collect", dict(keep=1)),
           ("checkpoint", dict(data=Draws(0))))


def test_found_a_rollback_survives_a_restart_after_its_first_checkpoint_was_killed():
    """After ``restore --at 1 --rollback`` the first checkpoint (which would publish the
    rolled-back trees) is killed before its manifest; the restart is hot and writes the
    newest checkpoint's transcript back: the local state dropped the rollback's note
    when it saved the pending manifest, which never committed."""
    replay(("start", dict(lines=1, rows=1, others=1)),
           ("append", dict(data=Draws(0), n=2)),
           ("checkpoint", dict(data=Draws(0))),
           ("rollback", dict(data=Draws(0, 1), cli=False)),
           ("kill_checkpoint", dict(data=Draws(0), call=1, moment="before-manifest")),
           ("restart", dict(data=Draws(0))))


def test_found_a_restart_after_takeover_keeps_the_local_lines_it_did_not_publish():
    """The second container has two unpublished lines; the first commits 2 (another
    line); the second takes over (its files to be the next checkpoint) and restarts
    before checkpointing: the restore is hot and the store's transcript, newer by mtime,
    replaces the local one. The two lines are in no checkpoint and on no disk."""
    replay(("start", dict(lines=1, rows=1, others=1)),
           ("append", dict(data=Draws(1), n=2)),
           ("turn", dict(data=Draws(0), n=1, rows=0)),
           ("takeover", dict(data=Draws(1))),
           ("restart", dict(data=Draws(1))))


SHORT = settings(max_examples=12, stateful_step_count=18, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=200, stateful_step_count=50, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def test_lineage_model_loses_nothing():
    """Short and derandomized: the same sequences on every run (``make test``)."""
    LineageModel.TestCase.settings = SHORT
    LineageModel.TestCase().runTest()


@pytest.mark.long
@pytest.mark.timeout(7200)
def test_lineage_model_loses_nothing_long():
    """Many more and longer random sequences (``make test-long``, ``make torture``)."""
    LineageModel.TestCase.settings = LONG
    LineageModel.TestCase().runTest()
