"""Lineage end to end (design §11, "Lineage: stale disks, refused writers, rollbacks").

Each container is a ``Live``: its own ``$AM_LOCAL`` and state, driven through the real
CLI in subprocesses, on one store shared by the test (a local directory, the hf-mount
rules simulator ``hfsim://``, and S3 through moto's server). The trees hold what an
agent's do: a real Codex transcript (JSONL, ``codex-home``) that lines are appended to,
a SQLite database written by ``sqlite3`` (the ``hermes`` preset's ``state.db``, in WAL
mode) that rows are inserted into, and plain files. Every scenario ends by reading
back what matters: the database's rows (``sqlite3`` on a copy) and the transcript's
lines, in the live trees, in exports of single checkpoints (``restore --at N --to
DIR``, forks included) and in a fresh container's restore. Nothing may be lost and
nothing misreported: a fork holds the work it says it holds, the main line holds every
row another writer committed, and a fresh restore never picks a fork.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, JOURNAL, Live, clean_env, journal_script, wait_for
from test_fencing import ROLLOUT, Shared, line

from journal.local.state import read_state

pytest_plugins = ["tests.s3server"]

TRANSCRIPT = ROLLOUT                               # a real Codex rollout (1 MB), appended to
DB = "hermes/state.db"                             # the hermes preset's database
NOTES = "codex-home/memories/notes.md"
KEEP = "codex-home/memories/keep.md"
#: Live directory of each tree, by tree name (an export lays trees out by name).
TREES = {"codex": "codex-home", "hermes": "hermes"}
COMPANIONS = ("-wal", "-shm", "-journal")


@pytest.fixture(params=["local", "hfsim", "s3"])
def store(request, tmp_path) -> Shared:
    """The store every container of a test shares."""
    if request.param == "local":
        return Shared("local", str(tmp_path / "store"))
    if request.param == "hfsim":
        return Shared("hfsim", f"hfsim://{tmp_path / 'store'}")
    bucket = request.getfixturevalue("s3_bucket")
    return Shared("s3", bucket.url, dict(bucket.server.env))


#: The probes beyond the four scenarios run on a local and a cloud store only.
LOCAL_AND_S3 = pytest.mark.parametrize("store", ["local", "s3"], indirect=True)


def container(home: Path, store: Shared) -> Live:
    """One container on ``store``, with an empty ``$AM_LOCAL``; it runs the installed
    ``journal`` (the launcher, as deployed: an idle tick may end in its fast exit), and
    ``run`` expects exit 0 unless told."""
    return Live(home, store.url, env=store.env, expect=0, cmd=journal_script())


# --- the trees ------------------------------------------------------------------------------------


def add_rows(box: Live, *rows: tuple[int, str, str]) -> None:
    """Insert ``rows`` (id, author, body) into the container's live database, as an
    agent does: WAL mode, one transaction, the connection closed afterwards."""
    path = box.local / DB
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, author TEXT, body TEXT)")
        db.executemany("INSERT INTO messages VALUES (?, ?, ?)", rows)
        db.commit()
    finally:
        db.close()


#: An agent that commits one row and is killed before it closes its database: the row
#: is in the -wal file only.
DIES_WITH_WAL = textwrap.dedent(r'''
    import os, sqlite3, sys
    db = sqlite3.connect(sys.argv[1])
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute("INSERT INTO messages VALUES (?, ?, ?)", (int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    db.commit()
    os._exit(0)
''')


def add_row_and_die(box: Live, row: tuple[int, str, str]) -> None:
    subprocess.run([sys.executable, "-c", DIES_WITH_WAL, str(box.local / DB), *map(str, row)], check=True)
    assert os.path.getsize(f"{box.local / DB}-wal") > 0


def rows_of(path: Path) -> list[tuple]:
    """Every row of the database at ``path``, read with sqlite3 from a copy (with its
    companions), so that nothing is ever written beside the original."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.db"
        shutil.copyfile(path, copy)
        for suffix in COMPANIONS:
            if os.path.exists(f"{path}{suffix}"):
                shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
        db = sqlite3.connect(copy)
        try:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            return db.execute("SELECT id, author, body FROM messages ORDER BY id").fetchall()
        finally:
            db.close()


