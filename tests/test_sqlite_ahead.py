"""Database snapshots started ahead of the scan (``journal/sqlite/ahead.py``).

Real databases and real checkpoints. The spies below wrap the real ``Ahead.take`` and
``Started`` (they record, or commit a row at a chosen moment; the code they wrap runs
as it always does): what they check is which snapshots were made ahead, of which
files, and what was published from them.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import msgspec
import pytest

from journal.checkpoint import run as checkpoint_run
from journal.checkpoint.run import checkpoint
from journal.errors import JournalError
from journal.checkpoint.errors import CheckpointErrors
from journal.format.codec import PLAIN
from journal.format.model import KIND_SQLITE, KIND_SYMLINK, Entry
from journal.local.state import FileState
from journal.restore.run import restore
from journal.sqlite import capture as sqlite_capture
from journal.sqlite import snapshot as snapshot_mod
from journal.sqlite.ahead import Ahead, Wanted
from journal.sqlite.snapshot import remove_staging

from conftest import Live


def fill(db: Path, rows: range, body: int = 200) -> None:
    """Rows ``rows`` into table ``t`` of ``db`` (made in WAL mode if new)."""
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, body TEXT)")
        con.execute("BEGIN")
        con.executemany("INSERT INTO t VALUES (?, ?)", ((n, f"{n:08d}" * (body // 8)) for n in rows))
        con.execute("COMMIT")
    finally:
        con.close()


def ids(db: Path) -> list[int]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute("SELECT id FROM t ORDER BY id")]
    finally:
        con.close()


def box(tmp_path: Path) -> Live:
    live = Live(tmp_path / "home", tmp_path / "store")
    live.write("codex-home/sessions/2026/12/05/rollout-a.jsonl", '{"n": 0}\n')
    return live


@pytest.fixture
def taken(monkeypatch) -> list[tuple[str, bool]]:
    """``(path, made ahead)`` of every database capture, in order (a spy on ``Ahead.take``)."""
    seen: list[tuple[str, bool]] = []
    real = Ahead.take

    def spy(self, full_path, prev, walked):
        got = real(self, full_path, prev, walked)
        seen.append((full_path, got is not None))
        return got

    monkeypatch.setattr(Ahead, "take", spy)
    return seen


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """The real path of every database snapshot started (a spy on ``Started``)."""
    paths: list[str] = []
    real = sqlite_capture.Started.__init__

    def spy(self, full_path, *args, **kwargs):
        paths.append(os.path.realpath(full_path))
        real(self, full_path, *args, **kwargs)

    monkeypatch.setattr(sqlite_capture.Started, "__init__", spy)
    return paths


def staging_files(live: Live) -> list[str]:
    staging = live.state_dir / "sqlite-staging"
    return sorted(os.listdir(staging)) if staging.exists() else []


def test_changed_databases_are_snapshotted_ahead_and_restore_exactly(tmp_path, taken):
    live = box(tmp_path)
    hermes, opencode = live.local / "hermes/state.db", live.local / "opencode-share/opencode.db"
    fill(hermes, range(2000))
    fill(opencode, range(3000))
    store = live.store
    assert checkpoint(live.cfg, store).seq == 1
    assert sorted(taken) == sorted([(str(hermes), True), (str(opencode), True)]), \
        "a tree's first checkpoint walks it for its databases before the scan"

    taken.clear()
    fill(hermes, range(2000, 2100))
    fill(opencode, range(3000, 3050))
    live.append("codex-home/sessions/2026/12/05/rollout-a.jsonl", '{"n": 1}\n')
    assert checkpoint(live.cfg, store).seq == 2
    assert sorted(taken) == sorted([(str(hermes), True), (str(opencode), True)])
    assert staging_files(live) == []

    dest = tmp_path / "restored"
    restore(live.cfg, store, to=str(dest))
    assert ids(dest / "hermes/state.db") == list(range(2100))
    assert ids(dest / "opencode/opencode.db") == list(range(3050))


def test_a_commit_after_the_snapshot_began_is_taken_by_the_next_checkpoint(tmp_path, monkeypatch):
    """The entry keeps the signature read before the backup began: a row committed
    after it is not in this snapshot, and the next checkpoint sees a changed database."""
    live = box(tmp_path)
    db = live.local / "hermes/state.db"
    fill(db, range(500))
    store = live.store
    checkpoint(live.cfg, store)
    real = Ahead.take
    late = []

    def take_then_commit(self, full_path, prev, walked):
        got = real(self, full_path, prev, walked)
        if got is not None and not late:
            got.snapped.join()  # the copy is made and checked: this row is not in it
            fill(db, range(500, 501))
            late.append(full_path)
        return got

    monkeypatch.setattr(Ahead, "take", take_then_commit)
    fill(db, range(100_000, 100_010))
    assert checkpoint(live.cfg, store).seq == 2
    assert late == [str(db)]
    monkeypatch.setattr(Ahead, "take", real)
    third = checkpoint(live.cfg, store)
    assert third.seq == 3, "the row committed after the snapshot began must make the next tick busy"

    for seq, want in ((2, [*range(500), *range(100_000, 100_010)]),
                      (3, [*range(501), *range(100_000, 100_010)])):
        dest = tmp_path / f"at-{seq}"
        restore(live.cfg, store, to=str(dest), at=str(seq))
        assert ids(dest / "hermes/state.db") == want


@pytest.mark.parametrize("swap", ["directory", "file"])
def test_a_database_swapped_for_a_symlink_is_never_snapshotted_outside_the_tree(tmp_path, started, swap):
    """A hostile process swaps the database's directory (or the file itself) for a
    symlink to another database of the same name: nothing outside the tree is opened,
    and the tree's checkpoint holds the symlink."""
    live = box(tmp_path)
    inside = live.local / "hermes/profiles/state.db"
    fill(inside, range(300))
    store = live.store
    checkpoint(live.cfg, store)
    assert live.entries("hermes")["profiles/state.db"].kind == KIND_SQLITE
    outside = tmp_path / "outside/state.db"
    fill(outside, range(10_000, 10_300))
    fill(inside, range(300, 310))  # the tree's database changed too
    if swap == "directory":
        os.rename(inside.parent, live.local / "hermes/moved")
        os.symlink(outside.parent, inside.parent)
        link, still = "profiles", "moved/state.db"
    else:
        os.rename(inside, live.local / "hermes/profiles/kept.db")
        os.symlink(outside, inside)
        link, still = "profiles/state.db", None
    started.clear()
    checkpoint(live.cfg, store)
    assert not [p for p in started if p.startswith(str(outside.parent))], started
    entries = live.entries("hermes")
    assert entries[link].kind == KIND_SYMLINK
    if still:
        assert entries[still].kind == KIND_SQLITE
    assert staging_files(live) == []


