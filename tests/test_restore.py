"""Restore: the newest valid checkpoint back onto local disk, never going backwards."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import msgspec
import pytest

from conftest import Live, clean_env
from journal.repository.errors import HistoryWithoutState
from journal.gc.run import gc
from journal.repository.history import ManifestCache
from journal.local.state import load_state
from journal.restore.entry import Verdict
from journal.format.model import KIND_FILE, KIND_SYMLINK, Entry, TreeRoot
from journal.format.objects import CHUNK_BYTES, KIND_CHUNK, encode_record
from journal.repository.segments import AHEAD_BYTES
import journal.restore.trees as trees_module
from journal.restore.writer import LINK_WORKERS, WORKERS
from faults import FaultyStore
from journal.repository.repository import pack_key
from journal.repository.repository import encode_manifest, manifest_key
from journal.gc.retention import Policy
from journal.verify import verify
from tripwire import write_tripwire

from conftest import one_line_error

TREES = {"codex": "codex-home", "claude": "agent-state/claude", "openclaw": "oc-home/.openclaw",
         "gemini": "agent-state/gemini-home/.gemini"}
ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
SESSION = "agents/main/sessions/d703a1a9-1b7b-4fb1-b512-c9738b1fe617.jsonl"
SECOND = 1_000_000_000


@pytest.fixture
def source(live):
    """The fixture trees plus a Gemini home, with a few private modes, checkpointed once."""
    live.add_gemini_tree()
    claude = live.local / TREES["claude"]
    (claude / "projects" / "-home-node-work-spotter" / "4d5611e5-241a-462a-8d15-5122611a9569.jsonl").chmod(0o600)
    (claude / "projects" / "-home-node-work-spotter").chmod(0o700)
    (live.local / "codex-home" / "config.toml").write_text('model = "gpt-5.3-codex"\n')
    (live.local / "codex-home" / "auth.json").write_text('{"tokens": null}')
    (live.local / "codex-home" / "auth.json").chmod(0o600)
    assert live.checkpoint().seq == 1
    return live


def harness_dirs(live) -> None:
    """The empty harness homes a fresh container makes before restore runs."""
    for rel in TREES.values():
        (live.local / rel).mkdir(parents=True, exist_ok=True)


def set_mtime(path: Path, mtime_ns: int) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def actions(result, tree: str) -> dict[str, int]:
    return next(t.actions for t in result.trees if t.name == tree)


def tree_result(result, tree: str):
    return next(t for t in result.trees if t.name == tree)


def remove(path: Path) -> None:
    subprocess.run(["rm", "-rf", str(path)], check=True)


# --- rebuilding trees ---------------------------------------------------------------------


@pytest.mark.parametrize("tree", sorted(TREES))
def test_restore_into_empty_local_rebuilds_every_stored_tree(source, make_live, tree):
    fresh = make_live("b", fixtures=False)  # a new container: $AM_LOCAL exists, nothing in it

    result = fresh.restore()

    want = source.snapshot(source.local / TREES[tree])
    got = fresh.snapshot(fresh.local / TREES[tree])
    assert sorted(got) == sorted(want)
    assert got == want and result.complete


@pytest.mark.parametrize("tree", sorted(TREES))
def test_restore_into_empty_harness_homes_is_byte_identical(source, make_live, tree):
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)

    result = fresh.restore()

    assert result.complete and tree_result(result, tree).lost == []
    want = source.snapshot(source.local / TREES[tree])
    got = fresh.snapshot(fresh.local / TREES[tree])
    assert sorted(got) == sorted(want)
    assert got == want
    assert len([v for v in want.values() if v[0] == "file"]) >= 2


def test_checkpoint_right_after_restore_is_idle(source, make_live):
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)
    fresh.restore()
    puts, put_bytes = fresh.store.puts, fresh.store.put_bytes

    result = fresh.checkpoint()

    assert result.seq is None and result.objects == 0
    assert (fresh.store.puts, fresh.store.put_bytes) == (puts, put_bytes)
    assert fresh.repo().manifest_seqs() == [1]


def test_restore_marks_the_local_state_complete(source, make_live):
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)

    fresh.restore()

    state = load_state(str(fresh.local / ".journal"), fresh.repo().store_id)
    assert state.restore_complete and state.seq == 1


# --- the keep-or-replace rule -------------------------------------------------------------


def test_hot_restart_keeps_a_newer_local_file(source):
    config = source.local / "codex-home" / "config.toml"
    checkpointed = source.entries("codex")["config.toml"]
    config.write_text('model = "gpt-5.4"\n')
    set_mtime(config, checkpointed.mtime_ns + 60 * SECOND)

    result = source.restore()

    assert config.read_text() == 'model = "gpt-5.4"\n'
    assert actions(result, "codex").get(Verdict.KEEP_NEWER) == 1


def test_restore_keeps_a_local_jsonl_that_extends_the_checkpoint(source):
    rollout = source.local / "codex-home" / ROLLOUT
    checkpointed = source.entries("codex")[ROLLOUT]
    with open(rollout, "ab") as fh:
        fh.write(b'{"timestamp": "2026-02-24T12:10:00.000Z", "type": "event_msg", "payload": {}}\n')
    grown = rollout.read_bytes()
    set_mtime(rollout, checkpointed.mtime_ns - 60 * SECOND)  # an older clock must not matter

    result = source.restore()

    assert rollout.read_bytes() == grown
    assert actions(result, "codex").get(Verdict.KEEP_EXTENDS) == 1


def test_restore_replaces_an_older_different_local_file(source):
    session = source.local / "oc-home" / ".openclaw" / SESSION
    want = session.read_bytes()
    checkpointed = source.entries("openclaw")[SESSION]
    session.write_bytes(want[: len(want) // 2].replace(b"a", b"b"))
    set_mtime(session, checkpointed.mtime_ns - 60 * SECOND)

    result = source.restore()

    assert session.read_bytes() == want
    assert session.stat().st_mtime_ns == checkpointed.mtime_ns
    assert actions(result, "openclaw").get(Verdict.REPLACE) == 1


def test_restore_writes_back_a_missing_file(source):
    rollout = source.local / "codex-home" / ROLLOUT
    want = rollout.read_bytes()
    rollout.unlink()

    result = source.restore()

    assert rollout.read_bytes() == want
    assert actions(result, "codex").get(Verdict.WRITE) == 1


@pytest.mark.parametrize("change", ["mode", "mtime"])
def test_a_file_restore_leaves_as_it_is_with_other_metadata_is_checkpointed_as_it_is(source, change):
    """A local file with the checkpointed bytes is left as it is, also when its mode or
    mtime differ (a chmod, a rewrite of the same bytes); the next checkpoint must then
    publish that mode and mtime, not the entry's (found by tests/test_model_based.py:
    the local state said the file was the entry, so the chmod never reached the store)."""
    config = source.local / "codex-home" / "config.toml"
    checkpointed = source.entries("codex")["config.toml"]
    if change == "mode":
        config.chmod(0o600)
    else:
        set_mtime(config, checkpointed.mtime_ns + 60 * SECOND)

    result = source.restore()
    assert actions(result, "codex").get(Verdict.SAME, 0) >= 1 and config.read_text() == 'model = "gpt-5.3-codex"\n'
    assert source.checkpoint(allow_deletions=True).seq == 2

    entry = source.entries("codex")["config.toml"]
    st = config.stat()
    assert (entry.mode, entry.mtime_ns) == (st.st_mode & 0o7777, st.st_mtime_ns)
    assert (entry.mode, entry.mtime_ns) != (checkpointed.mode, checkpointed.mtime_ns)


def test_first_deployment_over_a_populated_tree_keeps_newer_files_and_checkpoints_them(source, make_live, tmp_path):
    second = make_live("b")  # same transcripts on disk, no local state, the store has history
    newer = second.local / "codex-home" / "config.toml"
    newer.write_text('model = "local-newer"\n')
    set_mtime(newer, source.entries("codex")["config.toml"].mtime_ns + 60 * SECOND)
    (second.local / "codex-home" / "history.jsonl").write_text('{"only": "here"}\n')
    (second.local / "oc-home" / ".openclaw" / SESSION).unlink()
    with pytest.raises(HistoryWithoutState):
        second.checkpoint()

    result = second.restore()

    assert result.complete
    assert newer.read_text() == 'model = "local-newer"\n'
    assert (second.local / "oc-home" / ".openclaw" / SESSION).read_bytes() == \
        (source.local / "oc-home" / ".openclaw" / SESSION).read_bytes()
    assert second.checkpoint().seq == 2
    stored = second.entries("codex", seq=2)
    assert stored["config.toml"].size == len('model = "local-newer"\n') and "history.jsonl" in stored
    out = tmp_path / "export"
    second.restore(to=str(out))
    assert (out / "codex" / "config.toml").read_text() == 'model = "local-newer"\n'


def test_jsonl_with_no_complete_line_restores_as_an_empty_file(live, make_live):
    torn = live.local / "codex-home" / "session_index.jsonl"
    torn.write_bytes(b'{"id": "019c8a59", "thread_name": "fix the bu')
    live.checkpoint()
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)

    fresh.restore()

    assert (fresh.local / "codex-home" / "session_index.jsonl").read_bytes() == b""


def grown_rollout(source) -> tuple[Path, bytes, list[int]]:
    """The codex rollout after two more one-line checkpoints (three segments); returns
    it, its checkpointed bytes and where each segment ends."""
    rollout = source.local / "codex-home" / ROLLOUT
    for n in range(2):
        with open(rollout, "ab") as fh:
            fh.write(b'{"timestamp": "2026-02-24T12:1%d:00.000Z", "type": "event_msg", "payload": {}}\n' % n)
        assert source.checkpoint().seq == 2 + n
    refs = source.entries("codex")[ROLLOUT].refs
    ends = [sum(r.size for r in refs[:i + 1]) for i in range(len(refs))]
    assert len(refs) == 3 and ends[-1] == rollout.stat().st_size
    return rollout, rollout.read_bytes(), ends


@pytest.mark.parametrize("cut", ["line-in-first-segment", "torn-in-last-segment", "segment-boundary", "empty"])
def test_restore_completes_a_newer_local_transcript_that_is_a_prefix_of_the_checkpoint(source, cut):
    rollout, full, ends = grown_rollout(source)
    size = {"line-in-first-segment": full.rfind(b"\n", 0, ends[0] // 2) + 1, "torn-in-last-segment": ends[-1] - 7,
            "segment-boundary": ends[0], "empty": 0}[cut]
    rollout.write_bytes(full[:size])   # an older copy of an append-only transcript ...
    set_mtime(rollout, source.entries("codex")[ROLLOUT].mtime_ns + 60 * SECOND)   # ... with a newer clock

    proc = source.run("restore")

    assert proc.returncode == 0, proc.stderr
    assert "1 complete-prefix" in proc.stdout
    assert rollout.read_bytes() == full
    tick = json.loads(source.run("checkpoint", "--json").stdout)
    assert tick["seq"] is None, "the next checkpoint published the shorter transcript"
    assert source.entries("codex")[ROLLOUT].size == len(full)


def test_restore_keeps_a_newer_shorter_transcript_that_is_not_a_prefix(source):
    rollout, full, _ = grown_rollout(source)
    mine = full[:len(full) // 2].replace(b"event_msg", b"event_MSG")
    rollout.write_bytes(mine)
    set_mtime(rollout, source.entries("codex")[ROLLOUT].mtime_ns + 60 * SECOND)

    result = source.restore()

    assert actions(result, "codex").get(Verdict.KEEP_NEWER) == 1
    assert rollout.read_bytes() == mine


# --- options ---------------------------------------------------------------------------------


def test_restore_to_dir_writes_every_stored_tree_there_and_leaves_live_alone(source, tmp_path):
    (source.local / "codex-home" / ROLLOUT).unlink()
    state_before = source.state_file.read_bytes()
    out = tmp_path / "export"

    result = source.restore(to=str(out))

    assert sorted(t.name for t in result.trees) == sorted(TREES)
    assert sorted(p.name for p in out.iterdir()) == sorted([*TREES, ".journal-export"])
    assert source.snapshot(out / "claude") == source.snapshot(source.local / TREES["claude"])
    assert (out / "codex" / ROLLOUT).is_file()
    assert not (source.local / "codex-home" / ROLLOUT).exists()
    assert source.state_file.read_bytes() == state_before


def test_restore_at_an_older_seq_gives_the_older_content(source, tmp_path):
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2

    source.restore(to=str(tmp_path / "at1"), at="1")
    source.restore(to=str(tmp_path / "at2"), at="2")

    assert (tmp_path / "at1" / "codex" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'
    assert (tmp_path / "at2" / "codex" / "config.toml").read_text() == 'model = "second"\n'


def test_restore_json_names_each_verdict_as_it_always_has(bare_live):
    """Restore's verdicts are an enum now; ``--json`` counts paths by its values, and
    users' scripts read those names: they never change."""
    assert [v.value for v in Verdict] == [
        "write", "replace", "complete-prefix", "same", "keep-newer", "keep-extends", "keep-conflict",
        "keep-valid-db", "keep-unreadable", "cannot-create", "refused", "remove", "keep-rolled-back"]
    home = bare_live.local / "fx-home"
    home.mkdir()
    (home / "same.txt").write_text("a")
    (home / "gone.txt").write_text("b")
    bare_live.run("checkpoint")
    (home / "gone.txt").unlink()

    proc = bare_live.run("restore", "--dry-run", "--json")

    assert proc.returncode == 0, proc.stderr
    fx = next(t for t in json.loads(proc.stdout)["trees"] if t["name"] == "fx")
    assert fx["actions"] == {"same": 1, "write": 1}