def contents(root: Path, *, export: bool = False) -> dict[str, object]:
    """What the trees under ``root`` hold, keyed ``tree/path``: a plain file's bytes, the
    database's rows (its companions left out). ``root`` is an ``$AM_LOCAL``, or with
    ``export`` a ``restore --to`` directory (trees by name)."""
    out: dict[str, object] = {}
    for tree, live in TREES.items():
        base = root / (tree if export else live)
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_symlink() or not path.is_file():
                continue
            rel = path.relative_to(base).as_posix()
            if rel == "state.db":
                out[f"{tree}/{rel}"] = rows_of(path)
            elif not any(rel == f"state.db{s}" for s in COMPANIONS):
                out[f"{tree}/{rel}"] = path.read_bytes()
    return out


def in_tree(rel: str) -> str:
    """A live path (``codex-home/...``) as checkpoints and exports name it (``codex/...``)."""
    for tree, live in TREES.items():
        if rel.startswith(live + "/"):
            return f"{tree}/{rel[len(live) + 1:]}"
    raise AssertionError(rel)


def lines_of(data: object) -> list[bytes]:
    assert isinstance(data, bytes)
    return data.splitlines(keepends=True)


def live_lines(box: Live) -> list[bytes]:
    return lines_of((box.local / TRANSCRIPT).read_bytes())


def seeded(home: Path, store: Shared) -> Live:
    """A container whose trees hold a real transcript, a database with 3 rows and two notes."""
    box = container(home, store)
    box.write(TRANSCRIPT, (FIXTURES / ROLLOUT).read_bytes())
    box.write(NOTES, "seed notes\n")
    box.write(KEEP, "seed keep\n")
    add_rows(box, *[(i, "seed", f"seed row {i}") for i in (1, 2, 3)])
    return box


def work(box: Live, who: str, n: int, *, note: str | None = None) -> tuple[bytes, tuple]:
    """One turn of an agent: a transcript line and a database row (id ``n``), and, with
    ``note``, a file of its own. Returns the line and the row."""
    text = line(f"{who} turn {n}").encode()
    row = (n, who, f"{who} row {n}")
    box.append(TRANSCRIPT, text)
    add_rows(box, row)
    if note is not None:
        box.write(note, f"{who}'s file {n}\n")
    return text, row


# --- the CLI --------------------------------------------------------------------------------------


def export(box: Live, at: int, dest: Path) -> dict[str, object]:
    """``journal restore --at AT --to DEST`` (must succeed); what it wrote."""
    box.run("restore", "--at", str(at), "--to", str(dest))
    return contents(dest, export=True)


def fresh(home: Path, store: Shared) -> Live:
    """A new container on an empty disk, restored from the store (complete, no fork)."""
    box = container(home, store)
    ran = restore_json(box)
    assert ran["complete"] and ran["lineage"] == "fresh" and ran["fork"] is None, ran
    return box


def restore_json(box: Live, *args: str, expect: int = 0) -> dict:
    return json.loads(box.run("restore", "--json", *args, expect=expect).stdout)


def no_fork(ran: dict) -> bool:
    return ran["fork"] is None or ran["fork"]["seq"] is None


def status(box: Live) -> dict:
    return json.loads(box.run("status", "--json").stdout)


def history(box: Live) -> dict[int, dict]:
    """``journal log --json`` by sequence, after checking the main line: every manifest
    that is not a fork names the previous such one as its parent (the first none), and a
    fork names one of the main line."""
    log = {e["seq"]: e for e in box.log()}
    assert all(e["error"] is None for e in log.values()), log
    main = [s for s in sorted(log) if log[s]["fork"] is None]
    assert main[0] == 1 and log[1]["parent"] is None
    for before, seq in zip(main, main[1:]):
        assert log[seq]["parent"] == before, f"checkpoint {seq} is built on {log[seq]['parent']}, not {before}"
    for seq in set(log) - set(main):
        assert log[seq]["parent"] in main, f"fork {seq} is built on {log[seq]['parent']}"
    return log


