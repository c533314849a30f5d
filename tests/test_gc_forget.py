"""``journal forget SEQ...`` (``gc/forget.py``): gc's mark with the named checkpoints
for its policy. It tombstones them as ``forgotten`` under the gc lease and deletes
nothing; a gc past its grace deletes them and what only they needed; no policy keeps a
forgotten checkpoint again. It refuses, in one line and changing nothing, a checkpoint
the store does not hold and the newest checkpoint of a tree.
"""

from __future__ import annotations

import json
import time

import pytest

from journal.gc.errors import GcBusy
from journal.gc.forget import forget
from journal.gc.lease import Lease
from journal.gc.retention import Policy
from journal.gc.run import TOMBSTONE_PREFIX, gc
from journal.repository.repository import PACK_PREFIX, manifest_key
from journal.verify import verify

from conftest import CodexLive, one_line_error
from test_gc import fork_on_one, needed_packs, store_listing

HOUR_NS = 3600 * 10**9


@pytest.fixture
def box(root) -> CodexLive:
    return CodexLive(root)


def versions(box: CodexLive, n: int) -> None:
    """Checkpoints 1..n; a.txt changes every time, b.txt never."""
    box.write("b.txt", "stable content\n" * 20)
    for i in range(1, n + 1):
        box.write("a.txt", f"version {i}\n" * (50 + i))
        assert box.checkpoint().seq == i


def test_forget_refuses_the_newest_checkpoint_in_one_line_and_changes_nothing(box):
    versions(box, 3)
    before = store_listing(box)

    for args in (("3",), ("2", "3"), ("3", "--dry-run")):
        proc = box.run("forget", *args)
        assert proc.returncode == 2, proc.stdout
        assert "checkpoint 3 is the newest checkpoint of tree(s) codex" in one_line_error(proc)

    assert store_listing(box) == before


def test_forget_refuses_a_checkpoint_the_store_does_not_hold_naming_it(box):
    versions(box, 2)
    (box.store_path / manifest_key(1)).write_bytes(b"torn")
    before = store_listing(box)

    missing = box.run("forget", "7", "2")
    torn = box.run("forget", "1")

    assert missing.returncode == 2 and "no checkpoint 7 in the store" in one_line_error(missing)
    assert torn.returncode == 2 and "checkpoint 1 does not read" in one_line_error(torn)
    assert store_listing(box) == before


def test_forget_dry_run_says_what_it_would_tombstone_and_changes_nothing(box):
    versions(box, 3)
    before = store_listing(box)

    text = box.run("forget", "2", "--dry-run")
    doc = json.loads(box.run("forget", "2", "--dry-run", "--json").stdout)

    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("would forget 1 checkpoint: 2\n")
    assert doc["dry_run"] and doc["forgotten"] == [2] and doc["tombstone_kinds"]["forgotten"] == 1
    assert store_listing(box) == before


def test_forget_then_a_gc_past_the_grace_deletes_the_checkpoint_and_what_only_it_needed(box):
    versions(box, 4)
    only_2 = needed_packs(box, 2) - needed_packs(box, 1) - needed_packs(box, 3) - needed_packs(box, 4)
    assert only_2

    proc = box.run("forget", "2")

    assert proc.returncode == 0, proc.stderr
    (stone,) = box.tombstones().values()
    assert {(i.key, i.kind) for i in stone.items} == {(manifest_key(2), "forgotten")} | {(k, "pack") for k in only_2}
    assert box.seqs() == [1, 2, 3, 4], "forget deletes nothing"

    within = box.run("gc", "--keep-last", "10", "--json")   # inside the default 24 h grace
    doc = json.loads(within.stdout)
    assert doc["plan"]["expire"] == [2] and doc["plan"]["tombstone_count"] == 0 and doc["result"]["deleted"] == 0
    assert box.seqs() == [1, 2, 3, 4]

    plan, result = gc(box.repo(), Policy(keep_last=10), 24 * 3600, now_ns=stone.created_ns + 25 * HOUR_NS)

    assert result.deleted == 1 + len(only_2)
    assert box.seqs() == [1, 3, 4] and not only_2 & box.keys(PACK_PREFIX)
    assert box.keys(TOMBSTONE_PREFIX) == set()
    assert verify(box.repo(), full=True).ok


def test_a_forgotten_checkpoint_is_never_kept_again_and_the_rules_count_without_it(box):
    versions(box, 5)
    assert box.run("forget", "4").returncode == 0

    doc = json.loads(box.run("gc", "--keep-last", "2", "--dry-run", "--explain", "--json").stdout)
    plan = doc["plan"]
    assert sorted(map(int, plan["kept"])) == [3, 5] and plan["expire"] == [1, 2, 4]
    (four,) = [v for v in plan["explained"] if v["seq"] == 4]
    assert four["decision"] == "expired" and four["why"][0].startswith("forgotten by `journal forget`")

    swept = json.loads(box.run("gc", "--keep-last", "10", "--grace", "0", "--json").stdout)

    assert swept["result"]["deleted"] >= 1 and box.seqs() == [1, 2, 3, 5]   # keep-last 10 did not save it
    again = box.run("forget", "4")
    assert again.returncode == 2 and "no checkpoint 4" in one_line_error(again)


def test_forget_names_a_checkpoint_forgotten_before_and_tombstones_nothing_new(box):
    versions(box, 3)
    box.run("forget", "1")

    doc = json.loads(box.run("forget", "1", "2", "--json").stdout)

    assert doc["already"] == [1] and doc["forgotten"] == [2]
    assert doc["tombstone_kinds"]["forgotten"] == 1
    assert len(box.tombstones()) == 2


def test_forgetting_a_forks_parent_leaves_the_fork_to_its_own_rule(make_live):
    a = fork_on_one(make_live)                              # 1, 2, 4 and fork 3, built on 1

    proc = a.run("forget", "1")

    assert proc.returncode == 0, proc.stderr
    assert "fork 3 (built on checkpoint 1) is no longer kept with its parent" in proc.stdout
    doc = json.loads(a.run("gc", "--keep-last", "3", "--dry-run", "--json").stdout)
    assert doc["plan"]["kept"]["3"] == ["fork made after the oldest checkpoint kept"]
    assert sorted(map(int, doc["plan"]["kept"])) == [2, 3, 4] and doc["plan"]["expire"] == [1]
    assert a.run("forget", "3").returncode == 0              # a fork is never the newest of a tree


def test_forget_holds_the_gc_lease(box):
    versions(box, 2)

    with Lease(box.store, clock=time.time_ns):
        with pytest.raises(GcBusy):
            forget(box.repo(), [1])

    assert box.keys(TOMBSTONE_PREFIX) == set()
    assert forget(box.repo(), [1]).forgotten == [1]