def test_a_repository_is_what_restore_reads(source):
    """Restore's functions name what they read from the store as narrow protocols
    (``restore/reads.py``); the repository restore opens must be each of them."""
    from journal.restore.reads import BlobReads, StagingReads

    repo = source.repo()
    assert isinstance(repo, BlobReads) and isinstance(repo, StagingReads)


def test_dry_run_reports_the_plan_and_writes_nothing(source):
    rollout = source.local / "codex-home" / ROLLOUT
    rollout.unlink()
    state_before = source.state_file.read_bytes()
    store_before = sorted(p.relative_to(source.store_path) for p in source.store_path.rglob("*"))

    result = source.restore(dry_run=True)

    assert result.dry_run and actions(result, "codex").get(Verdict.WRITE) == 1
    assert not rollout.exists()
    assert source.state_file.read_bytes() == state_before
    assert sorted(p.relative_to(source.store_path) for p in source.store_path.rglob("*")) == store_before


def add_messages(source, n: int) -> Path:
    """``n`` more rows in an opencode database (a real SQLite file in WAL mode)."""
    db = source.local / "opencode-share" / "opencode.db"
    db.parent.mkdir(exist_ok=True)
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE IF NOT EXISTS message (id INTEGER PRIMARY KEY, body TEXT)")
        con.executemany("INSERT INTO message (body) VALUES (?)", [(f"message {i}",) for i in range(n)])
        con.commit()
    finally:
        con.close()
    return db


