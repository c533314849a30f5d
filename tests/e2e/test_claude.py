"""Claude Code (``@anthropic-ai/claude-code``) under journal: a lost container, a restore, ``claude -p --resume ID``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal.presets import PRESETS
from tests.e2e.clis import installed
from tests.e2e.harness import Agent, Box, assert_resumed, legacy_torn_resume, lost_and_resumed, torn_lines


class Claude(Agent):
    name = "claude"
    preset = "claude"

    def setup(self, box: Box) -> None:
        tree = self.tree(box)
        tree.mkdir(parents=True, exist_ok=True)
        box.env.update(CLAUDE_CONFIG_DIR=str(tree), ANTHROPIC_BASE_URL=self.mock.url, ANTHROPIC_API_KEY="mock",
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
        box.path_with(self.cli.bin_dir)

    def first(self, box: Box, prompt: str) -> list[str]:
        return [str(self.cli.binary), "-p", "--output-format", "json", prompt]

    def resume(self, box: Box, prompt: str) -> list[str]:
        """The session of the newest transcript: a restored box has no stdout of the
        first turn, only its files, and each is named for its session."""
        return [str(self.cli.binary), "-p", "--resume", newest_transcript(self.tree(box)).stem, prompt]


def newest_transcript(tree: Path) -> Path:
    """``projects/<cwd with / as ->/<session>.jsonl``, the one written last."""
    found = list(tree.glob("projects/*/*.jsonl"))
    assert found, f"no transcript under {tree}/projects"
    return max(found, key=lambda p: p.stat().st_mtime_ns)


def session_of(request) -> str:
    """The session a model request belongs to, as Claude names it in ``metadata.user_id``."""
    return json.loads(request.body["metadata"]["user_id"])["session_id"]


def stored_paths(box: Box) -> set[str]:
    """Every ``claude/…`` path any checkpoint in the store holds (``journal find``)."""
    found = json.loads(box.journal("find", "*", "--tree", "claude", "--json").stdout)
    return {f["path"] for f in found if any(v.get("kind") for v in f["versions"])}


@pytest.fixture
def claude(mock):
    return Claude(installed("claude"), mock)


@pytest.mark.parametrize("how", ["clean", "kill9"])
def test_claude_resumes_after_a_lost_container(claude, base, how):
    seen = lost_and_resumed(claude, base, how)
    assert_resumed(seen)
    first = {session_of(r) for r in claude.mock.requests if r.marker in seen.first_markers}
    assert {session_of(r) for r in seen.resumed} == first, "the resumed turn is not the first turn's session"
    assert newest_transcript(seen.after_restore).stem in first
    assert (seen.after_restore / ".claude.json").is_file()        # inside CLAUDE_CONFIG_DIR, rewritten whole
    assert torn_lines(claude.tree(seen.restored)) == []
    if how == "kill9":
        # The killed Claude never removed sessions/<pid>.json, and the tick that saw
        # its prompt saw that file too (written at start): a pid of the old container.
        stored = stored_paths(seen.restored)
        assert any(p.startswith("claude/projects/") and p.endswith(".jsonl") for p in stored), sorted(stored)
        assert not [p for p in stored if p.startswith("claude/sessions/")], sorted(stored)
        assert not list((seen.after_restore / "sessions").glob("*"))


def test_claude_debug_log_is_left_out_and_the_transcript_kept(claude, base):
    box = Box(base, "a", base / "store", claude.preset)
    claude.setup(box)
    box.turn([*claude.first(box, "Remember the word debug."), "--debug"])
    tree = claude.tree(box)
    transcript = newest_transcript(tree)
    assert (tree / "debug" / f"{transcript.stem}.txt").is_file()  # it wrote one: the check below is not empty
    stored = stored_paths(box)
    assert f"claude/{transcript.relative_to(tree)}" in stored
    assert not [p for p in stored if p.startswith("claude/debug/")], sorted(stored)


def test_claude_appends_onto_a_torn_last_line(claude, base):
    """The legacy copy's torn last line, with the real Claude: it resumes the session,
    but appends its next record onto the fragment, so that line stays corrupt for good."""
    seen = legacy_torn_resume(claude, base)
    assert seen.resumed, "Claude did not resume the session from the legacy copy"
    transcript = base / "legacy" / "local" / PRESETS["claude"].live / seen.transcript
    lines = transcript.read_bytes().split(b"\n")
    joined = [line for line in lines if line.startswith(seen.fragment)]
    assert len(joined) == 1 and joined[0] != seen.fragment, "Claude started a new line after the fragment"
    assert json.loads(joined[0][len(seen.fragment):])["sessionId"] == Path(seen.transcript).stem
    where = f"{seen.transcript}:{lines.index(joined[0]) + 1}:"
    assert len(seen.torn_after) == 1 and seen.torn_after[0].startswith(where), seen.torn_after
