"""Garbage collection, retention, live deletions and compaction (issue 6).

Covers ``journal gc`` (mark/sweep with tombstones, grace, lease, dry run),
retention (the newest valid manifest is always kept, an empty policy is refused),
gc racing checkpoints in separate processes, live deletions and the mass-deletion
guard, and bounded restores (leveled compaction of JSONL segments, metadata reads
that do not grow with the number of checkpoints).

Self-contained: every helper lives here. Heavy stores are built on ``/dev/shm``
when it is writable (fsync there is cheap), else in ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import msgspec
import pytest

from journal.errors import ConfigError
from journal.gc.errors import GcBusy, GcPlanStale
import journal.gc.run as gc_module
from journal.gc.delete import FALLBACK_RELIST
from journal.gc.run import TOMBSTONE_PREFIX, Tombstone, execute_gc, gc, plan_gc
from journal.format.index import iter_pages
from journal.gc.lease import LEASE_KEY, Lease, LeaseRecord
from journal.format.model import Manifest, TreeRoot
from journal.repository.repository import RENEWING_KEY, pack_key
from journal.repository.repository import MANIFEST_PREFIX, PACK_PREFIX, Repository, manifest_key
from journal.restore.run import restore
from journal.config import parse_duration
from journal.gc.retention import Policy, choose_kept
from journal.supervise.status import read_status
from journal.format.tombstone import TombstoneItem, tombstoned_packs
from journal.store import open_store
from journal.store.base import Store
from journal.verify import MISSING_OBJECT, verify

from conftest import CodexLive, FakeClock, Live, clean_env, container_env, one_line_error, run_journal

TREE = "codex"            # the codex preset: $AM_LOCAL/codex-home
HOUR_NS = 3600 * 10**9
POLICY_FLAGS = ("--keep-last", "--keep-within", "--keep-hourly", "--keep-daily", "--keep-inputs-within")


# --------------------------------------------------------------------------- helpers


def needed_packs(box: CodexLive, seq: int) -> set[str]:
    """Pack keys manifest ``seq`` needs (its pages and its entries' blobs), walked here."""
    repo = box.repo()
    keys = set()

    def read_page(ref):
        payload, base = repo.read_page(ref)
        if base is not None:  # a page delta needs its base page's pack
            keys.add(pack_key(base.pack))
        return payload
    for tree in repo.load_manifest(seq)[0].trees.values():
        for ref, page in iter_pages(tree.root, read_page):
            keys.add(pack_key(ref.pack))
            for e in page.entries:
                keys.update(pack_key(r.pack) for r in e.refs)
    return keys


def store_listing(box: CodexLive) -> dict[str, tuple]:
    """Every file under the store dir (hidden ones too): size, mtime and content hash."""
    out = {}
    for path in sorted(box.store_path.rglob("*")):
        if path.is_file():
            st = path.stat()
            out[str(path.relative_to(box.store_path))] = (st.st_size, st.st_mtime_ns,
                                                          hashlib.sha256(path.read_bytes()).hexdigest())
        else:
            out[str(path.relative_to(box.store_path)) + "/"] = ()
    return out


@pytest.fixture
def box(root) -> CodexLive:
    return CodexLive(root)


class CountingStore(Store):
    """Delegates to ``inner`` and records every get, head, list (with sizes or not) and
    delete (one key, or many: ``bulk`` holds the keys of each ``delete_many`` call)."""

    def __init__(self, inner: Store):
        self.inner = inner
        self.location = inner.location
        self.gets: list[tuple[str, int, int | None]] = []
        self.heads: list[str] = []
        self.lists: list[str] = []
        self.deletes: list[str] = []
        self.bulk: list[list[str]] = []

    def put_if_absent(self, key, data):
        return self.inner.put_if_absent(key, data)

    def get(self, key, start=0, end=None):
        self.gets.append((key, start, end))
        return self.inner.get(key, start, end)

    def head(self, key):
        self.heads.append(key)
        return self.inner.head(key)

    def list(self, prefix=""):
        self.lists.append(prefix)
        return self.inner.list(prefix)

    def list_sizes(self, prefix=""):
        self.lists.append(prefix)
        return self.inner.list_sizes(prefix)

    def delete(self, key):
        self.deletes.append(key)
        return self.inner.delete(key)

    def delete_many(self, keys, guard=None):
        self.bulk.append(list(keys))
        return self.inner.delete_many(keys, guard)

    def sweep_temp(self):
        return self.inner.sweep_temp()

    def is_empty(self):
        return self.inner.is_empty()


class HookStore(CountingStore):
    """A CountingStore that runs ``hook(op, key)`` before each call (once per trigger;
    before a ``delete_many``, ``hook("delete", key)`` for each of its keys)."""

    def __init__(self, inner: Store, hook):
        super().__init__(inner)
        self.hook = hook

    def put_if_absent(self, key, data):
        self.hook("put", key)
        return super().put_if_absent(key, data)

    def list(self, prefix=""):
        self.hook("list", prefix)
        return super().list(prefix)

    def list_sizes(self, prefix=""):
        self.hook("list", prefix)
        return super().list_sizes(prefix)

    def delete(self, key):
        self.hook("delete", key)
        return super().delete(key)

    def delete_many(self, keys, guard=None):
        for key in keys:
            self.hook("delete", key)
        return super().delete_many(keys, guard)


def line(i: int, width: int = 80) -> bytes:
    body = json.dumps({"i": i, "type": "message", "text": f"turn {i} " + "x" * (i * 7 % width)})
    return body.encode() + b"\n"


def garbage_packs(box: CodexLive, n: int, tag: str = "orphan") -> list[str]:
    """``n`` packs no manifest names (a crashed checkpoint's), of 1..n bytes; their keys, ascending."""
    keys = []
    for i in range(n):
        key = pack_key(hashlib.sha256(f"{tag} {i}".encode()).hexdigest())
        box.store.put_if_absent(key, b"x" * (i + 1))
        keys.append(key)
    return sorted(keys)


def three_versions(box: CodexLive) -> None:
    """Checkpoints 1..3; a.txt changes every time, b.txt never (its pack stays needed)."""
    box.write("b.txt", "stable content\n" * 20)
    for i in range(1, 4):
        box.write("a.txt", f"version {i}\n" * (50 + i))
        assert box.checkpoint().seq == i


# --------------------------------------------------------------------------- retention


def test_empty_policy_is_refused_naming_the_flags(box):
    box.write("a.txt", "a\n")
    box.checkpoint()
    before = store_listing(box)

    for extra in ((), ("--grace", "0s"), ("--dry-run",), ("--json",)):
        proc = box.run("gc", *extra)
        assert proc.returncode == 2, (extra, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert all(flag in proc.stderr for flag in POLICY_FLAGS), proc.stderr

    assert store_listing(box) == before


def test_gc_checks_its_policy_itself_and_names_both_retentions_but_no_option(box):
    """An empty policy is refused by its own check, whatever the store holds (it was
    the side effect of choosing what to keep from no manifests, which spoke of
    checkpoints only), in words: the options are the command line's to add."""
    box.write("a.txt", "a\n")
    box.checkpoint()

    for run in (lambda: plan_gc(box.repo(), Policy(), 0.0), lambda: gc(box.repo(), Policy(), 0.0),
                lambda: gc(box.repo(), Policy(), 0.0, dry_run=True)):
        with pytest.raises(ConfigError) as err:
            run()
        message = str(err.value)
        assert "checkpoints to keep" in message and "inputs" in message, message
        assert "--" not in message, message
    assert box.seqs() == [1]


def test_a_bad_duration_is_a_usage_error(box):
    box.write("a.txt", "a\n")
    box.checkpoint()

    for args in (("--keep-within", "soon"), ("--keep-last", "1", "--grace", "5x")):
        proc = box.run("gc", *args)
        assert proc.returncode == 2, proc.stderr
        assert "not a duration" in proc.stderr
    assert parse_duration("1d12h", "--grace") == 36 * 3600
    assert parse_duration("0s", "--grace") == 0


@pytest.mark.parametrize("args", [("--grace", "0"), ("--grace", "90"), ("--keep-within", "3600")],
                         ids=lambda a: " ".join(a))
def test_a_bare_number_is_seconds_wherever_a_duration_is_taken(box, args):
    box.write("a.txt", "a\n")
    box.checkpoint()

    proc = box.run("gc", "--keep-last", "1", *args, "--dry-run", expect=None)

    assert proc.returncode == 0, proc.stderr
    assert parse_duration("0", "--grace") == 0 and parse_duration("2.5", "--interval") == 2.5


def _fake_manifest(seq: int, created_ns: int, trees=(TREE,)) -> Manifest:
    return Manifest(seq=seq, parent=seq - 1 or None, parent_id=None, created="-", created_ns=created_ns,
                    host="h", pid=1, writer="w", trees={t: TreeRoot(root=None, files=0, bytes=0) for t in trees})


def test_retention_always_keeps_the_newest_manifest_of_every_tree():
    now = 1_800_000_000 * 10**9
    ms = [_fake_manifest(1, now - 5 * HOUR_NS, ("codex", "claude")),
          _fake_manifest(2, now - 4 * HOUR_NS, ("codex", "claude")),
          _fake_manifest(3, now - 3 * HOUR_NS, ("codex",)),
          _fake_manifest(4, now - 2 * HOUR_NS, ("codex",))]

    for policy in (Policy(keep_last=0), Policy(keep_last=1), Policy(keep_within=1.0), Policy(keep_hourly=0)):
        kept = choose_kept(ms, policy, now)
        assert sorted(kept) == [2, 4], policy  # 4: newest of codex; 2: newest of claude
        assert "claude" in " ".join(kept[2])


def test_retention_counts_only_the_main_line_and_keeps_a_fork_as_long_as_its_parent():
    """Forks (design §11, "Lineage") are off the main line: --keep-last counts without
    them, the newest of a tree is never a fork, and a fork lives while its parent is kept
    or while it is newer than the oldest checkpoint kept."""
    from journal.format.model import FORK_MANIFEST_VERSION, Fork

    now = 1_800_000_000 * 10**9

    def fork(seq: int, parent: int, age_hours: int) -> Manifest:
        m = _fake_manifest(seq, now - age_hours * HOUR_NS)
        return msgspec.structs.replace(m, version=FORK_MANIFEST_VERSION, parent=parent,
                                       fork=Fork(onto=seq - 1, why="stale or diverged disk"))

    ms = [_fake_manifest(1, now - 9 * HOUR_NS), _fake_manifest(2, now - 8 * HOUR_NS), fork(3, 1, 7),
          _fake_manifest(4, now - 6 * HOUR_NS), _fake_manifest(5, now - 5 * HOUR_NS), fork(6, 4, 4),
          fork(7, 1, 3)]

    kept = choose_kept(ms, Policy(keep_last=2), now)

    assert sorted(kept) == [4, 5, 6, 7], kept   # 2 main-line checkpoints, not 5 and the fork 7
    assert kept[5][0].startswith("newest manifest of tree")
    assert kept[6] == ["fork of checkpoint 4, which is kept"]
    assert kept[7] == ["fork made after the oldest checkpoint kept"]   # its parent 1 is not kept
    assert 3 not in kept                                                # parent gone, and older


def fork_on_one(make_live) -> Live:
    """Checkpoints 1, 2 and 4 of container a, and fork 3 of container b, built on 1
    (b's work, kept when a moved on); returns a."""
    a, b = make_live("a"), make_live("b", fixtures=False)
    a.checkpoint()
    b.restore()
    a.write("codex-home/memories/a.md", "a\n")
    a.checkpoint()
    b.write("codex-home/memories/b.md", "b\n")
    assert b.restore().fork.seq == 3                       # b's work is kept as fork 3, built on 1
    a.write("codex-home/memories/a.md", "a again\n")
    a.checkpoint()                                          # 4, past the fork
    return a


def test_gc_dry_run_lists_every_fork_with_why_it_is_kept_or_expires(make_live):
    a = fork_on_one(make_live)

    short = a.run("gc", "--keep-last", "1", "--dry-run")
    doc = json.loads(a.run("gc", "--keep-last", "1", "--dry-run", "--json").stdout)
    longer = a.run("gc", "--keep-last", "3", "--dry-run")

    assert "fork 3 (built on checkpoint 1): would expire: its parent is not kept" in short.stdout, short.stdout
    assert doc["plan"]["forks"] == {"3": 1} and sorted(map(int, doc["plan"]["kept"])) == [4]
    assert "fork 3 (built on checkpoint 1): kept: fork of checkpoint 1, which is kept" in longer.stdout
    assert a.repo().manifest_seqs() == [1, 2, 3, 4], "a dry run deletes nothing"


def test_retention_policies_choose_by_count_age_hour_and_day():
    now = 1_800_000_000 * 10**9  # 2027-01-15T08:00:00Z, on the hour
    # one a day for the 5 days before today (seqs 1..5), then two an hour over the
    # last 6 hours (seqs 6..17): sequence numbers grow with time, as they do
    ms = [_fake_manifest(5 - d, now - (d + 1) * 24 * HOUR_NS) for d in range(5)]
    ms += [_fake_manifest(6 + i, now - (12 - i) * HOUR_NS // 2) for i in range(12)]
    hours = {m.seq: m.created_ns // HOUR_NS for m in ms}
    days = {m.seq: m.created_ns // (24 * HOUR_NS) for m in ms}

    assert sorted(choose_kept(ms, Policy(keep_last=3), now)) == [15, 16, 17]
    assert sorted(choose_kept(ms, Policy(keep_within=2 * 3600), now)) == [14, 15, 16, 17]
    hourly = choose_kept(ms, Policy(keep_hourly=3), now)
    assert sorted(hourly) == [13, 15, 17]  # the newest of each of the last three hours
    assert len({hours[s] for s in hourly}) == 3
    daily = choose_kept(ms, Policy(keep_daily=4), now)
    assert sorted(daily) == [3, 4, 5, 17]  # today's newest, then the newest of each earlier day
    assert len({days[s] for s in daily}) == 4
    assert all("--keep-daily 4" in " ".join(daily[s]) for s in (3, 4, 5))
    combined = choose_kept(ms, Policy(keep_last=2, keep_daily=2), now)
    assert sorted(combined) == [5, 16, 17]


def test_keep_last_zero_still_keeps_the_newest_checkpoint(box):
    three_versions(box)

    dry = box.run("gc", "--keep-last", "0", "--grace", "0s", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)["plan"]
    assert sorted(map(int, plan["kept"])) == [3] and plan["expire"] == [1, 2]

    for _ in range(2):  # mark, then sweep
        proc = box.run("gc", "--keep-last", "0", "--grace", "0s")
        assert proc.returncode == 0, proc.stderr
    assert box.seqs() == [3]
    out = box.root / "out"
    assert restore(box.cfg, box.store, to=str(out)).complete
    assert (out / TREE / "a.txt").read_text() == "version 3\n" * 53


def test_keep_within_elapsed_keeps_only_the_newest(box):
    three_versions(box)
    later = time.time_ns() + 10 * HOUR_NS

    plan = plan_gc(box.repo(), Policy(keep_within=60.0), 0.0, now_ns=later)

    assert list(plan.kept) == [3] and plan.expire == [1, 2]


def test_an_unreadable_newest_manifest_keeps_the_newest_valid_one(box):
    three_versions(box)
    (box.store_path / manifest_key(3)).write_bytes(b"torn")

    for _ in range(2):
        plan, _ = box.gc(keep_last=1)
        assert sorted(plan.kept) == [2] and plan.unreadable == [3]

    assert box.seqs() == [2, 3]  # the unreadable one is left alone, the newest valid kept
    assert needed_packs(box, 2) <= box.keys(PACK_PREFIX)
    result = restore(box.cfg, box.store, to=str(box.root / "out"))
    assert result.complete and result.trees[0].seq == 2


# --------------------------------------------------------------------------- mark, grace, sweep


def test_first_gc_only_marks_then_a_sweep_after_grace_deletes(box):
    three_versions(box)
    all_packs = box.keys(PACK_PREFIX)
    needed = needed_packs(box, 3)
    garbage = all_packs - needed
    assert garbage and needed & all_packs
    before = store_listing(box)

    proc = box.run("gc", "--keep-last", "1")  # default grace: 24h
    assert proc.returncode == 0, proc.stderr

    after = store_listing(box)
    added = set(after) - set(before)
    assert {k for k in added if not k.endswith("/")} == {k for k in box.keys(TOMBSTONE_PREFIX)}
    assert {k: v for k, v in after.items() if k in before} == before  # nothing deleted or rewritten
    (key, stone), = box.tombstones().items()
    assert {i.key for i in stone.items} == garbage | {manifest_key(1), manifest_key(2)}
    assert {i.kind for i in stone.items if i.key.startswith(MANIFEST_PREFIX)} == {"manifest"}
    assert {i.kind for i in stone.items if i.key in garbage} == {"pack"}
    assert abs(stone.created_ns - time.time_ns()) < 600 * 10**9 and stone.mark_seq == 3
    assert all(i.bytes == box.store.head(i.key) for i in stone.items)
    stone_bytes = box.store.get(key)

    again = box.run("gc", "--keep-last", "1", "--json")  # still within grace: nothing more
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["plan"]["delete"] == [] and doc["plan"]["tombstone"] == [] and doc["result"]["deleted"] == 0
    assert box.seqs() == [1, 2, 3] and box.keys(PACK_PREFIX) == all_packs
    assert box.store.get(key) == stone_bytes  # tombstones are immutable

    sweep = box.run("gc", "--keep-last", "1", "--grace", "0s", "--json")
    assert sweep.returncode == 0, sweep.stderr
    doc = json.loads(sweep.stdout)
    freed = sum(before[k][0] for k in garbage | {manifest_key(1), manifest_key(2)})
    assert doc["result"]["deleted"] == len(garbage) + 2 and doc["result"]["bytes_freed"] == freed
    assert box.seqs() == [3]
    assert box.keys(PACK_PREFIX) == needed
    assert box.keys(TOMBSTONE_PREFIX) == set()  # resolved
    assert box.run("verify", "--full").returncode == 0
    assert restore(box.cfg, box.store, to=str(box.root / "out")).complete


def test_grace_is_measured_from_the_tombstone(box):
    three_versions(box)
    box.gc(grace=24 * 3600, keep_last=1)
    (stone,) = box.tombstones().values()
    repo = box.repo()

    early = plan_gc(repo, Policy(keep_last=1), 3600.0, now_ns=stone.created_ns + HOUR_NS // 2)
    late = plan_gc(repo, Policy(keep_last=1), 3600.0, now_ns=stone.created_ns + HOUR_NS + 1)

    assert early.delete == [] and early.bytes_freed == 0
    assert {i.key for i in late.delete} == {i.key for i in stone.items} and late.delete_count == len(stone.items)
    assert late.bytes_freed == sum(i.bytes for i in stone.items)
    # manifests (references) are deleted before packs (objects)
    kinds = [i.kind for i in late.delete]
    assert kinds == sorted(kinds, key=lambda k: k != "manifest")


def test_default_grace_then_zero_grace_deletes_on_the_second_run(box):
    three_versions(box)

    first = box.run("gc", "--keep-last", "1", "--json")
    assert first.returncode == 0 and json.loads(first.stdout)["result"]["deleted"] == 0
    second = box.run("gc", "--keep-last", "1", "--grace", "0s", "--json")
    assert second.returncode == 0 and json.loads(second.stdout)["result"]["deleted"] > 0
    assert box.seqs() == [3]


def test_a_gc_right_after_expiry_with_zero_grace_deletes_nothing_yet(box):
    three_versions(box)

    plan, result = box.gc(grace=0.0, keep_last=1)

    assert result.deleted == 0 and plan.tombstone  # only marked: deletion needs an existing tombstone
    assert box.seqs() == [1, 2, 3]


def test_grace_zero_with_yes_marks_and_deletes_in_one_run(box):
    three_versions(box)
    needed = needed_packs(box, 3)
    garbage = box.keys(PACK_PREFIX) - needed
    without = json.loads(box.run("gc", "--keep-last", "1", "--grace", "0", "--dry-run", "--json").stdout)
    dry = json.loads(box.run("gc", "--keep-last", "1", "--grace", "0", "--yes", "--dry-run", "--json").stdout)

    proc = box.run("gc", "--keep-last", "1", "--grace", "0", "--yes", "--json")

    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["result"]
    assert without["plan"]["delete_count"] == 0     # without --yes a run never sweeps what it marks
    assert result["deleted"] == dry["plan"]["delete_count"] == len(garbage) + 2
    assert box.seqs() == [3] and box.keys(PACK_PREFIX) == needed
    assert box.keys(TOMBSTONE_PREFIX) == set() and result["tombstones_removed"] == result["tombstones_written"] == 1
    assert box.run("verify", "--full").returncode == 0
    assert restore(box.cfg, box.store, to=str(box.root / "out")).complete


def test_yes_needs_a_zero_grace_and_is_refused_without_one(box):
    three_versions(box)
    before = store_listing(box)

    for grace in (("--grace", "1h"), ()):
        proc = box.run("gc", "--keep-last", "1", *grace, "--yes")
        assert proc.returncode == 2
        assert "--yes needs --grace 0" in one_line_error(proc)

    assert store_listing(box) == before


def test_an_orphan_marked_by_a_run_with_yes_waits_for_a_newer_checkpoint(box):
    three_versions(box)
    orphans = set(garbage_packs(box, 3))

    proc = box.run("gc", "--keep-last", "1", "--grace", "0", "--yes")

    assert proc.returncode == 0, proc.stderr
    assert "a later `journal gc` deletes its orphan packs" in proc.stdout
    assert orphans <= box.keys(PACK_PREFIX) and box.seqs() == [3]
    (stone,) = box.tombstones().values()
    assert {(i.key, i.kind) for i in stone.items} == {(k, "orphan") for k in orphans}
    box.write("a.txt", "version 4\n")
    assert box.checkpoint().seq == 4                  # the store moved past the mark
    assert box.run("gc", "--keep-last", "1", "--grace", "0", "--yes").returncode == 0
    assert not orphans & box.keys(PACK_PREFIX) and box.keys(TOMBSTONE_PREFIX) == set()


def test_dry_run_prints_the_plan_and_changes_nothing(box):
    three_versions(box)
    box.run("gc", "--keep-last", "1")       # a tombstone exists now
    box.write("a.txt", "version 4\n" * 60)  # and manifest 3 expires with keep-last 1
    assert box.checkpoint().seq == 4
    before = store_listing(box)

    text = box.run("gc", "--keep-last", "1", "--grace", "0s", "--dry-run")
    js = box.run("gc", "--keep-last", "1", "--grace", "0s", "--dry-run", "--json")

    assert (text.returncode, js.returncode) == (0, 0), text.stderr + js.stderr
    assert store_listing(box) == before
    doc = json.loads(js.stdout)
    plan = doc["plan"]
    assert doc["dry_run"] is True and doc["result"] is None
    assert plan["expire"] == [1, 2, 3] and sorted(map(int, plan["kept"])) == [4]
    assert {i[0] for i in plan["tombstone"]} >= {manifest_key(3)}
    deleted = {i[0] for i in plan["delete"]}
    assert {manifest_key(1), manifest_key(2)} <= deleted
    assert plan["bytes_freed"] == sum(before[k][0] for k in deleted) > 0
    assert plan["kept_samples"]
    for key, why in plan["kept_samples"].items():
        assert key in before and "manifest" in why
    out = text.stdout
    assert "expire 3 checkpoints: 1, 2, 3" in out
    assert plan["tombstone_count"] == len(plan["tombstone"]) and plan["delete_count"] == len(plan["delete"])
    assert f"tombstone {plan['tombstone_count']} objects ({plan['tombstone_bytes']:,} bytes)" in out
    assert f"delete {plan['delete_count']} objects" in out and f"{plan['bytes_freed']:,} bytes would be freed" in out
    assert f"  e.g. {plan['delete'][0][0]} (manifest, " in out
    assert "  kept packs/" in out

    real = box.run("gc", "--keep-last", "1", "--grace", "0s", "--json")
    result = json.loads(real.stdout)["result"]
    assert result["deleted"] == plan["delete_count"] and result["bytes_freed"] == plan["bytes_freed"]
    assert not deleted & set(store_listing(box))


def test_revived_content_in_a_tombstoned_pack_is_not_deleted(box):
    """A file reverted to old content: its chunk's pack (tombstoned) is needed again."""
    box.write("b.txt", "stable\n" * 30)
    box.write("a.txt", "zero\n")
    assert box.checkpoint().seq == 1
    box.write("a.txt", "X content\n" * 40)
    assert box.checkpoint().seq == 2
    (x_ref,) = box.entries(TREE, 2)["a.txt"].refs
    x_key = pack_key(x_ref.pack)
    box.write("a.txt", "Y content\n" * 40)
    assert box.checkpoint().seq == 3

    box.gc(grace=3600.0, keep_last=1)
    assert x_key in {i.key for s in box.tombstones().values() for i in s.items}
    box.write("a.txt", "X content\n" * 40)  # reverted: same chunk, same single-blob pack
    assert box.checkpoint().seq == 4
    assert box.entries(TREE, 4)["a.txt"].refs[0].pack == x_ref.pack, "the revert did not reuse the pack"

    for _ in range(2):  # sweeps the first tombstone, then the one naming manifest 3
        plan, result = box.gc(grace=0.0, keep_last=1)
        assert x_key not in {i.key for i in plan.delete}
        assert box.store.head(x_key) is not None
    assert box.seqs() == [4]
    assert verify(box.repo(), full=True).ok
    out = box.root / "out"
    assert restore(box.cfg, box.store, to=str(out)).complete
    assert (out / TREE / "a.txt").read_text() == "X content\n" * 40


def _revert_after_a_mark(box, first: int = 0) -> str:
    """Checkpoints 1-3 (a.txt: zero, X, Y), ``first`` garbage packs whose keys sort before
    every other pack, a gc that tombstones them and X's pack, then a.txt back to X on disk
    (not yet checkpointed); returns X's pack key."""
    box.write("b.txt", "stable\n" * 30)
    box.write("a.txt", "zero\n")
    box.checkpoint()
    box.write("a.txt", "X content\n" * 40)
    box.checkpoint()
    x_key = pack_key(box.entries(TREE, 2)["a.txt"].refs[0].pack)
    box.write("a.txt", "Y content\n" * 40)
    box.checkpoint()
    for i in range(first):
        box.store.put_if_absent(pack_key(f"{i:064x}"), b"first")
    box.gc(grace=3600.0, keep_last=1)
    box.write("a.txt", "X content\n" * 40)
    return x_key


def test_content_uploaded_again_after_its_pack_was_swept_is_never_taken_for_that_garbage(box):
    """A tombstone that stays (an orphan of it waits) must not go on naming a pack its
    sweep deleted: when the same content comes back, the fresh upload (same name) would
    be swept between its upload and its commit. The tombstone goes before what it names,
    and only the orphan is named again."""
    x_key = _revert_after_a_mark(box, first=1)  # the orphan waits: the store is still at the mark
    _, swept = box.gc(keep_last=1)
    assert box.store.head(x_key) is None and swept.tombstones_rewritten == 1
    assert x_key.rsplit("/", 1)[1] not in tombstoned_packs(box.store)
    assert tombstoned_packs(box.store) == {f"{0:064x}"}  # the waiting orphan, named again
    fired = []

    def hook(op, key):
        if op == "put" and key.startswith(MANIFEST_PREFIX) and not fired:
            fired.append(key)  # X's pack is uploaded again, its manifest not yet put
            assert box.store.head(x_key) is not None
            box.gc(keep_last=1)

    result = box.checkpoint(store=HookStore(open_store(str(box.store_path)), hook))
    assert fired and result.seq == 4
    assert box.entries(TREE, 4)["a.txt"].refs[0].pack == x_key.rsplit("/", 1)[1]
    assert box.store.head(x_key) is not None, "gc swept the fresh upload of content it had deleted before"
    assert verify(box.repo(), full=True).ok


def test_a_checkpoint_committed_during_the_sweep_keeps_what_it_needs(box):
    """The sweep must honour manifests present at sweep time, not only at planning time.

    Same revert as above, but the reverting checkpoint commits after gc planned and
    before it deletes (the hook runs it at gc's first write).
    """
    x_key = _revert_after_a_mark(box)
    fired = []

    def hook(op, key):
        if ((op == "put" and key.startswith(TOMBSTONE_PREFIX)) or (op == "delete" and key != RENEWING_KEY)) \
                and not fired:
            fired.append(key)
            assert box.checkpoint().seq == 4  # commits manifest 4, which needs x_key

    plan, _ = box.gc(grace=0.0, keep_last=1, store=HookStore(open_store(str(box.store_path)), hook))

    assert fired and x_key in {i.key for i in plan.delete}  # planned before manifest 4 existed
    assert box.entries(TREE, 4)["a.txt"].refs[0].pack == x_key.rsplit("/", 1)[1]
    assert box.store.head(x_key) is not None, "gc deleted a pack that manifest 4 (present at sweep time) needs"
    assert verify(box.repo(), full=True).ok


def test_a_checkpoint_committed_while_a_batch_is_sent_protects_the_later_batches(box, monkeypatch):
    """The sweep deletes packs a batch per request and lists the manifests again before
    each batch: a manifest committed while one batch is sent keeps what it needs in the
    batches after it."""
    monkeypatch.setattr(gc_module, "DELETE_BATCH", 2)
    x_key = _revert_after_a_mark(box, first=4)  # two batches of packs before X's
    first = [pack_key(f"{i:064x}") for i in range(4)]
    box.write("a.txt", "Z content\n" * 40)
    assert box.checkpoint().seq == 4  # the store moves past the mark: the first packs (orphans) may go
    box.write("a.txt", "X content\n" * 40)
    fired = []

    def hook(op, key):
        if op == "delete" and key == first[0] and not fired:
            fired.append(key)  # the first batch of packs is being sent
            assert box.checkpoint().seq == 5  # commits manifest 5, which needs x_key

    plan, result = box.gc(grace=0.0, keep_last=1, store=HookStore(open_store(str(box.store_path)), hook))

    assert fired and x_key in {i.key for i in plan.delete}  # planned before manifest 5 existed
    assert box.entries(TREE, 5)["a.txt"].refs[0].pack == x_key.rsplit("/", 1)[1]
    assert not set(first) & box.keys(PACK_PREFIX)  # the batches went: the first one, and the next one
    assert box.store.head(x_key) is not None, "gc deleted a pack that manifest 5 (committed between batches) needs"
    # Its tombstone went before the batches; the kept pack is named by none now (a later
    # mark names it again if it becomes garbage).
    assert result.protected == 1 and result.tombstones_removed == 1
    assert x_key.rsplit("/", 1)[1] not in tombstoned_packs(box.store)
    assert verify(box.repo(), full=True).ok


def test_an_orphan_pack_waits_until_the_store_moves_on(box):
    box.write("a.txt", "a\n")
    box.checkpoint()
    box.write("a.txt", "b\n")
    box.checkpoint()
    orphan = pack_key(hashlib.sha256(b"crashed upload").hexdigest())
    box.store.put_if_absent(orphan, b"crashed upload")  # a pack whose checkpoint never committed (yet)

    plan, _ = box.gc(keep_last=5)
    assert [(i.key, i.kind) for i in plan.tombstone] == [(orphan, "orphan")]
    for _ in range(2):
        plan, result = box.gc(keep_last=5)
        assert result.deleted == 0 and box.store.head(orphan) is not None

    box.write("a.txt", "c\n")
    assert box.checkpoint().seq == 3  # the store moved past the mark
    plan, result = box.gc(keep_last=5)
    assert [i.key for i in plan.delete] == [orphan] and box.store.head(orphan) is None
    assert box.keys(TOMBSTONE_PREFIX) == set()


@pytest.mark.parametrize("kind", ["bogus", "pack-ish"])
def test_a_tombstone_item_of_an_unknown_kind_is_kept_not_swept(box, kind):
    """Only the three kinds gc writes are swept by their rules: a crafted item of another
    kind (here naming a pack whose checkpoint has not committed yet) escaped the orphan
    rule and was deleted at once."""
    box.write("a.txt", "a\n")
    box.checkpoint()
    orphan = pack_key(hashlib.sha256(b"crashed upload").hexdigest())
    box.store.put_if_absent(orphan, b"crashed upload")
    stone = Tombstone(created="then", created_ns=1, host="elsewhere", mark_seq=10**6,
                      items=[TombstoneItem(orphan, kind, 14)])
    box.store.put_if_absent(f"{TOMBSTONE_PREFIX}{1:020d}-crafted0", msgspec.json.encode(stone))

    plan, result = box.gc(keep_last=5)

    assert box.store.head(orphan) is not None and result.deleted == 0
    assert f"{TOMBSTONE_PREFIX}{1:020d}-crafted0" in box.keys(TOMBSTONE_PREFIX)  # unresolved: it stays


def test_a_checkpoint_committed_while_gc_lists_packs_keeps_what_it_needs(box):
    """As above, but the reverting checkpoint commits while gc lists packs (after gc
    listed the manifests): gc did not walk it when it started, so its sweep must."""
    x_key = _revert_after_a_mark(box)
    fired = []

    def hook(op, key):
        if op == "list" and key == PACK_PREFIX and not fired:
            fired.append(key)
            assert box.checkpoint().seq == 4  # needs x_key, which a ripe tombstone names

    plan, result = box.gc(grace=0.0, keep_last=1, store=HookStore(open_store(str(box.store_path)), hook))

    assert fired and 4 not in plan.known_seqs
    assert box.entries(TREE, 4)["a.txt"].refs[0].pack == x_key.rsplit("/", 1)[1]
    assert box.store.head(x_key) is not None, "gc deleted a pack that manifest 4 (committed while it ran) needs"
    assert result.protected >= 1
    assert verify(box.repo(), full=True).ok


def test_the_mark_writes_bounded_tombstones_each_with_its_own_mark_seq(box, monkeypatch):
    """Tombstones of at most TOMBSTONE_ITEMS items, written while the pack listing streams;
    each one's mark_seq is the newest manifest listed after its last pack was listed."""
    monkeypatch.setattr(gc_module, "TOMBSTONE_ITEMS", 3)
    box.write("a.txt", "a\n")
    assert box.checkpoint().seq == 1
    crashed = set(garbage_packs(box, 8, "crashed upload"))
    fired = []

    def hook(op, key):
        if op == "put" and key.startswith(TOMBSTONE_PREFIX) and not fired:
            fired.append(key)  # the first tombstone is being written: a checkpoint commits now
            box.write("a.txt", "b\n")
            assert box.checkpoint().seq == 2

    plan, result = box.gc(grace=3600.0, keep_last=5, store=HookStore(open_store(str(box.store_path)), hook))

    stones = [stone for _, stone in sorted(box.tombstones().items())]
    assert fired and len(stones) == result.tombstones_written >= 3
    assert all(1 <= len(s.items) <= 3 for s in stones)
    keys = [i.key for s in stones for i in s.items]
    assert keys == sorted(keys) and len(keys) == len(set(keys)) == result.tombstoned == plan.tombstone_count
    assert crashed <= set(keys) and {i.kind for s in stones for i in s.items} == {"orphan"}
    assert stones[0].mark_seq == 1 and all(s.mark_seq == 2 for s in stones[1:]), [s.mark_seq for s in stones]
    assert plan.mark_seq == 2

    # newest is 2: the first tombstone's orphans go, the later ones' wait for the store to move on
    first, later = {i.key for i in stones[0].items}, crashed - {i.key for i in stones[0].items}
    plan, result = box.gc(keep_last=5)
    assert first and later
    assert all(box.store.head(k) is None for k in first) and all(box.store.head(k) is not None for k in later)
    assert plan.waiting == len(later) and result.deleted == len(first)
    box.write("a.txt", "c\n")
    assert box.checkpoint().seq == 3
    box.gc(keep_last=5)
    assert all(box.store.head(k) is None for k in crashed)
    assert box.keys(TOMBSTONE_PREFIX) == set()  # checkpoint 2's packs were revived: resolved too
    assert verify(box.repo(), full=True).ok


def test_a_plan_counts_everything_and_names_a_bounded_sample(box, monkeypatch):
    monkeypatch.setattr(gc_module, "SAMPLE_ITEMS", 2)
    three_versions(box)
    garbage_packs(box, 5)

    dry = plan_gc(box.repo(), Policy(keep_last=1), 0.0)
    mark, marked = box.gc(keep_last=1)
    (stone,) = box.tombstones().values()

    for plan in (dry, mark):
        assert len(plan.tombstone) == 2 and plan.tombstone_count == len(stone.items) == marked.tombstoned > 2
        assert plan.tombstone_bytes == sum(i.bytes for i in stone.items)
        assert plan.tombstone_kinds == {"manifest": 2, "pack": len(stone.items) - 7, "orphan": 5}
        assert plan.delete == [] and plan.delete_count == 0
    box.write("a.txt", "version 4\n")
    box.checkpoint()  # the store moves past the mark: the orphans may go too
    sweep, swept = box.gc(keep_last=1)
    assert len(sweep.delete) == 2 and [i.kind for i in sweep.delete] == ["manifest", "manifest"]
    assert sweep.delete_count == swept.deleted == len(stone.items)
    assert sweep.bytes_freed == swept.bytes_freed == sum(i.bytes for i in stone.items)
    assert sweep.finished_count == swept.tombstones_removed == 1


def test_the_sweep_relists_manifests_before_every_batch_of_packs(box, monkeypatch):
    monkeypatch.setattr(gc_module, "DELETE_BATCH", 2)
    three_versions(box)
    garbage_packs(box, 7, "unnamed")
    box.gc(keep_last=1)
    box.write("a.txt", "version 4\n")
    box.checkpoint()
    events = []

    def hook(op, key):
        if (op == "list" and key == MANIFEST_PREFIX) or (op == "delete" and key.startswith(PACK_PREFIX)):
            events.append(op)

    _, result = box.gc(keep_last=1, store=HookStore(open_store(str(box.store_path)), hook))

    assert result.deleted >= 9
    sweep = events[events.index("delete") - 1:]
    assert sweep[0] == "list", events
    runs = "".join("L" if e == "list" else "d" for e in sweep).split("L")[1:]
    assert runs and all(len(r) <= 2 for r in runs) and sum(map(len, runs)) == result.deleted - 2, sweep


def test_an_in_flight_checkpoint_pack_survives_a_gc_that_raced_the_previous_commit(box):
    """A pack uploaded by a checkpoint that has not committed yet is never swept.

    gc #1 lists manifests (newest 2), then checkpoint 3 commits and checkpoint 4
    uploads its packs and stalls before its manifest put, then gc #1 lists packs and
    marks checkpoint 4's packs as orphans. gc #2 (grace 0) sees newest 3. Checkpoint 4
    then commits: every pack it names must still exist.
    """
    for i in range(2):
        box.append("t.jsonl", line(i))
        box.checkpoint()
    reached, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    class StallManifest(CountingStore):
        def put_if_absent(self, key, data):
            if key.startswith(MANIFEST_PREFIX):
                reached.set()
                assert release.wait(30)
            return super().put_if_absent(key, data)

    def slow_checkpoint():
        try:
            box.append("t.jsonl", line(3))
            box.checkpoint(store=StallManifest(open_store(str(box.store_path))))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
            reached.set()

    worker = threading.Thread(target=slow_checkpoint)

    def hook(op, key):
        if op == "list" and key == PACK_PREFIX and not worker.is_alive() and not reached.is_set():
            box.append("t.jsonl", line(2))
            assert box.checkpoint().seq == 3
            worker.start()
            assert reached.wait(30)

    try:
        box.gc(keep_last=2, store=HookStore(open_store(str(box.store_path)), hook))
        assert worker.is_alive()  # checkpoint 4 has uploaded its packs and not committed
        plan2, _ = box.gc(keep_last=2)
    finally:
        release.set()
        worker.join(30)
    assert not errors, errors
    assert box.seqs()[-1] == 4
    missing = [pack_key(p) for p in box.manifest(4).packs if box.store.head(pack_key(p)) is None]
    assert not missing, (f"gc #2 deleted {missing}, which checkpoint 4 uploaded before it committed "
                         f"(gc #2 deleted {[i.key for i in plan2.delete]})")
    assert verify(box.repo(), full=True).ok


def test_gc_reads_only_index_pages_never_file_contents(box):
    payload = os.urandom(3 << 20)  # three 1 MiB chunks of incompressible data
    box.write("big.bin", payload)
    box.write("a.txt", "one\n")
    box.checkpoint()
    box.write("big.bin", payload[::-1])
    box.checkpoint()
    box.write("a.txt", "two\n")
    box.checkpoint()
    counting = CountingStore(open_store(str(box.store_path)))

    for _ in range(2):
        box.gc(keep_last=1, store=counting)

    pack_reads = [(k, s, e) for k, s, e in counting.gets if k.startswith(PACK_PREFIX)]
    assert pack_reads and all(e is not None for _, _, e in pack_reads), "gc read a whole pack"
    read = sum(e - s for _, s, e in pack_reads)
    assert read < 64 << 10, f"gc read {read} bytes of packs (file contents?)"
    assert box.seqs() == [3]


# --------------------------------------------------------------------------- store requests


def test_the_sweep_deletes_a_batch_of_keys_per_request(box):
    """The sweep sends its deletions ``DELETE_BATCH`` keys per ``delete_many`` (one
    DeleteObjects request on S3), never one request per object: the expired manifests,
    then the tombstone (before what it names), then its packs; the lease is checked once
    per batch."""
    orphans = _swept_after_a_mark(box, 2 * gc_module.DELETE_BATCH + 500)
    counting = CountingStore(open_store(str(box.store_path)))

    _, result = gc(box.repo(counting), Policy(keep_last=1), 0.0)

    assert [{k.split("/")[0] for k in keys} for keys in counting.bulk] == \
        [{"manifests"}, {"tombstones"}] + [{"packs"}] * 3
    packs = result.deleted - 2
    assert [len(keys) for keys in counting.bulk] == [2, 1, 1000, 1000, packs - 2000] and packs > 2500
    # A stale renewal marker cleared on taking the lease, and the lease released;
    # nothing else one key at a time.
    assert counting.deletes == [RENEWING_KEY, LEASE_KEY]
    lease_reads = [k for k, _, _ in counting.gets if k == LEASE_KEY]
    assert result.tombstones_written == 1  # (manifest 3 expires now)
    assert len(lease_reads) == 1 + 1 + len(counting.bulk) + 1  # taking it, a check per write, releasing it
    assert not set(orphans) & box.keys(PACK_PREFIX) and result.tombstones_removed == 1
    assert verify(box.repo(), full=True).ok


class KeyByKeyStore(CountingStore):
    """A store whose bulk deletes fail, as a cloud store's may: each is redone key by
    key, ``guard`` asked first (``CloudStore.delete_many``). ``relists`` holds, for
    each listing of the manifests made meanwhile, the kind of key being deleted."""

    def __init__(self, inner: Store):
        super().__init__(inner)
        self.deleting: str | None = None
        self.relists: list[str] = []

    def _listing(self, prefix: str) -> None:
        if self.deleting is not None and prefix.startswith(MANIFEST_PREFIX):
            self.relists.append(self.deleting)

    def list(self, prefix=""):
        self._listing(prefix)
        return super().list(prefix)

    def list_sizes(self, prefix=""):
        self._listing(prefix)
        return super().list_sizes(prefix)

    def delete_many(self, keys, guard=None):
        self.bulk.append(list(keys))
        kept = []
        for key in keys:
            self.deleting = key.split("/")[0]
            if guard is not None and not guard(key):
                kept.append(key)
                continue
            self.inner.delete(key)
        self.deleting = None
        return kept


def test_a_bulk_delete_redone_key_by_key_lists_the_manifests_again_for_packs_only(box):
    """When a bulk delete is redone key by key, the manifests are listed again every
    ``FALLBACK_RELIST`` keys while packs are deleted (a new manifest may need one),
    and never while the expired manifests themselves are deleted."""
    _swept_after_a_mark(box, 40)
    store = KeyByKeyStore(open_store(str(box.store_path)))

    _, result = gc(box.repo(store), Policy(keep_last=1), 0.0)

    manifests = [keys for keys in store.bulk if keys[0].startswith(MANIFEST_PREFIX)]
    packs = [keys for keys in store.bulk if keys[0].startswith(PACK_PREFIX)]
    assert [len(keys) for keys in manifests] == [2] and sum(map(len, packs)) > 40
    assert store.relists.count("manifests") == 0, store.relists
    assert store.relists.count("packs") == sum(-(-len(keys) // FALLBACK_RELIST) for keys in packs)
    assert box.seqs() == [3, 4] and result.protected == 0   # (3 is marked now: a later gc deletes it)


def test_gc_makes_no_head_request_however_many_packs(box):
    """Sizes come with the listings, and the sweep learns what is gone from the mark's
    pack listing: a dry run, a mark and a sweep make no HEAD request at all (they made
    one per expired manifest, per unreached pack and per item swept)."""
    three_versions(box)
    orphans = garbage_packs(box, 150)
    counting = CountingStore(open_store(str(box.store_path)))

    def run(grace: float, **kwargs):
        counting.heads.clear()
        plan, result = gc(box.repo(counting), Policy(keep_last=1), grace, **kwargs)
        assert counting.heads == [], f"{len(counting.heads)} HEAD request(s), first {counting.heads[:3]}"
        return plan, result

    dry, _ = run(0.0, dry_run=True)
    mark, marked = run(3600.0)
    (stone,) = box.tombstones().values()
    assert dry.tombstone_count == mark.tombstone_count == marked.tombstoned == len(stone.items) > 150 + 2
    assert all(i.bytes == box.store.head(i.key) for i in stone.items)  # the listed sizes, right
    assert set(orphans) <= {i.key for i in stone.items}
    box.write("a.txt", "version 4\n")
    box.checkpoint()  # the store moves past the mark: the orphans may go
    sweep, swept = run(0.0)
    assert sweep.delete_count == swept.deleted == len(stone.items)
    assert sweep.bytes_freed == swept.bytes_freed == sum(i.bytes for i in stone.items)
    assert not set(orphans) & box.keys(PACK_PREFIX)
    assert verify(box.repo(), full=True).ok


def test_the_sweep_skips_what_the_mark_listing_lacked_even_if_it_comes_back(box):
    """An item gone when the mark listed packs is skipped (not counted, not deleted),
    also when it is uploaded again before the sweep reaches it: its tombstone resolves,
    and the next mark names it again."""
    box.write("a.txt", "a\n")
    box.checkpoint()
    orphans = garbage_packs(box, 4)
    box.gc(grace=3600.0, keep_last=5)
    box.write("a.txt", "b\n")
    box.checkpoint()  # the store moves past the mark
    gone, back = orphans[:2]
    box.store.delete(gone)
    box.store.delete(back)
    fired = []

    def hook(op, key):
        if op == "delete" and key != RENEWING_KEY and not fired:  # the mark has listed packs; nothing deleted yet
            fired.append(key)
            box.store.put_if_absent(back, b"uploaded again")

    plan, result = box.gc(keep_last=5, store=HookStore(open_store(str(box.store_path)), hook))

    assert fired and {i.key for i in plan.delete} == set(orphans[2:]) and result.deleted == 2
    assert box.store.head(back) is not None and box.store.head(gone) is None
    assert box.keys(TOMBSTONE_PREFIX) == set()
    plan, _ = box.gc(grace=3600.0, keep_last=5)
    assert [(i.key, i.kind) for i in plan.tombstone] == [(back, "orphan")]


# --------------------------------------------------------------------------- the lease


def _plant_lease(box: CodexLive, expires_in: float) -> bytes:
    now = time.time_ns()
    record = LeaseRecord(holder="host elsewhere pid 4242", token="f" * 32, acquired_ns=now - 10**9,
                         expires_ns=now + int(expires_in * 1e9))
    raw = msgspec.json.encode(record)
    box.store.put_if_absent(LEASE_KEY, raw)
    return raw


def test_a_live_lease_makes_a_second_gc_fail_clearly(box):
    three_versions(box)
    box.gc(keep_last=1)
    raw = _plant_lease(box, 3600)
    before = store_listing(box)

    proc = box.run("gc", "--keep-last", "1", "--grace", "0s")

    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "another gc" in proc.stderr and "host elsewhere pid 4242" in proc.stderr, proc.stderr
    assert store_listing(box) == before  # nothing marked, nothing deleted
    assert box.store.get(LEASE_KEY) == raw
    with pytest.raises(GcBusy):
        box.gc(keep_last=1)
    assert box.store.get(LEASE_KEY) == raw and box.seqs() == [1, 2, 3]


def test_an_expired_lease_is_taken_over(box):
    three_versions(box)
    box.gc(keep_last=1)
    _plant_lease(box, -60)

    proc = box.run("gc", "--keep-last", "1", "--grace", "0s", "--json")

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["deleted"] > 0
    assert box.seqs() == [3]
    assert box.store.head(LEASE_KEY) is None  # released after the run


def test_only_one_lease_holder_and_a_lost_lease_stops_the_sweep(box):
    three_versions(box)
    box.gc(keep_last=1)
    store = open_store(str(box.store_path))

    with Lease(store):
        with pytest.raises(GcBusy):
            box.gc(keep_last=1)
        with pytest.raises(GcBusy):
            Lease(store).__enter__()
    assert store.head(LEASE_KEY) is None

    stale = Lease(store, seconds=-1).__enter__()      # expired at once: anyone may take it over
    plan = plan_gc(box.repo(), Policy(keep_last=1), 0.0)
    assert plan.delete
    with Lease(store):                                # a second gc takes it over
        with pytest.raises(GcBusy):
            execute_gc(box.repo(), plan, stale)       # the first one must not delete anything now
        assert box.seqs() == [1, 2, 3]
        assert all(store.head(i.key) is not None for i in plan.delete)
        stale.__exit__(None, None, None)              # and must not release the new holder's lease
        assert store.head(LEASE_KEY) is not None
    assert store.head(LEASE_KEY) is None


def test_a_plan_runs_as_planned_and_is_refused_once_the_store_moved_on(box):
    three_versions(box)
    box.gc(keep_last=1)   # the mark: the next plan deletes what it named
    stale_plan = plan_gc(box.repo(), Policy(keep_last=1), 0.0)
    box.write("a.txt", "version 4\n")
    box.checkpoint()      # another manifest: the plan's decisions no longer hold
    stones = box.keys(TOMBSTONE_PREFIX)

    with Lease(box.store) as lease:
        with pytest.raises(GcPlanStale, match="make a new plan"):
            execute_gc(box.repo(), stale_plan, lease)
    assert box.seqs() == [1, 2, 3, 4] and box.keys(TOMBSTONE_PREFIX) == stones
    assert all(box.store.head(i.key) is not None for i in stale_plan.delete)

    plan = plan_gc(box.repo(), Policy(keep_last=1), 0.0)
    with Lease(box.store) as lease:
        result = execute_gc(box.repo(), plan, lease)
    assert result.deleted == plan.delete_count > 0 and result.bytes_freed == plan.bytes_freed
    assert all(box.store.head(i.key) is None for i in plan.delete) and box.seqs() == [3, 4]  # 3: marked only now


def _swept_after_a_mark(box: CodexLive, orphans: int) -> list[str]:
    """Checkpoints 1-3, ``orphans`` garbage packs, a mark (keep-last 1), checkpoint 4:
    the next gc with zero grace sweeps them all; returns their keys."""
    three_versions(box)
    keys = garbage_packs(box, orphans)
    box.gc(grace=3600.0, keep_last=1)
    box.write("a.txt", "version 4\n")
    box.checkpoint()
    return keys


def test_a_gc_longer_than_its_lease_renews_it_and_finishes(box, monkeypatch):
    monkeypatch.setattr(gc_module, "DELETE_BATCH", 4)  # each batch takes 0.12 s: the lease is checked between
    orphans = _swept_after_a_mark(box, 40)
    clock = FakeClock()
    started = clock()

    def slow(op, key):
        if op == "delete" and key.startswith(PACK_PREFIX):
            clock.advance(0.03)

    plan, result = gc(box.repo(HookStore(open_store(str(box.store_path)), slow)), Policy(keep_last=1), 0.0,
                      lease_seconds=1.0, lease_clock=clock)

    assert clock() - started > 10**9, "the gc should outlast one lease"
    assert result.lease_renewals >= 2
    assert result.deleted == plan.delete_count > 40 and not set(orphans) & box.keys(PACK_PREFIX)
    assert box.store.head(LEASE_KEY) is None  # released
    assert verify(box.repo(), full=True).ok


def test_a_gc_that_loses_its_lease_stops_and_the_next_run_finishes_the_work(box, monkeypatch):
    monkeypatch.setattr(gc_module, "DELETE_BATCH", 4)
    orphans = _swept_after_a_mark(box, 30)
    deleted: list[str] = []
    planted: list[bytes] = []

    def steal(op, key):
        if op == "delete" and key.startswith(PACK_PREFIX):
            deleted.append(key)
            if len(deleted) == 10:  # this gc's lease is gone and another gc holds the store's
                box.store.delete(LEASE_KEY)
                planted.append(_plant_lease(box, 3600))

    with pytest.raises(GcBusy, match="run gc again to continue"):
        box.gc(keep_last=1, store=HookStore(open_store(str(box.store_path)), steal))

    assert len(deleted) == 12  # the batch under way when it lost the lease (9-12) went; no batch after it
    assert box.store.get(LEASE_KEY) == planted[0]  # and left the other gc's lease alone
    assert set(orphans) & box.keys(PACK_PREFIX) and verify(box.repo(), full=True).ok
    box.store.delete(LEASE_KEY)  # the other gc ends

    # Its tombstone went before its first batch, so what it had not deleted is named by
    # no tombstone: the next run marks it again, with a mark of its own (the orphans
    # then wait for the store to move past it), and never deletes it unmarked.
    left = set(orphans) & box.keys(PACK_PREFIX)
    _, again = box.gc(keep_last=1)
    assert again.tombstoned >= len(left) and set(orphans) & box.keys(PACK_PREFIX) == left
    box.write("a.txt", "version 5\n")
    assert box.checkpoint().seq == 5
    box.gc(keep_last=1)
    assert not set(orphans) & box.keys(PACK_PREFIX) and box.seqs() == [4, 5]  # (4 expires now: a later run)
    assert verify(box.repo(), full=True).ok


# --------------------------------------------------------------------------- concurrency

_WRITER = textwrap.dedent("""
    import json, os, sys, time
    path, flags = sys.argv[1], sys.argv[2]
    i = 0
    with open(path, "ab", buffering=0) as fh:
        open(os.path.join(flags, "writer.started"), "w").close()
        while not os.path.exists(os.path.join(flags, "stop")):
            rec = json.dumps({"i": i, "type": "message", "text": "w" * (i * 13 % 120)}).encode() + b"\\n"
            if i % 5 == 0:  # a torn tail for a moment
                fh.write(rec[:7]); time.sleep(0.0005); fh.write(rec[7:])
            else:
                fh.write(rec)
            if i % 17 == 0:
                with open(os.path.join(os.path.dirname(os.path.dirname(path)), "notes.txt"), "w") as notes:
                    notes.write(f"note {i}\\n" * (i % 9 + 1))
            i += 1
            time.sleep(0.001)
    print(i)
""")

# One loop process: "ckpt" takes checkpoints until ``minimum`` of them committed,
# "gc" runs ``minimum`` gc rounds (--keep-last 2 --grace 0s, and with ``sweep`` "yes",
# --yes: each round sweeps what it marked); each goes on until the other has reached its
# minimum too, so the two overlap the whole time.
_LOOP = textwrap.dedent("""
    import json, os, sys, time
    from journal.config import load_config
    from journal.store import open_store
    from journal.report import Collector
    role, minimum, flags, budget = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    sweep_marked = sys.argv[5] == "yes"
    mine, peer = os.path.join(flags, role + ".min"), os.path.join(flags, ("gc" if role == "ckpt" else "ckpt") + ".min")
    deadline = time.monotonic() + budget
    while not os.path.exists(os.path.join(flags, "writer.started")) and time.monotonic() < deadline:
        time.sleep(0.01)
    cfg = load_config()
    store = open_store(cfg.store)
    stats = {"rounds": 0, "commits": 0, "deleted": 0, "tombstoned": 0, "errors": []}
    if role == "ckpt":
        from journal.checkpoint.run import checkpoint
    else:
        from journal.gc.run import gc
        from journal.repository.repository import Repository
        from journal.gc.retention import Policy
    while time.monotonic() < deadline:
        try:
            if role == "ckpt":
                stats["commits"] += checkpoint(cfg, store, Collector(), wait=True).seq is not None
            else:
                plan, result = gc(Repository.open(store), Policy(keep_last=2), 0.0, sweep_marked=sweep_marked)
                stats["deleted"] += result.deleted
                stats["tombstoned"] += plan.tombstone_count
        except Exception as err:
            stats["errors"].append(f"round {stats['rounds']}: {type(err).__name__}: {err}")
        stats["rounds"] += 1
        progress = stats["commits"] if role == "ckpt" else stats["rounds"]
        if progress >= minimum:
            open(mine, "a").close()
            if os.path.exists(peer):
                break
    print(json.dumps(stats))
""")


@pytest.mark.long(short=40, full=110)
def test_checkpoints_and_gc_in_separate_processes_never_lose_a_needed_object(box, long_size):
    _race_checkpoints_and_gc(box, long_size, sweep_marked=False)


@pytest.mark.long(short=12, full=60)
def test_checkpoints_racing_a_gc_that_sweeps_what_it_marks_never_lose_a_needed_object(box, long_size):
    """``gc --grace 0 --yes`` deletes in each run what that run marked, while another
    process checkpoints: every committed checkpoint stays whole."""
    _race_checkpoints_and_gc(box, long_size, sweep_marked=True)


def _race_checkpoints_and_gc(box: CodexLive, rounds: int, sweep_marked: bool) -> None:
    jsonl = box.codex / "sessions" / "t.jsonl"
    jsonl.parent.mkdir(parents=True)
    jsonl.write_bytes(line(0))
    (box.codex / "notes.txt").write_text("note\n")
    assert box.run("checkpoint").returncode == 0
    flags = box.root / "flags"
    flags.mkdir()
    env = clean_env(box.env)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(jsonl), str(flags)], env=env,
                              stdout=subprocess.PIPE, text=True)
    loops = [subprocess.Popen([sys.executable, "-c", _LOOP, role, str(rounds), str(flags), "80",
                               "yes" if sweep_marked else "no"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for role in ("ckpt", "gc")]
    try:
        outs = [p.communicate(timeout=120) for p in loops]
    finally:
        (flags / "stop").touch()
        writer.communicate(timeout=30)
        for p in loops:
            if p.poll() is None:
                p.kill()
    stats = {}
    for role, p, (out, err) in zip(("ckpt", "gc"), loops, outs):
        assert p.returncode == 0, err
        stats[role] = json.loads(out)
    for role in stats:
        errors = stats[role]["errors"]
        counts = {r: {k: v for k, v in st.items() if k != "errors"} for r, st in stats.items()}
        assert not errors, f"{role} loop: {len(errors)} failed round(s), first: {errors[:3]}; {counts}"
    assert stats["ckpt"]["commits"] >= rounds and stats["gc"]["rounds"] >= rounds, stats
    assert stats["gc"]["deleted"] > 0, stats                   # gc really swept while checkpoints ran

    assert box.run("checkpoint").returncode == 0              # everything the writer wrote
    full = box.run("verify", "--full", "--json")
    doc = json.loads(full.stdout)
    assert full.returncode == 0 and doc["ok"], [f for f in doc["findings"]][:5]
    assert not [f for f in doc["findings"] if f["kind"] == MISSING_OBJECT]
    out = box.root / "out"
    proc = box.run("restore", "--to", str(out))
    assert proc.returncode == 0 and "restore complete" in proc.stdout, proc.stdout + proc.stderr
    assert (out / TREE / "sessions" / "t.jsonl").read_bytes() == jsonl.read_bytes()
    assert (out / TREE / "notes.txt").read_bytes() == (box.codex / "notes.txt").read_bytes()
    for _ in range(2):  # and a final gc leaves a complete store
        assert box.run("gc", "--keep-last", "2", "--grace", "0s").returncode == 0
    assert len(box.seqs()) == 2 and box.run("verify", "--full").returncode == 0


# --------------------------------------------------------------------------- live deletions


def _four_files(box: CodexLive) -> None:
    for name in ("f1.txt", "f2.txt", "f3.txt", "f4.txt"):
        box.write(name, f"{name} body\n" * 10)


def test_a_deleted_file_drops_out_but_old_checkpoints_keep_it_until_expired(box):
    _four_files(box)
    assert box.checkpoint().seq == 1
    box.write("gone.txt", "soon deleted, unique bytes\n" * 30)
    assert box.checkpoint().seq == 2
    gone_pack = pack_key(box.entries(TREE, 2)["gone.txt"].refs[0].pack)
    (box.codex / "gone.txt").unlink()

    result = box.checkpoint()

    assert result.seq == 3 and result.trees[0].deleted == 1 and not box.warnings
    assert "gone.txt" not in box.entries(TREE, 3) and "gone.txt" in box.entries(TREE, 2)
    old, new = box.root / "old", box.root / "new"
    assert box.run("restore", "--at", "2", "--to", str(old)).returncode == 0
    assert box.run("restore", "--to", str(new)).returncode == 0
    assert (old / TREE / "gone.txt").read_text() == "soon deleted, unique bytes\n" * 30
    assert not (new / TREE / "gone.txt").exists() and (new / TREE / "f1.txt").exists()

    box.gc(keep_last=2)
    box.gc(keep_last=2)
    assert box.seqs() == [2, 3] and box.store.head(gone_pack) is not None  # still retained

    box.gc(keep_last=1)
    box.gc(keep_last=1)
    assert box.seqs() == [3] and box.store.head(gone_pack) is None  # expired: now collected
    gone = box.root / "gone"
    box.run("restore", "--at", "2", "--to", str(gone))
    assert not (gone / TREE / "gone.txt").exists()


def test_exactly_half_of_a_tree_may_vanish(box):
    _four_files(box)
    box.checkpoint()
    (box.codex / "f1.txt").unlink()
    (box.codex / "f2.txt").unlink()

    result = box.checkpoint()

    assert result.seq == 2 and result.trees[0].deleted == 2 and not box.warnings
    assert sorted(box.entries(TREE)) == ["f3.txt", "f4.txt"]


def test_mass_deletion_is_kept_with_a_loud_warning_until_allowed(box):
    _four_files(box)
    assert box.run("checkpoint").returncode == 0
    for name in ("f1.txt", "f2.txt", "f3.txt"):
        (box.codex / name).unlink()

    proc = box.run("checkpoint")

    assert proc.returncode == 0, proc.stderr
    warning = [ln for ln in proc.stderr.splitlines() if ln.startswith("warning:")]
    assert warning and "3 of 4 files vanished" in warning[0] and "--allow-deletions" in warning[0], proc.stderr
    assert sorted(box.entries(TREE)) == ["f1.txt", "f2.txt", "f3.txt", "f4.txt"]

    box.write("f4.txt", "changed\n")  # a later checkpoint still keeps them
    result = box.checkpoint()
    assert result.seq == 2 and result.trees[0].kept_deleted == 3
    assert any("vanished" in w for w in box.warnings)
    entries = box.entries(TREE, 2)
    assert sorted(entries) == ["f1.txt", "f2.txt", "f3.txt", "f4.txt"] and entries["f4.txt"].size == 8

    allowed = box.run("checkpoint", "--allow-deletions")
    assert allowed.returncode == 0 and "vanished" not in allowed.stderr, allowed.stderr
    assert sorted(box.entries(TREE)) == ["f4.txt"]


def test_a_whole_tree_vanishing_is_kept(box):
    _four_files(box)
    box.checkpoint()
    for name in ("f1.txt", "f2.txt", "f3.txt", "f4.txt"):
        (box.codex / name).unlink()

    proc = box.run("checkpoint")
    assert proc.returncode == 0 and "4 of 4 files vanished" in proc.stderr, proc.stderr
    assert box.seqs() == [1] and len(box.entries(TREE)) == 4

    # the tree's directory itself gone (an unmounted volume), the tree configured explicitly
    config = box.home / ".config" / "journal" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('presets = ["codex"]\n')
    shutil.rmtree(box.codex)
    proc = box.run("checkpoint")
    assert proc.returncode == 0, proc.stderr
    assert "warning:" in proc.stderr and "missing" in proc.stderr, proc.stderr
    assert box.seqs() == [1] and len(box.entries(TREE)) == 4

    box.codex.mkdir()
    assert box.run("checkpoint", "--allow-deletions").returncode == 0
    assert box.seqs() == [1, 2] and box.entries(TREE) == {}


def test_supervise_records_the_mass_deletion_warning_in_status(box):
    _four_files(box)
    assert box.run("checkpoint").returncode == 0
    for name in ("f1.txt", "f2.txt", "f3.txt"):
        (box.codex / name).unlink()

    proc = box.run("supervise", "--no-restore", "--interval", "60", "--", "true", timeout=60)

    assert proc.returncode == 0, proc.stderr
    assert "vanished" in proc.stderr
    status = read_status(box.cfg.state_dir)
    assert any("vanished" in w for w in status.warnings), status
    assert "vanished" in box.run("status").stdout


# --------------------------------------------------------------------------- compaction, bounded restore


def _data_refs(box: CodexLive) -> set[tuple[str, int]]:
    return {(pack_key(r.pack), r.offset) for e in box.entries(TREE).values() for r in e.refs}


def _page_refs(box: CodexLive, seq: int | None = None) -> set[tuple[str, int]]:
    repo = box.repo()
    seq = seq if seq is not None else repo.manifest_seqs()[-1]
    out = set()
    for tree in repo.load_manifest(seq)[0].trees.values():
        for ref, _ in iter_pages(tree.root, lambda r: repo.read_page(r)[0]):
            out.add((pack_key(ref.pack), ref.offset))
    return out


def _counted_restore(box: CodexLive, dest: Path) -> CountingStore:
    counting = CountingStore(open_store(str(box.store_path)))
    result = restore(box.cfg, counting, to=str(dest))
    assert result.complete, result
    return counting


@pytest.mark.long(short=200, full=1000)
def test_a_transcript_appended_at_every_checkpoint_restores_from_few_packs(box, long_size):
    """1,000 appends (200 in a plain run), one checkpoint each."""
    appends = long_size
    rel = "sessions/rollout.jsonl"
    for i in range(appends):
        box.append(rel, line(i, width=200))
        assert box.checkpoint().seq == i + 1
    live = (box.codex / rel).read_bytes()
    entry = box.entries(TREE)[rel]
    assert entry.size == len(live) and len(entry.refs) <= 32, len(entry.refs)

    counting = _counted_restore(box, box.root / "out")

    assert (box.root / "out" / TREE / rel).read_bytes() == live
    packs = {k for k, _, _ in counting.gets if k.startswith(PACK_PREFIX)}
    assert len(packs) <= 32, f"restore read {len(packs)} distinct packs"
    assert len(counting.gets) <= 64, f"restore made {len(counting.gets)} GETs"
    # each byte is rewritten O(log n) times, not O(n)
    assert box.store.put_bytes < 40 * len(live), (box.store.put_bytes, len(live))

    # gc drops the superseded small segments; the store stays small and complete
    for _ in range(2):
        box.gc(keep_last=1)
    assert box.seqs() == [appends]
    assert len(box.keys(PACK_PREFIX)) <= 33, len(box.keys(PACK_PREFIX))
    assert verify(box.repo(), full=True).ok
    assert _counted_restore(box, box.root / "out2")


def _build_history(box: CodexLive, start: int, stop: int) -> None:
    for i in range(start, stop):
        box.append("sessions/t.jsonl", line(i))
        if i % 10 == 0:
            box.write(f"notes/n{i % 40:02d}.txt", f"note {i}\n")
        assert box.checkpoint().seq == i + 1


def _metadata_reads(box: CodexLive, dest: Path) -> tuple[int, int, int, int]:
    counting = _counted_restore(box, dest)
    data, pages = _data_refs(box), _page_refs(box)
    manifest_gets = sum(1 for k, _, _ in counting.gets if k.startswith(MANIFEST_PREFIX))
    page_gets = sum(1 for k, s, _ in counting.gets if (k, s) in pages)
    other = sum(1 for k, s, _ in counting.gets if (k, s) not in data)  # everything that is not file data
    manifest_lists = sum(1 for p in counting.lists if MANIFEST_PREFIX.startswith(p) or p.startswith(MANIFEST_PREFIX))
    return manifest_gets, page_gets, other, manifest_lists


def test_restore_metadata_reads_do_not_grow_with_checkpoints(box):
    for i in range(40):
        box.write(f"notes/n{i:02d}.txt", f"note {i}\n")
    _build_history(box, 0, 30)
    small = _metadata_reads(box, box.root / "out30")
    _build_history(box, 30, 300)
    assert box.seqs()[-1] == 300

    big = _metadata_reads(box, box.root / "out300")

    manifest_gets, page_gets, metadata, lists = big
    assert manifest_gets + page_gets <= 64 and metadata <= 64, big
    assert manifest_gets <= small[0] and metadata <= small[2] + 2, (small, big)
    assert page_gets >= 1


def test_restore_lists_manifests_once(box):
    for i in range(5):
        box.append("sessions/t.jsonl", line(i))
        box.checkpoint()

    counting = _counted_restore(box, box.root / "out")
    at = CountingStore(open_store(str(box.store_path)))
    assert restore(box.cfg, at, at="3", to=str(box.root / "out3")).complete

    for store in (counting, at):
        lists = [p for p in store.lists if p.startswith(MANIFEST_PREFIX) or MANIFEST_PREFIX.startswith(p)]
        assert len(lists) == 1, f"restore listed manifests/ {len(lists)} times: {store.lists}"


#: ``journal`` killed (as by SIGKILL: ``os._exit``, no cleanup) right after its commit,
#: before it stamps and checks the packs it found already stored.
_KILLED_AFTER_COMMIT = textwrap.dedent("""
    import os, sys
    import journal.checkpoint.commit as commit
    commit.touch_kept = lambda paths: os._exit(137)
    from journal.cli.launch import main
    sys.exit(main())
""")


@pytest.mark.parametrize("killed", [False, True], ids=["whole", "killed-after-commit"])
def test_a_pack_found_stored_and_deleted_by_a_sweep_planned_before_the_commit_is_uploaded_again(tmp_path, killed):
    """A file goes back to earlier content, so its data pack is byte-identical to one a
    ripe tombstone names: the put answers KeyExists. The checkpoint (a real process)
    commits, and checks the pack, inside the window of a sweep batch already planned
    from a manifest listing taken just before: the batch deletes it afterwards. The
    next checkpoint must put it back, so the committed checkpoint is whole. Also when
    the checkpoint is killed right after its commit: its copy of the pack was kept
    before the manifest was put (it was moved only after, and lost)."""
    from journal.store.local import LocalStore

    local = tmp_path / "local"
    codex = local / "codex-home"
    codex.mkdir(parents=True)
    env = container_env(local, tmp_path / "store", tmp_path)
    settings = codex / "settings.json"

    def put(content: str, t: int) -> None:
        settings.write_text(content)
        os.utime(settings, ns=(t, t))

    (codex / "other.txt").write_text("stable\n" * 100)
    a, b = '{"mode": "A"}\n' * 300, '{"mode": "B"}\n' * 300
    for content, t in ((b, 1), (a, 2), (b, 3)):
        put(content, t * 10**18)
        assert run_journal("checkpoint", env=env).returncode == 0
    repo = Repository.open(open_store(env["JOURNAL_STORE"]))
    gc(repo, Policy(keep_last=1), 0.0)                       # tombstones manifests 1-2 and their packs
    real = LocalStore.delete_many
    inside: list[subprocess.CompletedProcess] = []

    def delete_many(self, keys, guard=None):
        if not inside and any(k.startswith("packs/") for k in keys):
            put(a, 4 * 10**18)                               # back to A: the same pack as manifest 2's
            cmd = [sys.executable, "-c", _KILLED_AFTER_COMMIT] if killed else None
            inside.append(run_journal("checkpoint", env=env, cmd=cmd))
        return real(self, keys, guard)
    try:
        LocalStore.delete_many = delete_many
        gc(Repository.open(open_store(env["JOURNAL_STORE"])), Policy(keep_last=1), 0.0)
    finally:
        LocalStore.delete_many = real
    assert inside and inside[0].returncode == (137 if killed else 0), inside
    assert Repository.open(open_store(env["JOURNAL_STORE"])).manifest_seqs()[-1] == 4  # committed
    first = verify(Repository.open(open_store(env["JOURNAL_STORE"])), full=True)
    assert first.findings                                    # the sweep did take the pack
    proc = run_journal("checkpoint", "--json", env=env)      # the next tick, nothing changed locally
    assert proc.returncode == 0, proc.stderr
    assert any("uploaded it again" in w for w in json.loads(proc.stdout)["warnings"]), proc.stdout
    assert not verify(Repository.open(open_store(env["JOURNAL_STORE"])), full=True).findings
    out = tmp_path / "out"
    assert run_journal("restore", "--to", str(out), env=env).returncode == 0
    assert (out / "codex" / "settings.json").read_text() == a


def test_a_kept_checkpoint_missing_its_index_pages_blocks_gc_with_a_way_out(box):
    """The newest checkpoint's index pack is gone (a lost object): gc cannot know what
    that checkpoint would keep, so it deletes and marks nothing, and says what to do."""
    three_versions(box)
    box.gc(keep_last=1)                                      # tombstones for 1-2
    root = box.manifest(3).trees["codex"].root
    (box.store_path / pack_key(root.pack)).unlink()
    before = store_listing(box)
    proc = box.run("gc", "--keep-last", "1", "--grace", "0s")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert line.count("\n") == 0 and "checkpoint 3 (tree codex)" in line and "journal verify --full" in line, line
    assert store_listing(box) == before


def test_gc_on_a_full_store_names_the_object_and_the_filesystem_to_free(tmp_path, small_tmpfs):
    disk = small_tmpfs("1m")
    live = Live(tmp_path / "a", disk / "store")
    claude = live.local / "agent-state" / "claude"
    claude.mkdir(parents=True)
    for i in range(2):
        (claude / "notes.md").write_text(f"version {i}\n")
        live.checkpoint()
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError):
            while True:
                os.write(fd, os.urandom(64 << 10))
    finally:
        os.close(fd)

    line = one_line_error(live.run("gc", "--keep-last", "1"))

    assert line.startswith(f"journal: error: put object: leases/gc: {disk}/store/leases/gc: ")
    assert line.endswith(f": No space left on device; free space on the filesystem mounted at {disk}")
    (disk / "filler").unlink()
    assert live.run("gc", "--keep-last", "1").returncode == 0
