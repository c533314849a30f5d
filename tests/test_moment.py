"""Naming a checkpoint or a time (``journal/repository/moment.py``, design §19): one
grammar for ``--at``, ``--since`` and ``diff A B``, in every command that takes one."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest

from journal.errors import ConfigError
from journal.format.model import Fork
from journal.repository.moment import parse_moment, parse_time

from conftest import Live, one_line_error, scratch_dir

NOW = 1_780_000_000 * 10**9          # 2026-05-28T20:26:40Z
DAY = datetime.datetime(2026, 3, 1, tzinfo=datetime.timezone.utc)
DAY_NS = int(DAY.timestamp()) * 10**9


# --------------------------------------------------------------------------- the grammar


@pytest.mark.parametrize("text, seq, back", [("42", 42, None), (" 7 ", 7, None), ("latest", None, 0),
                                             ("latest~3", None, 3), ("LATEST~0", None, 0)])
def test_a_number_names_a_checkpoint_and_latest_counts_back(text, seq, back):
    moment = parse_moment(text, "ls", "--at", now_ns=NOW)

    assert (moment.seq, moment.back, moment.first_ns) == (seq, back, None)


def test_a_bare_date_is_its_whole_utc_day():
    moment = parse_moment("2026-03-01", "ls", "--at", now_ns=NOW)

    assert moment.first_ns == DAY_NS                          # --since: from its start
    assert moment.last_ns == DAY_NS + 86_400 * 10**9 - 1      # --at: to its very end


@pytest.mark.parametrize("text, ns", [
    ("2026-03-01T12:00:00", DAY_NS + 12 * 3600 * 10**9),      # no zone: UTC
    ("2026-03-01T13:00:00+01:00", DAY_NS + 12 * 3600 * 10**9),
    ("2026-03-01T12:00:00Z", DAY_NS + 12 * 3600 * 10**9),
    ("2h", NOW - 2 * 3600 * 10**9), ("90m", NOW - 5400 * 10**9), ("3d", NOW - 3 * 86_400 * 10**9),
    ("1w", NOW - 7 * 86_400 * 10**9), ("1d12h", NOW - 36 * 3600 * 10**9),
])
def test_a_time_or_a_duration_ago_is_one_instant(text, ns):
    moment = parse_moment(text, "ls", "--at", now_ns=NOW)

    assert moment.first_ns == moment.last_ns == ns and moment.seq is None and moment.back is None


@pytest.mark.parametrize("text", ["yesterday", "-3", "2026-13-45", "latest~", "latest~-1", "2x", "1.5"])
def test_anything_else_is_refused_naming_what_may_be_written(text):
    with pytest.raises(ConfigError) as err:
        parse_moment(text, "diff", "B")

    assert f"diff: B {text!r} is neither a sequence number nor an ISO-8601 time" in str(err.value)
    assert "latest~N" in str(err.value) and "duration ago (2h, 3d)" in str(err.value)


@pytest.mark.parametrize("text", ["42", "latest", "latest~1"])
def test_a_time_only_option_refuses_a_checkpoint(text):
    with pytest.raises(ConfigError, match="is neither an ISO-8601 time nor a duration"):
        parse_time(text, "input list", "--since")
    assert parse_time("2026-03-01", "input list", "--since").first_ns == DAY_NS


# --------------------------------------------------------------------------- every command


def _build(live: Live) -> dict:
    """Main-line checkpoints 1, 2 and 4 and a fork, 3, between them."""
    live.write("codex-home/a.txt", "one\n")
    live.checkpoint()                                          # 1
    live.write("codex-home/b.txt", "two\n")
    live.checkpoint()                                          # 2
    live.publish({}, fork=Fork(onto=2, why="test fork"), version=2)   # 3, off the main line
    live.write("codex-home/c.txt", "four\n")
    assert live.checkpoint().seq == 4
    live.run("input", "append", "--harness", "codex", "--session", "S", "-", stdin="a prompt", expect=0)
    return {"live": live, "day": live.log()[0]["created"][:10]}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Iterator[dict]:
    with scratch_dir(tmp_path_factory.mktemp("moments")) as base:
        yield _build(Live(base / "a", base / "store"))


def _seq(live: Live, *args: str) -> int:
    proc = live.run("ls", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["seq"]


@pytest.mark.parametrize("args", [("ls", "--at", "999"), ("cat", "--at", "999", "codex/a.txt"),
                                  ("diff", "1", "999"), ("find", "*.txt", "--since", "999"),
                                  ("restore", "--at", "999", "--to", "{out}")],
                         ids=["ls", "cat", "diff", "find", "restore"])
def test_a_checkpoint_number_the_store_does_not_hold_is_exit_2_naming_the_newest(made, tmp_path, args):
    live = made["live"]
    proc = live.run(*[a.format(out=tmp_path / "out") for a in args])

    assert proc.returncode == 2, proc.stdout
    line = one_line_error(proc)
    assert "999: the store holds no checkpoint 999; the newest is checkpoint 4" in line
    assert not (tmp_path / "out").exists()


def test_latest_counts_main_line_checkpoints_and_a_number_still_names_a_fork(made):
    live = made["live"]

    assert [_seq(live, "--at", at) for at in ("latest", "latest~1", "latest~2", "3")] == [4, 2, 1, 3]
    too_far = live.run("ls", "--at", "latest~3")
    assert too_far.returncode == 2
    assert "--at latest~3: the store holds only 3 main-line checkpoint(s), so latest~2 is the oldest; the " \
           "newest is checkpoint 4" in one_line_error(too_far)


def test_a_date_means_the_end_of_its_utc_day_for_at_and_its_start_for_since(made, tmp_path):
    live, day = made["live"], made["day"]

    assert _seq(live, "--at", day) == 4
    found = json.loads(live.run("find", "c.txt", "--since", day, "--json", expect=0).stdout)
    assert [v["first"] for v in found[0]["versions"]] == [4]
    restored = live.run("restore", "--at", day, "--to", str(tmp_path / "out"), expect=0)
    assert "restore complete" in restored.stdout and (tmp_path / "out" / "codex" / "c.txt").exists()


def test_find_since_takes_a_duration_as_input_list_does(made):
    live = made["live"]

    found = json.loads(live.run("find", "*.txt", "--since", "2h", "--json", expect=0).stdout)
    inputs = json.loads(live.run("input", "list", "--since", "2h", "--json", expect=0).stdout)
    none_yet = json.loads(live.run("find", "*.txt", "--since", "0m", "--json", expect=0).stdout)

    assert sorted(f["path"] for f in found) == ["codex/a.txt", "codex/b.txt", "codex/c.txt"]
    assert len(inputs) == 1 and none_yet == []


def test_diff_and_restore_read_latest_as_ls_does(made, tmp_path):
    live = made["live"]

    changes = json.loads(live.run("diff", "latest~1", "latest", "--json", expect=0).stdout)
    live.run("restore", "--at", "latest~1", "--to", str(tmp_path / "out"), expect=0)

    assert [(c["path"], c["change"], c["a"], c["b"]) for c in changes] == [("codex/c.txt", "added", 2, 4)]
    assert sorted(p.name for p in (tmp_path / "out" / "codex").iterdir()) == ["a.txt", "b.txt"]
