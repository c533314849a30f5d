"""Hermes (PyPI ``hermes-agent``) under journal: a lost container, a restore, ``hermes chat --resume ID``."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.clis import installed
from tests.e2e.harness import Agent, Box, assert_resumed, databases, lost_and_resumed, quick_check

#: Hermes's config: the mock as a custom OpenAI-compatible provider (chat completions).
#: The context length spares a lookup of the model on openrouter.ai; tirith (a security
#: scanner it downloads from GitHub) and lazy installs (pip, into its own venv) are off.
CONFIG = """\
model:
  provider: custom
  base_url: {url}/v1
  api_key: mock
  default: mock-model
  context_length: 128000
security:
  tirith_enabled: false
  allow_lazy_installs: false
"""

#: What the hermes preset leaves out (docs/harnesses.md): logs, caches and files that
#: name live processes. Each of these is written by a first turn.
LEFT_OUT = ("logs/agent.log", "logs/errors.log", ".update_check", ".skills_prompt_snapshot.json", "auth.lock")


def sessions(db: Path) -> list[str]:
    """The session ids of Hermes's ``state.db``, oldest first."""
    with contextlib.closing(sqlite3.connect(db)) as con:
        return [row[0] for row in con.execute("SELECT id FROM sessions ORDER BY started_at, id")]


class Hermes(Agent):
    name = "hermes"
    preset = "hermes"

    def setup(self, box: Box) -> None:
        home = self.tree(box)
        home.mkdir(parents=True, exist_ok=True)
        box.env["HERMES_HOME"] = str(home)
        box.path_with(self.cli.bin_dir)
        if not (home / "config.yaml").exists():          # a restored box has its own from the store
            (home / "config.yaml").write_text(CONFIG.format(url=self.mock.url))

    def first(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "chat", "--quiet", "--query", prompt]

    def resume(self, box: Box, prompt: str) -> list[str]:
        """The first turn's session, by its id (``--continue`` would take the newest)."""
        first = sessions(self.tree(box) / "state.db")[0]
        return [str(self.cli.binary), "chat", "--quiet", "--resume", first, "--query", prompt]


@pytest.fixture
def hermes(mock):
    return Hermes(installed("hermes"), mock)


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_hermes_resumes_after_a_lost_container(hermes, base, how):
    """The resumed turn carries the first turn's reply (``assert_resumed``); ``state.db``
    comes back alone (no ``-wal``), whole, with the first session's messages; logs,
    caches and locks do not come back."""
    seen = lost_and_resumed(hermes, base, how)
    assert_resumed(seen)
    restored = seen.after_restore
    assert [p.name for p in databases(restored)] == ["state.db"]
    assert not list(restored.glob("state.db-*"))
    assert quick_check(restored / "state.db") == "ok"
    first = sessions(restored / "state.db")[0]
    with contextlib.closing(sqlite3.connect(restored / "state.db")) as con:
        said = {(role, text) for role, text in
                con.execute("SELECT role, content FROM messages WHERE session_id = ?", (first,))}
    assert any(role == "user" and "Remember the word first-" in text for role, text in said), said
    assert any(role == "assistant" and text.endswith(tuple(seen.first_markers)) for role, text in said), said
    assert [name for name in LEFT_OUT if (restored / name).exists()] == []
