"""``journal sessions`` and ``journal show`` (``journal/browse/conversations/catalog.py``):
the harnesses' sessions a checkpoint holds, and one of them as a conversation.

The store holds the real samples of ``tests/fixtures/conversations`` (one session of
each harness, SOURCES.md there) and the two Codex rollouts of
``tests/fixtures/sessions`` (whose ids share their first 8 characters), checkpointed;
then a third turn added to the Claude session and to one of Hermes's two sessions,
and checkpointed again.
"""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from journal.browse.conversations import catalog
from journal.browse.view import View
from journal.report import Collector

from conftest import Live, one_line_error
from helpers.samples import CONVERSATIONS, FIXTURES, lay_out

CLAUDE = "5bdf5b47-a84d-4120-8963-73ce2c46a985"
CLAUDE_LIVE = f"agent-state/claude/projects/-tmp-jsx-claude-box-work/{CLAUDE}.jsonl"
GEMINI = "02798349-e3da-4970-8557-256a479df21f"
GEMINI_LIVE = "agent-state/gemini-home/.gemini/tmp/work/chats/session-2026-12-07T17-08-02798349.jsonl"
HERMES = "20261207_170759_5f4865"
HERMES_COPY = "20261207_170759_copy00"        # the same session under another id, added here
OPENCODE = "ses_dae8a27baffeoH5ubHwkfh19PU"
OPENCLAW = "56dd70f1-19c8-4868-a4eb-f4ea5cf8019d"
CODEX = "01a25175-9bbc-7443-8ff0-010275ac7845"
CODEX_A = "01a250e8-253a-78f1-b444-778345fd9fc3"
CODEX_B = "01a250e8-2702-7cc1-98c7-3411bfef5dc6"
THIRD = "Third prompt, added here."


def claude_turn(text: str) -> str:
    """A Claude Code user record, as it writes one for a prompt."""
    return json.dumps({"parentUuid": None, "isSidechain": False, "type": "user",
                       "message": {"role": "user", "content": text}, "uuid": "3d0c8a7e-0000-4000-8000-000000000003",
                       "timestamp": "2026-12-07T18:00:00.000Z", "cwd": "/tmp/jsx/claude/box/work",
                       "sessionId": CLAUDE}) + "\n"


def hermes_db(live: Live) -> sqlite3.Connection:
    return sqlite3.connect(live.local / "hermes" / "state.db")


@pytest.fixture
def two(make_live) -> Live:
    """Checkpoint 1: every sample, Hermes's session twice; checkpoint 2: a third prompt
    in the Claude session and in Hermes's first."""
    live = make_live("a", fixtures=False)
    lay_out(CONVERSATIONS, live.local)
    for rollout in (FIXTURES / "sessions" / "codex-home" / "sessions" / "2026" / "12" / "07").glob("*.jsonl"):
        shutil.copy(rollout, live.local / "codex-home" / "sessions" / "2026" / "12" / "07")
    with hermes_db(live) as con:
        con.execute("INSERT INTO sessions SELECT ? || substr(id, 23), source, user_id, session_key, chat_id, chat_type, "
                    "thread_id, display_name, origin_json, expiry_finalized, model, model_config, system_prompt, "
                    "parent_session_id, started_at, ended_at, end_reason, message_count, tool_call_count, input_tokens, "
                    "output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cwd, git_branch, "
                    "git_repo_root, billing_provider, billing_base_url, billing_mode, estimated_cost_usd, "
                    "actual_cost_usd, cost_status, cost_source, pricing_version, title, api_call_count, handoff_state, "
                    "handoff_platform, handoff_error, compression_failure_cooldown_until, compression_failure_error, "
                    "compression_fallback_streak, profile_name, rewind_count, archived FROM sessions", (HERMES_COPY,))
        con.execute("INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp) "
                    "SELECT ?, role, content, tool_call_id, tool_calls, tool_name, timestamp FROM messages "
                    "WHERE session_id = ? ORDER BY id", (HERMES_COPY, HERMES))
    con.close()
    live.checkpoint()
    live.append(CLAUDE_LIVE, claude_turn(THIRD))
    with hermes_db(live) as con:
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, 1796670000)",
                    (HERMES, THIRD))
    con.close()
    live.checkpoint()
    return live