def _swap_while_sqlite_opens(monkeypatch, victim: Path, outside: Path, back: bool) -> list[str]:
    """While SQLite opens ``victim`` (and only then), it is a symlink to ``outside``
    (swapped in by an atomic rename); ``back``: the very same inode is renamed back
    right after, so a look before and after the backup sees the walk's file both times.
    Real renames and real SQLite; the patch only times the swap."""
    real_connect = snapshot_mod.sqlite3.connect
    done: list[str] = []

    def connect(database, *args, **kwargs):
        if str(victim) not in str(database) or "mode=rw" not in str(database) or done:
            return real_connect(database, *args, **kwargs)
        kept = victim.with_name("kept.db")
        os.link(victim, kept)
        os.symlink(outside, str(victim) + ".lnk")
        os.rename(str(victim) + ".lnk", victim)   # the path never goes missing
        try:
            return real_connect(database, *args, **kwargs)
        finally:
            if back:
                os.rename(kept, victim)
            done.append(str(database))

    monkeypatch.setattr(snapshot_mod.sqlite3, "connect", connect)
    return done


@pytest.mark.parametrize("case", ["made ahead, swapped back", "a new database, left a symlink"])
def test_a_database_swapped_while_sqlite_opens_it_is_never_published_as_the_other(tmp_path, monkeypatch, case):
    """The looks before and after the backup leave the moment SQLite opens the path by
    name: a symlink to another database there and then (and the same inode back after)
    had that database's rows published under the tree's path, made ahead or by the
    scan itself (a database new to the tree). The backup checks the file it holds open
    is the walk's: the snapshot fails, loudly, and the tree's last checkpoint of it stays."""
    live = box(tmp_path)
    fill(live.local / "hermes/state.db", range(100))
    store = live.store
    checkpoint(live.cfg, store)
    outside = tmp_path / "outside/secret.db"
    fill(outside, range(900_000, 900_005))
    if case.startswith("made ahead"):
        victim, rel, want = live.local / "hermes/state.db", "state.db", list(range(100))
        fill(victim, range(100, 200), body=4000)   # it grows: a change its signature shows, whatever the clock
    else:
        victim, rel, want = live.local / "hermes/profiles/x/state.db", "profiles/x/state.db", None
        fill(victim, range(5))
    for n in range(300):   # files the scan reads before the database's tree: its walk comes after the swap
        live.write(f"codex-home/sessions/2026/12/05/rollout-{n}.jsonl", '{"n": %d}\n' % n)
    done = _swap_while_sqlite_opens(monkeypatch, victim, outside, back=case.startswith("made ahead"))

    try:
        checkpoint(live.cfg, store)
        failed = None
    except CheckpointErrors as err:
        failed = err

    assert done, "the swap ran"
    entry = live.entries("hermes").get(rel)
    if failed is None:   # the walk passed by while the path was the symlink: it is stored as one
        assert case.startswith("made ahead") and entry.kind == KIND_SYMLINK, entry
        return
    assert str(victim) in str(failed) and "replaced while SQLite opened it" in str(failed)
    dest = tmp_path / "restored"
    restore(live.cfg, store, to=str(dest))
    if want is None:
        assert entry is None
    else:
        assert entry.kind == KIND_SQLITE and ids(dest / "hermes" / rel) == want, "the last checkpoint of it stays"
    assert staging_files(live) == []


