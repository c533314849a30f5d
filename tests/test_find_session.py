"""``journal find --session ID`` (``journal/browse/sessions.py``): a harness's session
found by its id across the checkpoints, with the command that resumes it.

The trees hold real session files, laid out as each harness writes them
(``tests/fixtures/sessions``, SOURCES.md there): two Codex rollouts whose ids share
their first 8 characters (UUIDv7s made a second apart) and their ``threads`` rows in
``state_5.sqlite``, a Claude Code transcript, two Gemini chats (named for 8
characters of the id), and opencode's and Hermes's session rows, each database
built from its table's dump as the harness left it (WAL mode).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from journal.browse.sessions import PlaceKind, find_sessions
from journal.browse.view import View
from journal.browse.errors import BadSessionId, NoSuchSession
from journal.presets import PRESETS, SESSIONS
from journal.report import Collector

from conftest import Live, one_line_error

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "sessions"
WORK = "/tmp/jfx/work"      # the directory the CLIs ran in (SOURCES.md)

CODEX_A = "01a250e8-253a-78f1-b444-778345fd9fc3"
CODEX_B = "01a250e8-2702-7cc1-98c7-3411bfef5dc6"
CLAUDE = "38ac9b26-68b9-4da0-a518-5a5c46eb9aa5"
GEMINI = "6f30c4b9-3b53-4a45-9632-8aac04655831"
OPENCODE_A = "ses_daf177e69ffeqT1vY90mgolb0c"     # made first
OPENCODE_B = "ses_daf173520ffe119XKsExqSNPF6"
HERMES_A = "20261207_142936_18406c"
HERMES_B = "20261207_142948_38a27e"


def lay_out(live: Live) -> None:
    """The samples under ``live``'s ``$AM_LOCAL``, each dump made into its database."""
    shutil.copytree(SAMPLES, live.local, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md"))
    for dump in live.local.rglob("*.sql"):
        with sqlite3.connect(dump.with_suffix("")) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(dump.read_text())
        dump.unlink()


def sessions(live: Live, query: str, **kwargs):
    view = View(live.repo(), "find", Collector())
    return find_sessions(view, query, {}, **kwargs)


@pytest.fixture
def one(make_live) -> Live:
    """Every sample in one checkpoint."""
    live = make_live("a", fixtures=False)
    lay_out(live)
    live.checkpoint()
    return live


def test_every_harness_preset_says_where_its_sessions_live():
    harnesses = set(PRESETS) - {"terminal"}          # the Agent Manager's scrollback: no sessions
    assert harnesses <= set(SESSIONS) <= set(PRESETS)
    for name in ("codex", "claude", "gemini", "opencode", "hermes"):
        assert SESSIONS[name].resume, name


def test_codex_session_is_found_by_its_rollout_and_its_thread_row(one):
    found = sessions(one, CODEX_A).sessions
    assert [(s.harness, s.tree, s.id) for s in found] == [("codex", "codex", CODEX_A)]
    session = found[0]
    assert [(p.path, p.kind, p.first, p.last) for p in session.places] == [
        (f"codex/sessions/2026/12/07/rollout-2026-12-07T14-28-40-{CODEX_A}.jsonl", PlaceKind.TRANSCRIPT, 1, 1),
        ("codex/state_5.sqlite", PlaceKind.DATABASE, 1, 1)]
    assert session.cwd == WORK                  # the rollout's session_meta, and the row's cwd
    assert session.resume == ["codex", "resume", CODEX_A] and session.in_cwd


def test_claude_session_resumes_in_its_project_directory(one):
    [session] = sessions(one, CLAUDE).sessions
    assert [p.path for p in session.places] == [f"claude/projects/-tmp-jfx-work/{CLAUDE}.jsonl"]
    assert session.cwd == WORK and session.in_cwd
    assert session.resume == ["claude", "--resume", CLAUDE]


def test_gemini_name_holds_8_characters_and_the_first_record_the_whole_id(one):
    """Gemini names a chat ``session-<time>-<8 hex>.jsonl``: the whole id comes from its
    first record, and its directory from ``.project_root`` beside ``chats/``."""
    for query in (GEMINI[:8], GEMINI):
        [session] = sessions(one, query).sessions
        assert session.id == GEMINI
        assert session.cwd == WORK and session.resume == ["gemini", "--resume", GEMINI]
        assert [p.path for p in session.places] == ["gemini/tmp/work/chats/session-2026-12-07T14-28-6f30c4b9.jsonl"]
    with pytest.raises(NoSuchSession):       # the name's 8 characters, another id
        sessions(one, GEMINI[:9] + "0000-0000-0000-000000000000")


def test_a_prefix_several_ids_share_lists_them_all(one):
    assert [s.id for s in sessions(one, CODEX_A[:8]).sessions] == [CODEX_A, CODEX_B]
    assert {s.id for s in sessions(one, "ses_daf1").sessions} == {OPENCODE_A, OPENCODE_B}
    hermes = sessions(one, "20261207").sessions
    assert [(s.harness, s.id, s.cwd) for s in hermes] == [("hermes", HERMES_A, WORK), ("hermes", HERMES_B, WORK)]
    assert hermes[0].resume == ["hermes", "chat", "--resume", HERMES_A] and not hermes[0].in_cwd


def test_an_id_is_text_never_a_pattern(one):
    """'_' is a LIKE wildcard and '.' a regex one: neither may stand for another character."""
    assert [s.id for s in sessions(one, OPENCODE_B[:10]).sessions] == [OPENCODE_B]
    for query in (OPENCODE_B[:9] + "_5", CODEX_A[:8] + "." + CODEX_A[9:13], "ses_daf1%"[:8] + "..."):
        with pytest.raises(NoSuchSession):
            sessions(one, query)
    for query in ("../../etc/passwd", "01a250e8*", "ses_daf1%", "6f30c4b9[0-9]", "01a250e8/x", "0123456"):
        with pytest.raises(BadSessionId):
            sessions(one, query)


def test_databases_are_read_only_where_they_changed(make_live):
    """opencode's second session is made after checkpoint 2: its row is in checkpoint 3
    only, the first's in all three; the database is rebuilt once per version (1 and
    3), never for checkpoint 2, where only a transcript changed."""
    live = make_live("a", fixtures=False)
    lay_out(live)
    db = live.local / "opencode-share" / "opencode.db"
    with sqlite3.connect(db) as con:
        second = con.execute("SELECT * FROM session WHERE id = ?", (OPENCODE_B,)).fetchone()
        con.execute("DELETE FROM session WHERE id = ?", (OPENCODE_B,))
    live.checkpoint()
    live.append(f"agent-state/claude/projects/-tmp-jfx-work/{CLAUDE}.jsonl", '{"type":"mode","mode":"normal"}\n')
    live.checkpoint()
    with sqlite3.connect(db) as con:
        con.execute(f"INSERT INTO session VALUES ({','.join('?' * len(second))})", second)
    live.checkpoint()
    result = sessions(live, "ses_daf17", tree="opencode")
    spans = {s.id: [(v.first, v.last, v.checkpoints) for v in s.places[0].versions] for s in result.sessions}
    assert spans == {OPENCODE_A: [(3, 3, 1), (1, 2, 2)], OPENCODE_B: [(3, 3, 1)]}
    assert [(s.first, s.last) for s in result.sessions] == [(3, 3), (1, 3)]
    assert result.snapshots == 2 and result.manifests == 3 and result.skipped == []


def test_a_damaged_snapshot_is_passed_over_and_the_answer_says_so(make_live):
    """The newer version of ``state.db`` damaged: the session is found in the older one,
    and the command exits 3 as ``find`` does past damage."""
    live = make_live("a", fixtures=False)
    lay_out(live)
    live.checkpoint()
    db = live.local / "hermes" / "state.db"
    with sqlite3.connect(db) as con:
        con.execute("UPDATE sessions SET title = 'renamed' WHERE id = ?", (HERMES_A,))
    live.checkpoint()
    old, new = live.entries("hermes", 1)["state.db"], live.entries("hermes", 2)["state.db"]
    live.corrupt_blob(next(ref for ref in new.refs if ref not in old.refs))
    result = sessions(live, HERMES_A)
    [session] = result.sessions
    assert [(v.first, v.last) for v in session.places[0].versions] == [(1, 1)]
    assert len(result.skipped) == 1 and "hermes/state.db in checkpoint 2 is damaged" in result.skipped[0]
    proc = live.run("find", "--session", HERMES_A, expect=3)
    assert f"hermes session {HERMES_A} (tree hermes, checkpoint 1)" in proc.stdout
    assert "FALLBACK (exit 3)" in proc.stderr


def test_cli_prints_each_session_and_the_command_that_resumes_it(one):
    proc = one.run("find", "--session", CODEX_A[:8], expect=0)
    lines = proc.stdout.splitlines()
    assert lines[0] == "2 sessions begin with '01a250e8' (give more of the id to name one):"
    assert f"  resume  cd {WORK} && codex resume {CODEX_A}" in lines
    assert f"codex session {CODEX_B} (tree codex, checkpoint 1)" in lines
    [session] = json.loads(one.run("find", "--session", OPENCODE_A, "--json", expect=0).stdout)
    assert session["resume"] == ["opencode", "--session", OPENCODE_A] and session["cwd"] == WORK
    assert [(p["path"], p["kind"], p["checkpoints"]) for p in session["places"]] == [
        ("opencode/opencode.db", "database", 1)]


def test_cli_no_such_session_or_a_bad_id_is_one_line(one):
    missing = one.run("find", "--session", "ffffffff-0000", expect=1)
    line = one_line_error(missing)
    assert "no session id begins with 'ffffffff-0000' in 1 checkpoint" in line
    error = json.loads(one.run("find", "--session", "ffffffff-0000", "--json", expect=1).stdout)
    assert error["kind"] == "NoSuchSession" and error["exit"] == 1
    hostile = one.run("find", "--session", "../../*", expect=2)
    assert "session id '../../*': holds a character no session id has" in one_line_error(hostile)
    assert "give PATTERN or --session ID" in one_line_error(one.run("find", expect=2))
    assert "give PATTERN or --session ID" in one_line_error(one.run("find", "*", "--session", CLAUDE, expect=2))