def export_trees(source, out: Path) -> dict[str, dict]:
    """Every tree of an export, as ``Live.snapshot`` sees it (the marker file aside)."""
    return {p.name: source.snapshot(p) for p in sorted(out.iterdir()) if p.is_dir()}


def test_restore_to_an_earlier_export_is_refused_and_replace_gives_exactly_the_checkpoint(source, tmp_path):
    add_messages(source, 50)
    assert source.checkpoint().seq == 2
    db = add_messages(source, 50)
    (source.local / "codex-home" / "config.toml").write_text('model = "third"\n')
    with open(source.local / "codex-home" / ROLLOUT, "ab") as fh:
        fh.write(b'{"timestamp": "2026-02-24T12:30:00.000Z", "type": "event_msg", "payload": {}}\n')
    assert source.checkpoint().seq == 3
    out, fresh = tmp_path / "export", tmp_path / "fresh"
    assert source.run("restore", "--at", "3", "--to", str(out)).returncode == 0
    before = export_trees(source, out)

    refused = source.run("restore", "--at", "2", "--to", str(out))

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "the export of checkpoint 3" in refused.stderr and "--replace" in refused.stderr
    assert export_trees(source, out) == before
    replaced = source.run("restore", "--at", "2", "--to", str(out), "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert source.run("restore", "--at", "2", "--to", str(fresh)).returncode == 0
    assert export_trees(source, out) == export_trees(source, fresh)
    assert sqlite3.connect(out / "opencode" / "opencode.db").execute("SELECT count(*) FROM message").fetchone() == (50,)
    assert (out / "codex" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'
    assert db.exists() and (source.local / "codex-home" / "config.toml").read_text() == 'model = "third"\n'


def test_restore_to_replace_removes_only_the_earlier_export_and_never_follows_a_link(source, tmp_path):
    out, outside = tmp_path / "export", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    assert source.run("restore", "--to", str(out)).returncode == 0
    (out / "codex" / "escape").symlink_to(outside)
    (out / "notes.txt").write_text("not journal's")

    refused = source.run("restore", "--to", str(out), "--replace")

    assert refused.returncode == 2 and str(out / "notes.txt") in refused.stderr
    assert (out / "notes.txt").read_text() == "not journal's" and (out / "codex" / "escape").is_symlink()
    (out / "notes.txt").unlink()
    before = export_trees(source, out)
    dry = source.run("restore", "--to", str(out), "--replace", "--dry-run")
    assert dry.returncode == 0 and f"would remove {out / 'codex'}" in dry.stderr
    assert export_trees(source, out) == before
    assert source.run("restore", "--to", str(out), "--replace").returncode == 0
    assert not os.path.lexists(out / "codex" / "escape")
    assert (outside / "keep.txt").read_text() == "mine"
    assert (out / "codex" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'


def test_restore_to_replace_refuses_a_directory_no_export_wrote(source, tmp_path):
    user = tmp_path / "work"
    (user / "codex").mkdir(parents=True)
    (user / "codex" / "draft.md").write_text("draft")

    plain = source.run("restore", "--to", str(user))
    forced = source.run("restore", "--to", str(user), "--replace")

    assert plain.returncode == 2 and "not empty" in plain.stderr
    assert forced.returncode == 2 and "holds no journal export" in forced.stderr
    assert sorted(p.name for p in user.rglob("*")) == ["codex", "draft.md"]
    assert (user / "codex" / "draft.md").read_text() == "draft"


# --- damage in the store -------------------------------------------------------------------


def test_torn_newest_manifest_is_skipped_for_the_previous_one(source):
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2
    newest = source.store_path / manifest_key(2)
    newest.write_bytes(newest.read_bytes()[:40])
    config.unlink()

    result = source.restore()

    assert config.read_text() == 'model = "gpt-5.3-codex"\n'
    assert tree_result(result, "codex").seq == 1
    assert any("manifest 2" in w for w in source.warnings)


@pytest.mark.parametrize("adopt", ["restore", "takeover"])
def test_parent_id_is_the_id_of_the_parent_manifest_after_a_torn_newest_was_passed_over(source, adopt):
    """The checkpoint after a restore (or takeover) that passed over a torn manifest 2
    builds on sequence 2: its ``parent_id`` must not be manifest 1's id, a manifest
    other than its ``parent``. Manifest 2's id cannot be known, so it is null."""
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2
    newest = source.store_path / manifest_key(2)
    newest.write_bytes(newest.read_bytes()[:40])
    if adopt == "restore":
        assert tree_result(source.restore(), "codex").seq == 1
    else:
        assert source.run("takeover").returncode == 0
    config.write_text('model = "third"\n')

    assert source.checkpoint().seq == 3

    third, _ = source.repo().load_manifest(3)
    assert third.parent == 2
    assert third.parent_id is None, "names manifest 1 while its parent is manifest 2"


def test_a_store_whose_every_manifest_is_unreadable_is_an_error_not_an_empty_restore(source, make_live):
    """History exists but none of it reads: "nothing to restore ... complete" would let
    a fresh container start its agent on empty state and publish that."""
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2
    for seq in (1, 2):
        path = source.store_path / manifest_key(seq)
        path.write_bytes(path.read_bytes()[:40])
    fresh = make_live("fresh", fixtures=False)

    ran = fresh.run("restore")

    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    [line] = [line for line in ran.stderr.splitlines() if line.startswith("journal: error:")]
    assert "none of the 2 checkpoint(s) in the store can be read" in line and "manifests/000000000002" in line
    assert "restore complete" not in ran.stdout and not (fresh.local / "codex-home").exists()


def test_corrupt_blob_falls_back_to_an_older_good_copy(source):
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2
    source.corrupt_blob(source.entries("codex")["config.toml"].refs[0])
    config.unlink()

    result = source.restore()

    assert config.read_text() == 'model = "gpt-5.3-codex"\n'
    codex = tree_result(result, "codex")
    assert codex.lost == [] and len(codex.fallbacks) == 1 and "config.toml" in codex.fallbacks[0]
    assert any("config.toml" in w and "damaged" in w for w in source.warnings)


def test_an_older_entry_of_another_kind_is_no_copy_of_a_damaged_file(source):
    """The newest copy of a file is damaged, and an older checkpoint held a directory
    at that path: the fallback took the directory's entry as a copy and staged it as an
    empty file, reported restored (complete, exit 3). Only an older entry of the same
    kind stands in: here there is none, so the file is lost and the restore says so."""
    spot = source.local / "codex-home" / "spot"
    spot.mkdir()
    (spot / "inner.txt").write_text("in a directory\n")
    assert source.checkpoint().seq == 2
    shutil.rmtree(spot)
    spot.write_bytes(b"now a file\n" * 1000)
    assert source.checkpoint(allow_deletions=True).seq == 3
    source.corrupt_blob(source.entries("codex")["spot"].refs[0])
    shutil.rmtree(source.local / "codex-home")

    result = source.restore()

    codex = tree_result(result, "codex")
    assert codex.lost == ["spot"] and not codex.fallbacks and not result.complete
    assert not (source.local / "codex-home" / "spot").exists()


def test_a_large_files_chunks_verified_in_the_fetch_threads_still_refuse_a_damaged_one(source):
    """A file of at least ``AHEAD_BYTES`` is read and verified ahead, in the fetch
    threads: a damaged chunk there still loses the file (no older copy), never writes
    it, and the restore says so."""
    big = source.local / "codex-home" / "weights.bin"
    big.write_bytes(os.urandom(AHEAD_BYTES + 3 * CHUNK_BYTES + 123))
    assert source.checkpoint().seq == 2
    refs = source.entries("codex")["weights.bin"].refs
    source.corrupt_blob(refs[len(refs) // 2])
    big.unlink()

    proc = source.run("restore")

    assert proc.returncode == 1, proc.stderr
    assert "LOST weights.bin" in proc.stdout and "INCOMPLETE" in proc.stderr
    assert not big.exists()


def test_a_restore_from_a_store_behind_a_link_stages_with_more_threads(source, tmp_path, monkeypatch):
    """Staging threads from a store whose reads wait on a link (``read_ahead``: a bucket,
    a FUSE mount) mostly wait, so there are ``LINK_WORKERS`` of them; from a local disk,
    ``WORKERS`` (more would only contend for the GIL)."""
    asked = []
    make_pool = trees_module.make_pool
    monkeypatch.setattr(trees_module, "make_pool", lambda workers: asked.append(workers) or make_pool(workers))
    assert not source.store.read_ahead

    source.restore(to=str(tmp_path / "local-disk"))
    source.restore(store=FaultyStore(source.store), to=str(tmp_path / "behind-a-link"))

    assert asked == [WORKERS, LINK_WORKERS] and LINK_WORKERS > WORKERS
    local, linked = (source.snapshot(tmp_path / where) for where in ("local-disk", "behind-a-link"))
    assert {path: local[path] for path in local if path != ".journal-export"} == \
        {path: linked[path] for path in linked if path != ".journal-export"}


def test_blob_with_no_good_copy_is_lost_and_restore_exits_non_zero(source):
    rollout = source.local / "codex-home" / ROLLOUT
    source.corrupt_blob(source.entries("codex")[ROLLOUT].refs[0])
    rollout.unlink()

    proc = source.run("restore")

    assert proc.returncode == 1
    assert f"LOST {ROLLOUT}" in proc.stdout and "INCOMPLETE" in proc.stderr
    assert not rollout.exists()
    assert load_state(str(source.local / ".journal"), source.repo().store_id).restore_complete is False


def checkpoint_a_path_near_path_max(live) -> str:
    """A file whose full path is just under PATH_MAX (4096 bytes), checkpointed; its path."""
    claude = live.local / TREES["claude"]
    depth = (4095 - len(str(claude)) - len("/leaf.md")) // 201
    claude.joinpath(*["d" * 200] * depth).mkdir(parents=True)
    claude.joinpath(*["d" * 200] * depth, "leaf.md").write_text("deep\n")
    live.checkpoint()
    return "/".join(["d" * 200] * depth + ["leaf.md"])


def test_a_stored_path_too_long_to_create_on_a_fresh_machine_is_lost_not_kept(live, make_live):
    """A path that fit under PATH_MAX where it was checkpointed is past it under a longer
    root. Nothing is there and restore cannot create it: it is lost (restore incomplete,
    exit 1, naming it), never "left as it is" with the restore called complete."""
    leaf = checkpoint_a_path_near_path_max(live)
    fresh = make_live("b" * 200, fixtures=False)
    harness_dirs(fresh)
    assert len(os.fsencode(fresh.local / TREES["claude"] / leaf)) > 4096

    proc = fresh.run("restore")

    assert proc.returncode == 1, proc.stderr
    assert f"claude: LOST {leaf}: " in proc.stdout and "restore INCOMPLETE" in proc.stderr
    assert "left it as it is" not in proc.stderr and "restore complete" not in proc.stdout + proc.stderr
    warning = next(line for line in proc.stderr.splitlines() if leaf in line)
    assert "cannot create" in warning and "(File name too long)" in warning and "shorten it" in warning
    assert load_state(str(fresh.local / ".journal"), fresh.repo().store_id).restore_complete is False
    assert (fresh.local / TREES["claude"] / ("d" * 200)).is_dir()  # what fits is restored


def test_a_local_path_past_path_max_is_left_as_it_is_and_the_restore_completes(live, tmp_path):
    """The same path, there on disk under a root that grew longer: restore cannot look at
    it, so it keeps it (it is not lost) and says so."""
    leaf = checkpoint_a_path_near_path_max(live)
    moved = tmp_path / ("h" * 250) / "a"
    moved.parent.mkdir()
    live.home.rename(moved)
    live = Live(moved, live.store_path)

    proc = live.run("restore")

    assert proc.returncode == 0, proc.stderr
    assert "LOST" not in proc.stdout and "keep-unreadable" in proc.stdout and "restore complete" in proc.stdout
    warning = next(line for line in proc.stderr.splitlines() if leaf in line)
    assert "(File name too long); left it as it is" in warning


def test_checkpoint_refuses_after_an_incomplete_restore_until_takeover(source):
    rollout = source.local / "codex-home" / ROLLOUT
    source.corrupt_blob(source.entries("codex")[ROLLOUT].refs[0])
    rollout.unlink()
    assert source.run("restore").returncode == 1
    keys_before = sorted(source.store.list(""))

    refused = source.run("checkpoint", "--json")

    assert refused.returncode == 1 and "incomplete" in refused.stderr and "journal takeover" in refused.stderr
    assert json.loads(refused.stdout)["kind"] == "CheckpointAfterIncompleteRestore"
    assert sorted(source.store.list("")) == keys_before
    assert source.run("takeover").returncode == 0
    assert source.run("checkpoint").returncode == 0


def test_corrupt_object_in_one_tree_does_not_block_the_others(source, make_live):
    source.corrupt_blob(source.entries("codex")[ROLLOUT].refs[0])
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)

    result = fresh.restore()

    assert not result.complete
    assert tree_result(result, "codex").lost == [ROLLOUT]
    for tree in ("claude", "openclaw", "gemini"):
        assert tree_result(result, tree).lost == []
        assert fresh.snapshot(fresh.local / TREES[tree]) == source.snapshot(source.local / TREES[tree])
    codex_left = set(source.snapshot(source.local / "codex-home")) - set(fresh.snapshot(fresh.local / "codex-home"))
    assert codex_left == {ROLLOUT}


def test_deleted_pack_rolls_back_only_the_files_stored_in_it(source, make_live):
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    source.checkpoint()
    lost_pack = source.entries("codex", seq=2)["config.toml"].refs[0].pack
    (source.local / "codex-home" / "history.jsonl").write_text('{"added": "in checkpoint 3"}\n')
    assert source.checkpoint().seq == 3
    source.pack_file(lost_pack).unlink()
    fresh = make_live("b", fixtures=False)
    harness_dirs(fresh)

    result = fresh.restore()

    codex = fresh.local / "codex-home"
    assert (codex / "history.jsonl").read_text() == '{"added": "in checkpoint 3"}\n'
    assert (codex / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'
    assert tree_result(result, "codex").seq == 3


# --- paths that would escape the tree --------------------------------------------------------


def publish_crafted_manifest(live, files: list[tuple[str, bytes]], links: list[tuple[str, str]]) -> int:
    """Publish a manifest whose codex tree holds exactly these entries, as a hostile writer could."""
    refs = live.put_records([encode_record(KIND_CHUNK, payload) + (len(payload),) for _, payload in files])
    entries = [Entry(path=p, kind=KIND_FILE, mode=0o644, mtime_ns=time.time_ns(), size=len(b), refs=(ref,))
               for (p, b), ref in zip(files, refs)]
    entries += [Entry(path=p, kind=KIND_SYMLINK, mode=0o777, target=t) for p, t in links]
    entries.sort(key=lambda e: e.path)
    return live.publish({"codex": TreeRoot(root=live.put_tree(entries), files=len(entries),
                                           bytes=sum(e.size for e in entries))})


@pytest.mark.parametrize("shape", ["dotdot", "absolute", "through-symlink"])
def test_manifest_path_escaping_the_tree_is_refused_alone(source, tmp_path, shape):
    outside = tmp_path / "outside"
    outside.mkdir()
    files, links = [("config.toml", b"harmless\n")], []
    if shape == "dotdot":
        bad = "../../escaped.txt"
    elif shape == "absolute":
        bad = str(outside / "escaped.txt")
    else:
        links.append(("link", str(outside)))
        bad = "link/escaped.txt"
    files.append((bad, b"pwned\n"))
    publish_crafted_manifest(source, files, links)
    before = {p for p in tmp_path.rglob("*") if ".journal" not in p.parts and "codex-home" not in p.parts}

    result = source.restore()

    codex = tree_result(result, "codex")
    assert codex.error is None
    assert codex.lost == [bad] and list(codex.refused) == [bad]
    assert codex.actions["refused"] == 1
    assert not result.complete
    assert not list(tmp_path.rglob("escaped.txt"))
    after = {p for p in tmp_path.rglob("*") if ".journal" not in p.parts and "codex-home" not in p.parts}
    assert after == before
    # The refused entry is refused alone: the rest of its tree is restored.
    assert (source.local / "codex-home" / "config.toml").read_text() == "harmless\n"
    assert tree_result(result, "claude").error is None


def test_manifest_path_escaping_the_tree_fails_the_cli_restore(source, tmp_path):
    publish_crafted_manifest(source, [("../escaped.txt", b"pwned\n")], [])

    proc = source.run("restore")

    assert proc.returncode == 1
    assert "codex: LOST ../escaped.txt: refused: it has an empty, '.' or '..' component" in proc.stdout
    assert "restore INCOMPLETE" in proc.stderr
    assert not list(tmp_path.rglob("escaped.txt"))


def test_restore_never_writes_through_a_local_symlinked_directory(source, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    day = source.local / "codex-home" / "sessions" / "2026" / "02" / "23"
    remove(day)
    os.symlink(outside, day)

    result = source.restore()

    assert list(outside.iterdir()) == []
    codex = tree_result(result, "codex")
    assert not result.complete and codex.error is None
    assert codex.lost and all(p.startswith("sessions/2026/02/23/") for p in codex.lost)
    assert all("is a symlink" in codex.refused[p] for p in codex.lost)


def test_a_name_the_kernel_cannot_hold_is_refused_alone_and_a_backslash_is_not(source):
    long_name = "x" * 300  # over NAME_MAX: no filesystem here can hold it
    publish_crafted_manifest(source, [("ok\\name.txt", b"kept\n"), (long_name, b"never\n")], [])

    result = source.restore()

    codex = tree_result(result, "codex")
    assert codex.error is None and codex.lost == [long_name]
    assert "longer than 255 bytes" in codex.refused[long_name]
    assert (source.local / "codex-home" / "ok\\name.txt").read_bytes() == b"kept\n"
    assert not result.complete


# --- names: what checkpoint accepts, restore restores, byte for byte --------------------------

#: Names Linux allows that are not traversals, each in a directory of its own.
ODD_NAMES = ["projects/notes\\draft.txt", "nl/new\nline.txt", "sp/ lead and trail ", "dash/-rf", "dash/--help",
             "long/" + "é" * 127 + "x", "ctl/tab\there\x1b[0m", "deep/.journal-tmp/kept.txt",
             ".journal-tmp-0123456789abcdef/looks-like-journal's.part"]


def test_odd_names_and_journal_tmp_entries_round_trip_byte_identical(make_live):
    """A backslash (zips made on Windows), a newline, spaces, a leading '-', a 255-byte
    name, control characters, and entries named ``.journal-tmp`` (a file, a symlink and
    a directory at the top of a tree, a directory below) are checkpointed and restored
    byte for byte; supervise then starts its command."""
    a = make_live("a", fixtures=False)
    fx, hermes, claude = a.local / "fx-home", a.local / "hermes", a.local / "agent-state" / "claude"
    for i, name in enumerate(ODD_NAMES):
        (fx / name).parent.mkdir(parents=True, exist_ok=True)
        (fx / name).write_bytes(b"file %d\n" % i)
    (fx / ".journal-tmp").write_text("a user file named like journal's old temp dir\n")
    hermes.mkdir()
    os.symlink("somewhere\\else", hermes / ".journal-tmp")
    (claude / ".journal-tmp" / "sub").mkdir(parents=True)
    (claude / ".journal-tmp" / "sub" / "notes.md").write_text("kept\n")
    trees = {"fx-home": fx, "hermes": hermes, "agent-state/claude": claude}

    checkpointed = a.run("checkpoint")
    assert checkpointed.returncode == 0 and "warning" not in checkpointed.stderr, checkpointed.stderr

    b = make_live("b", fixtures=False)
    proc = b.run("restore")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "restore complete" in proc.stdout
    for rel, root in trees.items():
        assert Live.snapshot(b.local / rel) == Live.snapshot(root), rel

    c = make_live("c", fixtures=False)
    started = c.home / "started"
    sup = c.run("supervise", "--", sys.executable, "-c", f"open({str(started)!r}, 'w').close()")
    assert sup.returncode == 0, sup.stdout + sup.stderr
    assert started.exists(), "supervise started its command after a complete restore"
    assert Live.snapshot(c.local / "fx-home") == Live.snapshot(fx)


@pytest.mark.parametrize("to_write", [False, True], ids=["nothing-to-write", "files-to-write"])
def test_restore_never_follows_a_symlink_named_like_its_old_temp_dir(bare_live, tmp_path, to_write):
    """A symlink named ``.journal-tmp`` (where restore once kept its temp files) is a user
    entry like any other: restore stages in its own fresh ``.journal-tmp-<random>``
    directory, never writes through the link nor cleans up what it points at."""
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    (fx / "a.txt").write_text("a\n")
    assert bare_live.checkpoint().seq == 1
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.md").write_text("never part of any tree\n")
    (fx / ".journal-tmp").symlink_to(precious)
    if to_write:
        (fx / "a.txt").unlink()

    result = bare_live.restore()

    assert [p.name for p in precious.iterdir()] == ["notes.md"]
    assert (precious / "notes.md").read_text() == "never part of any tree\n"
    assert (fx / ".journal-tmp").is_symlink()
    assert result.complete and tree_result(result, "fx").error is None
    assert (fx / "a.txt").read_text() == "a\n"
    assert not [p for p in fx.iterdir() if p.name.startswith(".journal-tmp-")], "the temp dir is removed"


def test_restore_to_refuses_a_stored_tree_name_that_escapes_the_directory(bare_live, tmp_path):
    """A manifest (from a buggy or hostile writer sharing the bucket) names its tree
    ``../../escaped``: ``restore --to DIR`` refuses it, never joining it to DIR."""
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    (fx / "payload.txt").write_text("written outside --to\n")
    assert bare_live.checkpoint().seq == 1
    repo = bare_live.repo()
    first, first_id = repo.load_manifest(1)
    evil = msgspec.structs.replace(first, seq=2, parent=1, parent_id=first_id,
                                   trees={"../../escaped": first.trees["fx"]})
    repo.put_manifest(encode_manifest(evil)[1], 2)
    dest = tmp_path / "exports" / "x"

    result = bare_live.restore(to=str(dest))

    assert not result.complete
    assert "not a valid tree name" in tree_result(result, "../../escaped").error
    assert list(tmp_path.rglob("payload.txt")) == [fx / "payload.txt"]   # only the live one
    assert not (tmp_path / "escaped").exists()


# --- what the next checkpoint makes of a restore ----------------------------------------------


def test_checkpoint_after_a_fallback_restore_republishes_the_good_copy(source):
    config = source.local / "codex-home" / "config.toml"
    first = source.entries("codex")["config.toml"]
    config.write_text('model = "second"\n')
    source.checkpoint()
    source.corrupt_blob(source.entries("codex")["config.toml"].refs[0])
    config.unlink()
    source.restore()

    result = source.checkpoint()

    assert result.seq == 3
    assert source.repo().load_manifest(3)[0].parent_id == source.repo().load_manifest(2)[1]
    # The good copy's bytes, uploaded afresh: an older manifest's pack may be expired
    # by gc at any time, so a fallback never leans on it.
    republished = source.entries("codex", seq=3)["config.toml"]
    assert [r.id for r in republished.refs] == [r.id for r in first.refs]
    assert {r.pack for r in republished.refs} <= set(source.repo().load_manifest(3)[0].packs)


def missing_packs(live, seq: int, tree: str) -> list[str]:
    """Packs that manifest ``seq``'s ``tree`` names but the store no longer holds."""
    entries, _ = ManifestCache(live.repo()).tree(seq, tree)
    return [r.pack for e in entries for r in e.refs if live.store.head(pack_key(r.pack)) is None]


def test_a_checkpoint_after_a_rollback_and_a_sweep_names_no_deleted_pack(bare_live, tmp_path):
    """``restore --at 1`` writes back manifest 1's content, whose packs gc has
    tombstoned; a sweep deletes them before the next checkpoint, which must upload that
    content again rather than name the deleted packs."""
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    for v in (1, 2, 3):
        (fx / "notes.txt").write_text(f"version {v}\n" * 50)
        set_mtime(fx / "notes.txt", v * 10**18)
        assert bare_live.checkpoint().seq == v
        (fx / "other.txt").write_text("stable\n")
    assert gc(bare_live.repo(), Policy(keep_last=1), 0.0)[0].tombstone_count > 0   # marks manifests 1, 2
    (fx / "notes.txt").unlink()                                 # (or any local copy older than manifest 1)
    assert bare_live.restore(at="1", rollback=True).complete
    assert (fx / "notes.txt").read_text() == "version 1\n" * 50
    assert gc(bare_live.repo(), Policy(keep_last=1), 0.0)[1].deleted > 0             # sweeps them

    assert bare_live.checkpoint().seq == 4

    assert missing_packs(bare_live, 4, "fx") == []
    out = tmp_path / "out"
    result = bare_live.restore(to=str(out))
    assert result.complete, [(t.name, t.lost, t.error) for t in result.trees]
    assert (out / "fx" / "notes.txt").read_text() == "version 1\n" * 50


def test_a_rollback_carries_a_tree_not_configured_here_as_the_newest_manifest_has_it(bare_live, tmp_path):
    """``restore --at 1`` on a machine that does not configure tree ``extra`` (another
    container's): the next checkpoint carries ``extra`` as the newest manifest has it,
    not as manifest 1 had it (whose packs a gc sweep may already have deleted)."""
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    extra = tmp_path / "extra-live"
    extra.mkdir()
    conf = bare_live.home / ".config" / "journal" / "config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text(f'[[trees]]\nname = "extra"\npath = "{extra}"\n')
    for v in (1, 2, 3):
        (extra / "data.txt").write_text(f"extra version {v}\n" * 100)
        (fx / "n.txt").write_text(f"fx {v}\n" * 10)
        assert bare_live.checkpoint().seq == v
    conf.unlink()                                    # this container does not configure "extra"
    gc(bare_live.repo(), Policy(keep_last=1), 0.0)   # marks manifests 1, 2 and their packs
    assert bare_live.restore(at="1", rollback=True).complete
    gc(bare_live.repo(), Policy(keep_last=1), 0.0)   # sweeps: manifest 1's packs are gone

    assert bare_live.checkpoint().seq == 4

    result = verify(bare_live.repo(), full=True)
    assert not result.findings, result.findings
    assert [e.size for p, e in bare_live.entries("extra", 4).items() if p == "data.txt"] == \
        [len("extra version 3\n" * 100)]


def test_rollback_with_at_into_live_trees_survives_the_next_restart(source, make_live):
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    source.checkpoint()
    config.unlink()
    source.restore(at="1", rollback=True)
    assert config.read_text() == 'model = "gpt-5.3-codex"\n'
    source.checkpoint()

    restarted = make_live("b", fixtures=False)
    harness_dirs(restarted)
    restarted.restore()

    assert (restarted.local / "codex-home" / "config.toml").read_text() == 'model = "gpt-5.3-codex"\n'


def test_hot_restart_over_an_unreadable_directory_names_it_and_restores_the_rest(source):
    """As an unprivileged user, a directory at mode 000: restore cannot look at what is
    in it, so it leaves it as it is, says so, and restores everything else; the next
    checkpoint keeps the directory's last checkpoint."""
    secret = source.local / TREES["claude"] / "secret"
    secret.mkdir()
    (secret / "note.md").write_text("private\n")
    source.checkpoint()
    rollout = source.local / "codex-home" / ROLLOUT
    want = rollout.read_bytes()
    rollout.unlink()
    secret.chmod(0)
    try:
        restored = source.run("restore", unprivileged=True)
        secret.chmod(0)  # restore gave the directory its checkpointed mode back, at the end
        checkpointed = source.run("checkpoint", unprivileged=True)
    finally:
        secret.chmod(0o755)

    assert restored.returncode == 0 and "Traceback" not in restored.stderr, restored.stderr
    [warning] = [line for line in restored.stderr.splitlines() if line.startswith("warning:")]
    assert f"restore: cannot read {secret / 'note.md'} (Permission denied); left it as it is" in warning
    assert "1 keep-unreadable" in restored.stdout and "restore complete" in restored.stdout
    assert rollout.read_bytes() == want
    # The state still holds the path's entry: a checkpoint that cannot read it keeps it.
    assert checkpointed.returncode == 0 and f"cannot read {secret}" in checkpointed.stderr, checkpointed.stderr
    assert "secret/note.md" in source.entries("claude")
    assert (secret / "note.md").read_text() == "private\n"


def test_restore_onto_a_full_disk_names_the_file_and_the_filesystem_to_free(bare_live, small_tmpfs):
    claude = bare_live.local / TREES["claude"]
    claude.mkdir(parents=True)
    (claude / "big.bin").write_bytes(os.urandom(256 << 10))
    bare_live.checkpoint()
    disk = small_tmpfs("128k")
    fresh = Live(disk, bare_live.store_path)
    (fresh.local / TREES["claude"]).mkdir(parents=True)

    line = one_line_error(fresh.run("restore"))

    assert line == (f"journal: error: {fresh.local / TREES['claude'] / 'big.bin'}: No space left on device; "
                    f"free space on the filesystem mounted at {disk}")
    assert not any(p.name.endswith(".part") for p in disk.rglob("*")), "no temp file is left behind"


# --- the restore-complete marker and fallbacks: what they tell the next checkpoint ----------


def test_a_restore_killed_after_moving_a_bad_database_aside_leaves_checkpoints_refused(make_live, tmp_path):
    """A hot restart finds its database invalid, moves it aside, and is SIGKILLed before
    the rebuilt copy is installed. The previous restore's marker must not survive that:
    the next checkpoint would publish the tree without its database."""
    a = make_live("a", fixtures=False)
    share = a.local / "opencode-share"
    db = share / "opencode.db"
    share.mkdir()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t(x INTEGER PRIMARY KEY, y)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, os.urandom(40).hex()) for i in range(500)])
    con.commit()
    con.close()
    for i in range(3):
        (share / f"session-{i}.json").write_text(json.dumps({"id": i}))
    assert a.checkpoint().seq == 1
    assert a.run("restore").returncode == 0       # the previous restore: its marker is set
    db.write_bytes(b"not a database, " * 400)     # the agent died mid-write: invalid now

    killed = subprocess.run([sys.executable, str(write_tripwire(tmp_path)), "restore"],
                            env=clean_env({**a.env, "JOURNAL_TEST_KILL": "replace:after:/invalid/"}),
                            capture_output=True, text=True, timeout=60)

    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not db.exists() and len(list((a.local / ".journal").glob("invalid/*/opencode/opencode.db"))) == 1
    keys = sorted(a.store.list(""))
    refused = a.run("checkpoint")
    assert refused.returncode == 1 and "journal restore" in refused.stderr, refused.stderr
    assert sorted(a.store.list("")) == keys, "a checkpoint published the tree without its database"
    again = a.run("restore")
    assert again.returncode == 0, again.stderr
    assert a.run("checkpoint").returncode == 0
    assert "opencode.db" in a.entries("opencode") and db.exists()


def test_a_restore_past_a_damaged_index_page_says_so_and_the_next_checkpoint_records_it(source):
    """The newest manifest's index page of one tree is damaged: restore takes that tree
    from the checkpoint before. It must say so (summary, --json, exit 3), and the next
    checkpoint, which makes that older version the newest, records why."""
    config = source.local / "codex-home" / "config.toml"
    config.write_text('model = "second"\n')
    assert source.checkpoint().seq == 2
    source.corrupt_blob(source.repo().load_manifest(2)[0].trees["codex"].root)
    config.unlink()

    proc = source.run("restore", "--json")

    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["complete"] and doc["fallback"] and doc["seq"] == 2
    seqs = {t["name"]: t["seq"] for t in doc["trees"]}
    assert seqs == {"claude": 2, "codex": 1, "gemini": 2, "openclaw": 2}
    codex = next(t for t in doc["trees"] if t["name"] == "codex")
    assert codex["skipped"] and codex["skipped"][0].startswith("checkpoint 2 is unusable")
    assert config.read_text() == 'model = "gpt-5.3-codex"\n'
    text = source.run("restore")
    assert text.returncode == 3
    summary = text.stdout.strip().splitlines()[-1]
    assert summary.startswith("restore complete from a FALLBACK") and "codex: restored from checkpoint 1" in summary

    committed = source.run("checkpoint")

    assert committed.returncode == 0, committed.stderr
    assert "checkpoint 3: tree codex: restored from checkpoint 1" in committed.stderr
    restored = source.repo().load_manifest(3)[0].restored
    assert list(restored) == ["codex"] and "checkpoint 2 is unusable" in restored["codex"]
    log = source.run("log")
    assert "RESTORED codex: restored from checkpoint 1" in log.stdout
    assert json.loads(source.run("log", "--json").stdout)[0]["restored"] == restored
    state = load_state(str(source.local / ".journal"), source.repo().store_id)
    assert all(t.restored is None for t in state.trees.values()), "said once, by checkpoint 3"
    assert source.run("restore").returncode == 0    # checkpoint 3 is whole: no fallback now


def test_a_forked_child_of_a_process_whose_fetch_threads_run_makes_its_own(tmp_path):
    """A process that read a large file (its fetch pool is up) and then forks: the child
    holds none of those threads, and a pool inherited from the parent would take its
    reads and never run them (a torture trial's forked restore waited for ever)."""
    script = tmp_path / "fork.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        from journal.repository import fetch
        fetch._executor().submit(lambda: 1).result()
        pid = os.fork()
        if pid == 0:
            try:
                os._exit(0 if fetch._executor().submit(lambda: 42).result(timeout=10) == 42 else 3)
            except BaseException:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        fetch.shutdown()
        sys.exit(os.WEXITSTATUS(status))
    """))

    proc = subprocess.run([sys.executable, str(script)], cwd=Path(__file__).resolve().parent.parent, timeout=60)

    assert proc.returncode == 0, "the forked child's read never ran"
