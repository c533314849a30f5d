"""``journal migrate`` against legacy copies as they are found in the field (found by
an adversarial review): a stale WAL an rsync without ``--delete`` left behind, an
empty database file, names that are not UTF-8, a live tree that is also an old-HOME
directory, a closed transcript with a torn last line, and a legacy file replaced by a
symlink or a FIFO after the plan. Real files, real SQLite, the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import FIXTURES
from test_migrate import Legacy


@pytest.fixture
def site(tmp_path) -> Legacy:
    return Legacy(tmp_path)


def test_a_stale_wal_next_to_a_newer_db_is_refused_not_replayed(site):
    live = site.root / "live" / "state.db"
    live.parent.mkdir()
    con = sqlite3.connect(live, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE msg(id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO msg(body) VALUES (?)", [(f"A{i}",) for i in range(100)])
    legacy = site.legacy / "hermes" / "state.db"
    legacy.parent.mkdir(parents=True)
    for suffix in ("", "-wal", "-shm"):                      # the first sync: a consistent trio
        shutil.copyfile(str(live) + suffix, str(legacy) + suffix)
    con.executemany("INSERT INTO msg(body) VALUES (?)", [(f"B{i}",) for i in range(100)])
    con.close()                                              # checkpointed; the live -wal is gone
    shutil.copyfile(live, legacy)                            # the second sync, without --delete
    synced = os.stat(legacy).st_mtime_ns                     # the -wal left from the first sync is older
    os.utime(str(legacy) + "-wal", ns=(synced - 10**9, synced - 10**9))
    proc = site.migrate_cli()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "its -wal is older than the database" in proc.stdout and str(legacy) in proc.stdout
    assert not (site.local / "hermes" / "state.db").exists()  # nothing older installed


def test_an_empty_database_file_is_no_candidate_and_no_local_authority(site):
    good = site.legacy / "opencode" / "opencode.db"
    good.parent.mkdir(parents=True)
    con = sqlite3.connect(good)
    con.execute("CREATE TABLE m(x)")
    con.executemany("INSERT INTO m VALUES (?)", [(i,) for i in range(500)])
    con.commit()
    con.close()
    (site.legacy / "opencode" / "checkpoints").mkdir()
    (site.legacy / "opencode" / "checkpoints" / "opencode.db").write_bytes(b"")   # preferred, but empty
    local = site.local / "opencode-share" / "opencode.db"
    local.parent.mkdir(parents=True)
    local.write_bytes(b"")                                   # the harness created it and died
    proc = site.migrate_cli()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "empty" in proc.stdout
    assert sqlite3.connect(local).execute("SELECT count(*) FROM m").fetchone()[0] == 500
    moved = list((site.local / ".journal").glob("invalid/*/opencode/opencode.db"))
    assert len(moved) == 1 and moved[0].read_bytes() == b""  # moved aside, never deleted


def test_a_name_that_is_not_utf8_is_a_problem_and_json_still_works(site):
    claude = site.legacy / "claude" / "projects" / "p"
    claude.mkdir(parents=True)
    (claude / "ok.jsonl").write_text('{"a": 1}\n')
    with open(os.fsencode(claude) + b"/s-\xff.jsonl", "wb") as fh:
        fh.write(b'{"only": "copy"}\n')
    proc = site.migrate_cli("--json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert not report["ok"]
    assert any("s-\\xff.jsonl" in p and "not valid UTF-8" in p for p in report["problems"]), report["problems"]
    assert (site.local / "agent-state" / "claude" / "projects" / "p" / "ok.jsonl").exists()


def test_an_old_home_directory_that_is_the_live_tree_is_never_renamed(site):
    share = site.old_home / ".local" / "share" / "opencode"
    (share / "storage").mkdir(parents=True)
    (share / "storage" / "live.json").write_text('{"live": 1}')
    (site.legacy / "opencode" / "storage").mkdir(parents=True)
    (site.legacy / "opencode" / "storage" / "a.json").write_text('{"legacy": 1}')
    site.env["OPENCODE_LIVE"] = str(share)                    # opencode's own default under that HOME
    proc = site.migrate_cli()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "it is (or holds) the live tree" in proc.stdout
    assert (share / "storage" / "live.json").read_text() == '{"live": 1}'
    assert (share / "storage" / "a.json").read_text() == '{"legacy": 1}'
    assert not list(share.parent.glob("opencode.pre-agent-state*"))


def test_a_closed_transcript_with_a_torn_last_line_is_imported_up_to_its_last_newline(site):
    src = next((FIXTURES / "codex-home" / "sessions").rglob("*.jsonl"))
    rel = Path("sessions/2026/02/23/rollout-x.jsonl")
    data = src.read_bytes()
    torn = data[:data.rfind(b"\n", 0, len(data) - 1) + 1] + b'{"type":"event_msg","payload":{"cut'
    (site.legacy / "codex" / rel).parent.mkdir(parents=True)
    (site.legacy / "codex" / rel).write_bytes(torn)
    proc = site.migrate_cli()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    live = site.local / "codex-home" / rel
    assert live.read_bytes() == torn[:torn.rfind(b"\n") + 1]
    assert "not a complete line" in proc.stdout + proc.stderr
    assert (site.legacy / "codex" / rel).read_bytes() == torn  # the legacy copy keeps the tail
    with open(live, "ab") as fh:                               # the harness appends
        fh.write(b'{"type":"event_msg","payload":{"n":1}}\n')
    assert site.run("checkpoint").returncode == 0
    out = site.root / "out"
    assert site.run("restore", "--to", str(out)).returncode == 0
    for raw in (out / "codex" / rel).read_bytes().splitlines():
        json.loads(raw)


@pytest.mark.parametrize("swap", ["symlink", "fifo"])
def test_a_legacy_file_swapped_after_the_plan_fails_its_step_and_no_checkpoint_is_taken(site, swap, monkeypatch):
    """The file becomes a symlink to a secret, or a FIFO, between the plan and the copy:
    nothing is read through it, the step fails, no checkpoint is committed, and a
    re-run once the file is back imports everything."""
    from journal.migrate import execute as mig
    claude = site.legacy / "claude"
    claude.mkdir()
    (claude / "a.jsonl").write_text('{"a": 1}\n')
    target = claude / "zzz.txt"
    target.write_text("legacy notes\n")
    secret = site.root / "secret"
    secret.write_text("not for the store\n")
    real = mig._HANDLERS[mig.Action.COPY]

    def swap_then_copy(run, step):
        if step.source == str(target) and target.is_file() and not target.is_symlink():
            target.rename(site.root / "zzz.saved")
            if swap == "symlink":
                target.symlink_to(secret)
            else:
                os.mkfifo(target)
        return real(run, step)
    monkeypatch.setitem(mig._HANDLERS, mig.Action.COPY, swap_then_copy)
    from journal.config import load_config
    from journal.store import open_store
    cfg = load_config(env={**site.env, "PATH": os.environ.get("PATH", "")})
    report = mig.migrate(cfg, open_store(site.env["JOURNAL_STORE"]), str(site.legacy), old_home=str(site.old_home))
    assert not report.ok and report.seq is None, report.problems
    assert any(r.outcome == "failed" and r.step.source == str(target) for r in report.results)
    assert not (site.local / "agent-state" / "claude" / "zzz.txt").exists()
    assert not (site.root / "store" / "manifests").exists() or not os.listdir(site.root / "store" / "manifests")
    monkeypatch.setitem(mig._HANDLERS, mig.Action.COPY, real)
    target.unlink()
    (site.root / "zzz.saved").rename(target)
    proc = site.migrate_cli()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site.local / "agent-state" / "claude" / "zzz.txt").read_text() == "legacy notes\n"


def test_a_live_tree_whose_journal_tmp_is_a_symlink_gets_nothing_written_through_it(site):
    """Migrate copied files into a live tree through ``<tree>/.journal-tmp`` by name, so a
    symlink there sent its temp files (and links) outside the tree. Its temp directory
    is now new and its own: the user's ``.journal-tmp`` is an ordinary entry."""
    claude = site.legacy / "claude"
    (claude / "projects" / "p").mkdir(parents=True)
    (claude / "projects" / "p" / "s.jsonl").write_text('{"a": 1}\n')
    os.symlink("projects/p/s.jsonl", claude / "latest")
    live = site.local / "agent-state" / "claude"
    live.mkdir(parents=True)
    outside = site.root / "outside"
    outside.mkdir()
    os.symlink(outside, live / ".journal-tmp")
    before = (sorted(os.listdir(outside)), outside.stat().st_mtime_ns)

    proc = site.migrate_cli()

    assert (sorted(os.listdir(outside)), outside.stat().st_mtime_ns) == before
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (live / "projects" / "p" / "s.jsonl").read_text() == '{"a": 1}\n'
    assert os.readlink(live / "latest") == "projects/p/s.jsonl"
    assert os.readlink(live / ".journal-tmp") == str(outside)
    assert not [p for p in live.iterdir() if p.name.startswith(".journal-tmp-")]


def test_a_local_database_beside_a_directory_shm_is_moved_aside_and_the_migration_goes_on(site):
    """Such a database is invalid (its -shm is never SQLite's); moving it aside failed
    on the directory and stopped the migration with a traceback-free one-liner and no
    report. It is moved aside (a rename takes a directory) and the legacy copy installed."""
    _one_row_db(site.legacy / "opencode" / "opencode.db", 1)
    local = site.local / "opencode-share" / "opencode.db"
    _one_row_db(local, 2)
    os.mkdir(str(local) + "-shm")
    proc = site.migrate_cli()
    assert "moved (with its -wal/-shm)" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(os.listdir(local.parent)) == ["opencode.db"]
    con = sqlite3.connect(local)
    assert con.execute("SELECT x FROM m").fetchall() == [(1,)]
    con.close()


def _one_row_db(path, x: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE m(x)")
        con.execute("INSERT INTO m VALUES (?)", (x,))
    con.close()
