"""The harnesses' session records read as conversations (``journal/browse/conversations/``).

The samples are real: each CLI, at the version ``tests/e2e/clis.py`` pins, ran a
first turn in which the mock model called one tool, then a resumed turn
(``tests/fixtures/conversations/SOURCES.md``); the older formats come from public
repositories (``tests/fixtures/real/SOURCES.md``: Codex 0.104 rollouts with their text
redacted, a Claude Code 2.1.39 transcript, pi sessions as OpenClaw kept them before 2026.9).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
import zstandard

from journal.browse.conversations import hermes, openclaw, opencode
from journal.browse.conversations.formats import DATABASES, TRANSCRIPTS, read_transcript
from journal.browse.conversations.model import Role
from journal.presets import SESSIONS

from helpers.samples import CONVERSATIONS, FIXTURES, build_db

CODEX = "codex-home/sessions/2026/12/07/rollout-2026-12-07T17-03-11-01a25175-9bbc-7443-8ff0-010275ac7845.jsonl"
CLAUDE = "agent-state/claude/projects/-tmp-jsx-claude-box-work/5bdf5b47-a84d-4120-8963-73ce2c46a985.jsonl"
GEMINI = "agent-state/gemini-home/.gemini/tmp/work/chats/session-2026-12-07T17-08-02798349.jsonl"
OPENCODE = "opencode-share/opencode.db.sql"
OPENCLAW = "oc-home/.openclaw/agents/main/agent/openclaw-agent.sqlite.sql"
HERMES = "hermes/state.db.sql"
PROMPT = "Remember the word alpha. TOOLCALL: look at README.md."
README = "The project the agent works in."

#: Each sample: its file, its reader, its session id, its working directory, the tool
#: the mock called and its arguments, what the result holds, and the two replies.
SAMPLES = {
    "codex": (CODEX, "01a25175-9bbc-7443-8ff0-010275ac7845", "/tmp/jsx/codex/box/work", "exec_command",
              '{"cmd": "cat README.md"}', README, ("Noted. MOCK-2-935cdad8", "Noted. MOCK-3-1997eed2")),
    "claude": (CLAUDE, "5bdf5b47-a84d-4120-8963-73ce2c46a985", "/tmp/jsx/claude/box/work", "Read",
               '{"file_path":"/tmp/jsx/claude/box/work/README.md"}', README,
               ("Noted. MOCK-2-810613b9", "Noted. MOCK-3-76ee9166")),
    "gemini": (GEMINI, "02798349-e3da-4970-8557-256a479df21f", None, "list_directory",
               '{"dir_path":"/tmp/jsx/gemini/box/work"}', "README.md (32 bytes)",
               ("Noted. MOCK-3-4e75e2aa", "Noted. MOCK-5-7ae5ce95")),
    "opencode": (OPENCODE, "ses_dae8a27baffeoH5ubHwkfh19PU", "/tmp/jsx/opencode/box/work", "read",
                 '{"filePath":"/tmp/jsx/opencode/box/work/README.md"}', "1: The project opencode works in.",
                 ("Noted. MOCK-3-2deb192e", "Noted. MOCK-4-1473d696")),
    "openclaw": (OPENCLAW, "56dd70f1-19c8-4868-a4eb-f4ea5cf8019d", "/tmp/jsx/openclaw/box/local/oc-home/.openclaw/workspace",
                 "tool_search", '{"query":"read file"}', "[]", ("Noted. MOCK-2-997a2403", "Noted. MOCK-3-c566b9f8")),
    "hermes": (HERMES, "20261207_170759_5f4865", "/tmp/jsx/hermes/box/work", "read_file",
               '{"path": "/tmp/jsx/hermes/box/work/README.md"}', "1|The project the agent works in.",
               ("Noted. MOCK-2-e42d35e2", "Noted. MOCK-3-07609944")),
}


def pieces(path: Path, size: int = 1000):
    """A file's bytes in pieces that cut its lines anywhere, as a store's blobs may."""
    data = path.read_bytes()
    return [data[i:i + size] for i in range(0, len(data), size)]


def transcript(fmt: str, rel: str, root: Path = CONVERSATIONS, extra: bytes = b""):
    return read_transcript(fmt, pieces(root / rel) + ([extra] if extra else []))


@contextlib.contextmanager
def database(rel: str, tmp_path: Path):
    db = build_db(CONVERSATIONS / rel, tmp_path / Path(rel).stem)
    con = sqlite3.connect(db)
    try:
        yield con
    finally:
        con.close()


def conversation(harness: str, tmp_path: Path):
    rel, session = SAMPLES[harness][0], SAMPLES[harness][1]
    if harness in DATABASES:
        with database(rel, tmp_path) as con:
            return DATABASES[harness](con, None)[session]
    return transcript(harness, rel)


@pytest.mark.parametrize("harness", sorted(SAMPLES))
def test_each_harness_session_reads_as_prompt_tool_call_result_and_replies(harness, tmp_path):
    _, session, cwd, tool, args, result, replies = SAMPLES[harness]
    got = conversation(harness, tmp_path)
    said = [(i.role, i.tool, i.text) for i in got.items if i.role is not Role.CONTEXT]
    assert said[0][:2] == (Role.USER, None) and PROMPT in said[0][2]
    assert said[1] == (Role.TOOL_CALL, tool, args)
    assert said[2][:2] == (Role.TOOL_RESULT, tool) and result in said[2][2]
    assert said[3:] == [(Role.ASSISTANT, None, replies[0]), (Role.USER, None, said[4][2]),
                        (Role.ASSISTANT, None, replies[1])]
    assert "Which word?" in said[4][2]
    assert (got.id, got.cwd, got.unreadable, got.prompts) == (session, cwd, 0, 2)
    assert got.first_prompt.strip('"') == PROMPT and got.last_ns > 0
    assert [t.number for t in got.turns() if t.items[0].role is Role.USER] == [1, 2]


def test_text_the_harness_put_in_is_context_not_a_prompt():
    """Codex's developer instructions and ``<environment_context>``, Gemini's
    ``<session_context>``: before the first prompt, in turn 0."""
    for fmt, rel, opening in (("codex", CODEX, "<environment_context>"), ("gemini", GEMINI, "<session_context>")):
        turns = transcript(fmt, rel).turns()
        assert turns[0].number == 0 and {i.role for i in turns[0].items} == {Role.CONTEXT}
        assert any(i.text.startswith(opening) for i in turns[0].items)
        assert turns[1].items[0].role is Role.USER


def test_gemini_log_is_replayed_as_gemini_loads_it():
    """The reply is written twice (before and after its tool call completed), its result
    also as a message of its own, and the whole list again at the resume: one call,
    one result. A ``$rewindTo`` drops that message and every later one."""
    got = transcript("gemini", GEMINI)
    assert [i.role for i in got.items].count(Role.TOOL_RESULT) == 1
    assert [i.role for i in got.items].count(Role.TOOL_CALL) == 1
    last_prompt = next(json.loads(line)["id"] for line in (CONVERSATIONS / GEMINI).read_text().splitlines()
                       if '"Which word?"' in line and '"$set"' not in line)
    rewound = transcript("gemini", GEMINI, extra=json.dumps({"$rewindTo": last_prompt}).encode() + b"\n")
    assert rewound.prompts == 1 and rewound.items[-1].text == "Noted. MOCK-3-4e75e2aa"


def test_lines_that_are_not_json_objects_are_skipped_and_counted():
    """A line of garbage, a JSON value that is no object, and a last line cut short: the
    rest reads as before, and the three are counted."""
    whole = transcript("claude", CLAUDE)
    data = (CONVERSATIONS / CLAUDE).read_bytes()
    first, rest = data.split(b"\n", 1)
    damaged = read_transcript("claude", [first + b"\nnot json at all\n[1, 2]\n", rest, b'{"type": "user", "mess'])
    assert damaged.unreadable == 3 and damaged.items == whole.items
    assert damaged.bytes == len(data) + len(b"not json at all\n[1, 2]\n") + 22


def test_database_rows_that_are_not_json_are_counted(tmp_path):
    with database(OPENCODE, tmp_path) as con:
        con.execute("UPDATE part SET data = '{torn' WHERE json_extract(data, '$.type') = 'step-start'")
        got = opencode.read(con, None)[SAMPLES["opencode"][1]]
    assert got.unreadable == 3 and got.prompts == 2


def test_openclaw_event_stored_compressed_reads_as_the_same(tmp_path):
    """OpenClaw keeps a large event zstd-compressed (``event_zstd``) instead of as JSON text."""
    session = SAMPLES["openclaw"][1]
    with database(OPENCLAW, tmp_path) as con:
        plain = openclaw.read(con, [session])[session]
        event = con.execute("SELECT event_json FROM transcript_events WHERE session_id = ? AND seq = 5",
                            (session,)).fetchone()[0]
        con.execute("PRAGMA ignore_check_constraints = ON")
        con.execute("UPDATE transcript_events SET event_json = NULL, event_zstd = ?, event_utf8_bytes = ?, "
                    "navigation_json = '{}' WHERE session_id = ? AND seq = 5",
                    (zstandard.ZstdCompressor().compress(event.encode()), len(event.encode()), session))
        packed = openclaw.read(con, [session])[session]
        con.execute("UPDATE transcript_events SET event_zstd = x'00ff' WHERE seq = 5")
        broken = openclaw.read(con, [session])[session]
    assert packed.items == plain.items and packed.unreadable == 0
    assert broken.unreadable == 1 and Role.TOOL_CALL not in [i.role for i in broken.items]


def test_a_database_reads_only_the_sessions_asked_for(tmp_path):
    with database(HERMES, tmp_path) as con:
        assert hermes.read(con, []) == {}
        assert list(hermes.read(con, [SAMPLES["hermes"][1], "20990101_000000_ffffff"])) == [SAMPLES["hermes"][1]]


def test_older_formats_read_from_real_sessions():
    """Codex 0.104 (tool arguments redacted to text that is not JSON), Claude Code 2.1.39
    (a compaction, its summary put in as a user message), pi (a command the user ran,
    compactions)."""
    real = FIXTURES / "real"
    codex = transcript("codex", "codex-home/sessions/2026/02/23/rollout-2026-02-23T13-19-38-"
                                "019c8a70-dda7-7f33-98ea-f30553347322.jsonl", real)
    assert codex.unreadable == 0 and codex.items[-1].role is Role.TOOL_CALL
    assert codex.items[-1].text.startswith("[REDACTED_ARGUMENTS len=")
    claude = transcript("claude", "agent-state/claude/projects/-home-node-work-spotter/"
                                  "4d5611e5-241a-462a-8d15-5122611a9569.jsonl", real)
    roles = [i.role for i in claude.items]
    assert claude.prompts == 2 and roles.count(Role.TOOL_CALL) == roles.count(Role.TOOL_RESULT) == 150
    assert any(i.role is Role.INFO and i.text == "Conversation compacted" for i in claude.items)
    assert any(i.role is Role.CONTEXT and i.text.startswith("This session is being continued") for i in claude.items)
    pi = transcript("pi", "oc-home/.openclaw/agents/main/sessions/ffae836b-9420-4060-ac13-7745215f90ff.jsonl", real)
    assert pi.id == "ffae836b-9420-4060-ac13-7745215f90ff" and pi.cwd == "/Users/badlogic/workspaces/pi-mono"
    assert pi.prompts == 55 and [i.role for i in pi.items].count(Role.CONTEXT) == 2
    assert any(i.role is Role.TOOL_CALL and i.tool == "bash" and i.text == "ls" for i in pi.items)


def test_every_format_a_preset_names_has_a_reader():
    named = {r.format for s in SESSIONS.values() for r in (*s.files, *s.tables) if r.format}
    assert named == set(TRANSCRIPTS) | set(DATABASES)
