"""The lineage guards (``journal/repository/lineage.py``): a machine continues only the history it knows.

Each container is a separate ``$AM_LOCAL`` with its own state, driven through the CLI;
every scenario runs on a local directory store and on S3 (moto's server). The store is
damaged behind journal's back the way it happens: its manifests deleted (a wrong
lifecycle rule, a partial copy), rolled back to an older copy, or swapped for another
machine's store (``JOURNAL_STORE`` pointed elsewhere).
"""

from __future__ import annotations

import json

from conftest import Live
from test_fencing import (ROLLOUT, Shared, assert_linear, container, fresh_restore, line,  # noqa: F401
                          shared, snapshot)  # shared: a fixture

from journal.repository.repository import MANIFEST_PREFIX, manifest_key
from journal.store import open_store

pytest_plugins = ["tests.s3server"]


def lose(store: Shared, keys: list[str]) -> None:
    """Delete ``keys`` from the store behind journal's back."""
    raw = open_store(store.url)
    for key in keys:
        raw.delete(key)


def manifests(store: Shared) -> list[str]:
    return [k for k in store.keys() if k.startswith(MANIFEST_PREFIX)]


def error_line(ran) -> str:
    assert ran.stderr.startswith("journal: error: ") and len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    return ran.stderr.strip()


def three_checkpoints(box: Live) -> None:
    box.run("checkpoint")
    for n in range(2):
        box.append(ROLLOUT, line(f"turn {n}"))
        box.run("checkpoint")
    assert box.seqs() == [1, 2, 3]


def state_bytes(box: Live) -> bytes:
    return (box.local / ".journal" / "state.msgpack").read_bytes()


# --- lost manifests -------------------------------------------------------------------------------


def test_checkpoint_refuses_a_store_whose_manifests_vanished_and_verify_fails_it(shared, tmp_path):
    """The manifests are gone, config and packs remain: the machine that committed
    checkpoint 3 must not start a new history there, and verify must not pass it."""
    box = container(tmp_path / "a", shared)
    three_checkpoints(box)
    lose(shared, manifests(shared))
    keys = sorted(shared.keys())
    box.append(ROLLOUT, line("after the loss"))

    refused = box.run("checkpoint", expect=1)
    verified = box.run("verify", "--full", "--json", expect=1)

    message = error_line(refused)
    assert manifest_key(3) in message and "no checkpoint at all" in message
    assert "journal takeover" in message and "backup" in message, "names the ways out"
    assert sorted(shared.keys()) == keys, "the refused checkpoint wrote to the store"
    findings = json.loads(verified.stdout)["findings"]
    assert sorted(f["key"] for f in findings) == [k for k in keys if k.startswith("packs/")]
    assert {(f["kind"], f["severity"], f["manifest"]) for f in findings} == {("unreferenced-pack", "error", None)}


def test_restore_and_checkpoint_refuse_a_store_rolled_back_past_what_this_machine_knows(shared, tmp_path):
    """Manifest 3 is gone (an older copy of the store): a restart's restore would roll
    the local state back to 2 and the next checkpoint would commit another 3."""
    box = container(tmp_path / "a", shared)
    three_checkpoints(box)
    lose(shared, [manifest_key(3)])
    box.append(ROLLOUT, line("after the rollback"))
    files, state = snapshot(box), state_bytes(box)

    refused = box.run("restore", expect=1)
    dry = box.run("restore", "--dry-run", expect=1)
    checkpoint = box.run("checkpoint", expect=1)

    for ran in (refused, dry, checkpoint):
        message = error_line(ran)
        assert "checkpoint 3" in message and "its newest is checkpoint 2" in message, message
    assert snapshot(box) == files
    assert state_bytes(box) == state, "a refused restore rewrote the local state"
    assert shared.seqs() == [1, 2]
    box.run("restore", "--to", str(tmp_path / "export"))  # what the store still holds, touching nothing here
    assert (tmp_path / "export" / "codex" / ROLLOUT.split("/", 1)[1]).read_text().endswith(line("turn 0"))


def test_takeover_after_the_manifests_vanished_starts_again_and_says_what_it_leaves(shared, tmp_path):
    box = container(tmp_path / "a", shared)
    three_checkpoints(box)
    lose(shared, manifests(shared))

    took = box.run("takeover")
    committed = json.loads(box.run("checkpoint", "--json").stdout)

    assert "holds no checkpoint" in took.stdout and "checkpoints 1-3" in took.stdout, took.stdout
    assert committed["seq"] == 1 and shared.seqs() == [1]
    assert snapshot(fresh_restore(tmp_path, shared, "c")) == snapshot(box)


