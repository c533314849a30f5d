"""Gemini CLI (``@google/gemini-cli``) under journal: a lost container, a restore,
``gemini --resume <session id>``.

Gemini resumes a session by its id (``--resume <uuid>``, the ``sessionId`` of the
chat's first line), or ``latest`` (the session of the project started last: another
pane's, when two share a folder). The first turn names its session (``--session-id``)
so that every resumed turn here is that exact session.
"""

from __future__ import annotations

import json
import uuid

import pytest

from journal.presets import PRESETS
from tests.e2e.clis import installed
from tests.e2e.harness import Agent, Box, assert_resumed, legacy_torn_resume, lost_and_resumed, torn_lines

SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}


class Gemini(Agent):
    name = "gemini"
    preset = "gemini"

    def __init__(self, cli, mock):
        super().__init__(cli, mock)
        self.session = str(uuid.uuid4())

    def setup(self, box: Box) -> None:
        tree = self.tree(box)                             # $GEMINI_CLI_HOME/.gemini
        tree.mkdir(parents=True, exist_ok=True)
        box.env.update(GEMINI_CLI_HOME=str(tree.parent), GEMINI_API_KEY="mock",
                       GOOGLE_GEMINI_BASE_URL=self.mock.url, GEMINI_CLI_TRUST_WORKSPACE="true",
                       # It re-executes itself as a child node with a bigger heap (the parent
                       # waits, ignoring SIGTERM; journal signals the whole group): the same
                       # files, ~2 s less a turn.
                       GEMINI_CLI_NO_RELAUNCH="true")
        box.path_with(self.cli.bin_dir)
        if not (tree / "settings.json").exists():         # a restored box has its own from the store
            (tree / "settings.json").write_text(json.dumps(SETTINGS, indent=2))

    def first(self, box: Box, prompt: str, session: str | None = None) -> list[str]:
        return [str(self.cli.binary), "--session-id", session or self.session, "-p", prompt]

    def resume(self, box: Box, prompt: str, session: str | None = None) -> list[str]:
        return [str(self.cli.binary), "--resume", session or self.session, "-p", prompt]


@pytest.fixture
def gemini(mock):
    return Gemini(installed("gemini"), mock)


def chats(tree) -> list:
    return sorted(tree.glob("tmp/*/chats/session-*.jsonl"))


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_gemini_resumes_after_a_lost_container(gemini, base, how):
    seen = lost_and_resumed(gemini, base, how)
    assert_resumed(seen)
    # (a resume in another minute than the chat's name also starts a stray file of the same id)
    assert {json.loads(p.open().readline())["sessionId"] for p in chats(seen.after_restore)} == {gemini.session}
    assert torn_lines(seen.after_restore) == []
    assert torn_lines(gemini.tree(seen.restored)) == []


def test_gemini_resumes_the_exact_session_by_id_where_latest_takes_another(gemini, base):
    """Two panes in one folder: after a restore, ``--resume <id>`` continues the first
    pane's session; ``--resume latest`` would continue the second (the newest)."""
    a = Box(base, "a", base / "store", gemini.preset)
    gemini.setup(a)
    other = str(uuid.uuid4())
    a.turn(gemini.first(a, "Pane one says one-a."))
    a.turn(gemini.first(a, "Pane two says two-b.", session=other))
    mine = [r.marker for r in gemini.mock.carrying("one-a") if r.marker]
    theirs = [r.marker for r in gemini.mock.carrying("two-b") if r.marker]
    a.lose()
    b = Box(base, "a", base / "store", gemini.preset)
    gemini.setup(b)
    b.journal("restore")
    for session, prompt, wanted, unwanted in (("latest", "Latest two-c.", theirs, mine),
                                              (gemini.session, "Exact one-d.", mine, theirs)):
        b.turn(gemini.resume(b, prompt, session=session))
        [sent] = [r for r in gemini.mock.carrying(prompt) if r.marker and "stream" in r.path]
        assert any(m in sent.raw for m in wanted), f"--resume {session} did not carry its session's reply"
        assert not any(m in sent.raw for m in unwanted), f"--resume {session} carried the other pane's reply"


def test_gemini_appends_onto_a_torn_last_line_of_the_legacy_copy(gemini, base):
    """The legacy rsync copy, its chat's last line cut in half: Gemini skips the
    fragment when it loads, then appends its next record straight onto it, so that
    line stays corrupt for good and the record written onto it is lost with it."""
    seen = legacy_torn_resume(gemini, base)
    assert seen.resumed, "Gemini did not resume the session from the legacy copy"
    data = (base / "legacy" / "local" / PRESETS["gemini"].live / seen.transcript).read_bytes()
    [glued] = [line for line in data.split(b"\n") if line.strip() and not _json(line)]
    assert glued.startswith(seen.fragment) and len(glued) > len(seen.fragment), \
        f"Gemini did not append onto the fragment: {glued[:120]!r}"
    assert not data.endswith(glued + b"\n"), "nothing was appended after the corrupt line"
    assert len(seen.torn_after) == 1 and seen.transcript in seen.torn_after[0]


def _json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
