"""Input retention (``journal/gc/inputs.py``, design §16 and §20): ``gc --keep-inputs-within``
expires delivered inputs (every one with ``--include-undelivered``) by the same two
phases as packs, never a session's newest, and deletes an input before its marker."""

from __future__ import annotations

import json

import pytest

from journal.format.inputs import claim_key, delivery_key, input_key, parse_id, session_dir
from journal.gc.inputs import InputPolicy
from journal.gc.retention import Policy
from journal.gc.run import gc
from journal.inputs.log import InputLog
from journal.report import Collector
from journal.repository.repository import Repository
from journal.store import open_store
from journal.verify import ORPHAN_DELIVERY, verify

from conftest import FakeClock, container_env, run_journal

DAY = 86400
KEEP_A_DAY = InputPolicy(keep_within=DAY)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def repo(tmp_path) -> Repository:
    return Repository.open(open_store(str(tmp_path / "store")), create=True)


@pytest.fixture
def log(repo, clock) -> InputLog:
    return InputLog(repo, clock=clock)


def keys(repo: Repository) -> set[str]:
    return set(repo.store.list("inputs/"))


def run(repo: Repository, clock: FakeClock, policy: InputPolicy = KEEP_A_DAY, **kwargs):
    """One gc over the inputs at the fake clock's time (grace 0: the sweep of the next run
    deletes what this run marks)."""
    reporter = Collector()
    plan, result = gc(repo, Policy(), 0, inputs=policy, now_ns=clock(), reporter=reporter, **kwargs)
    assert reporter.warnings == []
    return plan, result


def test_delivered_inputs_older_than_the_duration_expire_in_two_phases_newest_kept(repo, log, clock):
    ids = []
    for i in range(4):
        ids.append(log.append("codex", "S", f"prompt {i}".encode(), client_id=f"c{i}").id)
        clock.advance(60)
    for ident in ids:
        log.mark_delivered(ident)
    sdir, _ = parse_id(ids[0])
    fresh = log.append("codex", "S", b"today").id
    clock.advance(2 * DAY)
    before = keys(repo)

    plan, result = run(repo, clock)      # mark
    assert plan.tombstone_kinds == {"input": 12} and result.deleted == 0 and keys(repo) == before
    clock.advance(1)
    _, result = run(repo, clock)         # sweep: claims and inputs; the markers wait for their inputs
    assert result.deleted == 8
    assert keys(repo) == {delivery_key(sdir, s) for s in (1, 2, 3, 4)} | {input_key(sdir, 5)}
    assert [i.seq for i in log.list(undelivered=True)] == [5], "no expired input ever reads as undelivered"
    clock.advance(1)
    _, result = run(repo, clock)         # the markers, and the tombstone resolved
    assert result.deleted == 4 and result.tombstones_removed == 1
    assert keys(repo) == {input_key(sdir, 5)} and list(repo.store.list("tombstones/")) == []
    assert [i.id for i in log.list()] == [fresh]
    assert log.append("codex", "S", b"next").seq == 6, "the newest input kept the sequence"
    assert log.append("codex", "S", b"a retry of an expired prompt", client_id="c0").seq == 7


def test_undelivered_and_recent_inputs_stay_unless_asked(repo, log, clock):
    old = [log.append("codex", "S", f"old {i}".encode()).id for i in range(3)]
    log.mark_delivered(old[0])
    clock.advance(2 * DAY)
    recent = log.append("codex", "S", b"recent").id
    log.mark_delivered(recent)
    log.append("codex", "S", b"newest")

    for _ in range(3):
        run(repo, clock)
        clock.advance(1)
    assert [i.id for i in log.list()][:3] == old[1:] + [recent], "undelivered and recent inputs stay"
    for _ in range(2):
        run(repo, clock, InputPolicy(keep_within=DAY, include_undelivered=True))
        clock.advance(1)
    assert [i.id for i in log.list()] == [recent, parse_id(recent)[0] + "/5"]


def test_a_sweep_whose_run_keeps_inputs_deletes_nothing_and_resolves_its_tombstones(repo, log, clock):
    for i in range(3):
        log.mark_delivered(log.append("codex", "S", f"{i}".encode()).id)
    clock.advance(2 * DAY)
    run(repo, clock)
    before = keys(repo)
    clock.advance(1)
    plan, result = gc(repo, Policy(keep_last=5), 0, now_ns=clock())   # no input policy now
    assert result.deleted == 0 and keys(repo) == before and result.tombstones_removed == 1
    assert plan.delete_count == 0


