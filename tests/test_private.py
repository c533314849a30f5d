"""The state directory is private (design §10, ``journal/local/private.py``): it holds
copies of the agents' credentials and databases, so no group or other bit is set on
anything journal makes there, whatever the umask, and an earlier version's open state
directory is tightened by the next command that takes its lock."""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from conftest import Live

from journal import paths


def umask_cmd(umask: int) -> list[str]:
    """``python -m journal`` run under ``umask``."""
    return ["sh", "-c", f'umask {umask:03o} && exec "$0" "$@"', sys.executable, "-m", "journal"]


def secret_trees(live: Live, turn: int) -> None:
    """A Claude home holding a 0600 ``auth.json`` and a Hermes home holding a 0600 WAL
    database, each directory 0700; each turn rewrites the file and adds rows."""
    claude = live.local / "agent-state" / "claude"
    hermes = live.local / "hermes"
    for folder in (claude, hermes):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    auth = claude / "auth.json"
    fd = os.open(auth, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b'{"token": "%d-%s"}' % (turn, b"s3cret" * 500))
    os.close(fd)
    db = hermes / "state.db"
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE IF NOT EXISTS kv (k INTEGER PRIMARY KEY, v BLOB)")
    con.executemany("INSERT INTO kv (v) VALUES (?)", [(os.urandom(300),) for _ in range(40)])
    con.commit()
    con.close()
    db.chmod(0o600)


def open_to_others(state_dir: Path, skip: str | None = None) -> list[str]:
    """Every path under ``state_dir`` (itself included) with a group or other bit,
    with its mode; none under ``skip``."""
    found = []
    for path in [state_dir, *state_dir.rglob("*")]:
        if skip and skip in path.relative_to(state_dir).parts[:1]:
            continue
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(state_dir)}")
    return found


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_nothing_in_the_state_directory_is_open_to_others_whatever_the_umask(bare_live, tmp_path, umask):
    """Checkpoints of a rewritten 0600 secret and a 0600 WAL database, a restore that
    moves an invalid database aside, and a supervisor with a metrics file, all under
    ``umask``: every directory and file the state directory holds is its owner's only
    (the chunk copy of auth.json, the database's base copy, the maps, pages, state,
    quiet snapshot, activity records, status, locks), and the metrics file is 0644."""
    live = bare_live
    cmd = umask_cmd(umask)
    for turn in range(2):   # the second turn's rewrite keeps chunk copies (future delta bases)
        secret_trees(live, turn)
        live.run("checkpoint", cmd=cmd, expect=0)
    (live.local / "hermes" / "state.db").write_bytes(b"not a database" * 300)
    live.run("restore", cmd=cmd, expect=0)
    metrics = tmp_path / "metrics.prom"
    live.run("supervise", "--metrics-file", str(metrics), "--", "true", cmd=cmd, expect=0)

    state = live.state_dir
    made = {p.name for p in state.iterdir()}
    assert {paths.CHUNKS_DIR, paths.BASE_DIR, paths.MAPS_DIR, paths.PAGES_DIR, paths.INVALID_DIR, paths.QUIET_FILE,
            paths.STATUS_FILE, paths.ACTIVITY_DIR, paths.LOCK_FILE, paths.SUPERVISE_LOCK} <= made, made
    assert os.listdir(state / paths.CHUNKS_DIR) and os.listdir(state / paths.BASE_DIR)
    assert open_to_others(state) == []
    assert stat.S_IMODE(metrics.stat().st_mode) == 0o644


def test_a_metrics_file_keeps_its_mode_but_never_wider_than_0644(bare_live, tmp_path):
    live = bare_live
    secret_trees(live, 0)
    metrics = tmp_path / "metrics.prom"
    for before, after in ((0o600, 0o600), (0o666, 0o644)):
        metrics.write_text("")
        metrics.chmod(before)
        live.run("supervise", "--no-restore", "--metrics-file", str(metrics), "--", "true", cmd=umask_cmd(0), expect=0)
        assert stat.S_IMODE(metrics.stat().st_mode) == after and "journal_" in metrics.read_text()


def test_an_earlier_versions_open_state_directory_is_tightened_by_the_next_checkpoint(bare_live):
    """A state directory as earlier versions left it (0755 directories, 0644 files): the
    next checkpoint, idle as it is, takes every group and other bit off, except off the
    databases moved aside into ``invalid/``, which keep their own modes (the directory
    around them is private)."""
    live = bare_live
    for turn in range(2):
        secret_trees(live, turn)
        live.checkpoint_ok()
    state = live.state_dir
    aside = state / paths.INVALID_DIR / "20260101T000000Z" / "hermes"
    aside.mkdir(parents=True)
    (aside / "state.db").write_bytes(b"moved aside")
    for path in [state, *state.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert open_to_others(state)

    assert live.checkpoint_ok()["seq"] is None    # idle: the quiet snapshot alone could have answered
    assert open_to_others(state, skip=paths.INVALID_DIR) == []
    assert stat.S_IMODE((aside / "state.db").stat().st_mode) == 0o644
    assert open_to_others(state) == [f"0o644 {(aside / 'state.db').relative_to(state)}"]