def listed(live: Live, *args: str) -> dict:
    return json.loads(live.run("sessions", "--json", *args, expect=0).stdout)


def test_sessions_lists_every_harness_session_and_where_each_last_changed(two):
    """A transcript's change is its version's first checkpoint; a database's sessions
    are compared with the database's older version: Hermes's changed session says 2,
    its twin 1. A database is read where it changed only: the current opencode,
    OpenClaw and Hermes databases, and Hermes's older version (4 rebuilds)."""
    got = listed(two)
    rows = {s["id"]: (s["harness"], s["turns"], s["changed"], s.get("changed_exact", True)) for s in got["sessions"]}
    assert rows == {CODEX: ("codex", 2, 1, True), CODEX_A: ("codex", 2, 1, True), CODEX_B: ("codex", 1, 1, True),
                    CLAUDE: ("claude", 3, 2, True), GEMINI: ("gemini", 2, 1, True), HERMES: ("hermes", 3, 2, True),
                    HERMES_COPY: ("hermes", 2, 1, True), OPENCODE: ("opencode", 2, 1, True),
                    OPENCLAW: ("openclaw", 2, 1, True)}
    assert got["seq"] == 2 and got["snapshots"] == 4 and got["skipped"] == []
    claude = next(s for s in got["sessions"] if s["id"] == CLAUDE)
    assert claude["path"] == f"claude/{CLAUDE_LIVE.removeprefix('agent-state/claude/')}"
    assert claude["prompt"] == "Remember the word alpha. TOOLCALL: look at README.md."
    assert claude["bytes"] == (two.local / CLAUDE_LIVE).stat().st_size and claude["kind"] == "transcript"

    lines = two.run("sessions", expect=0).stdout.splitlines()
    assert lines[0].startswith("checkpoint 2 (") and lines[0].endswith("): 9 sessions")
    [row] = [line for line in lines if CLAUDE in line]
    assert row.split()[:4] == ["claude", CLAUDE, "3", f"{claude['bytes']:,}"]
    assert row.endswith("2  Remember the word alpha. TOOLCALL: look at README.md.")


def test_sessions_at_an_older_checkpoint_and_of_one_harness(two):
    older = {s["id"]: s["turns"] for s in listed(two, "--at", "1")["sessions"]}
    assert (older[CLAUDE], older[HERMES]) == (2, 2)
    assert [s["id"] for s in listed(two, "--harness", "hermes")["sessions"]] == [HERMES, HERMES_COPY]
    lines = two.run("sessions", "--harness", "hermes", "--at", "1", expect=0).stdout.splitlines()
    assert lines[0].startswith("checkpoint 1 (") and lines[0].endswith("): 2 hermes sessions")
    assert [line.split()[:3] for line in lines[2:]] == [["hermes", HERMES, "2"], ["hermes", HERMES_COPY, "2"]]


def test_show_prints_the_conversation_with_tools_shortened(two):
    out = two.run("show", CLAUDE, expect=0).stdout
    lines = out.splitlines()
    assert lines[0] == f"claude session {CLAUDE} (tree claude, checkpoint 2, {two.manifest(2).created})"
    assert "  cwd     /tmp/jsx/claude/box/work" in lines
    assert f"  resume  cd /tmp/jsx/claude/box/work && claude --resume {CLAUDE}" in lines
    assert "  3 turns, " in out
    start = lines.index("user:")
    assert lines[start:start + 9] == [
        "user:", "  Remember the word alpha. TOOLCALL: look at README.md.",
        "tool call Read:", '  {"file_path":"/tmp/jsx/claude/box/work/README.md"}',
        "tool result Read:", "  1   The project the agent works in.", "  2   ",
        "assistant:", "  Noted. MOCK-2-810613b9"]
    assert lines[-3:] == ["── turn 3 · 2026-12-07 18:00:00", "user:", f"  {THIRD}"]
    earlier = two.run("show", CLAUDE[:8], "--at", "1", expect=0).stdout
    assert THIRD not in earlier and "── turn 2 " in earlier
    shown = json.loads(two.run("show", OPENCODE[:12], "--json", expect=0).stdout)
    assert shown["session"]["id"] == OPENCODE and shown["resume"] == ["opencode", "--session", OPENCODE]
    assert [[i["role"] for i in t["items"]] for t in shown["turns"]] == [
        ["user", "tool_call", "tool_result", "assistant"], ["user", "assistant"]]


