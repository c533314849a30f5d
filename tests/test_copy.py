"""``journal copy --to URL``: checkpoints and the input journal copied to a second store
(design §23), incrementally, resumably, verified on read, re-sealed between keys, and
never over a target that moved on; and ``journal supervise --copy-to``."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import Live, describe, one_line_error, run_journal
from journal.repository.repository import Repository
from journal.store import open_store
from tripwire import write_tripwire

pytest_plugins = ["tests.s3server"]

MARKER = "QUOKKA-SECRET-51c2"
SETTINGS = "codex-home/config.json"
TRANSCRIPT = "codex-home/sessions/2026/02/23/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"
DB = "opencode-share/opencode.db"


def change(live: Live, turn: int) -> None:
    """One turn of an agent: a transcript grows, a settings file is rewritten (a chunk
    delta from the second turn on), a database changes a few pages (delta page maps)."""
    live.append(TRANSCRIPT, json.dumps({"type": "message", "turn": turn, "text": f"{MARKER} {turn}"}) + "\n")
    settings = {"turn": turn, "token": MARKER, "history": [f"entry {i} of a long settings file" for i in range(600)]}
    live.write(SETTINGS, json.dumps(settings))
    db = live.local / DB
    db.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")
        con.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)",
                        ((i, f"{MARKER} {turn} {i}" * 8) for i in range(turn * 40, turn * 40 + 400)))
    con.close()


def history(live: Live, turns: int, start: int = 0) -> None:
    """``turns`` checkpoints, each after one ``change``."""
    for turn in range(start, start + turns):
        change(live, turn)
        live.run("checkpoint", expect=0)


def copy(live: Live, target, *args: str, expect: int = 0, env: dict | None = None) -> dict:
    """``journal copy --to TARGET --json``; its summary (or error object)."""
    done = live.run("copy", "--to", str(target), "--json", *args, env=env, expect=expect)
    return json.loads(done.stdout)


def exported(live: Live, out: Path, store=None, env: dict | None = None, at: str | None = None,
             keyless: bool = False) -> dict:
    """``restore --to OUT`` (from ``store``, else the container's; ``keyless``: without
    the container's key), described tree by tree."""
    args = ["restore", "--to", str(out)] + (["--store", str(store)] if store is not None else []) \
        + (["--at", at] if at else [])
    env = {**{k: v for k, v in live.env.items() if not (keyless and k == "JOURNAL_KEY_FILE")}, **(env or {})}
    done = run_journal(*args, env=env)
    assert done.returncode == 0, done.stderr
    return {tree.name: describe(tree) for tree in sorted(out.iterdir()) if tree.is_dir()}


def stored(url: str) -> dict[str, bytes]:
    store = open_store(url)
    return {key: store.get(key) for key in store.list("")}


def manifests(url: str) -> list[str]:
    return sorted(k for k in open_store(url).list("manifests/"))


def test_a_local_copy_restores_what_the_source_restores_and_a_second_copy_copies_nothing(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True)
    history(live, 2)
    live.run("input", "append", "--harness", "codex", "--session", "s1", "-", stdin="first prompt", expect=0)
    target = tmp_path / "copy"

    planned = copy(live, target, "--dry-run")
    assert planned["dry_run"] and planned["checkpoints"] == [1, 2] and planned["objects"] > 2
    assert not target.exists(), "a dry run writes nothing"
    done = copy(live, target)
    again = copy(live, target)

    assert done["mode"] == "same" and done["created"] and done["checkpoints"] == [1, 2]
    assert done["objects"] == planned["objects"] and done["bytes"] >= planned["bytes"]
    assert done["inputs"] == 1 and done["refused"] == []
    assert (again["checkpoints"], again["objects"], again["inputs"]) == ([], 0, 0)
    source, replica = stored(str(tmp_path / "store")), stored(str(target))
    assert all(replica[k] == source[k] for k in replica if k != "config"), "objects are copied byte for byte"
    assert exported(live, tmp_path / "out-source") == exported(live, tmp_path / "out-copy", target)
    listed = live.run("input", "list", "--json", "--store", str(target), expect=0).stdout
    assert "first prompt" in live.run("input", "show", json.loads(listed)[0]["id"], "--store", str(target),
                                      expect=0).stdout


def test_copies_to_s3_incrementally_and_a_restore_from_it_equals_the_source(tmp_path, s3_server, s3_bucket):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True, env=s3_server.env)
    history(live, 2)
    first = copy(live, s3_bucket.url)
    history(live, 1, start=2)
    mark = s3_bucket.mark()
    second = copy(live, s3_bucket.url)

    assert first["checkpoints"] == [1, 2] and second["checkpoints"] == [3]
    assert len([w for w in s3_bucket.writes(mark) if w[0] == "PUT"]) == second["objects"] <= 3
    assert exported(live, tmp_path / "out-source") == exported(live, tmp_path / "out-copy", s3_bucket.url)
    assert exported(live, tmp_path / "old-source", at="1") == exported(live, tmp_path / "old-copy", s3_bucket.url,
                                                                       at="1")


