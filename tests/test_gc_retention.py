"""Retention that explains itself (``gc/retention.py``): restic's period rules from
hourly to yearly (the newest checkpoint of each of the last N periods that have one;
UTC; ISO weeks), and ``gc --explain``, which names for every checkpoint the rules that
keep it, or why each rule lets it go.

Checkpoint times are chosen: pure retention reads ``ManifestInfo``s made here, and a
real store gets manifests published at chosen times (``Live.publish``).
"""

from __future__ import annotations

import datetime as _dt
import json
import time

import pytest

from journal.gc.retention import ManifestInfo, Policy, choose_kept, explain_expired

from conftest import CodexLive

TREE = "codex"
UTC = _dt.timezone.utc


def at(*when: int) -> int:
    """A UTC time (year, month, day[, hour, minute]) in nanoseconds."""
    return int(_dt.datetime(*when, tzinfo=UTC).timestamp()) * 10**9


def history(*times: int) -> list[ManifestInfo]:
    """Main-line checkpoints 1, 2, ... made at ``times`` (ascending), one tree."""
    return [ManifestInfo(seq=seq, created_ns=ns, trees=(TREE,)) for seq, ns in enumerate(times, 1)]


NOW = at(2027, 3, 1)


def test_keep_weekly_keeps_the_newest_of_each_of_the_last_iso_weeks_that_have_a_checkpoint():
    # 2027-01-03 is a Sunday of ISO week 2026-W53; 2027-01-04 opens 2027-W01; no checkpoint
    # in W02 or W03.
    ms = history(at(2026, 12, 28), at(2027, 1, 3), at(2027, 1, 4), at(2027, 1, 10), at(2027, 1, 25),
                 at(2027, 1, 26))

    three = choose_kept(ms, Policy(keep_weekly=3), NOW)
    two = choose_kept(ms, Policy(keep_weekly=2), NOW)

    assert sorted(three) == [2, 4, 6] and sorted(two) == [4, 6]
    assert three[2] == ["newest of 2026-W53 (--keep-weekly 3)"]
    assert three[4] == ["newest of 2027-W01 (--keep-weekly 3)"]


def test_keep_monthly_and_yearly_count_only_periods_that_have_a_checkpoint():
    ms = history(at(2024, 5, 1), at(2024, 11, 2), at(2026, 11, 3), at(2026, 11, 20), at(2027, 1, 5),
                 at(2027, 1, 30), at(2027, 2, 14))

    assert sorted(choose_kept(ms, Policy(keep_monthly=2), NOW)) == [6, 7]
    assert sorted(choose_kept(ms, Policy(keep_monthly=3), NOW)) == [4, 6, 7]   # December has none
    assert sorted(choose_kept(ms, Policy(keep_yearly=2), NOW)) == [4, 7]
    yearly = choose_kept(ms, Policy(keep_yearly=3), NOW)
    assert sorted(yearly) == [2, 4, 7] and yearly[2] == ["newest of 2024 (--keep-yearly 3)"]   # 2025 has none
    both = choose_kept(ms, Policy(keep_monthly=1, keep_yearly=2), NOW)
    assert both[7][1:] == ["newest of 2027-02 (--keep-monthly 1)", "newest of 2027 (--keep-yearly 2)"]


def test_periods_are_utc_whatever_the_local_time_zone(monkeypatch):
    monkeypatch.setenv("TZ", "Pacific/Kiritimati")   # UTC+14: both would fall on 1 February
    time.tzset()
    try:
        ms = history(at(2027, 1, 31, 23, 30), at(2027, 2, 1, 0, 30))
        kept = choose_kept(ms, Policy(keep_monthly=2, keep_daily=2), NOW)
    finally:
        monkeypatch.undo()
        time.tzset()

    assert sorted(kept) == [1, 2]
    assert kept[1] == ["newest of 2027-01-31 (--keep-daily 2)", "newest of 2027-01 (--keep-monthly 2)"]


def test_each_expired_checkpoint_is_told_why_each_rule_lets_it_go():
    ms = history(at(2026, 11, 3), at(2027, 1, 5), at(2027, 1, 30), at(2027, 2, 14), at(2027, 2, 28))
    policy = Policy(keep_last=1, keep_within=86400.0 * 7, keep_monthly=2)
    kept = choose_kept(ms, policy, NOW)

    why = explain_expired(ms, policy, NOW, kept)

    assert sorted(kept) == [3, 5] and sorted(why) == [1, 2, 4]
    assert why[2] == ["not among the newest 1 (--keep-last 1)",
                      "made 2027-01-05T00:00:00Z, before 2027-02-22T00:00:00Z (--keep-within)",
                      "not the newest of 2027-01: checkpoint 3 is (--keep-monthly 2)"]
    assert why[1][-1] == "2026-11 is not among the last 2 months with a checkpoint (--keep-monthly 2)"


@pytest.fixture
def box(root) -> CodexLive:
    return CodexLive(root)


def test_gc_explain_names_the_rule_that_keeps_each_checkpoint_and_why_the_others_expire(box):
    box.write("a.txt", "a\n")
    box.checkpoint()                                   # 1: made now, long before the others
    for when in (at(2090, 1, 10), at(2090, 1, 20), at(2090, 2, 5), at(2090, 3, 1)):
        box.publish({}, created_ns=when)               # 2..5 at chosen times
    args = ("gc", "--keep-monthly", "2", "--keep-last", "1", "--dry-run", "--explain")

    text = box.run(*args)
    doc = json.loads(box.run(*args, "--json").stdout)

    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "  5  2090-03-01T00:00:00Z  kept: newest manifest of tree(s) codex; within --keep-last 1; " \
           "newest of 2090-03 (--keep-monthly 2)" in lines
    assert "  4  2090-02-05T00:00:00Z  kept: newest of 2090-02 (--keep-monthly 2)" in lines
    assert "  3  2090-01-20T00:00:00Z  expired: not among the newest 1 (--keep-last 1); 2090-01 is not among " \
           "the last 2 months with a checkpoint (--keep-monthly 2)" in lines
    explained = {v["seq"]: v for v in doc["plan"]["explained"]}
    assert [v["seq"] for v in doc["plan"]["explained"]] == [5, 4, 3, 2, 1]
    assert explained[4] == {"seq": 4, "created": "2090-02-05T00:00:00Z", "decision": "kept",
                            "why": ["newest of 2090-02 (--keep-monthly 2)"]}
    assert explained[1]["decision"] == "expired" and "--keep-monthly 2" in explained[1]["why"][-1]
    assert box.seqs() == [1, 2, 3, 4, 5], "a dry run deletes nothing"


def test_gc_explain_says_a_checkpoint_rule_is_missing_when_only_inputs_expire(box):
    box.write("a.txt", "a\n")
    box.checkpoint()

    doc = json.loads(box.run("gc", "--keep-inputs-within", "7d", "--dry-run", "--explain", "--json").stdout)

    assert doc["plan"]["explained"] == [{"seq": 1, "created": doc["plan"]["explained"][0]["created"],
                                         "decision": "kept", "why": ["no checkpoint retention given"]}]
