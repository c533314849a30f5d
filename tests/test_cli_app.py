"""What every command shares (``journal/cli/app.py``): the options ``journal`` takes
before the command as well as after it, the hint for an unknown command, and the
lines that say what to do next (``trees``, a busy lock)."""

from __future__ import annotations

import fcntl
import json
import os

import pytest

from conftest import one_line_error
from test_cli import _launched


def test_journal_help_lists_the_options_that_go_before_the_command(run_journal):
    proc = run_journal("--help")

    options = proc.stdout.split("Options:", 1)[1].split("Commands:", 1)[0]
    assert all(f"  {flag}" in options for flag in ("--json", "--store URL", "--config FILE", "--debug"))


def test_the_shared_options_work_before_the_command_as_after_it(bare_live, tmp_path):
    other = tmp_path / "other-store"

    made = bare_live.run("--debug", "--json", "--store", str(other), "init", expect=0)
    bare_live.write("codex-home/a.txt", "a\n")
    before = bare_live.run("--json", "--store", str(other), "checkpoint", expect=0)
    after = bare_live.run("log", "--json", "--store", str(other), expect=0)
    listed = bare_live.run("--store", str(other), "--json", "log", expect=0)

    assert json.loads(made.stdout)["store"] == str(other) and json.loads(before.stdout)["seq"] == 1
    assert json.loads(after.stdout) == json.loads(listed.stdout) and len(json.loads(listed.stdout)) == 1
    assert not bare_live.store_path.exists(), "the store named before the command is the one used"


def test_an_option_given_before_and_after_the_command_must_agree(bare_live, tmp_path):
    same = bare_live.run("--store", str(tmp_path / "s"), "init", "--store", str(tmp_path / "s"), expect=0)
    clash = bare_live.run("--json", "--store", str(tmp_path / "s"), "log", "--store", str(tmp_path / "t"))

    assert "ready" in same.stdout
    assert clash.returncode == 2 and json.loads(clash.stdout)["kind"] == "ConfigError"
    assert f"log: --store is given twice, {tmp_path / 's'} before the command and {tmp_path / 't'} after it" \
        in one_line_error(clash)


def test_an_option_before_a_command_that_does_not_take_it_is_exit_2(run_journal):
    proc = run_journal("--store", "/tmp/nowhere", "demo")

    assert proc.returncode == 2
    assert "demo: --store (given before the command) is not an option of this command" in one_line_error(proc)


def test_a_plain_checkpoint_with_its_options_before_it_stays_on_the_fast_path(live, tmp_path):
    rc, out, err, clicked = _launched(live, tmp_path, "--json", "checkpoint")

    assert (rc, err, clicked) == (0, "", False)
    assert json.loads(out)["seq"] == 1


@pytest.mark.parametrize("typed, meant", [("check", "verify"), ("fsck", "verify"), ("checkpiont", "checkpoint"),
                                          ("lss", "ls")])
def test_an_unknown_command_is_hinted_at_a_reading_command_for_a_reading_word(run_journal, typed, meant):
    proc = run_journal(typed)

    assert proc.returncode == 2
    assert f"No such command '{typed}'. Did you mean '{meant}'?" in one_line_error(proc)


def test_trees_shows_custom_jsonl_patterns_and_does_not_send_you_to_itself(bare_live, tmp_path):
    config = tmp_path / "journal.toml"
    config.write_text('presets = []\n[[trees]]\nname = "notes"\npath = "notes"\njsonl = ["*.log"]\n')
    (bare_live.local / "notes").mkdir()
    empty = tmp_path / "empty.toml"
    empty.write_text("presets = []\n")

    listed = bare_live.run("trees", "--config", str(config), expect=0)
    none = bare_live.run("trees", "--config", str(empty), expect=0)

    (line,) = [ln for ln in listed.stdout.splitlines() if ln.strip().startswith("notes")]
    assert "jsonl *.log" in line and "*.jsonl" not in line
    assert "trees:     none: " in none.stdout and "journal trees" not in none.stdout


def test_a_busy_lock_says_how_to_wait_for_it(live):
    live.state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(live.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = live.run("checkpoint")
    finally:
        os.close(fd)

    assert proc.returncode == 1
    assert "another journal operation holds" in one_line_error(proc) and "--wait" in proc.stderr
