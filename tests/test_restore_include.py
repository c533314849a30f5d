"""A partial restore (``journal restore --include PATTERN``): only the paths its patterns
select, into an export or onto the live trees, never taken for a whole restore."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from conftest import one_line_error
from journal.format.model import KIND_DIR, KIND_FILE, Entry
from journal.local.state import clear_restore_marker, load_state
from journal.restore.errors import BadInclude
from journal.restore.include import Include

ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


@pytest.fixture
def source(live):
    """The fixture trees, a Codex config and an opencode database, checkpointed once."""
    (live.local / "codex-home" / "config.toml").write_text('model = "gpt-5.3-codex"\n')
    (live.local / "codex-home" / "sessions").chmod(0o700)
    db = live.local / "opencode-share" / "opencode.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("CREATE TABLE message (id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO message (body) VALUES (?)", [(f"message {i}",) for i in range(50)])
    con.commit()
    con.close()
    assert live.checkpoint().seq == 1
    return live


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()
                  and not str(p.relative_to(root)).startswith(".journal"))


def entry(path: str, kind: str = KIND_FILE) -> Entry:
    return Entry(path=path, kind=kind, mode=0o755 if kind == KIND_DIR else 0o644, mtime_ns=0, size=0)


# --- what a pattern selects --------------------------------------------------------------


def test_star_stops_at_slash_double_star_crosses_it_and_a_directory_takes_its_subtree():
    entries = [entry("a", KIND_DIR), entry("a/b", KIND_DIR), entry("a/b/deep.jsonl"), entry("a/top.jsonl"),
               entry("a/b-c.txt"), entry("z.toml")]

    def chosen(*patterns):
        inc = Include(list(patterns))
        taken, listed = inc.select("codex", entries)
        return [e.path for e in taken], listed, inc.unmatched()

    assert chosen("codex/a/*.jsonl") == (["a", "a/top.jsonl"], ["a/top.jsonl"], [])
    assert chosen("codex/**/*.jsonl") == (["a", "a/b", "a/b/deep.jsonl", "a/top.jsonl"],
                                          ["a/b/deep.jsonl", "a/top.jsonl"], [])
    assert chosen("codex/a/b/")[1] == ["a/b", "a/b/deep.jsonl"]          # not a/b-c.txt: a sibling
    assert chosen("codex")[1] == [e.path for e in entries]               # the tree's name: all of it
    assert chosen("*/z.toml")[1] == ["z.toml"]
    # a pattern under another's match is still seen to match; one that matches nothing is named
    assert chosen("codex/a", "codex/a/top.jsonl", "codex/*.jsonl")[2] == ["codex/*.jsonl"]


@pytest.mark.parametrize("pattern, why", [("/codex/config.toml", "an absolute path"),
                                          ("codex/../claude", "'..'"), ("codex//x", "empty"), ("", "empty")])
def test_a_pattern_no_path_can_match_is_refused_with_the_rule(pattern, why):
    with pytest.raises(BadInclude) as raised:
        Include([pattern])

    assert why in str(raised.value) and "TREE/PATH as `journal ls` shows it" in str(raised.value)


# --- into an export ----------------------------------------------------------------------


def test_include_one_file_exports_that_file_alone(source, tmp_path):
    out = tmp_path / "out"

    done = source.run("restore", "--to", str(out), "--include", "codex/config.toml", expect=0)

    assert sorted(p.name for p in out.iterdir()) == [".journal-export", "codex"]
    assert files_under(out / "codex") == ["config.toml"]
    assert (out / "codex" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'
    assert "restore of 1 path matching 'codex/config.toml' complete" in done.stdout
    mark = json.loads((out / ".journal-export").read_text())
    assert (mark["trees"], mark["complete"], mark["include"]) == (["codex"], True, ["codex/config.toml"])


def test_include_a_directory_exports_everything_under_it_with_its_modes(source, tmp_path):
    out = tmp_path / "out"

    source.run("restore", "--to", str(out), "--include", "codex/sessions/", expect=0)

    assert source.snapshot(out / "codex" / "sessions") == source.snapshot(source.local / "codex-home" / "sessions")
    assert (out / "codex" / "sessions").stat().st_mode & 0o777 == 0o700
    assert files_under(out) == [f"codex/sessions/{p}" for p in files_under(source.local / "codex-home" / "sessions")]


def test_include_a_glob_lists_what_it_selects_and_a_dry_run_writes_nothing(source, tmp_path):
    out = tmp_path / "out"
    live_jsonl = sorted(f"{tree}/{p}" for tree, root in (("codex", "codex-home"), ("claude", "agent-state/claude"),
                                                         ("openclaw", "oc-home/.openclaw"))
                        for p in files_under(source.local / root) if p.endswith(".jsonl"))

    dry = source.run("restore", "--to", str(out), "--include", "**/*.jsonl", "--dry-run", "--json", expect=0)
    text = source.run("restore", "--to", str(out), "--include", "**/*.jsonl", "--dry-run", expect=0)
    done = json.loads(source.run("restore", "--to", str(out), "--include", "**/*.jsonl", "--json", expect=0).stdout)

    listed = sorted(f"{t['name']}/{p}" for t in json.loads(dry.stdout)["trees"] for p in t["included"])
    assert listed == live_jsonl and len(listed) >= 4
    assert all(f"  {path}" in text.stdout.splitlines() for path in listed)
    assert sorted(f"{t['name']}/{p}" for t in done["trees"] for p in t["included"]) == live_jsonl
    assert sorted(f"{t}/{p}" for t in ("codex", "claude", "openclaw") if (out / t).exists()
                  for p in files_under(out / t)) == live_jsonl
    assert not (out / "opencode").exists()   # a tree the patterns take nothing of is not written


def test_include_a_sqlite_database_rebuilds_it_and_it_passes_quick_check(source, tmp_path):
    out = tmp_path / "out"

    source.run("restore", "--to", str(out), "--include", "opencode/opencode.db", expect=0)

    assert files_under(out / "opencode") == ["opencode.db"]
    con = sqlite3.connect(out / "opencode" / "opencode.db")
    try:
        assert con.execute("PRAGMA quick_check").fetchone() == ("ok",)
        assert con.execute("SELECT count(*) FROM message").fetchone() == (50,)
    finally:
        con.close()


def test_a_pattern_that_matches_nothing_exits_2_naming_it_and_writes_nothing(source, tmp_path, make_live):
    out = tmp_path / "out"
    fresh = make_live("b", fixtures=False)

    exported = source.run("restore", "--to", str(out), "--include", "codex/config.toml", "--include",
                          "codex/*.jsonl", expect=2)
    onto_live = fresh.run("restore", "--include", "codex/nothing-here", expect=2)

    assert "pattern 'codex/*.jsonl' matches no path of checkpoint 1" in one_line_error(exported)
    assert "pattern 'codex/nothing-here' matches no path" in one_line_error(onto_live)
    assert not out.exists()
    assert files_under(fresh.local) == [] and not fresh.state_file.exists()


def test_a_bad_pattern_is_one_line_with_exit_2(source):
    line = one_line_error(source.run("restore", "--to", "/tmp/never", "--include", "codex/../x", expect=2))

    assert "pattern 'codex/../x'" in line and "'..'" in line


# --- onto the live trees -----------------------------------------------------------------


def test_partial_restore_into_a_fresh_container_never_lets_a_checkpoint_publish_the_rest_as_deleted(source,
                                                                                                     make_live):
    fresh = make_live("b", fixtures=False)
    newest = source.log()[0]

    done = fresh.run("restore", "--include", "codex/config.toml", expect=0)
    refused = fresh.run("checkpoint", expect=1)

    assert files_under(fresh.local) == ["codex-home/config.toml"]
    assert "whole `journal restore`" in done.stderr
    assert "run `journal restore` first" in one_line_error(refused)
    assert source.log()[0] == newest                          # nothing published over checkpoint 1
    fresh.run("restore", expect=0)                            # the whole restore: every path, marked complete
    assert load_state(str(fresh.state_dir), fresh.repo().store_id).restore_complete
    assert fresh.checkpoint_ok()["seq"] is None               # nothing changed: no deletion to publish
    assert (fresh.local / "codex-home" / ROLLOUT).read_bytes() == (source.local / "codex-home" / ROLLOUT).read_bytes()


def test_partial_restore_on_a_hot_disk_puts_a_deleted_file_back_and_the_next_checkpoint_is_idle(source):
    config = source.local / "codex-home" / "config.toml"
    config.unlink()
    (source.local / "codex-home" / ROLLOUT).write_text("edited locally\n")   # newer: kept, unrestored anyway

    source.run("restore", "--include", "codex/config.toml", expect=0)

    assert config.read_text() == 'model = "gpt-5.3-codex"\n'
    assert (source.local / "codex-home" / ROLLOUT).read_text() == "edited locally\n"
    state = load_state(str(source.state_dir), source.repo().store_id)
    assert state.restore_complete and "opencode.db" in state.trees["opencode"].files
    published = source.checkpoint_ok()
    assert published["seq"] == 2                              # the local edit, and nothing else
    listing = source.run("ls", "--json", "--at", "2", "codex", expect=0).stdout
    assert "config.toml" in listing
    assert source.checkpoint_ok()["seq"] is None


def test_partial_restore_onto_a_stale_disk_or_an_older_checkpoint_is_refused_and_changes_nothing(source,
                                                                                                 make_live):
    other = make_live("b", fixtures=False)
    other.run("restore", expect=0)
    other.write("codex-home/config.toml", 'model = "other"\n')
    assert other.checkpoint_ok()["seq"] == 2                 # the store moved on: ``source`` is stale
    state = source.state_file.read_bytes()

    stale = source.run("restore", "--include", "codex/config.toml", expect=2)
    older = other.run("restore", "--at", "1", "--include", "codex/config.toml", expect=2)
    rollback = other.run("restore", "--at", "1", "--rollback", "--include", "codex/config.toml", expect=2)

    assert "this disk is stale" in one_line_error(stale)
    assert "export them" in one_line_error(older) and "export them" in one_line_error(rollback)
    assert len(source.log()) == 2                            # no fork was made
    assert source.state_file.read_bytes() == state
    assert (source.local / "codex-home" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'
    assert (other.local / "codex-home" / "config.toml").read_text() == 'model = "other"\n'


def test_partial_restore_never_completes_what_a_killed_whole_restore_left(source):
    # A whole restore killed after its first change: the marker is cleared, the disk still hot.
    clear_restore_marker(str(source.state_dir), source.repo().store_id)
    (source.local / "codex-home" / "config.toml").unlink()

    done = source.run("restore", "--include", "codex/config.toml", expect=0)

    assert (source.local / "codex-home" / "config.toml").exists()
    assert "not marked complete" in done.stderr
    assert not load_state(str(source.state_dir), source.repo().store_id).restore_complete
    assert "was incomplete" in one_line_error(source.run("checkpoint", expect=1))
    assert len(source.log()) == 1