def test_a_failed_scan_leaves_no_snapshot_running_and_no_staging_copy(tmp_path, monkeypatch):
    live = box(tmp_path)
    db = live.local / "hermes/state.db"
    fill(db, range(20_000))  # a few MB: its backup outlasts the failure below
    store = live.store
    checkpoint(live.cfg, store)
    fill(db, range(20_000, 20_100))

    def fails(tree, cache, ctx):
        raise JournalError("the store went away")

    monkeypatch.setattr(checkpoint_run, "scan_tree", fails)
    with pytest.raises(JournalError):
        checkpoint(live.cfg, store)
    assert not [t for t in threading.enumerate() if t.name == "journal-backup"]
    time.sleep(0.5)  # a copy still being written would land now
    assert staging_files(live) == []


def identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def test_snapshots_are_used_only_for_their_own_path_previous_entry_and_file(tmp_path):
    staging = tmp_path / "state/sqlite-staging"
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    fill(first, range(100))
    fill(second, range(100))

    def reached(path: Path):
        return lambda: identity(path) if not os.path.islink(path) else None

    ahead = Ahead(str(staging), PLAIN)
    ahead.want(Wanted(str(first), None, reached(first)))
    ahead.want(Wanted(str(second), None, reached(second)))
    assert ahead.take(str(second), None, identity(second)) is None, "not the one under way: the capture makes its own"
    got = ahead.take(str(first), None, identity(first))
    assert got is not None and got.path == str(first)
    copy, _ = got.snapped.result()
    assert ids(Path(copy)) == list(range(100))
    remove_staging(copy)
    assert ahead.take(str(first), None, identity(first)) is None, "taken once"
    ahead.close()
    assert os.listdir(staging) == []

    prev = FileState(None, Entry(path="a.db", kind="file", mode=0o600))
    ahead.want(Wanted(str(first), prev, reached(first)))
    assert ahead.take(str(first), FileState(None, prev.entry), identity(first)) is None, \
        "made for another previous entry: discarded"
    assert os.listdir(staging) == []
    ahead.want(Wanted(str(first), None, reached(first)))
    assert ahead.take(str(first), None, identity(second)) is None, "a copy of another file than the walk saw"
    assert os.listdir(staging) == []
    ahead.want(Wanted(str(tmp_path / "gone.db"), None, reached(tmp_path / "gone.db")))  # nothing to start
    ahead.want(Wanted(str(second), None, lambda: None))  # not reached without a symlink: never started
    ahead.close()
    assert os.listdir(staging) == []
    assert not [t for t in threading.enumerate() if t.name == "journal-backup"]