def test_show_of_a_long_tool_result_says_how_much_is_left_out(two):
    """Codex's tool output is six lines: five are printed, and a line says one more."""
    lines = two.run("show", CODEX, expect=0).stdout.splitlines()
    start = lines.index("tool result exec_command:")
    assert lines[start + 1:start + 7] == ["  Chunk ID: 84724d", "  Wall time: 0.0000 seconds",
                                          "  Process exited with code 0", "  Original token count: 8", "  Output:",
                                          "  … (1 more line)"]


def test_show_of_no_such_or_several_sessions_is_one_line(two):
    missing = two.run("show", "ffffffff-0000", expect=1)
    assert one_line_error(missing) == (
        "journal: error: show: no session id begins with 'ffffffff-0000' in checkpoint 2 (harness trees: claude, "
        "codex, gemini, hermes, openclaw, opencode); `journal sessions --at 2` lists the sessions it holds")
    assert json.loads(two.run("show", "ffffffff-0000", "--json", expect=1).stdout)["kind"] == "SessionNotFound"
    several = one_line_error(two.run("show", CODEX_A[:8], expect=2))
    assert f"2 sessions begin with '01a250e8' in checkpoint 2 (codex {CODEX_A}, codex {CODEX_B})" in several
    assert "session id '../x': holds a character" in one_line_error(two.run("show", "../x", expect=2))
    unknown = one_line_error(two.run("sessions", "--harness", "pi", expect=2))
    assert unknown.endswith("no harness 'pi'; the known ones are claude, codex, gemini, hermes, openclaw, opencode")


def test_unreadable_lines_are_skipped_and_counted(two):
    """A Gemini chat with a line of garbage and a JSON array: the session reads on."""
    two.append(GEMINI_LIVE, "not json\n[1]\n")
    two.checkpoint()
    [row] = [line for line in two.run("sessions", expect=0).stdout.splitlines() if GEMINI in line]
    assert row.endswith("[2 lines unreadable]")
    out = two.run("show", GEMINI, expect=0).stdout
    assert out.endswith("\n(2 lines unreadable, skipped)\n") and "  Noted. MOCK-5-7ae5ce95" in out


def test_a_damaged_transcript_is_passed_over_and_the_listing_says_so(two):
    """The Claude transcript's newest segment damaged: the rest is listed, exit 3."""
    old, new = two.entries("claude", 1), two.entries("claude", 2)
    path = CLAUDE_LIVE.removeprefix("agent-state/claude/")
    two.corrupt_blob(next(ref for ref in new[path].refs if ref not in old[path].refs))
    proc = two.run("sessions", "--json", expect=3)
    got = json.loads(proc.stdout)
    assert len(got["sessions"]) == 8 and CLAUDE not in [s["id"] for s in got["sessions"]]
    [note] = got["skipped"]
    assert note.startswith(f"claude/{path} in the checkpoint read is damaged (verify object: ")
    assert f"warning: sessions: {note}; passed over" in proc.stderr and "FALLBACK (exit 3)" in proc.stderr


def test_a_database_session_unchanged_past_the_versions_read_says_no_later_than(two, monkeypatch):
    """With one older version read at most, Hermes's twin, unchanged through two more
    checkpoints where the database changed, is unchanged since at least checkpoint 2."""
    with hermes_db(two) as con:
        con.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'assistant', 'ok', "
                    "1796670001)", (HERMES,))
    con.close()
    two.checkpoint()
    monkeypatch.setattr(catalog, "DB_LOOKBACK", 1)
    got = catalog.list_sessions(View(two.repo(), "sessions", Collector()), {}, harness="hermes")
    assert [(s.id, s.changed, s.changed_exact) for s in got.sessions] == [(HERMES, 3, True), (HERMES_COPY, 2, False)]
    [row] = [line for line in two.run("sessions", expect=0).stdout.splitlines() if HERMES_COPY in line]
    assert " 1  Remember" in row
