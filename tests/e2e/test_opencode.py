"""opencode (``opencode-ai``) under journal: a lost container, a restore, ``opencode run --session ID``.

opencode reads its data only from ``$XDG_DATA_HOME/opencode`` (default
``~/.local/share/opencode``): the container links that path to the preset's tree,
``$AM_LOCAL/opencode-share``, before opencode runs (docs/harnesses.md). Its database
holds every session, message and part; everything else it keeps there is a plain file,
but its log, its clones of reference repositories and git's locks in its snapshots.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.clis import installed
from tests.e2e.harness import Agent, Box, assert_resumed, databases, lost_and_resumed, quick_check
from tests.e2e.mockmodel import MockModel

#: The project the agent works in: one commit made the same in every container (a
#: re-cloned checkout), so opencode gives it the same project id there (its root commit).
PROJECT_GIT = {"GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid", "GIT_COMMITTER_NAME": "e2e",
               "GIT_COMMITTER_EMAIL": "e2e@example.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
               "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def config(url: str) -> dict:
    return {"$schema": "https://opencode.ai/config.json",
            "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "mock",
                                  "options": {"baseURL": f"{url}/v1", "apiKey": "mock"},
                                  "models": {"mock-model": {"name": "mock-model"}}}},
            "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False, "share": "disabled"}


class OpenCode(Agent):
    name = "opencode"
    preset = "opencode"

    def setup(self, box: Box) -> None:
        tree = self.tree(box)
        tree.mkdir(parents=True, exist_ok=True)           # opencode fails on a dangling link
        link = box.home / ".local" / "share" / "opencode"  # $XDG_DATA_HOME/opencode
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(tree)
        conf = box.home / ".config" / "opencode" / "opencode.json"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(json.dumps(config(self.mock.url), indent=2))
        box.env.update(OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1",
                       OPENCODE_DISABLE_DEFAULT_PLUGINS="1", npm_config_registry=f"{self.mock.url}/npm/")
        box.path_with(self.cli.bin_dir)
        if not (box.work / ".git").exists():
            env = {**box.env, **PROJECT_GIT}
            (box.work / "README.md").write_text("The project opencode works in.\n")
            for cmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "README.md"],
                        ["git", "commit", "-q", "-m", "init"]):
                subprocess.run(cmd, cwd=box.work, env=env, check=True, capture_output=True)

    def first(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "run", prompt]

    def resume(self, box: Box, prompt: str) -> list[str]:
        """The exact session the first turn made, by its id, in its own directory (from
        another one ``opencode run`` records the turn but never prints it nor exits)."""
        return [str(self.cli.binary), "run", "--session", newest_session(self.tree(box) / "opencode.db"), prompt]


def newest_session(db: Path) -> str:
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        row = con.execute("SELECT id FROM session ORDER BY time_updated DESC LIMIT 1").fetchone()
    assert row, f"no session in {db}"
    return row[0]


def texts(db: Path) -> dict[str, list[str]]:
    """Each session's text parts, in order: the prompts and the replies."""
    found: dict[str, list[str]] = {}
    with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        rows = con.execute("SELECT s.id, json_extract(p.data, '$.text') FROM session s "
                           "JOIN message m ON m.session_id = s.id JOIN part p ON p.message_id = m.id "
                           "WHERE json_extract(p.data, '$.type') = 'text' ORDER BY m.time_created, p.id")
        for sid, text in rows:
            found.setdefault(sid, []).append(text)
    return found


