"""Codex (``@openai/codex``) under journal: a lost container, a restore, ``codex exec resume --last``."""

from __future__ import annotations

import sqlite3

import pytest

from tests.e2e.clis import installed
from tests.e2e.harness import (Agent, Box, assert_resumed, databases, legacy_torn_resume, lost_and_resumed,
                              quick_check, torn_lines)

#: What Codex keeps in SQLite (docs/harnesses.md): user state journal snapshots.
USER_DATABASES = {"state_5.sqlite", "goals_1.sqlite", "queue_1.sqlite", "memories_1.sqlite",
                  "thread_history_1.sqlite"}

CONFIG = """\
model = "mock-model"
model_provider = "mock"
check_for_update_on_startup = false

[model_providers.mock]
name = "mock"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"

[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false

[analytics]
enabled = false
"""


class Codex(Agent):
    name = "codex"
    preset = "codex"

    def setup(self, box: Box) -> None:
        home = self.tree(box)
        home.mkdir(parents=True, exist_ok=True)
        box.env.update(CODEX_HOME=str(home), MOCK_API_KEY="mock")
        box.path_with(self.cli.bin_dir)
        if not (home / "config.toml").exists():          # a restored box has its own from the store
            (home / "config.toml").write_text(CONFIG.format(url=self.mock.url))

    def first(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "exec", "--skip-git-repo-check", prompt]

    def resume(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "exec", "--skip-git-repo-check", "resume", "--last", prompt]


@pytest.fixture
def codex(mock):
    return Codex(installed("codex"), mock)


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_codex_resumes_after_a_lost_container(codex, base, how):
    seen = lost_and_resumed(codex, base, how)
    assert_resumed(seen)
    assert torn_lines(codex.tree(seen.restored)) == []
    _databases_restored(seen.after_restore)


def _databases_restored(tree):
    """Restored before Codex runs again (it would make empty ones), whole and checked,
    with the first turn's thread in ``state_5.sqlite``; its log left out."""
    found = {p.name: p for p in databases(tree)}
    assert USER_DATABASES <= set(found), f"restored databases: {sorted(found)}"
    assert "logs_2.sqlite" not in found
    for name in USER_DATABASES:
        assert quick_check(found[name]) == "ok", name
    with sqlite3.connect(found["state_5.sqlite"]) as db:
        titles = [row[0] for row in db.execute("SELECT first_user_message FROM threads")]
    assert any("Remember the word first-" in t for t in titles), titles


def test_codex_after_the_legacy_copys_torn_line(codex, base):
    """Codex starts a new line after a torn fragment: the resumed session goes on, and
    the fragment stays in the transcript as one bad line."""
    seen = legacy_torn_resume(codex, base)
    assert len(seen.torn_after) == 1 and seen.transcript in seen.torn_after[0], seen.torn_after