def main_line(log: dict[int, dict]) -> list[int]:
    return [s for s in sorted(log) if log[s]["fork"] is None]


def store_keys(store: Shared) -> list[str]:
    return sorted(store.keys())


# --- 1. a stale disk ------------------------------------------------------------------------------


def test_stale_disk_keeps_its_unpublished_work_as_a_fork_and_takes_the_newest(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    seed = contents(c1.local)
    # c1's unpublished work: a line, a row its agent committed to the WAL and died
    # holding, a new file, an edit of a file c2 deletes, and a deletion.
    lost_line = line("c1 turn 101").encode()
    c1.append(TRANSCRIPT, lost_line)
    lost_row = (101, "c1", "in the wal only")
    add_row_and_die(c1, lost_row)
    c1.write("codex-home/memories/c1-only.md", "c1's file\n")
    (c1.local / NOTES).write_text("c1's edit, which c2 never sees\n")
    (c1.local / KEEP).unlink()
    c1_disk = contents(c1.local)
    assert c1_disk[DB] == [*seed[DB], lost_row]

    c2 = fresh(tmp_path / "c2", store)                           # c1 "died"; c2 starts on an empty disk
    assert contents(c2.local) == seed
    c2_lines, c2_rows = [], []
    for n in (201, 202):
        got = work(c2, "c2", n)
        c2_lines.append(got[0])
        c2_rows.append(got[1])
        if n == 202:
            (c2.local / NOTES).unlink()                          # c2 deletes what c1 edited
        c2.run("checkpoint")                                     # 2, 3
    newest = contents(c2.local)

    ran = restore_json(c1)                                       # c1 comes back on its old disk

    assert ran["complete"] and ran["lineage"] == "stale" and not ran["rollback"], ran
    assert "checkpoint 1" in ran["lineage_note"] and "checkpoint 3" in ran["lineage_note"], ran["lineage_note"]
    fork = ran["fork"]
    assert (fork["seq"], fork["base"], fork["onto"]) == (4, 1, 3), fork
    assert sorted(fork["work"]) == sorted([in_tree(TRANSCRIPT), DB, "codex/memories/c1-only.md", in_tree(NOTES),
                                           f"{in_tree(KEEP)} (deleted here)"]), fork["work"]
    # the live trees are now the newest checkpoint: c2's rows and lines, nothing of c1's
    assert contents(c1.local) == newest
    assert rows_of(c1.local / DB) == [*seed[DB], *c2_rows]
    assert live_lines(c1)[-2:] == c2_lines and lost_line not in live_lines(c1)
    assert not (c1.local / NOTES).exists(), "a file c2 deleted is still in the live trees"
    assert (c1.local / KEEP).read_text() == "seed keep\n"
    assert contents(fresh(tmp_path / "c3-early", store).local) == newest, "a fresh restore did not take checkpoint 3"
    # the fork holds exactly what c1 had on its disk
    forked = export(c1, 4, tmp_path / "fork")
    assert forked == c1_disk
    assert lost_row in forked[DB] and lines_of(forked[in_tree(TRANSCRIPT)])[-1] == lost_line
    st = status(c1)
    assert st["restore"]["lineage"] == "stale" and st["restore"]["fork"] == 4 and st["last_error"] is None, st
    assert "idle" in c1.run("checkpoint").stdout, "the trees restore wrote are not what the state knows"

    after_line, after_row = work(c1, "c1", 301)
    committed = c1.checkpoint_ok()

    assert committed["seq"] == 5
    log = history(c1)
    assert main_line(log) == [1, 2, 3, 5] and log[5]["parent"] == 3
    assert log[4]["fork"] is not None and "checkpoint 3" in log[4]["fork"] and log[4]["parent"] == 1, log[4]
    main5 = export(c1, 5, tmp_path / "five")
    assert main5[DB] == [*seed[DB], *c2_rows, after_row], "the main line lost a row c2 wrote"
    assert lines_of(main5[in_tree(TRANSCRIPT)])[-3:] == [*c2_lines, after_line]
    assert "codex/memories/c1-only.md" not in main5
    c3 = fresh(tmp_path / "c3", store)
    assert contents(c3.local) == main5 == contents(c1.local)
    assert lost_row not in rows_of(c3.local / DB) and lost_line not in live_lines(c3)


def test_stale_disk_that_changed_nothing_makes_no_fork_and_becomes_the_newest(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    c2 = fresh(tmp_path / "c2", store)
    (c2.local / NOTES).unlink()
    _, row = work(c2, "c2", 201, note="codex-home/memories/new.md")
    c2.run("checkpoint")                                         # 2
    newest = contents(c2.local)
    keys = store_keys(store)

    ran = restore_json(c1)

    assert ran["complete"] and ran["lineage"] == "stale" and no_fork(ran), ran
    assert store_keys(store) == keys, "a restore with no local work wrote to the store"
    assert not (c1.local / NOTES).exists(), "a file c2 deleted is still here"
    assert contents(c1.local) == newest and rows_of(c1.local / DB)[-1] == row
    assert "idle" in c1.run("checkpoint").stdout                 # nothing to publish: it is the newest
    _, mine = work(c1, "c1", 301)
    assert c1.checkpoint_ok()["seq"] == 3
    assert main_line(history(c1)) == [1, 2, 3]
    assert rows_of(fresh(tmp_path / "c3", store).local / DB)[-2:] == [row, mine]


@LOCAL_AND_S3
def test_stale_disk_whose_transcript_only_grew_keeps_its_lines_and_takes_the_other_rows(store, tmp_path):
    """c1 only appended to the transcript, c2 only added rows: a transcript that extends
    the newest one's is no fork (the longer wins, and the next checkpoint publishes it)."""
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    seed = contents(c1.local)
    mine = line("c1, unpublished").encode()
    c1.append(TRANSCRIPT, mine)
    c2 = fresh(tmp_path / "c2", store)
    theirs = (201, "c2", "c2 row 201")
    add_rows(c2, theirs)
    c2.run("checkpoint")                                         # 2

    ran = restore_json(c1)

    assert ran["lineage"] == "stale" and no_fork(ran), ran
    assert live_lines(c1)[-1] == mine and rows_of(c1.local / DB) == [*seed[DB], theirs]
    assert c1.checkpoint_ok()["seq"] == 3
    published = contents(fresh(tmp_path / "c3", store).local)
    assert lines_of(published[in_tree(TRANSCRIPT)])[-1] == mine and published[DB][-1] == theirs
    assert published == contents(c1.local)


@LOCAL_AND_S3
def test_a_fork_does_not_disturb_the_writer_that_stayed_on_the_main_line(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    lost_line, lost_row = work(c1, "c1", 101)
    c2 = fresh(tmp_path / "c2", store)
    work(c2, "c2", 201)
    c2.run("checkpoint")                                         # 2
    assert "idle" in c2.run("checkpoint").stdout                 # c2's quiet snapshot: manifests/3 absent
    assert restore_json(c1)["fork"]["seq"] == 3                  # c1's fork, above c2's last checkpoint

    for cmd in (JOURNAL, journal_script()):                      # c2's next sequence now holds a fork
        assert "idle" in c2.run("checkpoint", cmd=cmd).stdout
    kept_line, kept_row = work(c2, "c2", 202)
    ran = restore_json(c2)                                       # hot: c2's newer work stays
    assert ran["lineage"] == "hot" and ran["fork"] is None, ran
    assert rows_of(c2.local / DB)[-1] == kept_row and live_lines(c2)[-1] == kept_line
    assert c2.checkpoint_ok()["seq"] == 4
    log = history(c2)
    assert main_line(log) == [1, 2, 4] and log[4]["parent"] == 2

    work(c1, "c1", 301)                                          # c1 built on 2, as c2 did: refused
    assert "journal restore" in c1.run("checkpoint", expect=1).stderr
    published = contents(fresh(tmp_path / "c3", store).local)
    assert published == contents(c2.local)
    assert lost_row not in published[DB] and lost_line not in lines_of(published[in_tree(TRANSCRIPT)])


# --- 2. a refused writer --------------------------------------------------------------------------


def assert_refused_ticks(box: Live) -> None:
    """Every further tick fails, idle ones included (no change since the last), through
    the full command and through the launcher's fast exit, saying to run ``journal
    restore``, never "idle"."""
    for cmd in (JOURNAL, journal_script()):
        again = box.run("checkpoint", expect=None, cmd=cmd)
        assert again.returncode != 0, f"a tick of a refused writer succeeded:\n{again.stdout}"
        assert "idle" not in again.stdout and "journal restore" in again.stderr, again.stdout + again.stderr


def test_refused_writer_fails_every_tick_until_restore_then_forks_its_work_and_builds_on_the_winner(
        store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # N = 1
    seed = contents(c1.local)
    c2 = fresh(tmp_path / "c2", store)
    won_line, won_row = work(c1, "c1", 101)
    c1.run("checkpoint")                                         # N + 1 = 2
    winner = contents(c1.local)
    mine_line, mine_row = work(c2, "c2", 201, note="codex-home/memories/c2.md")
    c2_disk = contents(c2.local)
    keys = store_keys(store)

    refused = c2.run("checkpoint", expect=1)

    assert "journal restore" in refused.stderr and "checkpoint 2 was committed" in refused.stderr, refused.stderr
    assert_refused_ticks(c2)
    assert store_keys(store) == keys, "a refused writer published something"
    assert contents(c2.local) == c2_disk
    st = status(c2)
    assert st["last_error"] is not None and not st["last_error"]["cleared"], st
    assert st["last_error"]["op"] == "checkpoint" and "journal restore" in st["last_error"]["message"], st

    ran = restore_json(c2)

    assert ran["complete"] and ran["lineage"] == "stale", ran
    assert "checkpoint 1" in ran["lineage_note"] and "checkpoint 2" in ran["lineage_note"], ran["lineage_note"]
    assert (ran["fork"]["seq"], ran["fork"]["base"], ran["fork"]["onto"]) == (3, 1, 2), ran["fork"]
    assert contents(c2.local) == winner, "c2's trees are not c1's checkpoint"
    forked = export(c2, 3, tmp_path / "fork")
    assert forked == c2_disk
    assert mine_row in forked[DB] and lines_of(forked[in_tree(TRANSCRIPT)])[-1] == mine_line
    st = status(c2)
    assert st["last_error"] is None or st["last_error"]["cleared"], st

    next_line, next_row = work(c2, "c2", 202)
    committed = c2.checkpoint_ok()

    assert committed["seq"] == 4
    log = history(c2)
    assert main_line(log) == [1, 2, 4] and log[3]["fork"] is not None and log[3]["parent"] == 1, log
    newest = export(c2, 4, tmp_path / "four")
    assert newest[DB] == [*seed[DB], won_row, next_row]
    assert lines_of(newest[in_tree(TRANSCRIPT)])[-2:] == [won_line, next_line]
    diff = json.loads(c2.run("diff", "--json", "2", "4").stdout)
    assert not [c for c in diff if c.get("rewritten")], diff
    assert {c["path"]: c.get("lines_added") for c in diff if c["kind"] == "jsonl"} == {in_tree(TRANSCRIPT): 1}
    assert contents(fresh(tmp_path / "c3", store).local) == newest == contents(c2.local)
    ran = restore_json(c1)                                       # the winner is stale in turn, with no work
    assert ran["lineage"] == "stale" and no_fork(ran) and contents(c1.local) == newest, ran


#: Run the journal CLI; its first manifest put waits until the rival's checkpoint (the
#: command in $JOURNAL_TEST_RIVAL, JSON: argv and env) has committed: this writer
#: passed the fence and loses the race at the commit point, with a pending manifest.
RACE = textwrap.dedent(r'''
    import json, os, subprocess, sys
    from journal.repository import repository
    rival = json.loads(os.environ["JOURNAL_TEST_RIVAL"])
    put = repository.Repository.put_manifest
    done = []

    def put_manifest(self, record, seq, staged=None):
        if not done:
            done.append(subprocess.run(rival["argv"], env=rival["env"], check=True, capture_output=True))
        return put(self, record, seq, staged)

    repository.Repository.put_manifest = put_manifest
    sys.argv[0] = "journal"
    from journal.cli.entry import main
    main()
''')


@LOCAL_AND_S3
def test_writer_that_lost_the_race_at_the_commit_point_is_refused_until_restore_and_loses_nothing(
        store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    seed = contents(c1.local)
    c2 = fresh(tmp_path / "c2", store)
    won_line, won_row = work(c1, "c1", 101)
    mine_line, mine_row = work(c2, "c2", 201, note="codex-home/memories/c2.md")
    c2_disk = contents(c2.local)
    rival = {"argv": [*c1.cmd, "checkpoint"], "env": clean_env(c1.env)}

    lost = c2.run("checkpoint", cmd=[sys.executable, "-c", RACE], env={"JOURNAL_TEST_RIVAL": json.dumps(rival)},
                  expect=1)

    assert "journal restore" in lost.stderr, lost.stderr
    assert store.seqs() == [1, 2]
    winner, keys = contents(c1.local), store_keys(store)
    assert_refused_ticks(c2)                                     # its pending manifest is another's sequence
    assert store_keys(store) == keys
    st = status(c2)
    assert st["last_error"] is not None and not st["last_error"]["cleared"], st

    ran = restore_json(c2)

    assert ran["complete"] and ran["lineage"] == "stale" and "refused" in ran["lineage_note"], ran
    assert (ran["fork"]["seq"], ran["fork"]["base"], ran["fork"]["onto"]) == (3, 1, 2), ran["fork"]
    assert contents(c2.local) == winner
    forked = export(c2, 3, tmp_path / "fork")
    assert forked == c2_disk and mine_row in forked[DB] and lines_of(forked[in_tree(TRANSCRIPT)])[-1] == mine_line
    next_line, next_row = work(c2, "c2", 202)
    assert c2.checkpoint_ok()["seq"] == 4
    assert main_line(history(c2)) == [1, 2, 4]
    newest = export(c2, 4, tmp_path / "four")
    assert newest[DB] == [*seed[DB], won_row, next_row]
    assert lines_of(newest[in_tree(TRANSCRIPT)])[-2:] == [won_line, next_line]
    assert contents(fresh(tmp_path / "c3", store).local) == newest


def test_idle_writer_whose_next_sequence_another_committed_is_refused_not_idle(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    c2 = fresh(tmp_path / "c2", store)
    for cmd in (JOURNAL, journal_script()):                      # c2's quiet snapshot is taken: idle ticks
        assert "idle" in c2.run("checkpoint", cmd=cmd).stdout
    _, row = work(c1, "c1", 101)
    c1.run("checkpoint")                                         # 2

    assert_refused_ticks(c2)
    st = status(c2)
    assert st["last_error"] is not None and not st["last_error"]["cleared"], st

    ran = restore_json(c2)
    assert ran["lineage"] == "stale" and no_fork(ran), ran
    assert rows_of(c2.local / DB)[-1] == row and contents(c2.local) == contents(c1.local)
    assert "idle" in c2.run("checkpoint").stdout
    assert store.seqs() == [1, 2]


# --- 3. restore --at N onto the live trees --------------------------------------------------------


def test_rollback_keeps_hot_work_as_a_fork_and_makes_the_trees_exactly_the_checkpoint(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    one = contents(c1.local)
    one_transcript = (c1.local / TRANSCRIPT).read_bytes()
    for n in (101, 102):
        work(c1, "c1", n, note=f"codex-home/memories/after-{n}.md")
        c1.run("checkpoint")                                     # 2, 3
    hot_line, hot_row = work(c1, "c1", 103, note="codex-home/memories/hot.md")   # not checkpointed
    (c1.local / NOTES).write_text("edited, not checkpointed\n")
    hot = contents(c1.local)
    before, keys = Live.snapshot(c1.local), store_keys(store)

    plain = c1.run("restore", "--at", "1", expect=2)

    assert "--rollback" in plain.stderr, plain.stderr
    assert Live.snapshot(c1.local) == before, "a refused restore --at changed the live trees"
    assert store_keys(store) == keys
    exported = export(c1, 1, tmp_path / "one")
    assert exported == one

    ran = restore_json(c1, "--at", "1", "--rollback")

    assert ran["complete"] and ran["rollback"] and not ran["fallback"], ran
    assert (ran["fork"]["seq"], ran["fork"]["base"], ran["fork"]["onto"]) == (4, 3, 1), ran["fork"]
    assert contents(c1.local) == exported, "the live trees are not exactly checkpoint 1"
    assert (c1.local / TRANSCRIPT).read_bytes() == one_transcript, "the transcript was not cut back"
    assert rows_of(c1.local / DB) == one[DB]
    for n in ("after-101", "after-102", "hot"):
        assert not (c1.local / f"codex-home/memories/{n}.md").exists(), n
    forked = export(c1, 4, tmp_path / "fork")
    assert forked == hot
    assert hot_row in forked[DB] and lines_of(forked[in_tree(TRANSCRIPT)])[-1] == hot_line

    committed = c1.checkpoint_ok()

    assert committed["seq"] == 5
    log = history(c1)
    assert main_line(log) == [1, 2, 3, 5] and log[5]["parent"] == 3, log[5]
    assert log[4]["fork"] is not None and log[4]["parent"] == 3, log[4]
    assert not any(log[s]["restored"] for s in (1, 2, 3, 4)), "a rollback was logged before it was published"
    assert log[5]["restored"] and all("checkpoint 1" in why for why in log[5]["restored"].values()), \
        log[5]["restored"]
    assert export(c1, 5, tmp_path / "five") == one
    c3 = fresh(tmp_path / "c3", store)
    assert contents(c3.local) == one
    assert rows_of(c3.local / DB) == one[DB] and (c3.local / TRANSCRIPT).read_bytes() == one_transcript
    assert "idle" in c1.run("checkpoint").stdout


@LOCAL_AND_S3
def test_rollback_with_no_local_work_makes_no_fork_and_is_exact(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    one = contents(c1.local)
    work(c1, "c1", 101, note="codex-home/memories/after.md")
    c1.run("checkpoint")                                         # 2
    keys = store_keys(store)

    ran = restore_json(c1, "--at", "1", "--rollback")

    assert ran["complete"] and ran["rollback"] and no_fork(ran), ran
    assert store_keys(store) == keys
    assert contents(c1.local) == one
    assert c1.checkpoint_ok()["seq"] == 3
    assert history(c1)[3]["restored"]
    assert contents(fresh(tmp_path / "c3", store).local) == one


@LOCAL_AND_S3
def test_plain_restore_after_a_rollback_keeps_the_rolled_back_trees(store, tmp_path):
    """A rollback, then a plain restore before any checkpoint (``journal supervise``'s
    startup restore, when the container is restarted after the rollback): the disk is
    hot (the state follows checkpoint 3, the newest), so its local state, the
    rolled-back trees, must stay, and the next checkpoint publish checkpoint 1's content
    with the rollback noted."""
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    one = contents(c1.local)
    for n in (101, 102):
        work(c1, "c1", n, note=f"codex-home/memories/after-{n}.md")
        c1.run("checkpoint")                                     # 2, 3
    restore_json(c1, "--at", "1", "--rollback")
    assert contents(c1.local) == one

    ran = restore_json(c1)

    assert ran["complete"] and no_fork(ran), ran
    assert contents(c1.local) == one, "a plain restore undid part of the rollback"
    assert c1.checkpoint_ok()["seq"] == 4
    assert history(c1)[4]["restored"], "checkpoint 4 publishes a rolled-back tree without saying so"
    assert contents(fresh(tmp_path / "c3", store).local) == one


# --- 4. init of another store ---------------------------------------------------------------------


def followed_store(box: Live) -> str:
    state = read_state(str(box.state_dir))
    assert state is not None
    return state.store_id


def init_elsewhere_then_checkpoint(box: Live, store: Shared, elsewhere: Path, env: dict[str, str],
                                   *args: str) -> dict:
    """``journal init ARGS`` of the store ``elsewhere`` (with ``env``), from a machine
    that follows ``store`` and has committed checkpoint 1 there; then a checkpoint, which
    must commit 2 there. Returns init's report."""
    mine = followed_store(box)
    env = {"JOURNAL_STORE": str(elsewhere), **env}

    made = json.loads(box.run("init", "--json", *args, env=env).stdout)

    assert made["followed_store"] == mine and made["store_id"] != mine, made
    again = box.run("init", env=env)                             # idempotent, and says what is followed
    assert mine in again.stderr and "journal takeover" in again.stderr, again.stderr
    assert followed_store(box) == mine
    _, row = work(box, "c1", 101)
    assert box.checkpoint_ok()["seq"] == 2 and store.seqs() == [1, 2]
    assert followed_store(box) == mine
    assert export(box, 2, box.home / "two")[DB][-1] == row
    assert json.loads(box.run("log", "--json", env=env).stdout) == [], "the other store holds a checkpoint"
    st = status(box)
    assert st["last_error"] is None and st["last_checkpoint"]["seq"] == 2, st
    return made


def test_init_of_another_store_never_repoints_the_machine(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    made = init_elsewhere_then_checkpoint(c1, store, tmp_path / "elsewhere", {})
    assert not made["encrypted"]


def test_init_of_another_encrypted_store_never_repoints_the_machine(tmp_path):
    store = Shared("local", str(tmp_path / "store"))
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    made = init_elsewhere_then_checkpoint(c1, store, tmp_path / "elsewhere",
                                          {"JOURNAL_PASSPHRASE": "correct horse battery staple"}, "--encrypt")
    assert made["encrypted"], made


def child_pid(box: Live) -> int | None:
    """The supervised child's pid, from the supervisor's status file (None: not yet)."""
    try:
        return json.loads((box.state_dir / "status.json").read_text()).get("child_pid")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_init_of_another_store_while_supervise_runs_leaves_its_ticks_committing(store, tmp_path):
    c1 = seeded(tmp_path / "c1", store)
    c1.run("checkpoint")                                         # 1
    mine = followed_store(c1)
    sup = c1.popen("supervise", "--interval", "0.5", "--no-input-socket", "--", "sleep", "30",
                   start_new_session=True)
    try:
        wait_for(lambda: child_pid(c1), 30, "supervise to start its child", step=0.05)
        _, first = work(c1, "c1", 101)
        wait_for(lambda: store.seqs()[-1] >= 2, 30, "a tick to commit", step=0.05)

        made = json.loads(c1.run("init", "--json", env={"JOURNAL_STORE": str(tmp_path / "elsewhere")}).stdout)
        assert made["followed_store"] == mine, made
        _, second = work(c1, "c1", 102)
        seen = store.seqs()[-1]
        wait_for(lambda: store.seqs()[-1] > seen, 30, "a tick after init to commit", step=0.05)

        st = status(c1)
        assert st["running"] and st["last_error"] is None, st
        assert st["last_checkpoint"]["seq"] == store.seqs()[-1], st
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGTERM)
        _, err = sup.communicate(timeout=30)
    assert followed_store(c1) == mine
    assert "error" not in err.lower(), err
    c3 = fresh(tmp_path / "c3", store)
    assert rows_of(c3.local / DB)[-2:] == [first, second]
    assert contents(c3.local) == contents(c1.local)
    assert main_line(history(c3)) == store.seqs()