def test_a_writer_whose_checkpoint_gc_expired_after_another_moved_on_is_refused(shared, tmp_path):
    """a knows checkpoint 1; b commits 2 and 3 and gc keeps only 3. a's fence (is 2
    free?) passes, so a would commit a second checkpoint 2 beside b's 3: a fork."""
    a = container(tmp_path / "a", shared)
    a.run("checkpoint")
    b = container(tmp_path / "b", shared, fixtures=False)
    b.run("restore")
    for n in range(2):
        b.append(ROLLOUT, line(f"b {n}"))
        b.run("checkpoint")
    for _ in range(2):  # mark, then sweep
        b.run("gc", "--keep-last", "1", "--grace", "0s")
    assert shared.seqs() == [3]

    a.append(ROLLOUT, line("a, stale"))
    refused = a.run("checkpoint", expect=1)

    assert "checkpoint 3 was committed" in error_line(refused) and "journal takeover" in refused.stderr
    assert shared.seqs() == [3]


# --- another machine's store ----------------------------------------------------------------------


def test_checkpoint_and_restore_refuse_another_machines_store_naming_both(shared, tmp_path):
    """This machine follows its own store A; JOURNAL_STORE now names b's store B. A
    checkpoint must not publish into B's history, and a restore must not write B's
    files over these (it used to, and then adopt B's history)."""
    other = container(tmp_path / "b", shared, fixtures=False)
    other.write("codex-home/memories/theirs.md", "b's file\n")
    other.run("checkpoint")
    box = container(tmp_path / "a", Shared("local", str(tmp_path / "mine")))
    three_checkpoints(box)
    mine, theirs = box.repo().store_id, shared.repo().store_id
    box.env.update(JOURNAL_STORE=shared.url, **shared.env)
    box.append(ROLLOUT, line("meant for store A"))
    files, state, keys = snapshot(box), state_bytes(box), shared.keys()

    for args in (("checkpoint",), ("restore",), ("restore", "--dry-run")):
        message = error_line(box.run(*args, expect=1))
        assert f"store {theirs}" in message and f"follows store {mine}" in message, message
        assert "--to DIR" in message and "journal takeover" in message and "state.msgpack on purpose" in message

    assert shared.keys() == keys and snapshot(box) == files and state_bytes(box) == state
    box.run("restore", "--to", str(tmp_path / "export"))
    assert (tmp_path / "export" / "codex" / "memories" / "theirs.md").read_text() == "b's file\n"


def test_takeover_of_another_machines_store_says_what_it_adopts_and_leaves(shared, tmp_path):
    other = container(tmp_path / "b", shared, fixtures=False)
    other.write("codex-home/memories/theirs.md", "b's file\n")
    other.run("checkpoint")
    mine_path = tmp_path / "mine"
    box = container(tmp_path / "a", Shared("local", str(mine_path)))
    three_checkpoints(box)
    mine, theirs = box.repo().store_id, shared.repo().store_id
    box.env.update(JOURNAL_STORE=shared.url, **shared.env)
    kept = sorted(str(p) for p in mine_path.rglob("*"))

    took = box.run("takeover")
    as_json = json.loads(box.run("takeover", "--json").stdout)
    committed = json.loads(box.run("checkpoint", "--json").stdout)

    assert f"took over store {theirs} after checkpoint 1" in took.stdout, took.stdout
    assert f"no longer follows store {mine} (it knew checkpoint 3 there)" in took.stdout
    assert (as_json["store_id"], as_json["seq"]) == (theirs, 1)
    assert committed["seq"] == 2 and shared.seqs() == [1, 2]
    assert_linear(shared)
    assert sorted(str(p) for p in mine_path.rglob("*")) == kept, "store A was touched"


def test_init_of_a_new_store_where_the_known_one_vanished_only_creates_it_and_takeover_follows_it(shared, tmp_path):
    box = container(tmp_path / "a", shared)
    box.run("checkpoint")
    old = shared.repo().store_id
    lose(shared, shared.keys())
    box.append(ROLLOUT, line("after the volume went away"))
    vanished = box.run("checkpoint", expect=1)  # StoreVanished

    made = box.run("init")
    refused = box.run("checkpoint", expect=1)   # init re-points nothing: still the old store's state
    took = box.run("takeover")
    committed = json.loads(box.run("checkpoint", "--json").stdout)

    assert "`journal init`, then `journal takeover`" in vanished.stderr, vanished.stderr
    assert f"still follows store {old}" in made.stderr and "journal takeover" in made.stderr, made.stderr
    assert old in refused.stderr, refused.stderr
    assert f"no longer follows store {old}" in took.stdout, took.stdout
    assert committed["seq"] == 1 and shared.seqs() == [1]