def test_a_database_swapped_for_a_symlink_after_the_checks_and_back_is_never_published(tmp_path, monkeypatch):
    """A hostile process swaps a queued database for a symlink to an outside one once
    the checkpoint has looked at it, lets its snapshot start, and puts the file back
    before the walk reaches it: the file is looked at again when its snapshot starts
    and ends, and the walk's file must be the one copied, so the outside rows are never
    stored under the tree's path."""
    live = box(tmp_path)
    first, second = live.local / "hermes/p1/state.db", live.local / "hermes/p2/state.db"
    fill(first, range(100))
    fill(second, range(100))
    store = live.store
    checkpoint(live.cfg, store)
    outside = tmp_path / "outside/state.db"
    fill(outside, range(10_000, 10_100))
    fill(first, range(100, 110))
    fill(second, range(100, 110))
    real_take = Ahead.take
    swapped = []

    def take(self, full_path, prev, seen):
        other = second if full_path == str(first) else first
        if not swapped and self._queue and self._queue[0][0] == str(other):
            kept = other.with_name("kept.db")
            os.rename(other, kept)
            os.symlink(outside, other)
            got = real_take(self, full_path, prev, seen)  # the next snapshot starts now
            if self._running is not None:
                self._running.snapped.join()
            os.unlink(other)
            os.rename(kept, other)  # back before the walk reaches it
            swapped.append(str(other))
            return got
        return real_take(self, full_path, prev, seen)

    monkeypatch.setattr(Ahead, "take", take)
    assert checkpoint(live.cfg, store).seq == 2
    assert swapped
    dest = tmp_path / "restored"
    restore(live.cfg, store, to=str(dest))
    assert ids(dest / "hermes/p1/state.db") == list(range(110))
    assert ids(dest / "hermes/p2/state.db") == list(range(110))
    assert staging_files(live) == []


def test_a_database_the_rules_now_exclude_is_not_snapshotted_ahead(tmp_path, started):
    live = box(tmp_path)
    db = live.local / "hermes/state.db"
    fill(db, range(100))
    store = live.store
    checkpoint(live.cfg, store)
    cfg = msgspec.structs.replace(live.cfg, trees=tuple(
        msgspec.structs.replace(t, exclude=t.exclude + ("state.db",)) if t.name == "hermes" else t
        for t in live.cfg.trees))
    fill(db, range(100, 110))
    started.clear()
    checkpoint(cfg, store)
    assert started == [], "an excluded database is neither opened nor copied"


def test_a_first_checkpoint_never_snapshots_a_database_outside_the_tree(tmp_path, started):
    """A tree's first checkpoint walks it for databases as its scan does: a symlink to a
    directory outside (holding a database of a name the tree declares) is not followed."""
    live = box(tmp_path)
    fill(live.local / "hermes/state.db", range(50))
    outside = tmp_path / "outside/state.db"
    fill(outside, range(10_000, 10_050))
    os.symlink(outside.parent, live.local / "hermes/profiles")
    checkpoint(live.cfg, live.store)
    assert started == [os.path.realpath(live.local / "hermes/state.db")]
    entries = live.entries("hermes")
    assert entries["profiles"].kind == KIND_SYMLINK and entries["state.db"].kind == KIND_SQLITE
    assert staging_files(live) == []


def test_a_database_unreadable_by_its_capture_is_kept_and_the_rest_committed(tmp_path, monkeypatch):
    """A database path that cannot be read when its capture comes (swapped after the
    walk for a symlink to itself: ``ELOOP``) raised out of the scan and failed the whole
    checkpoint, the other trees' changes with it. It is a live path that cannot be read
    this time, as for any file: one warning names it, its last checkpoint stays, and
    the rest is committed."""
    live = box(tmp_path)
    db = live.local / "hermes/state.db"
    fill(db, range(100))
    store = live.store
    checkpoint(live.cfg, store)
    fill(db, range(100, 200), body=4000)
    live.append("codex-home/sessions/2026/12/05/rollout-a.jsonl", '{"n": 1}\n')   # another tree changed
    real = Ahead.take

    def take(self, full_path, prev, seen):
        got = real(self, full_path, prev, seen)
        if full_path == str(db):
            if got is not None:
                got.discard()   # the capture makes its own snapshot: the case at hand
                got = None
            os.rename(db, db.with_name("kept.db"))
            os.symlink("state.db", db)   # a symlink to itself
        return got

    monkeypatch.setattr(Ahead, "take", take)
    result = checkpoint(live.cfg, store)

    assert result.seq == 2
    assert [w for w in result.warnings if str(db) in w and "kept its last checkpoint" in w], result.warnings
    assert live.entries("hermes")["state.db"].kind == KIND_SQLITE
    dest = tmp_path / "restored"
    restore(live.cfg, store, to=str(dest))
    assert ids(dest / "hermes/state.db") == list(range(100))
    assert (dest / "codex/sessions/2026/12/05/rollout-a.jsonl").read_text() == '{"n": 0}\n{"n": 1}\n'