def test_a_copy_killed_after_its_first_pack_is_completed_by_the_next_which_puts_nothing_twice(
        tmp_path, s3_server, s3_bucket):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True, env=s3_server.env)
    history(live, 2)
    tripwire = [sys.executable, str(write_tripwire(tmp_path))]
    mark = s3_bucket.mark()

    killed = live.run("copy", "--to", s3_bucket.url, cmd=tripwire, expect=None,
                      env={"JOURNAL_TEST_KILL": "unlink:after:copy-spool"})
    after_kill = s3_bucket.objects()
    done = copy(live, s3_bucket.url)

    assert killed.returncode == -9
    assert not any(k.startswith("manifests/") for k in after_kill), "killed before its first manifest"
    assert sum(k.startswith("packs/") for k in after_kill) == 1
    assert done["checkpoints"] == [1, 2] and done["refused"] == []
    puts = [w for w in s3_bucket.writes(mark) if w[0] == "PUT"]
    assert len(puts) == len(s3_bucket.objects()), "every object of the target was put exactly once"
    assert exported(live, tmp_path / "out-source") == exported(live, tmp_path / "out-copy", s3_bucket.url)


def test_a_corrupt_source_pack_is_refused_and_named_and_its_checkpoint_is_not_written(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True)
    history(live, 2)
    data_pack = Repository.open(open_store(str(tmp_path / "store"))).load_manifest(2)[0].packs[0]
    pack = tmp_path / "store" / "packs" / data_pack[:2] / data_pack
    raw = bytearray(pack.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    pack.chmod(0o600)
    pack.write_bytes(bytes(raw))
    target = tmp_path / "copy"

    done = copy(live, target, expect=1)

    assert pack.name in " ".join(done["refused"]), done["refused"]
    refused = {int(why.split()[1]) for why in done["refused"]}
    assert refused and set(done["checkpoints"]).isdisjoint(refused)
    assert manifests(str(target)) == [f"manifests/{s:012d}" for s in done["checkpoints"]]
    assert not (target / "packs" / pack.parent.name / pack.name).exists()


def encrypted(tmp_path: Path, name: str) -> tuple[Live, Path]:
    key = tmp_path / f"{name}.key"
    live = Live(tmp_path / name, tmp_path / f"{name}-store", fixtures=True, env={"JOURNAL_KEY_FILE": str(key)})
    live.run("init", "--encrypt", "--key-file", str(key), expect=0)
    return live, key


def test_encrypted_to_encrypted_with_another_key_reseals_and_only_the_target_key_reads_it(tmp_path):
    live, key = encrypted(tmp_path, "a")
    history(live, 2)
    added = json.loads(live.run("input", "append", "--harness", "codex", "--session", "s1", "--client-id", "c1",
                                "--json", "-", stdin=f"{MARKER} prompt", expect=0).stdout)
    live.run("input", "mark-delivered", added["id"], expect=0)
    target, other = tmp_path / "copy", tmp_path / "copy.key"
    other.write_bytes(os.urandom(32))
    first = copy(live, target, "--to-key-file", str(other))
    history(live, 1, start=2)
    second = copy(live, target, env={"JOURNAL_TO_KEY_FILE": str(other)})
    with_other = {"JOURNAL_KEY_FILE": str(other)}

    assert first["mode"] == "reseal" and first["checkpoints"] == [1, 2] and first["inputs"] == 3
    assert second["checkpoints"] == [3] and second["bytes"] < first["bytes"] / 4, "only what changed is re-sealed"
    for rel, data in stored(str(target)).items():
        assert MARKER.encode() not in data and b"rollout-2026" not in data, rel
    refused = live.run("log", "--store", str(target), expect=1)
    assert "opens none of the 1 key(s)" in one_line_error(refused)
    verified = json.loads(live.run("verify", "--full", "--json", "--store", str(target), env=with_other,
                                   expect=0).stdout)
    assert verified["ok"] and not verified["findings"], verified["findings"]
    assert exported(live, tmp_path / "out-source") == exported(live, tmp_path / "out-copy", target, env=with_other)
    listed = json.loads(live.run("input", "list", "--json", "--store", str(target), env=with_other, expect=0).stdout)
    assert [(i["seq"], i["client_id"], i["delivered"]) for i in listed] == [(1, "c1", True)]
    again = live.run("input", "append", "--harness", "codex", "--session", "s1", "--client-id", "c1", "--json",
                     "--store", str(target), "-", stdin=f"{MARKER} prompt", env=with_other, expect=0)
    assert json.loads(again.stdout)["duplicate"], "the copy's claim of c1 names its copy of input 1"


def test_a_killed_reseal_is_completed_by_the_next_with_the_same_packs(tmp_path):
    live, _key = encrypted(tmp_path, "a")
    history(live, 2)
    target, other = tmp_path / "copy", tmp_path / "copy.key"
    other.write_bytes(os.urandom(32))
    tripwire = [sys.executable, str(write_tripwire(tmp_path))]

    killed = live.run("copy", "--to", str(target), "--to-key-file", str(other), cmd=tripwire, expect=None,
                      env={"JOURNAL_TEST_KILL": "unlink:after:copy-spool"})
    before = {p.name for p in (target / "packs").rglob("*") if p.is_file()}
    committed = manifests(str(target))
    done = copy(live, target, "--to-key-file", str(other))
    after = {p.name for p in (target / "packs").rglob("*") if p.is_file()}

    assert killed.returncode == -9 and len(before) == 1 and committed == []
    assert done["skipped_objects"] == 1 and before < after, "the rerun wrote the very pack the kill left"
    verified = json.loads(live.run("verify", "--json", "--store", str(target), expect=0,
                                   env={"JOURNAL_KEY_FILE": str(other)}).stdout)
    assert verified["ok"] and not verified["findings"], "no pack is left that no manifest names"


def test_encrypted_to_plain_is_refused_without_the_flag_and_decrypts_with_it(tmp_path):
    live, _key = encrypted(tmp_path, "a")
    history(live, 1)
    target = tmp_path / "plain"

    refused = live.run("copy", "--to", str(target), expect=2)
    assert not target.exists(), "nothing written, not even a config"
    line = one_line_error(refused)
    assert "is encrypted" in line and "--decrypt-to-plain" in line and str(target) in line
    done = copy(live, target, "--decrypt-to-plain")

    assert done["mode"] == "reseal" and done["checkpoints"] == [1]
    assert b'"encryption"' not in (target / "config").read_bytes()
    assert exported(live, tmp_path / "out-source") == exported(live, tmp_path / "out-copy", target, keyless=True)


def test_a_target_that_moved_on_is_refused_naming_both_checkpoints(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True)
    history(live, 1)
    target = tmp_path / "copy"
    copy(live, target)
    other = Live(tmp_path / "b", target, fixtures=False)   # a container that restored from the copy
    other.run("restore", expect=0)
    other.write("codex-home/mine.txt", "written on the copy")
    other.run("checkpoint", expect=0)
    history(live, 1, start=1)
    before = stored(str(target))

    refused = live.run("copy", "--to", str(target), expect=1)

    line = one_line_error(refused)
    assert "has moved on" in line and "checkpoint 2" in line and line.count(" pid ") == 2, line
    assert stored(str(target)) == before, "nothing was written"


def test_supervise_copies_the_store_on_a_timer(tmp_path):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=True)
    history(live, 1)
    target = tmp_path / "copy"
    wait = f"while [ ! -e {target}/manifests/000000000001 ]; do sleep 0.05; done"

    ran = live.run("supervise", "-v", "--copy-to", str(target), "--copy-every", "1h", "--", "sh", "-c", wait,
                   timeout=60)

    assert ran.returncode == 0, ran.stderr
    assert f"copy to {target}: 1 checkpoint(s)" in ran.stderr
    assert manifests(str(target)) == ["manifests/000000000001"]


@pytest.mark.parametrize("args, said", [
    (("--copy-every", "soon"), "is not a duration"),
    (("--copy-every", "1h"), "without a store to copy to"),
])
def test_supervise_refuses_a_copy_schedule_it_cannot_keep(tmp_path, args, said):
    live = Live(tmp_path / "a", tmp_path / "store", fixtures=False)
    if "soon" in args:
        args = ("--copy-to", str(tmp_path / "copy"), *args)
    refused = live.run("supervise", *args, "--", "true", expect=2)
    assert said in one_line_error(refused)