def test_a_dry_run_counts_and_changes_nothing(repo, log, clock):
    for i in range(3):
        log.mark_delivered(log.append("codex", "S", f"{i}".encode(), client_id=f"c{i}").id)
    clock.advance(2 * DAY)
    before = keys(repo)
    plan, result = run(repo, clock, dry_run=True)
    assert result is None and plan.tombstone_kinds == {"input": 6} and keys(repo) == before
    assert list(repo.store.list("tombstones/")) == []


def test_a_marker_left_by_a_stopped_sweep_is_a_warning_and_the_next_gc_removes_it(repo, log, clock):
    ident = log.append("codex", "S", b"gone", client_id="c").id
    log.mark_delivered(ident)
    log.append("codex", "S", b"newest")
    sdir, seq = parse_id(ident)
    repo.store.delete(claim_key(sdir, "c"))
    repo.store.delete(input_key(sdir, seq))   # as a sweep stopped between the input and its marker
    found = verify(Repository.open(repo.store, audit=True))
    assert [(f.kind, f.key, f.severity) for f in found.findings] == [(ORPHAN_DELIVERY, delivery_key(sdir, seq),
                                                                       "warning")]
    assert found.ok
    run(repo, clock)
    clock.advance(1)
    run(repo, clock)
    assert keys(repo) == {input_key(sdir, 2)}


def test_the_command_line_takes_the_input_policy_alone_and_checks_it(tmp_path):
    env = container_env(tmp_path, tmp_path / "store", tmp_path)
    for i in range(2):
        run_journal("input", "append", "--harness", "codex", "--session", "S", "--file", "/dev/null", env=env)
    first = json.loads(run_journal("input", "list", "--json", env=env).stdout)[0]["id"]
    run_journal("input", "mark-delivered", first, env=env)
    refused = run_journal("gc", "--include-undelivered", env=env)
    assert refused.returncode == 2 and "add --keep-inputs-within DURATION" in refused.stderr
    empty = run_journal("gc", env=env)
    assert empty.returncode == 2 and "--keep-inputs-within DURATION" in empty.stderr
    dry = run_journal("gc", "--keep-inputs-within", "0s", "--dry-run", env=env)
    assert dry.returncode == 0 and "tombstone 2 objects" in dry.stdout and "1 input," not in dry.stdout
    assert "2 inputs" in dry.stdout and "expired input" in dry.stdout


def test_a_long_lived_appender_never_reuses_a_sequence_gc_expired(repo, log, clock):
    """The socket server's log knows the newest sequence it stored (3); other processes
    append 4-10; gc expires 1-9 (it keeps a session's newest). The server's next append
    tried 4, free again, and stored the new prompt below 10, where the expired input's
    delivery marker still stood: listed as delivered, never replayed. A known sequence
    whose input is gone is no start: the append goes after the newest listed."""
    server = log
    for i in range(1, 4):
        server.append("codex", "S", f"p{i}".encode())
    for i in range(4, 11):
        InputLog(repo, clock=clock).append("codex", "S", f"p{i}".encode())
    for info in list(server.list(harness="codex", session="S")):
        server.mark_delivered(info.id)
    clock.advance(2 * DAY)
    run(repo, clock)   # marks
    run(repo, clock)   # sweeps: inputs 1-9 gone, 10 kept
    assert [i.seq for i in server.list(harness="codex", session="S")] == [10]

    new = server.append("codex", "S", b"the new prompt")

    assert new.seq == 11
    listed = {i.seq: i for i in server.list(harness="codex", session="S")}
    assert not listed[11].delivered


def test_a_marker_left_by_a_lost_input_never_expires_the_new_prompt_at_its_sequence(repo, log, clock):
    """Input 2 is lost, its marker stays, a new prompt takes sequence 2 (and another 3):
    the marker names the lost record, so gc counts the new prompt undelivered and keeps it."""
    for text in (b"first", b"second"):
        log.mark_delivered(log.append("codex", "S", text).id)
    sdir = session_dir("codex", "S")
    repo.store.delete(input_key(sdir, 2))
    new = log.append("codex", "S", b"the new prompt")
    log.append("codex", "S", b"newest")
    assert new.seq == 2
    clock.advance(2 * DAY)

    reporter = Collector()
    for _ in range(2):   # mark, then sweep
        gc(repo, Policy(), 0, inputs=KEEP_A_DAY, now_ns=clock(), reporter=reporter)
        clock.advance(1)
    assert [i.seq for i in log.list(undelivered=True)] == [2, 3], "the new prompt is still there, undelivered"
    assert input_key(sdir, 1) not in keys(repo), "the delivered one expired"
    assert any(f"{delivery_key(sdir, 2)} names input record" in w for w in reporter.warnings)
