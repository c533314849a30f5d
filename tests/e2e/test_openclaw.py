"""OpenClaw (npm ``openclaw``) under journal: a lost container, a restore, ``openclaw agent --local --session-id ID``."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.clis import installed
from tests.e2e.harness import Agent, Box, assert_resumed, databases, lost_and_resumed, quick_check

#: The mock as a custom OpenAI-compatible provider (chat completions) of the default
#: agent, ``main``. Bootstrap files, tools beyond the minimal profile and the memory
#: plugin are off: each would add seconds to every turn and nothing to what is tested.
CONFIG = {
    "models": {"mode": "replace", "providers": {"mock": {
        "baseUrl": "{url}/v1", "apiKey": "mock", "api": "openai-completions",
        "models": [{"id": "mock-model", "name": "Mock", "reasoning": False, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 4000}]}}},
    "agents": {"defaults": {"model": {"primary": "mock/mock-model"}, "skipBootstrap": True}},
    "tools": {"profile": "minimal"},
    "plugins": {"slots": {"memory": "none"}},
}
AGENT_DB = "agents/main/agent/openclaw-agent.sqlite"        # the main agent's sessions and transcripts
STATE_DB = "state/openclaw.sqlite"                           # state shared by every agent


def first_session(db: Path) -> str:
    """The id of the oldest session of an agent's database."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        return con.execute("SELECT session_id FROM session_windows ORDER BY created_at LIMIT 1").fetchone()[0]


def transcript(db: Path, session: str) -> str:
    """The transcript events of ``session`` (one JSON text each), joined."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        rows = con.execute("SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq", (session,))
        return "\n".join(row[0] or "" for row in rows)


class OpenClaw(Agent):
    name = "openclaw"
    preset = "openclaw"

    def setup(self, box: Box) -> None:
        state = self.tree(box)
        state.mkdir(parents=True, exist_ok=True)
        box.env["OPENCLAW_STATE_DIR"] = str(state)
        box.path_with(self.cli.bin_dir, *self.cli.path)
        if not (state / "openclaw.json").exists():       # a restored box has its own from the store
            config = json.dumps(CONFIG).replace("{url}", self.mock.url)
            (state / "openclaw.json").write_text(config)

    def first(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "agent", "--local", "--agent", "main", "--message", prompt]

    def resume(self, box: Box, prompt: str) -> list[str]:
        """The first turn's session, by its id."""
        session = first_session(self.tree(box) / AGENT_DB)
        return [str(self.cli.binary), "agent", "--local", "--session-id", session, "--message", prompt]


@pytest.fixture
def openclaw(mock):
    return OpenClaw(installed("openclaw"), mock)


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_openclaw_resumes_after_a_lost_container(openclaw, base, how):
    """The resumed turn carries the first turn's reply (``assert_resumed``); the agent's
    and the shared databases come back alone (no ``-wal``), whole, the first session's
    transcript in the agent's; SQLite leases and the managed temp root do not come back."""
    seen = lost_and_resumed(openclaw, base, how)
    assert_resumed(seen)
    restored = seen.after_restore
    found = {str(p.relative_to(restored)) for p in databases(restored)}
    assert {AGENT_DB, STATE_DB} <= found, found
    assert not [p for p in found if p.endswith("lock.sqlite")]
    assert list(restored.rglob("*.sqlite-wal")) == [] and list((restored / "tmp").rglob("*")) == []
    for rel in found:
        assert quick_check(restored / rel) == "ok", rel
    said = transcript(restored / AGENT_DB, first_session(restored / AGENT_DB))
    assert "Remember the word first-" in said and any(m in said for m in seen.first_markers), said[:2000]