def legacy_torn_database(agent: OpenCode, base: Path) -> tuple[str, subprocess.CompletedProcess]:
    """The legacy design's copy of a live WAL database, with the real opencode: a first
    turn (no journal); the tree copied with ``rsync -a``; a second turn, whose start
    checkpoints the WAL into ``opencode.db`` and whose first commit restarts the WAL;
    the copy's ``-wal`` and ``-shm`` taken again (an rsync that read the db before that
    checkpoint and the ``-wal`` after it); the container lost; the copy put back; a
    resumed turn. Returns a private check of the copied trio and the resumed turn."""
    a = Box(base, "legacy", base / "no-store", agent.preset)
    agent.setup(a)
    tag, opencode, tree, copy = os.urandom(3).hex(), str(agent.cli.binary), agent.tree(a), base / "legacy-copy"
    done = a.run([opencode, "run", f"Remember the word legacy-{tag}."])
    assert done.returncode == 0, done.stderr
    rsync(f"{tree}/", f"{copy}/")                         # opencode.db is one page: every row is in the -wal
    done = a.run([opencode, "run", "--continue", f"Second legacy turn {tag}."])
    assert done.returncode == 0, done.stderr
    for companion in ("opencode.db-wal", "opencode.db-shm"):
        rsync(str(tree / companion), str(copy / companion))
    probe = base / "probe"
    shutil.copytree(copy, probe)                          # opening it replays the -wal: never the copy itself
    try:
        checked = quick_check_rw(probe / "opencode.db")
    except sqlite3.DatabaseError as err:
        checked = str(err)
    a.lose()
    b = Box(base, "legacy", base / "no-store", agent.preset)
    shutil.copytree(copy, agent.tree(b), symlinks=True, dirs_exist_ok=True)
    agent.setup(b)
    return checked, b.run([opencode, "run", "--continue", f"Resumed after the legacy copy {tag}."])


def rsync(src: str, dst: str) -> None:
    """``rsync -a src dst`` (a tree when ``src`` ends in ``/``), as the legacy loop copies."""
    if shutil.which("rsync"):
        subprocess.run(["rsync", "-a", src, dst], check=True)
    elif src.endswith("/"):
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)


def quick_check_rw(db: Path) -> str:
    with closing(sqlite3.connect(db)) as con:
        return con.execute("PRAGMA quick_check").fetchone()[0]


@pytest.fixture(scope="module")
def mock_server():
    with MockModel() as server:
        yield server


@pytest.fixture(scope="module")
def opencode(mock_server):
    return OpenCode(installed("opencode"), mock_server)


@pytest.fixture(scope="module")
def lost(opencode, tmp_path_factory):
    """Each way of losing the container, run once for the tests that look at it."""
    seen = {}

    def run(how: str):
        if how not in seen:
            seen[how] = lost_and_resumed(opencode, tmp_path_factory.mktemp(how), how)
        return seen[how]
    return run


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_opencode_resumes_the_same_session_after_a_lost_container(lost, how):
    assert_resumed(lost(how))


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_opencode_database_is_restored_whole_with_the_first_session(lost, how):
    """Restored before opencode runs again, as one checked file (no ``-wal``, which held
    every row), with the first turn's prompt and reply in its session."""
    seen = lost(how)
    found = databases(seen.after_restore)
    assert [p.name for p in found] == ["opencode.db"]
    assert quick_check(found[0]) == "ok"
    assert not list(seen.after_restore.glob("opencode.db-*"))
    sessions = texts(found[0])
    assert len(sessions) == 1, sessions
    (first,) = sessions.values()
    assert "Remember the word first-" in first[0]
    assert any(m in t for m in seen.first_markers for t in first), "the first turn's reply is not in the database"
    if how == "kill9":
        assert any(seen.killed_prompt in t for t in first), "the killed turn's prompt is not in the database"


def test_opencode_tree_keeps_its_snapshots_and_leaves_out_its_log(opencode, lost):
    """The project snapshots (``snapshot/<project>/<worktree>/``, a git directory opencode
    reverts files from) come back as plain files; ``log/`` (diagnostics nothing reads
    back) and ``repos/`` (clones it fetches again) come back empty, and opencode logs
    into that ``log/`` again."""
    seen = lost("clean")
    restored = {str(p.relative_to(seen.after_restore)) for p in seen.after_restore.rglob("*")
                if p.is_file() or p.is_symlink()}
    snapshots = [p for p in restored if p.startswith("snapshot/")]
    assert any(p.endswith("/HEAD") for p in snapshots) and any(p.endswith("/index") for p in snapshots), restored
    assert not [p for p in restored if p.startswith(("log/", "repos/"))], restored
    assert (seen.after_restore / "log").is_dir()
    assert (opencode.tree(seen.restored) / "log" / "opencode.log").stat().st_size > 0


def test_legacy_copy_of_the_live_database_leaves_opencode_unable_to_start(opencode, tmp_path):
    """The reason the database is a snapshot: a copied db + ``-wal`` pair read at two
    moments is malformed, and opencode refuses to start on it, every session gone."""
    checked, resumed = legacy_torn_database(opencode, tmp_path)
    assert checked != "ok"
    assert resumed.returncode != 0
    assert "database disk image is malformed" in resumed.stdout + resumed.stderr
