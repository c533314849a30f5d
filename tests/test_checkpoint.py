"""Checkpoint: what one tick publishes, and what it must never publish."""

from __future__ import annotations

import contextlib
import errno
import functools
import gc as collector
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from heldfile import HeldFile
from journal.checkpoint.capture import AHEAD_FILE, CHUNK, ROLL_BYTES, SEGMENT_TARGET, capture_item
import journal.checkpoint.run as checkpoint_module
from journal.checkpoint.run import checkpoint
from journal.errors import ObjectNotFound, StoreError
from journal.local.errors import LocalWriteError
from journal.repository.errors import HistoryWithoutState, ManifestConflict, NotAStore
from journal.gc.run import gc
from journal.verify import verify
from journal.repository.history import ManifestCache
from journal.local.state import load_state
from journal.format.model import KIND_FILE, KIND_JSONL, KIND_SYMLINK, Manifest, decode, is_pending
from journal.format.objects import KIND_CHUNK, KIND_DBPAGE, KIND_SEGMENT, decode_record
import journal.repository.pack as pack_module
from journal.repository.pack import PackWriter
from journal.report import Collector
from journal.repository.repository import Repository
from journal.gc.retention import Policy
from journal.local.walk import Matcher, walk_tree

from conftest import Live, OpencodeLive, peak_rss
from faults import FaultyStore
from conftest import one_line_error
from conftest import container_env, resident_pages

ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


def codex_line(n: int) -> bytes:
    return json.dumps({"timestamp": f"2026-02-24T12:10:{n % 60:02d}.000Z", "type": "event_msg",
                       "payload": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": n}}}}
                      ).encode() + b"\n"


def counters(live) -> tuple[int, int]:
    return live.store.puts, live.store.put_bytes


def restored(live, tree: str, tmp_path: Path, seq: int | None = None) -> Path:
    """Restore every stored tree with ``--to``; returns the copy of ``tree``."""
    out = tmp_path / f"export-{seq}-{len(list(tmp_path.glob('export-*')))}"
    live.restore(to=str(out), at=None if seq is None else str(seq))
    return out / tree


# --- what a tick writes -------------------------------------------------------------


def test_first_checkpoint_publishes_every_tree_in_three_objects(live):
    result = live.checkpoint()

    assert result.seq == 1
    assert sorted(t.name for t in result.trees) == ["claude", "codex", "openclaw"]
    assert sum(t.files for t in result.trees) == 11
    assert result.objects == 3  # one data pack, one index pack, the manifest
    assert live.store.puts == 4  # ... plus the store's config object
    assert live.repo().manifest_seqs() == [1]


def test_a_commit_saves_new_path_states_naming_the_stored_packs_and_leaves_the_scanned_ones_as_they_were(
        live, monkeypatch):
    """The scan's entries name packs by placeholder until the data pack is closed. The
    commit replaces each such path state with a new one (a path state is never changed
    in place: a save finds what changed by identity), and the state it saves names
    only packs the manifest names."""
    scanned = []
    real = checkpoint_module.commit_manifest

    def commit(*args, **kwargs):
        scanned.extend((fs, fs.entry) for read in kwargs["captured"].values() for fs in read)
        return real(*args, **kwargs)

    monkeypatch.setattr(checkpoint_module, "commit_manifest", commit)
    result = live.checkpoint()

    assert scanned and any(is_pending(r.pack) for fs, _ in scanned for r in fs.entry.refs)
    assert all(fs.entry is entry for fs, entry in scanned)
    packs = set(live.manifest(result.seq).packs)
    saved = [fs for cache in load_state(str(live.state_dir), live.repo().store_id).trees.values()
             for fs in cache.files.values()]
    assert {r.pack for fs in saved for r in fs.entry.refs} <= packs


def test_idle_checkpoint_writes_nothing(live):
    live.checkpoint()
    before = counters(live)

    result = live.checkpoint()

    assert result.seq is None and result.objects == 0 and result.bytes == 0
    assert counters(live) == before
    assert live.repo().manifest_seqs() == [1]


def test_idle_checkpoint_in_a_new_process_writes_nothing(live):
    live.checkpoint()
    packs = sorted(p.name for p in (live.store_path / "packs").rglob("*"))

    proc = live.run("checkpoint")

    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("idle:")
    assert live.repo().manifest_seqs() == [1]
    assert sorted(p.name for p in (live.store_path / "packs").rglob("*")) == packs


def test_appending_a_line_uploads_only_the_new_line(live, tmp_path):
    live.checkpoint()
    rollout = live.local / "codex-home" / ROLLOUT
    old = live.entries("codex")[ROLLOUT]
    line = codex_line(1)
    with open(rollout, "ab") as fh:
        fh.write(line)
    puts, put_bytes = counters(live)

    result = live.checkpoint()

    new = live.entries("codex")[ROLLOUT]
    assert result.seq == 2 and result.objects == 3  # data pack, index pack, manifest
    assert live.store.puts - puts == 3
    assert live.store.put_bytes - put_bytes < 16 * 1024 < rollout.stat().st_size
    assert new.refs[:-1] == old.refs and new.refs[-1].size == len(line)
    assert [t.changed for t in result.trees if t.name == "codex"] == [1]
    assert (restored(live, "codex", tmp_path) / ROLLOUT).read_bytes() == rollout.read_bytes()


def test_torn_trailing_line_is_published_only_once_complete(live, tmp_path):
    chat = live.local / "codex-home" / "history.jsonl"
    chat.write_bytes(codex_line(1) + b'{"timestamp": "2026-02-24T12:10:02.000Z", "ty')
    live.checkpoint()
    assert live.entries("codex")["history.jsonl"].size == len(codex_line(1))
    assert (restored(live, "codex", tmp_path, seq=1) / "history.jsonl").read_bytes() == codex_line(1)

    with open(chat, "ab") as fh:
        fh.write(b'pe": "event_msg"}\n')
    result = live.checkpoint()

    assert result.seq == 2
    assert (restored(live, "codex", tmp_path, seq=2) / "history.jsonl").read_bytes() == chat.read_bytes()


def test_torn_line_alone_uploads_no_data(live):
    chat = live.local / "codex-home" / "history.jsonl"
    chat.write_bytes(codex_line(1))
    live.checkpoint()
    before = live.entries("codex")["history.jsonl"]
    with open(chat, "ab") as fh:
        fh.write(b'{"timestamp": "2026-02-24T12:10:02.000Z", "ty')

    result = live.checkpoint()

    after = live.entries("codex")["history.jsonl"]
    assert (after.size, after.refs) == (before.size, before.refs)
    assert result.objects <= 2  # at most a new index page and manifest; no data pack


def test_gemini_rewrite_through_rename_is_rebased(live, tmp_path):
    chat = live.add_gemini_tree()
    rel = str(chat.relative_to(live.local / "agent-state/gemini-home/.gemini"))
    live.checkpoint()
    # {"$rewindTo": id}: Gemini CLI rewrites the chat through a temp file and a rename,
    # dropping everything after the rewind point and changing an earlier record.
    rewritten = b"".join(live.gemini_record(i, "edited" if i == 3 else None) for i in range(20))
    rewritten += b"".join(live.gemini_record(i, "after the rewind " * 40) for i in range(20, 45))
    tmp = chat.with_name(chat.name + ".tmp")
    tmp.write_bytes(rewritten)
    os.replace(tmp, chat)

    result = live.checkpoint()

    assert result.seq == 2
    entry = live.entries("gemini")[rel]
    assert entry.kind == KIND_JSONL and entry.size == len(rewritten)
    assert (restored(live, "gemini", tmp_path) / rel).read_bytes() == rewritten


def test_jsonl_truncated_in_place_is_rebased(live, tmp_path):
    rollout = live.local / "codex-home" / ROLLOUT
    live.checkpoint()
    shorter = rollout.read_bytes()[:4096]
    shorter = shorter[: shorter.rfind(b"\n") + 1] + codex_line(7)
    with open(rollout, "r+b") as fh:  # same inode: a non-atomic migration
        fh.truncate(0)
        fh.write(shorter)

    live.checkpoint()

    assert live.entries("codex")[ROLLOUT].size == len(shorter)
    assert (restored(live, "codex", tmp_path) / ROLLOUT).read_bytes() == shorter


def test_jsonl_rewritten_in_place_to_a_longer_file_is_rebased(live, tmp_path):
    chat = live.local / "codex-home" / "history.jsonl"
    chat.write_bytes(b"".join(codex_line(i) for i in range(10)))
    live.checkpoint()
    longer = b"".join(codex_line(i + 100) for i in range(12))
    with open(chat, "r+b") as fh:
        fh.write(longer)

    live.checkpoint()

    assert (restored(live, "codex", tmp_path) / "history.jsonl").read_bytes() == longer


def test_non_jsonl_files_are_stored_byte_for_byte(live, tmp_path):
    codex = live.local / "codex-home"
    files = {
        "config.toml": b'model = "gpt-5.3-codex"\n[projects."/home/node/work"]\ntrust_level = "trusted"\n',
        "auth.json": b'{"OPENAI_API_KEY": null, "tokens": {"id_token": "x.y.z"}}',
        "notes.md": b"# notes\r\nno newline at the end",
        "blob.bin": bytes(range(256)) * 4 + b"\0" * 4096 + b"\n\n\0tail",
        "empty.json": b"",
        # A transcript damaged the way Claude Code's have been: a torn record run into
        # the next one, a run of NULs, a duplicated block. Stored as is, never "fixed".
        "damaged.jsonl": b'{"a": 1}\n{"b": {"tor{"c": 3}\n' + b"\0" * 300 + b'\n{"a": 1}\n{"a": 1}\n',
    }
    for name, data in files.items():
        (codex / name).write_bytes(data)

    live.checkpoint()

    out = restored(live, "codex", tmp_path)
    assert {name: (out / name).read_bytes() for name in files} == files
    kinds = {p: e.kind for p, e in live.entries("codex").items() if p in files}
    assert kinds == {**{n: KIND_FILE for n in files}, "damaged.jsonl": KIND_JSONL}


def test_a_checkpoint_and_a_restore_of_a_large_tree_run_no_cycle_collection(live, tmp_path):
    """Their objects are freed by reference counting: the cycle collector is paused for
    each (it ran ~150 times in a 20,000-file tick; here ~20 times) and enabled again
    after, also after a failure (its first allocation after may run one collection)."""
    many = live.local / "codex-home" / "many"
    for d in range(20):
        (many / f"d{d}").mkdir(parents=True)
        for f in range(100):
            (many / f"d{d}" / f"f{f}.json").write_text(f'{{"n": {f}}}')
    started = []

    def count(phase, info):
        if phase == "start":
            started.append(info["generation"])

    collector.callbacks.append(count)
    try:
        live.checkpoint()
        (many / "d3" / "f7.json").write_text('{"n": "changed"}')
        live.checkpoint()
        restored(live, "codex", tmp_path)
    finally:
        collector.callbacks.remove(count)

    assert len(started) <= 3, f"none inside the three operations, at most one after each: {started}"
    assert collector.isenabled()
    (many / "d4" / "f8.json").write_text('{"n": "changed too"}')
    with pytest.raises(StoreError):
        live.checkpoint(store=FaultyStore(live.store, fail_when=lambda method, key: method == "put_if_absent"))
    assert collector.isenabled()


def test_one_byte_change_in_a_large_file_reuploads_one_chunk(live, tmp_path):
    big = live.local / "codex-home" / "blob.bin"
    big.write_bytes(os.urandom(5 * CHUNK))
    live.checkpoint()
    old = live.entries("codex")["blob.bin"]
    with open(big, "r+b") as fh:
        fh.seek(3 * CHUNK + 12345)
        fh.write(b"\0" if fh.read(1) != b"\0" else b"\1")
    puts, put_bytes = counters(live)

    result = live.checkpoint()

    new = live.entries("codex")["blob.bin"]
    assert len(old.refs) == len(new.refs) == 5
    assert [a.id == b.id for a, b in zip(old.refs, new.refs)] == [True, True, True, False, True]
    assert result.objects == 3 and live.store.puts - puts == 3
    assert live.store.put_bytes - put_bytes < 2 * CHUNK
    assert (restored(live, "codex", tmp_path) / "blob.bin").read_bytes() == big.read_bytes()


def test_a_large_file_read_ahead_hashes_each_chunk_once_and_restores_byte_for_byte(live, tmp_path, monkeypatch):
    """Past ``AHEAD_FILE`` a file's chunks are read, hashed and compressed by threads
    ahead of the pack writer; the SHA-256 computed there is both the chunk's id and its
    record's, so each chunk is hashed once (it was hashed twice)."""
    big = live.local / "codex-home" / "weights.bin"
    chunks = [os.urandom(CHUNK) for _ in range(AHEAD_FILE // CHUNK + 2)]
    data = b"".join(chunks) + b"tail"
    big.write_bytes(data)
    sha256 = hashlib.sha256
    whole_chunks = []

    def counting(payload=b"", **kwargs):
        if len(payload) == CHUNK:
            whole_chunks.append(1)
        return sha256(payload, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", counting)
    live.checkpoint()
    monkeypatch.undo()

    entry = live.entries("codex")["weights.bin"]
    assert [ref.id for ref in entry.refs] == [sha256(c).hexdigest() for c in chunks] + [sha256(b"tail").hexdigest()]
    assert len(whole_chunks) == len(chunks)
    assert (restored(live, "codex", tmp_path) / "weights.bin").read_bytes() == data


def test_a_large_files_pack_names_are_hashed_once_beside_the_writer(live, monkeypatch):
    """A pack's name is the SHA-256 of its bytes: each byte is hashed once, as it is
    spooled (never read back), and a large record's share in the hash thread, so the
    checkpoint's own thread only writes (it hashed every pack byte in series)."""
    big = live.local / "codex-home" / "weights.bin"
    big.write_bytes(os.urandom(AHEAD_FILE + 2 * CHUNK))
    sha256, hashers = hashlib.sha256, []

    class Counting:
        def __init__(self):
            self.digest, self.updates = sha256(), []
            hashers.append(self)

        def update(self, data):
            self.updates.append((threading.current_thread() is threading.main_thread(), len(data)))
            self.digest.update(data)

        def hexdigest(self):
            return self.digest.hexdigest()

    monkeypatch.setattr(pack_module, "hashlib", types.SimpleNamespace(sha256=Counting))
    live.checkpoint()
    monkeypatch.undo()

    named = {h.hexdigest(): h for h in hashers}
    stored = {p.name: p.stat().st_size for p in (live.store_path / "packs").glob("*/*")}
    new = [name for name in stored if name in named]
    assert new and sum(n for h in hashers for _, n in h.updates) == sum(stored[name] for name in new)
    in_writer = sum(n for h in hashers for in_main, n in h.updates if in_main)
    assert in_writer < CHUNK   # the small records (the index pages): not one chunk of the 10 MiB


def test_a_large_pack_leaves_the_page_cache_as_it_is_spooled(tmp_path, disk_dir):
    """A 48 MiB file's pack is spooled holding at most about two writeback steps of page
    cache, not all of its pages (``atomic.Writeback``: its fsync then finds it written,
    and each next write reuses pages just freed); it is stored whole and restores
    byte for byte. A small pack stays cached."""
    from journal.atomic import WRITEBACK_BYTES
    from journal.config import load_config
    from journal.restore.run import restore
    from journal.store import open_store

    fx = tmp_path / "local" / "fx-home"
    fx.mkdir(parents=True)
    data = os.urandom(48 << 20)
    (fx / "weights.bin").write_bytes(data)
    (tmp_path / "home").mkdir()
    env = container_env(tmp_path / "local", disk_dir / "store", tmp_path / "home",
                        JOURNAL_STATE_DIR=str(disk_dir / "state"))   # the spool beside the store: linked, not copied
    result = checkpoint(load_config(env=env), open_store(env["JOURNAL_STORE"]))
    packs = sorted((disk_dir / "store" / "packs").glob("*/*"), key=lambda p: p.stat().st_size)
    assert result.objects >= 2 and packs[-1].stat().st_size > 48 << 20
    step_pages = WRITEBACK_BYTES // os.sysconf("SC_PAGE_SIZE")
    assert resident_pages(packs[-1]) <= 2 * step_pages + step_pages // 2
    assert all(resident_pages(p) > 0 for p in packs[:-1])   # the manifest's and index's small packs
    restore(load_config(env=env), open_store(env["JOURNAL_STORE"]), to=str(tmp_path / "out"))
    assert (tmp_path / "out" / "fx" / "weights.bin").read_bytes() == data


def _initial_checkpoint_encodes(box: OpencodeLive, monkeypatch) -> tuple[Counter, str]:
    """``box``'s initial checkpoint; the records of chunks, segments and page groups of
    at least ``ENCODE_AHEAD_MIN`` it encoded, by (kind, "main" or "thread"), and the
    name of its largest pack."""
    import journal.format.objects as objects
    import journal.sqlite.capture as sqlite_capture

    where: Counter = Counter()

    def encode(kind, payload, **kwargs):
        if kind in (KIND_CHUNK, KIND_SEGMENT, KIND_DBPAGE) and len(payload) >= pack_module.ENCODE_AHEAD_MIN:
            where[(kind, "main" if threading.current_thread() is threading.main_thread() else "thread")] += 1
        return objects.encode_record(kind, payload, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(pack_module, "encode_record", encode)
        patch.setattr(sqlite_capture, "encode_record", encode)
        assert box.tick() == 1
    packs = sorted((p.stat().st_size, p.name) for p in (box.store_path / "packs").glob("*/*"))
    return where, packs[-1][1]


def _box_with_a_database(tmp_path: Path, name: str) -> OpencodeLive:
    """A container with the fixtures' transcripts, three 160 KB JSON files and a 1.5 MiB
    database, made in the same order every time (the walk lists a directory in the
    order its names were made: the same trees give the same packs)."""
    box = OpencodeLive(tmp_path / name, tmp_path / f"store-{name}", fixtures=True)
    con = sqlite3.connect(box.db)
    con.execute("CREATE TABLE m(id INTEGER PRIMARY KEY, body TEXT)")
    con.executemany("INSERT INTO m(body) VALUES (?)", ((f"row {i} " * 40,) for i in range(4000)))
    con.commit()
    con.close()
    for i in range(3):
        (box.db.parent / f"session-{i}.json").write_text(json.dumps({"i": i, "body": ["text"] * 20000}))
    return box


def test_an_initial_checkpoint_compresses_in_threads_into_the_packs_a_serial_one_writes(tmp_path, monkeypatch):
    """The chunks and transcript segments of a checkpoint's files, and a database's
    whole page groups, are compressed by threads while the scan reads on
    (``PackWriter.add_ahead``, ``sqlite/capture.py``'s ``_Cut``), and the pack holds
    the very bytes of a checkpoint that compresses each record in its turn."""
    import journal.sqlite.capture as sqlite_capture

    ahead, serial = (_box_with_a_database(tmp_path, name) for name in ("ahead", "serial"))
    assert ahead.db.stat().st_size > 3 * sqlite_capture.PAGE_GROUP_BYTES
    threaded, pack = _initial_checkpoint_encodes(ahead, monkeypatch)
    assert {kind for kind, _ in threaded} == {KIND_CHUNK, KIND_SEGMENT, KIND_DBPAGE}
    assert not [key for key in threaded if key[1] == "main"], threaded

    monkeypatch.setattr(PackWriter, "add_ahead", lambda self, kind, payload, **kw: self.add(kind, payload, **kw))
    monkeypatch.setattr(sqlite_capture, "ENCODE_AHEAD", 0)
    _, serial_pack = _initial_checkpoint_encodes(serial, monkeypatch)
    assert pack == serial_pack


def test_a_large_files_incompressible_chunks_are_spooled_from_the_bytes_read(live, tmp_path, monkeypatch):
    """An incompressible chunk's record goes to the spool in pieces, its payload's
    straight from the buffer the chunk was read into: one ``writev`` a record and no
    copy of the payload in memory (the record was joined first)."""
    big = live.local / "codex-home" / "weights.bin"
    data = os.urandom(AHEAD_FILE + 2 * CHUNK)
    big.write_bytes(data)
    writev, calls, from_read = os.writev, [], []

    def counting(fd, buffers):
        calls.append(1)
        from_read.append(sum(len(b) for b in buffers if isinstance(b, memoryview) and len(b.obj) == CHUNK))
        return writev(fd, buffers)

    monkeypatch.setattr(pack_module.os, "writev", counting)
    live.checkpoint()
    monkeypatch.undo()

    assert len(calls) == len(data) // CHUNK and sum(from_read) == len(data)
    assert (restored(live, "codex", tmp_path) / "weights.bin").read_bytes() == data


def test_a_record_in_pieces_is_spooled_whole_through_short_writes(live, tmp_path, monkeypatch):
    """``writev`` may write less than it was given (a signal, a nearly full disk): the
    rest is written after it, and the pack holds the record byte for byte."""
    writev = os.writev

    def short(fd, buffers):
        return writev(fd, [bytes(b"".join(buffers)[:1000])])

    monkeypatch.setattr(pack_module.os, "writev", short)
    writer = PackWriter(live.store, str(tmp_path / "spool"))
    pieces = [b"head", memoryview(os.urandom(5000))[7:4000], b"", b"x" * 3000]
    ref = writer.add_record("00" * 32, pieces, 1)
    writer.finish()
    monkeypatch.undo()

    pack = writer.resolve(ref).pack
    assert ref.length == sum(map(len, pieces))
    assert live.store.get(f"packs/{pack[:2]}/{pack}") == b"".join(pieces)
    assert pack == hashlib.sha256(b"".join(pieces)).hexdigest()


# --- transcripts changed other than by appending (design §6) ------------------------------

HELD = "sessions/2026/03/01/rollout-held.jsonl"   # under codex-home


def cli_checkpoint(live) -> dict:
    proc = live.run("checkpoint", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def cli_export(live, tmp_path: Path) -> Path:
    """The newest checkpoint restored by the CLI into a new directory; returns the codex copy."""
    out = tmp_path / f"cli-export-{len(list(tmp_path.glob('cli-export-*')))}"
    proc = live.run("restore", "--to", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "codex"


def held_transcript(live) -> HeldFile:
    """A codex transcript held open by its writer, checkpointed by the CLI as three
    segments: 40 lines, then line 1000, then line 1001 (one append a tick)."""
    held = HeldFile(live.local / "codex-home" / HELD)
    held.append(b"".join(codex_line(i) for i in range(40)))
    cli_checkpoint(live)
    for n in (1000, 1001):
        held.append(codex_line(n))
        cli_checkpoint(live)
    assert len(live.entries("codex")[HELD].refs) == 3
    return held


def edit_line(held: HeldFile, n: int) -> None:
    """Rewrite line ``n`` in place, same size, through the writer's open descriptor."""
    line = codex_line(n)
    before = held.path.stat().st_mtime_ns
    at = held.path.read_bytes().index(line)
    assert held.write_at(at, line.replace(str(n).encode(), b"9" * len(str(n)))) != before


def test_same_size_edit_of_an_earlier_line_is_captured_not_idle(live, tmp_path):
    with held_transcript(live) as held:
        edit_line(held, 1000)  # same inode, same size, a new mtime: no new line

        tick = cli_checkpoint(live)

        assert tick["seq"] == 4, "an in-place edit was reported idle"
        assert [w for w in tick["warnings"] if str(held.path) in w and "rewritten in place" in w]
        assert (cli_export(live, tmp_path) / HELD).read_bytes() == held.path.read_bytes()
        held.append(codex_line(1002))
        cli_checkpoint(live)
        assert (cli_export(live, tmp_path) / HELD).read_bytes() == held.path.read_bytes()


def test_earlier_line_edited_while_the_transcript_grew_is_captured(live, tmp_path):
    with held_transcript(live) as held:
        edit_line(held, 1000)           # the middle segment: neither the last nor an anchor
        held.append(codex_line(1002))   # ... and a new line in the same interval

        tick = cli_checkpoint(live)

        assert [w for w in tick["warnings"] if str(held.path) in w and "rewritten in place" in w]
        assert (cli_export(live, tmp_path) / HELD).read_bytes() == held.path.read_bytes()


def test_rolling_check_finds_an_edit_in_a_large_growing_transcript_within_its_bound(live, tmp_path):
    """Past ROLL_BYTES a growing capture re-hashes only a window of the earlier segments;
    the window rolls on, so an edit is found within one pass over them (design §6)."""
    path = live.local / "codex-home" / HELD
    path.parent.mkdir(parents=True)
    lines = [codex_line(i) for i in range(3 * SEGMENT_TARGET // len(codex_line(0)) + 2000)]
    path.write_bytes(b"".join(lines))
    cli_checkpoint(live)
    refs = live.entries("codex")[HELD].refs
    assert len(refs) >= 4 and sum(r.size for r in refs[:-1]) > 2 * ROLL_BYTES
    third = sum(r.size for r in refs[:2]) + 1000   # inside the third segment
    with HeldFile(path) as held:
        n = len(b"".join(lines)[:third].splitlines()) + 1
        edit_line(held, n)
        found = None
        for tick in range(1, len(refs) + 1):     # the bound: one growing capture per earlier segment
            held.append(codex_line(10_000 + tick))
            if [w for w in cli_checkpoint(live)["warnings"] if "rewritten in place" in w]:
                found = tick
                break
        assert found is not None, f"the edit was not found within {len(refs)} growing checkpoints"
        assert found > 1, "the first window reached the third segment: the re-check is not bounded"
        assert (cli_export(live, tmp_path) / HELD).read_bytes() == held.path.read_bytes()


def test_transcript_that_shrinks_is_captured_as_a_rewrite_with_a_warning(live, tmp_path):
    with held_transcript(live) as held:
        before = held.path.read_bytes()
        keep = before.index(codex_line(20))
        held.truncate(keep)

        proc = live.run("checkpoint")

        assert proc.returncode == 0, proc.stderr
        assert f"transcript {held.path} shrank from {len(before)} to {keep} bytes" in proc.stderr
        assert live.entries("codex")[HELD].size == keep
        assert (cli_export(live, tmp_path) / HELD).read_bytes() == before[:keep]


# --- what a tick takes, and what it leaves out -----------------------------------------


def test_symlinks_are_stored_as_links_and_never_followed(live, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not part of any tree")
    codex = live.local / "codex-home"
    os.symlink("sessions/2026", codex / "latest")
    os.symlink(str(outside), codex / "outside-dir")
    os.symlink(str(outside / "secret.txt"), codex / "outside-file")
    os.symlink("does-not-exist", codex / "dangling")

    live.checkpoint()

    entries = live.entries("codex")
    links = {p: e.target for p, e in entries.items() if e.kind == KIND_SYMLINK}
    assert links == {"latest": "sessions/2026", "outside-dir": str(outside),
                     "outside-file": str(outside / "secret.txt"), "dangling": "does-not-exist"}
    assert not [p for p in entries if p.startswith(("outside-dir/", "latest/"))]
    out = restored(live, "codex", tmp_path)
    assert {p: os.readlink(out / p) for p in links} == links
    assert (out / "outside-file").is_symlink()


def test_codex_preset_snapshots_its_databases_and_leaves_out_logs_and_caches(live):
    """Codex 0.171 keeps user state only in SQLite (docs/harnesses.md): every
    ``*.sqlite`` is a snapshot, but ``logs_*.sqlite`` (a log), the skills it unpacks at
    start, its live locks and its caches stay out."""
    codex = live.local / "codex-home"
    user_dbs = ["state_5.sqlite", "goals_1.sqlite", "queue_1.sqlite", "memories_1.sqlite", "thread_history_1.sqlite"]
    for rel in [*user_dbs, "logs_2.sqlite"]:
        with sqlite3.connect(codex / rel) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE t (x)")
            db.execute("INSERT INTO t VALUES (?)", (rel,))
    for rel in ["logs.db", "cache/models.json", ".tmp/plugins.zip", "db-backups/state_4.sqlite",
                "mcp-oauth-locks/server.lock", "thread-writer-locks/.coordination.lock", "skills/.system/imagegen/SKILL.md"]:
        (codex / rel).parent.mkdir(parents=True, exist_ok=True)
        (codex / rel).write_bytes(b"SQLite format 3\0" + b"x" * 100)
    kept = ["auth.json", "config.toml", "history.jsonl", "session_index.jsonl", "skills/mine/SKILL.md"]
    for rel in kept:
        (codex / rel).parent.mkdir(parents=True, exist_ok=True)
        (codex / rel).write_text("{}\n")

    live.checkpoint()

    stored = {p: e.kind for p, e in live.entries("codex").items() if e.kind != "dir"}
    others = {p: kind for p, kind in stored.items() if not p.startswith("sessions/")}
    assert others == {**{p: "jsonl" if p.endswith(".jsonl") else "file" for p in kept},
                      **{p: "sqlite" for p in user_dbs}}
    assert len(stored) == len(others) + 6  # the six rollouts


def test_fx_preset_leaves_out_locks_and_pending_index(live):
    fx = live.local / "fx-home"
    kept = ["sessions/s1/events.jsonl", "sessions/s1/meta.json", "config.json"]
    left_out = ["sessions/s1/session.lock", "sessions/s1/commit.lock", "sessions/s1/subagent/a1.lock",
                "index.pending"]
    for rel in kept + left_out:
        (fx / rel).parent.mkdir(parents=True, exist_ok=True)
        (fx / rel).write_text('{"pid": 4242}\n')

    live.checkpoint()

    stored = {p for p, e in live.entries("fx").items() if e.kind != "dir"}
    assert stored == set(kept)


def open_wal_databases(root: Path, rels: list[str]) -> list[sqlite3.Connection]:
    """A WAL database holding one row at each of ``rels`` under ``root``, its writer left
    open (so its ``-wal`` and ``-shm`` stay) for the caller to close."""
    writers = []
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        writers.append(sqlite3.connect(root / rel, isolation_level=None))
        writers[-1].execute("PRAGMA journal_mode=WAL")
        writers[-1].execute("CREATE TABLE t (x)")
        writers[-1].execute("INSERT INTO t VALUES (?)", (rel,))
    return writers


def test_hermes_preset_snapshots_its_stores_and_leaves_out_logs_caches_and_process_files(live):
    """Hermes 0.19 (docs/harnesses.md): every database its own ``hermes backup --quick``
    copies with the backup API is a snapshot, wherever it sits; its logs, the caches it
    rebuilds, its own backups and the files naming live processes stay out (a skill named
    ``logs`` stays in); its config, secrets, memories, skills, cron jobs and media are
    plain files."""
    hermes = live.local / "hermes"
    dbs = ["state.db", "kanban.db", "projects.db", "response_store.db", "memory_store.db",
           "verification_evidence.db", "cron/executions.db", "gateway/discord_message_recovery.db",
           "kanban/boards/ops/kanban.db", "profiles/coder/state.db"]
    writers = open_wal_databases(hermes, dbs)
    kept = ["config.yaml", ".env", "auth.json", "SOUL.md", "memories/MEMORY.md", "skills/git/SKILL.md",
            "skills/.curator_state", "skills/logs/SKILL.md", "cron/jobs.json", "gateway_state.json",
            "cache/images/a.png", "profiles/coder/config.yaml"]
    left_out = ["logs/agent.log", "logs/curator/run.md", ".update_check", ".skills_prompt_snapshot.json",
                ".tirith-install-failed", "auth.lock", "gateway.lock", "gateway.pid", "cron.pid", "processes.json",
                "checkpoints/4f2a/HEAD", "backups/hermes.zip", "node_modules/x/index.js", "skills/git/.venv/pyvenv.cfg",
                "skills/git/__pycache__/a.pyc", ".cache/pip/x", "profiles/coder/gateway.pid", "profiles/coder/logs/a.log"]
    for rel in kept + left_out:
        (hermes / rel).parent.mkdir(parents=True, exist_ok=True)
        (hermes / rel).write_text('{"pid": 4242}\n')

    live.checkpoint()
    for db in writers:
        db.close()

    stored = {p: e.kind for p, e in live.entries("hermes").items() if e.kind != "dir"}
    assert stored == {**{p: "file" for p in kept}, **{p: "sqlite" for p in dbs}}


def test_hermes_preset_follows_hermes_home(live, tmp_path):
    """``HERMES_HOME`` points Hermes at its tree, so journal checkpoints that tree (journal's
    own ``HERMES_LIVE``, when set, still wins)."""
    home = tmp_path / "hermes-home"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "MEMORY.md").write_text("the build needs make\n")
    live.env["HERMES_HOME"] = str(home)

    live.checkpoint()

    assert "memories/MEMORY.md" in live.entries("hermes")
    live.env["HERMES_LIVE"] = str(live.local / "elsewhere")
    assert [t.path for t in live.cfg.trees + live.cfg.dormant if t.name == "hermes"] == [str(live.local / "elsewhere")]


def test_openclaw_preset_snapshots_its_databases_and_leaves_out_leases_and_managed_roots(bare_live):
    """OpenClaw 2026.9 (docs/harnesses.md) keeps its sessions and transcripts in SQLite:
    every ``*.sqlite`` is a snapshot, but the SQLite leases and reindex copies, the roots
    it manages and reinstalls, logs, pid files and temp files stay out, as its own
    ``openclaw backup`` leaves them out. Older releases' JSONL transcripts stay transcripts."""
    oc = bare_live.local / "oc-home" / ".openclaw"
    dbs = ["agents/main/agent/openclaw-agent.sqlite", "state/openclaw.sqlite", "state/openclaw-quarantine.sqlite"]
    writers = open_wal_databases(oc, dbs)
    kept = {"openclaw.json": "file", ".env": "file", "workspace/AGENTS.md": "file", "workspace/tmp/notes.md": "file",
            "workspace/.git/HEAD": "file", "agents/main/sessions/s1.jsonl": "jsonl", "cron/runs/job.jsonl": "jsonl"}
    left_out = ["agents/main/agent/openclaw-agent.sqlite.reindex-lock.sqlite",
                "agents/main/agent/openclaw-agent.sqlite.reindex-lock.sqlite-journal",
                "agents/main/agent/openclaw-agent.sqlite.generation-lock.sqlite",
                "agents/main/agent/openclaw-agent.sqlite.memory-reindex-79c4d990-911c-415d-873b-851dcd42ca20",
                "agents/main/agent/openclaw-agent.sqlite.memory-reindex-79c4d990-911c-415d-873b-851dcd42ca20-wal",
                "agents/main/agent/tmp/upload.bin", "tmp/openclaw-0/gateway.20bb7d3a.lock.sqlite",
                "tools/rg/rg", "npm/node_modules/x/index.js", "plugin-skills/canvas/SKILL.md",
                "extensions/x/node_modules/y/index.js", "logs/gateway.log", "gateway.pid", "openclaw.json.4242.tmp"]
    for rel in [*kept, *left_out]:
        (oc / rel).parent.mkdir(parents=True, exist_ok=True)
        (oc / rel).write_text('{"pid": 4242}\n')

    bare_live.checkpoint()
    for db in writers:
        db.close()

    stored = {p: e.kind for p, e in bare_live.entries("openclaw").items() if e.kind != "dir"}
    assert stored == {**kept, **{p: "sqlite" for p in dbs}}


def test_gemini_preset_leaves_out_temp_files_live_locks_and_downloads(live):
    """Gemini CLI 0.61 (docs/harnesses.md): its chats, settings, registry, shadow git
    and extensions are kept; a rename's temp file caught mid-write, a lock naming a
    process of the lost container and re-fetchable downloads are not."""
    gemini = live.local / "agent-state" / "gemini-home" / ".gemini"
    kept = {"tmp/work/chats/session-2026-12-07T14-08-e975065a.jsonl": "jsonl", "tmp/work/logs.json": "file",
            "tmp/work/chats/session-2026-12-07T14-08-e975065a.jsonl.unreadable-1765116000000": "file",
            "tmp/work/.project_root": "file", "tmp/work/shell_history": "file", "settings.json": "file",
            "projects.json": "file", "trustedFolders.json": "file", "installation_id": "file",
            "history/work/.git/HEAD": "file", "history/work/.git/refs/heads/main": "file",
            "extensions/tool/bin/run.sh": "file"}
    left_out = ["projects.json.5f0c1a2b-9d3e-4f6a-8b7c-0d1e2f3a4b5c.tmp", "projects.json.lock/",
                "tmp/work/chats/session-2026-12-07T14-08-e975065a.jsonl.tmp-4242",
                "trustedFolders.json.tmp.5f0c1a2b-9d3e-4f6a-8b7c-0d1e2f3a4b5c", "policies/auto-saved.toml.9f8e7d6c.tmp",
                "history/work/.git/index.lock", "history/work/.git/refs/heads/main.lock", "tmp/litert-server.pid",
                "bin/litert/lit.linux_x86_64", "whisper_models/ggml-base.en.bin"]
    for rel in [*kept, *left_out]:
        (gemini / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            (gemini / rel).mkdir()
        else:
            (gemini / rel).write_text('{"pid": 4242}\n')

    live.checkpoint()

    stored = {p: e.kind for p, e in live.entries("gemini").items() if e.kind != "dir"}
    assert stored == kept
    dirs = {p for p, e in live.entries("gemini").items() if e.kind == "dir"}
    assert "projects.json.lock" not in dirs and "bin/litert" not in dirs and "bin" in dirs


def test_claude_preset_leaves_out_temp_files_live_process_files_and_logs(bare_live):
    """Claude Code 2.1 (docs/harnesses.md): transcripts, ``.claude.json``, memory,
    todos, file history and installed plugins are kept; a rename's temp file, a mkdir
    lock, the pid files of the lost container's sessions and IDEs, debug logs, the
    telemetry spool, shell snapshots and downloads are not. Only the top-level
    ``debug/`` is a log: a skill named ``debug`` is the user's."""
    claude = bare_live.local / "agent-state" / "claude"
    kept = {"projects/-work/6e29e5de-44b2-43e4-bf79-252d8c59028c.jsonl": "jsonl",
            "projects/-work/6e29e5de-44b2-43e4-bf79-252d8c59028c/subagents/agent-a1.jsonl": "jsonl",
            "projects/-work/memory/MEMORY.md": "file", "history.jsonl": "jsonl", ".claude.json": "file",
            ".credentials.json": "file", "settings.json": "file", "backups/.claude.json.backup.1796652494454": "file",
            "todos/6e29e5de-agent-6e29e5de.json": "file", "file-history/6e29e5de/0a1b2c3d4e5f6a7b@v1": "file",
            "plugins/installed_plugins.json": "file", "plugins/cache/mkt/hello/1.0.0/commands/hi.md": "file",
            "skills/debug/SKILL.md": "file"}
    left_out = [".claude.json.tmp.29577.a56b139879a7", ".claude.json.lock/", "history.jsonl.lock/",
                "sessions/29577.json", "sessions/.fleetview-heartbeat", "ide/41234.lock",
                "debug/6e29e5de-44b2-43e4-bf79-252d8c59028c.txt", "telemetry/1p_failed_events.json",
                "statsig/statsig.cached.evaluations.json", "cache/changelog.md",
                "shell-snapshots/snapshot-bash-1796652494454-ab12cd.sh"]
    for rel in [*kept, *left_out]:
        (claude / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            (claude / rel).mkdir()
        else:
            (claude / rel).write_text('{"pid": 29577}\n')

    bare_live.checkpoint()

    stored = {p: e.kind for p, e in bare_live.entries("claude").items() if e.kind != "dir"}
    assert stored == kept
    dirs = {p for p, e in bare_live.entries("claude").items() if e.kind == "dir"}
    assert ".claude.json.lock" not in dirs and "sessions" in dirs


def test_terminal_preset_keeps_pane_history_written_through_a_symlink(live, tmp_path):
    """The Agent Manager writes ``$DATA_DIR/state/terminal-history/<id>.json`` through
    ``<id>.json.<pid>.tmp`` and a rename; with that directory a symlink to
    ``$AM_LOCAL/terminal-history`` the writes land on local disk, and the ``terminal``
    preset checkpoints the histories and never a temp file."""
    history = live.local / "terminal-history"
    history.mkdir()
    state = tmp_path / "data" / "state"
    state.mkdir(parents=True)
    (state / "terminal-history").symlink_to(history)
    body = json.dumps({"version": 8, "cols": 80, "lines": ["$ codex", "hello"]})
    (state / "terminal-history" / "pane-1.json.4242.tmp").write_text(body)
    os.rename(state / "terminal-history" / "pane-1.json.4242.tmp", state / "terminal-history" / "pane-1.json")
    (state / "terminal-history" / "pane-2.json.4243.tmp").write_text(body[:10])   # a write in flight

    live.checkpoint()

    stored = {p: e.kind for p, e in live.entries("terminal").items() if e.kind != "dir"}
    assert stored == {"pane-1.json": "file"}


def test_opencode_preset_snapshots_its_database_and_leaves_out_its_log_and_clones(bare_live, tmp_path):
    """opencode 1.18 (docs/harnesses.md) writes through ``$XDG_DATA_HOME/opencode``, a
    symlink to ``$AM_LOCAL/opencode-share``: its databases are snapshots; auth, legacy
    storage, project snapshots (git directories it reverts files from), plans, tool
    output and worktrees are plain files; the top-level ``log/`` (a log), ``repos/``
    (clones it fetches again) and a git lock in ``snapshot/`` (a process of the lost
    container) stay out, and a worktree's own ``log/`` is kept."""
    tree = bare_live.local / "opencode-share"
    tree.mkdir()
    data = tmp_path / "xdg-data"
    data.mkdir()
    (data / "opencode").symlink_to(tree)
    dbs = ["opencode.db", "opencode-beta.db"]
    writers = []                                          # left open: each -wal and -shm stays
    for rel in dbs:
        writers.append(sqlite3.connect(data / "opencode" / rel, isolation_level=None))
        writers[-1].execute("PRAGMA journal_mode=WAL")
        writers[-1].execute("CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT)")
        writers[-1].execute("INSERT INTO session VALUES ('ses_daf2aa9eaffe5DYiFTDGByLV7T', '/home/node/work')")
    kept = ["auth.json", "mcp-auth.json", "storage/migration", "storage/session/global/ses_1.json",
            "snapshot/f164fd53/6e6888b4/HEAD", "snapshot/f164fd53/6e6888b4/index",
            "snapshot/f164fd53/6e6888b4/objects/info/alternates", "snapshot/f164fd53/6e6888b4/objects/ab/cdef",
            "plans/1796652488214-proud-comet.md", "tool-output/tool_250d5621d001", "worktree/f164fd53/feat/log/app.log"]
    left_out = ["log/opencode.log", "log/direct/latest.json", "repos/github.com/acme/lib/README.md",
                "snapshot/f164fd53/6e6888b4/index.lock"]
    for rel in kept + left_out:
        (data / "opencode" / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / "opencode" / rel).write_text('{"v": 1}\n')

    bare_live.checkpoint()
    for db in writers:
        db.close()

    entries = bare_live.entries("opencode")
    assert {p: e.kind for p, e in entries.items() if e.kind != "dir"} == {
        **{p: "file" for p in kept}, **{p: "sqlite" for p in dbs}}
    assert {"log", "repos", "worktree/f164fd53/feat/log"} <= {p for p, e in entries.items() if e.kind == "dir"}


def test_file_vanishing_between_walk_and_read_is_skipped(live):
    codex = live.local / "codex-home"
    (codex / "gone.json").write_text("{}")
    items = [i for i in walk_tree(str(codex), Matcher()) if i.path == "gone.json"]
    (codex / "gone.json").unlink()
    writer = PackWriter(live.store, str(live.home / "spool"))

    captured = capture_item(str(codex), items[0], None, False, writer.add)

    writer.abort()
    assert captured is None and writer.blobs == 0


def test_checkpoint_survives_files_churning_during_the_walk(live, tmp_path):
    churn = live.local / "codex-home" / "churn"
    churn.mkdir()
    stop = threading.Event()

    def keep_churning():
        n = 0
        while not stop.is_set():
            (churn / f"f{n:05d}.json").write_text(f'{{"n": {n}}}')
            if n >= 20:
                (churn / f"f{n - 20:05d}.json").unlink()
            n += 1

    worker = threading.Thread(target=keep_churning)
    worker.start()
    try:
        for _ in range(5):
            live.checkpoint()
    finally:
        stop.set()
        worker.join()

    live.checkpoint(allow_deletions=True)
    assert sorted(os.listdir(restored(live, "codex", tmp_path) / "churn")) == sorted(os.listdir(churn))


# --- refusals ----------------------------------------------------------------------------


def test_refuses_a_store_dir_that_is_not_a_journal_store(live):
    live.store_path.mkdir()
    (live.store_path / "README.txt").write_text("someone else's files\n")

    with pytest.raises(NotAStore):
        live.checkpoint()

    assert sorted(p.name for p in live.store_path.rglob("*")) == ["README.txt"]
    assert live.store.puts == 0


def test_refuses_to_checkpoint_when_local_state_is_lost_but_store_has_history(live):
    live.checkpoint()
    live.state_file.unlink()
    before = counters(live)

    with pytest.raises(HistoryWithoutState) as err:
        live.checkpoint()

    assert err.value.latest_seq == 1
    assert counters(live) == before and live.repo().manifest_seqs() == [1]


def test_two_state_dirs_on_one_store_conflict_naming_the_other_writer(make_live):
    a, b = make_live("a"), make_live("b")
    a.checkpoint()
    b.restore()
    (a.local / "codex-home" / "history.jsonl").write_text('{"from": "a"}\n')
    writer = a.popen("checkpoint")
    assert writer.wait(timeout=60) == 0, writer.stderr.read()
    (b.local / "codex-home" / "history.jsonl").write_text('{"from": "b"}\n')

    with pytest.raises(ManifestConflict) as err:
        b.checkpoint()

    assert err.value.seq == 2
    assert f"pid {writer.pid}" in str(err.value) and socket.gethostname() in str(err.value)
    assert a.entries("codex")["history.jsonl"].size == len('{"from": "a"}\n')


def test_one_change_in_three_thousand_files_writes_few_index_pages(bare_live):
    memories = bare_live.local / "codex-home" / "memories"
    for d in range(30):
        (memories / f"d{d:02d}").mkdir(parents=True)
        for f in range(100):
            (memories / f"d{d:02d}" / f"note-{f:03d}.md").write_text(f"note {d}/{f}\n")
    first = bare_live.checkpoint()
    (memories / "d17" / "note-042.md").write_text("changed\n")
    puts, put_bytes = counters(bare_live)

    result = bare_live.checkpoint()

    assert first.trees[0].files == 3000 and result.trees[0].changed == 1
    assert result.objects == 3 and bare_live.store.puts - puts == 3
    assert bare_live.store.put_bytes - put_bytes < 30 * 1024


# --- deletions ---------------------------------------------------------------------------


def test_deleting_one_file_of_many_drops_it_from_the_next_manifest(live):
    (live.local / "codex-home" / "notes.txt").write_text("scratch\n")
    live.checkpoint()
    (live.local / "codex-home" / "notes.txt").unlink()

    result = live.checkpoint()

    assert result.seq == 2
    assert "notes.txt" not in live.entries("codex") and "notes.txt" in live.entries("codex", seq=1)
    assert [(t.deleted, t.dirs_deleted, t.kept_deleted) for t in result.trees if t.name == "codex"] == [(1, 0, 0)]


def test_deleting_transcripts_with_history_is_held_back_whatever_the_share(live):
    """Three of six Codex rollouts (half the tree's files: under the mass-deletion
    guard's share) vanish: each holds more than a few KiB of history, so the checkpoint
    keeps them and says so, until --allow-deletions."""
    live.checkpoint()
    rollouts = sorted((live.local / "codex-home" / "sessions").rglob("*.jsonl"))
    assert len(rollouts) == 6 and all(p.stat().st_size > 4096 for p in rollouts[:3])
    for path in rollouts[:3]:
        path.unlink()

    held = live.checkpoint()

    codex = next(t for t in held.trees if t.name == "codex")
    assert held.seq is None and (codex.deleted, codex.kept_deleted, codex.files) == (0, 3, 6)
    assert any("3 transcript(s)" in w and rollouts[0].name in w and "--allow-deletions" in w
               for w in live.warnings), live.warnings
    assert len([p for p in live.entries("codex") if p.endswith(".jsonl")]) == 6

    dropped = live.checkpoint(allow_deletions=True)

    codex = next(t for t in dropped.trees if t.name == "codex")
    assert dropped.seq == 2 and (codex.deleted, codex.kept_deleted, codex.files) == (3, 0, 3)
    assert len([p for p in live.entries("codex") if p.endswith(".jsonl")]) == 3


def test_deleting_a_transcript_of_a_few_lines_is_not_held_back(live):
    small = live.local / "codex-home" / "sessions" / "short.jsonl"
    small.write_bytes(b'{"type": "session_meta"}\n' * 10)
    live.checkpoint()
    small.unlink()

    result = live.checkpoint()

    assert result.seq == 2 and "sessions/short.jsonl" not in live.entries("codex")
    assert not live.warnings


# --- the transcript guard's rename rule: the same file, never merely the same number ---

def _history(lines: int = 80) -> bytes:
    """A transcript with more history than the transcript guard lets go."""
    return b"".join(b'{"type": "event_msg", "payload": {"n": %d, "text": "%s"}}\n' % (i, b"x" * 40)
                    for i in range(lines))


def _kept_and_dropped(result, tree: str) -> tuple[int, int]:
    t = next(t for t in result.trees if t.name == tree)
    return t.kept_deleted, t.deleted


def test_a_transcript_renamed_within_its_tree_is_let_go_under_its_old_name(live):
    """A rename keeps the file (its device and inode, its bytes): the transcript is not
    lost, so the guard does not hold its old name, whether the new name is a transcript's
    or not."""
    sessions = live.local / "codex-home" / "sessions"
    first, second = sessions / "kept.jsonl", sessions / "archived.jsonl"
    first.write_bytes(_history())
    second.write_bytes(_history(90))
    live.checkpoint()
    first.rename(sessions / "renamed.jsonl")
    second.rename(sessions / "archived.jsonl.bak")

    result = live.checkpoint()

    assert _kept_and_dropped(result, "codex") == (0, 2) and not live.warnings
    entries = live.entries("codex")
    assert "sessions/kept.jsonl" not in entries and entries["sessions/renamed.jsonl"].kind == KIND_JSONL
    assert "sessions/archived.jsonl" not in entries and entries["sessions/archived.jsonl.bak"].kind == KIND_FILE


def test_a_database_whose_wal_size_equals_a_vanished_transcripts_inode_does_not_pass_for_it(root):
    """A database's signature holds its WAL's size where a file's holds the inode: a
    WAL exactly as long as the vanished transcript's inode number is no rename."""
    live = OpencodeLive(root / "home", root / "store")
    transcript = live.write("opencode-share/exports/session.jsonl", _history())
    live.write("opencode-share/auth.json", "{}\n")
    with contextlib.closing(sqlite3.connect(live.db)) as conn, conn:
        conn.execute("create table session (id text primary key, directory text, body blob)")
        conn.executemany("insert into session values (?, ?, ?)", [(str(i), "/w", b"y" * 3000) for i in range(8)])
    assert live.checkpoint().seq == 1
    assert live.db.stat().st_size >= transcript.stat().st_size > 4096
    inode = transcript.stat().st_ino
    transcript.unlink()
    with open(f"{live.db}-wal", "wb") as fh:   # a stray WAL (no valid header) that many bytes long
        fh.truncate(inode)
    # The agent holds its database open: the snapshot's connection is not the last one
    # to close, so SQLite leaves the WAL as it is.
    with contextlib.closing(sqlite3.connect(live.db)) as agent:
        assert agent.execute("select count(*) from session").fetchone() == (8,)

        result = live.checkpoint()

    assert _kept_and_dropped(result, "opencode") == (1, 0)
    assert "exports/session.jsonl" in live.entries("opencode")
    assert any("1 transcript(s)" in w and "--allow-deletions" in w for w in live.warnings), live.warnings


def test_a_file_with_a_vanished_transcripts_inode_on_another_device_does_not_pass_for_it(root):
    """A tree spanning two filesystems: the transcript vanishes from one, and a file on
    the other has its inode number and more bytes. Inode numbers repeat across devices,
    so that file is not the transcript renamed."""
    live = OpencodeLive(root / "home", root / "store")
    tree = live.local / "opencode-share"
    live.write("opencode-share/auth.json", "{}\n")
    with _tmpfs(tree / "one") as one, _tmpfs(tree / "two") as two:
        (one / "sessions").mkdir()
        (two / "sessions").mkdir()
        transcript = one / "sessions" / "session.jsonl"
        transcript.write_bytes(_history())
        other = two / "sessions" / "scratch.bin"
        other.write_bytes(b"z" * 8192)
        if transcript.stat().st_ino != other.stat().st_ino:
            pytest.skip("this kernel's tmpfs does not number inodes per mount")
        assert transcript.stat().st_dev != other.stat().st_dev
        live.checkpoint()
        transcript.unlink()

        result = live.checkpoint()

    assert _kept_and_dropped(result, "opencode") == (1, 0)
    assert "one/sessions/session.jsonl" in live.entries("opencode")
    assert any("1 transcript(s)" in w for w in live.warnings), live.warnings


@contextlib.contextmanager
def _tmpfs(point: Path):
    """A new tmpfs mounted on ``point`` (made here); skips where mounting is refused."""
    point.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=True)


def test_emptied_tree_keeps_its_entries_and_warns(live):
    live.checkpoint()
    claude = live.local / "agent-state" / "claude"
    for child in claude.iterdir():
        subprocess.run(["rm", "-rf", str(child)], check=True)
    before = counters(live)

    result = live.checkpoint()

    assert [t.kept_deleted for t in result.trees if t.name == "claude"] == [3]  # files: directories apart
    assert any("claude" in w and "--allow-deletions" in w for w in live.warnings)
    assert result.seq is None and counters(live) == before
    assert len([e for e in live.entries("claude").values() if e.kind != "dir"]) == 3


def test_a_directory_replaced_by_a_file_is_never_kept_under_it_by_the_deletion_guard(bare_live, tmp_path):
    """Most of a tree's files vanish because their directory ``a`` became a file ``a``:
    the mass-deletion guard kept ``a/x.txt`` beside the file ``a``, a manifest that fails
    ``verify`` (a path inside a file) and whose every restore is incomplete. Paths under
    a name that is no longer a directory are dropped whatever the guards say."""
    fx = bare_live.local / "fx-home"
    (fx / "a").mkdir(parents=True)
    (fx / "a" / "x.txt").write_text("x\n")
    (fx / "a" / "y.txt").write_text("y\n")
    (fx / "keep.txt").write_text("z\n")
    bare_live.checkpoint()
    shutil.rmtree(fx / "a")
    (fx / "a").write_text("now a file\n")

    result = bare_live.checkpoint()

    assert sorted(bare_live.entries("fx")) == ["a", "keep.txt"]
    assert [t.deleted for t in result.trees if t.name == "fx"] == [2]
    assert bare_live.run("verify").returncode == 0
    out = tmp_path / "out"
    assert bare_live.run("restore", "--to", str(out)).returncode == 0
    assert (out / "fx" / "a").read_text() == "now a file\n"


def test_allow_deletions_drops_an_emptied_tree(live):
    live.checkpoint()
    claude = live.local / "agent-state" / "claude"
    for child in claude.iterdir():
        subprocess.run(["rm", "-rf", str(child)], check=True)

    result = live.checkpoint(allow_deletions=True)

    assert result.seq == 2
    assert live.entries("claude") == {}


def test_vanished_harness_dir_stays_in_later_checkpoints(live):
    live.checkpoint()
    subprocess.run(["rm", "-rf", str(live.local / "oc-home")], check=True)
    (live.local / "codex-home" / "history.jsonl").write_text("{}\n")

    result = live.checkpoint()

    assert result.seq == 2
    assert live.entries("openclaw", seq=2) == live.entries("openclaw", seq=1) != {}


def test_configured_but_missing_tree_keeps_its_last_checkpoint_and_warns(live):
    live.checkpoint()
    config = live.home / ".config" / "journal" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('presets = ["codex", "claude", "openclaw"]\n')
    subprocess.run(["rm", "-rf", str(live.local / "oc-home")], check=True)
    before = counters(live)

    result = live.checkpoint()

    assert [t.absent for t in result.trees if t.name == "openclaw"] == [True]
    assert any("openclaw" in w and "missing" in w for w in live.warnings)
    assert result.seq is None and counters(live) == before


def test_writer_that_lost_a_conflict_recovers_through_restore_keeping_its_work_as_a_fork(make_live, tmp_path):
    a, b = make_live("a"), make_live("b")
    a.checkpoint()
    b.restore()
    (a.local / "codex-home" / "history.jsonl").write_text('{"from": "a"}\n')
    a.checkpoint()
    history = b.local / "codex-home" / "history.jsonl"
    history.write_text('{"from": "b"}\n')
    with pytest.raises(ManifestConflict):
        b.checkpoint()
    with pytest.raises(ManifestConflict):
        b.checkpoint()  # still refused: b has not adopted a's history

    recovered = b.restore()
    idle = b.checkpoint()
    history.write_text('{"from": "a"}\n{"from": "b, again"}\n')
    result = b.checkpoint()

    assert recovered.complete and recovered.lineage == "stale" and recovered.fork.seq == 3
    assert recovered.fork.work == ["codex/history.jsonl"] and recovered.fork.base == 1 and recovered.fork.onto == 2
    assert b.restore(to=str(tmp_path / "fork"), at="3").complete
    assert (tmp_path / "fork/codex/history.jsonl").read_bytes() == b'{"from": "b"}\n', "b's work is in the fork"
    fork = b.repo().load_manifest(3)[0]
    assert fork.is_fork and fork.parent == 1 and fork.fork.onto == 2
    assert idle.seq is None, "the live trees are checkpoint 2: nothing to publish"
    assert result.seq == 4 and b.repo().load_manifest(4)[0].parent == 2, "built on a's checkpoint, past the fork"
    assert b.restore(to=str(tmp_path / "newest")).seq == 4
    assert (tmp_path / "newest/codex/history.jsonl").read_bytes() == b'{"from": "a"}\n{"from": "b, again"}\n'


# --- live paths that exist but cannot be read -------------------------------------------


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_unreadable_directory_keeps_its_entries_while_every_other_change_commits(live):
    claude = live.local / "agent-state" / "claude"
    secret = claude / "secret"
    secret.mkdir()
    for i in range(8):
        (secret / f"note-{i}.md").write_text(f"note {i}\n")
    (claude / "gone.md").write_text("deleted before the next tick\n")
    live.checkpoint()
    before = live.entries("claude")
    rollout = live.local / "codex-home" / ROLLOUT
    with open(rollout, "ab") as fh:
        fh.write(codex_line(1))
    (claude / "new.md").write_text("new\n")
    (claude / "gone.md").unlink()
    secret.chmod(0)
    try:
        done = live.run("checkpoint", unprivileged=True)
    finally:
        secret.chmod(0o755)

    assert done.returncode == 0, done.stderr
    [warning] = warning_lines(done.stderr)
    assert f"cannot read {secret} (Permission denied)" in warning and "kept its last checkpoint" in warning
    after = live.entries("claude")
    assert {p: after.get(p) for p in before if p.startswith("secret/")} == \
        {p: e for p, e in before.items() if p.startswith("secret/")}
    # The 8 files it could not see are not counted as deleted: the one file really
    # deleted goes (9 of 12 would have tripped the deletion guard and kept it).
    assert "new.md" in after and "gone.md" not in after
    assert live.entries("codex")[ROLLOUT].size == rollout.stat().st_size


def test_path_longer_than_path_max_keeps_its_entries_while_every_other_change_commits(live, tmp_path):
    claude = live.local / "agent-state" / "claude"
    depth = (4095 - len(str(claude)) - len("/leaf.md")) // 201
    deepest = claude.joinpath(*["d" * 200] * depth)
    deepest.mkdir(parents=True)
    (deepest / "leaf.md").write_text("deep\n")
    live.checkpoint()
    leaf = "/".join(["d" * 200] * depth + ["leaf.md"])
    assert leaf in live.entries("claude")
    # The same tree under a longer root: the deepest directory's path is now past PATH_MAX.
    moved = tmp_path / ("h" * 250) / "a"
    moved.parent.mkdir()
    live.home.rename(moved)
    live = type(live)(moved, live.store_path)
    rollout = live.local / "codex-home" / ROLLOUT
    with open(rollout, "ab") as fh:
        fh.write(codex_line(1))

    result = live.checkpoint()

    assert result.seq == 2
    [warning] = live.warnings
    assert "(File name too long); kept its last checkpoint" in warning and "shorten it" in warning
    assert leaf in live.entries("claude")
    assert live.entries("codex")[ROLLOUT].size == rollout.stat().st_size


# --- a full or read-only disk ------------------------------------------------------------


def test_a_full_store_names_the_object_and_the_filesystem_to_free(bare_live, small_tmpfs):
    store = small_tmpfs("64k")
    live = Live(bare_live.home, store)
    claude = live.local / "agent-state" / "claude"
    claude.mkdir(parents=True)
    (claude / "big.bin").write_bytes(os.urandom(256 << 10))

    line = one_line_error(live.run("checkpoint"))

    assert line.startswith("journal: error: put object: packs/") and f" {store}/packs/" in line
    assert line.endswith(f": No space left on device; free space on the filesystem mounted at {store}")


def test_a_read_only_store_names_the_filesystem_to_remount(bare_live, small_tmpfs):
    store = small_tmpfs("64k", ro=True)
    live = Live(bare_live.home, store)
    (live.local / "agent-state" / "claude").mkdir(parents=True)

    line = one_line_error(live.run("checkpoint"))

    assert f"{store}/.tmp: Read-only file system; the filesystem mounted at {store} is read-only; remount it " \
           "read-write" in line


def test_a_full_state_dir_fails_the_checkpoint_naming_the_spool_never_a_live_file(tmp_path, small_tmpfs):
    """The spool shares the live tree's disk: a write that fails there is journal's own
    failure, never "cannot read" the live file (which would commit a pack cut short)."""
    disk = small_tmpfs("512k")
    live = Live(disk, tmp_path / "store")
    claude = live.local / "agent-state" / "claude"
    claude.mkdir(parents=True)
    (claude / "big.bin").write_bytes(os.urandom(300 << 10))

    done = live.run("checkpoint")

    line = one_line_error(done)
    assert line.startswith(f"journal: error: write spool: {live.local}/.journal/spool/")
    assert line.endswith(f": No space left on device; free space on the filesystem mounted at {disk}")
    assert not (tmp_path / "store" / "manifests").exists() or not os.listdir(tmp_path / "store" / "manifests")


# --- a line of any length -----------------------------------------------------------------


def checkpoint_peak_rss(live) -> tuple[int, int]:
    """Run ``journal checkpoint`` in a grandchild; (exit status, its peak RSS in bytes)."""
    return peak_rss([sys.executable, "-m", "journal", "checkpoint"], live.env, stderr=live.home / "checkpoint.err")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def test_a_300_mib_line_is_checkpointed_in_bounded_memory_torn_then_complete(root):
    """A transcript whose last line is 300 MiB long (sparse, on tmpfs: no disk, no
    memory): while it has no newline nothing of it is published, and once it has one
    it is published whole; neither checkpoint holds it in memory."""
    live = Live(root / "a", root / "store")
    chat = live.local / "agent-state" / "claude" / "projects" / "p" / "long.jsonl"
    chat.parent.mkdir(parents=True)
    first = b'{"n": 1}\n'
    chat.write_bytes(first + b'{"n": 2, "text": "')
    os.truncate(chat, len(first) + (300 << 20))

    rc, peak = checkpoint_peak_rss(live)

    assert rc == 0, (live.home / "checkpoint.err").read_text()
    assert peak < 100 << 20, f"peak RSS {peak >> 20} MiB for a torn 300 MiB line"
    assert live.entries("claude")["projects/p/long.jsonl"].size == len(first)

    with open(chat, "ab") as fh:
        fh.write(b'"}\n')
    rc, peak = checkpoint_peak_rss(live)

    assert rc == 0, (live.home / "checkpoint.err").read_text()
    assert peak < 100 << 20, f"peak RSS {peak >> 20} MiB for a complete 300 MiB line"
    entry = live.entries("claude")["projects/p/long.jsonl"]
    assert entry.size == chat.stat().st_size and len(entry.refs) > 30
    assert max(ref.size for ref in entry.refs) <= 8 << 20
    assert live.run("verify", "--full").returncode == 0
    out = root / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert sha256_of(out / "claude" / "projects" / "p" / "long.jsonl") == sha256_of(chat)


#: How a pack's upload may fail: the store refuses it; opening or reading its spool
#: file fails (a raw OSError: too many open files, an I/O error); the bucket answers
#: 404 (a bucket deleted, a multipart upload gone: ``ObjectNotFound``).
UPLOAD_FAILURES = {
    "a store error": lambda method, key: StoreError(f"{method} {key}: injected fault"),
    "a raw OSError": lambda method, key: OSError(errno.EMFILE, "Too many open files (injected)"),
    "a 404": lambda method, key: ObjectNotFound(key),
}


def _first_pack_fails(live: Live, how: str) -> tuple[FaultyStore, list[str]]:
    """The live store, with the first pack upload failing ``how`` (``UPLOAD_FAILURES``)."""
    failed: list[str] = []

    def first_pack(method: str, key: str) -> bool:
        if method == "put_if_absent" and key.startswith("packs/") and not failed:
            failed.append(key)
            return True
        return False

    return FaultyStore(live.store, fail_when=first_pack, error=UPLOAD_FAILURES[how]), failed


@pytest.mark.parametrize("how", UPLOAD_FAILURES)
def test_a_pack_upload_failing_while_files_are_read_fails_the_checkpoint(live, monkeypatch, how):
    """Packs roll and upload while the walk goes on, so an upload's failure can surface
    in the middle of reading a file. It fails the checkpoint, with the upload's own
    error; it is never taken for that file being unreadable or gone (which committed a
    manifest naming the lost pack, and the next checkpoint saw nothing to redo)."""
    monkeypatch.setattr(checkpoint_module, "PackWriter", functools.partial(PackWriter, target=1))  # one blob a pack
    store, failed = _first_pack_fails(live, how)
    collector = Collector()

    with pytest.raises(type(UPLOAD_FAILURES[how]("put_if_absent", "packs/x"))):
        checkpoint(live.cfg, store, collector)

    assert failed and live.repo().manifest_seqs() == []
    assert not [w for w in collector.warnings if "cannot read" in w], collector.warnings
    monkeypatch.undo()
    checkpoint(live.cfg, live.store, Collector())   # the store is back: all of it goes in, and verifies
    assert live.run("verify", "--full").returncode == 0


class _HalfWritten:
    """A spool file whose first large write stops half way on a full disk (as a
    buffered write may leave part of a record in the file), then works again."""

    def __init__(self, fh):
        self.fh, self.tripped = fh, False

    def write(self, data) -> int:
        if not self.tripped and len(data) > 200:
            self.tripped = True
            self.fh.write(bytes(data[:len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return self.fh.write(data)

    def __getattr__(self, name):
        return getattr(self.fh, name)


def test_a_full_disk_under_the_index_pack_fails_the_checkpoint_not_a_rebuilt_index(live, monkeypatch):
    """The index is updated from the last one's pages, and built whole when that cannot
    be done (a damaged page, a full disk writing the local page copies). A write of the
    index pack's own spool that failed half way left part of a record in it: the whole
    build went on in the same pack, every later page at the wrong offset, and the
    manifest named a pack whose bytes were not its name. The pack writer stays failed,
    so the checkpoint fails and the next one, with room again, commits a sound index."""
    live.checkpoint()
    with open(live.local / "codex-home" / ROLLOUT, "ab") as fh:
        fh.write(codex_line(1))
    real_open = PackWriter._open

    def open_index_half_full(self):
        real_open(self)
        if self.target is None:   # the index pack (never rolled)
            self._fh = _HalfWritten(self._fh)

    monkeypatch.setattr(PackWriter, "_open", open_index_half_full)
    with pytest.raises(LocalWriteError):
        live.checkpoint()
    assert live.seqs() == [1]

    monkeypatch.undo()
    assert live.checkpoint().seq == 2
    assert live.run("verify", "--full").returncode == 0


def test_a_pack_upload_404_while_a_database_is_captured_is_not_taken_for_its_page_maps(tmp_path, monkeypatch):
    """A 404 from a pack's upload (``ObjectNotFound``) surfacing while a database is
    cut was taken for the previous snapshot's page maps being unusable: the database was
    captured again and the checkpoint committed without the lost pack. It fails the
    checkpoint."""
    live = OpencodeLive(tmp_path / "c", tmp_path / "store")
    db = sqlite3.connect(live.db)
    db.execute("CREATE TABLE t (x BLOB)")
    for _ in range(400):
        db.execute("INSERT INTO t VALUES (?)", (os.urandom(3000),))
    db.commit()
    assert live.tick() == 1
    db.execute("UPDATE t SET x = randomblob(3000)")   # every page: many page groups, a pack each
    db.commit()
    db.close()
    monkeypatch.setattr(checkpoint_module, "PackWriter", functools.partial(PackWriter, target=1))
    store, failed = _first_pack_fails(live, "a 404")
    collector = Collector()

    with pytest.raises(ObjectNotFound):
        checkpoint(live.cfg, store, collector)

    assert failed and live.repo().manifest_seqs() == [1]
    assert not [w for w in collector.warnings if "page maps" in w], collector.warnings


# --- what checkpoint cannot store: refused loudly, path by path, never the whole run ----------


def _deeper_than_path_max(root: Path) -> str:
    """Make directories below ``root`` until a file's path passes PATH_MAX (through
    directory descriptors, as any program can); returns the first one too long, relative."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    rel, length = [], len(os.fsencode(root))
    try:
        while length < 4200:
            os.mkdir("d" * 200, dir_fd=fd)
            inner = os.open("d" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
            rel.append("d" * 200)
            length += 201
        out = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"too deep to name\n")
        os.close(out)
    finally:
        os.close(fd)
    return "/".join(rel)


def test_names_checkpoint_cannot_store_are_refused_one_by_one_with_a_warning_every_time(bare_live):
    """A name that is not UTF-8 and a symlink whose target is not UTF-8 are each left
    out with a warning naming them, on every checkpoint, and a path longer than
    PATH_MAX is named as unreadable; everything else is checkpointed (the link target
    used to crash the whole checkpoint with a traceback)."""
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    (fx / "fine.txt").write_text("fine\n")
    with open(os.fsencode(fx) + b"/bad-\xff.txt", "wb") as fh:
        fh.write(b"not utf-8\n")
    os.symlink(b"target-\xfe", os.fsencode(fx) + b"/link")
    _deeper_than_path_max(fx)

    for attempt in range(2):
        proc = bare_live.run("checkpoint")
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: checkpoint: skipping")]
        assert any("bad-\\xff.txt" in w and "not valid UTF-8" in w for w in warnings), proc.stderr
        assert any(f"{fx}/link" in w and "symlink target is not valid UTF-8" in w for w in warnings), proc.stderr
        assert len(warnings) == 2, warnings
        assert "File name too long" in proc.stderr, proc.stderr
    entries = bare_live.entries("fx")
    assert entries["fine.txt"].size == 5 and "link" not in entries
    assert not any("deep.txt" in p or "\udcff" in p for p in entries)


# --- a pending manifest, republished --------------------------------------------------------
# A checkpoint whose manifest put fails keeps the manifest *pending* in local state and
# republishes it at the next checkpoint; by then a gc sweep may have deleted packs it names.


def fx_notes(live) -> Path:
    tree = live.local / "fx-home"
    tree.mkdir(exist_ok=True)
    return tree / "notes.txt"


def failing_put(self, record, seq, staged=None):
    raise ConnectionError("network down during the manifest put")


def missing_packs(live, seq: int) -> list[str]:
    """Packs that manifest ``seq``'s fx tree names but the store no longer holds."""
    entries, _ = ManifestCache(live.repo()).tree(seq, "fx")
    return [r.pack for e in entries for r in e.refs if not live.pack_file(r.pack).exists()]


def restores_fx(live, tmp_path: Path, text: str) -> None:
    out = tmp_path / "out"
    result = live.restore(to=str(out))
    assert result.complete, [(t.lost, t.error) for t in result.trees]
    assert (out / "fx" / "notes.txt").read_text() == text


def test_a_checkpoint_whose_data_pack_is_stored_already_counts_only_what_it_uploaded(bare_live, tmp_path):
    """The manifest is staged while its packs upload, as if every pack were new; a data
    pack found already stored (the content came back: an earlier pack's very bytes)
    makes the manifest say so, encoded again, and the staged record is dropped."""
    notes = fx_notes(bare_live)
    notes.write_text("X" * 1000)
    assert bare_live.checkpoint().seq == 1
    notes.write_text("Y" * 1000)
    assert bare_live.checkpoint().seq == 2
    notes.write_text("X" * 1000)

    result = bare_live.checkpoint()

    assert result.seq == 3 and result.objects == 2           # the index pack and the manifest
    assert bare_live.manifest(3).added_objects == 2
    assert list((Path(bare_live.store_path) / ".tmp").iterdir()) == []   # no staged record left behind
    restores_fx(bare_live, tmp_path, "X" * 1000)


def pending_on_a_tombstoned_pack(live, monkeypatch) -> str:
    """Checkpoints 1 (fx notes: X) and 2 (Y), a gc mark that tombstones manifest 1 and
    its data pack P1, then X again, checkpointed as seq 3 and left pending (its put
    failed): the pending manifest relies on P1, found already stored. Returns P1."""
    notes = fx_notes(live)
    notes.write_text("X" * 1000)
    assert live.checkpoint().seq == 1                # data pack P1 = [chunk X]
    p1 = ManifestCache(live.repo()).tree(1, "fx")[0][0].refs[0].pack
    notes.write_text("Y" * 1000)
    assert live.checkpoint().seq == 2
    gc(live.repo(), Policy(keep_last=1), 3600.0)     # tombstones manifest 1 and P1
    notes.write_text("X" * 1000)                     # the content comes back: P1's very bytes
    monkeypatch.setattr(Repository, "put_manifest", failing_put)
    with pytest.raises(ConnectionError):
        live.checkpoint()                            # seq 3 left pending in local state
    monkeypatch.undo()
    return p1


def test_a_pending_manifest_whose_pack_a_sweep_took_is_whole_when_published(bare_live, tmp_path, monkeypatch):
    """The pending manifest's data pack already existed (a tombstoned one, same bytes),
    so the checkpoint relied on it; a sweep then deletes it. The republish must not
    publish a manifest naming a pack the store lacks: the copy the failed attempt kept
    (before its put) is checked first and the pack put back, then the manifest goes."""
    p1 = pending_on_a_tombstoned_pack(bare_live, monkeypatch)
    assert gc(bare_live.repo(), Policy(keep_last=1), 0.0)[1].deleted > 0   # deletes manifest 1 and P1
    assert not bare_live.pack_file(p1).exists()

    result = bare_live.checkpoint()                  # puts P1 back, then publishes pending 3

    assert result.seq == 3
    assert any(p1 in w and "uploaded it again" in w for w in result.warnings), result.warnings
    assert missing_packs(bare_live, 3) == []
    restores_fx(bare_live, tmp_path, "X" * 1000)


def test_a_pending_manifest_already_in_the_store_stands_and_the_next_checkpoint_uploads_again(
        bare_live, tmp_path, monkeypatch):
    notes = fx_notes(bare_live)
    notes.write_text("A" * 1000)
    assert bare_live.checkpoint().seq == 1
    notes.write_text("B" * 1000)
    real_put = Repository.put_manifest

    def put_then_fail(self, record, seq, staged=None):   # the put landed; its answer was lost
        real_put(self, record, seq, staged)
        raise ConnectionError("connection reset after the manifest put")
    monkeypatch.setattr(Repository, "put_manifest", put_then_fail)
    with pytest.raises(ConnectionError):
        bare_live.checkpoint()                       # seq 2 in the store, and pending locally
    monkeypatch.undo()
    assert missing_packs(bare_live, 2) == []
    for entry in ManifestCache(bare_live.repo()).tree(2, "fx")[0]:
        for ref in entry.refs:                       # the store loses manifest 2's data pack
            bare_live.pack_file(ref.pack).unlink(missing_ok=True)

    result = bare_live.checkpoint()                  # manifest 2 stands (no conflict, no fork), and

    assert result.seq == 3                           # nothing changed, yet every file is uploaded again
    assert any("re-uploads every file" in w for w in result.warnings), result.warnings
    assert missing_packs(bare_live, 3) == []
    assert bare_live.checkpoint().seq is None        # then idle again
    restores_fx(bare_live, tmp_path, "B" * 1000)


def test_a_pending_manifest_republished_while_a_gc_runs_is_dropped_and_its_packs_are_rechecked(
        bare_live, tmp_path, monkeypatch):
    """A gc whose sweep batch was planned (and its manifests listed again) before the
    republish deletes the pre-existing pack right after it: the republish's own checks,
    before and after its put, both find the pack. With a gc running, the pending
    manifest is dropped and every file uploaded again, so the pack found already stored
    keeps its spool copy and the next checkpoint puts it back."""
    from test_gc import HookStore
    from journal.store import open_store
    p1 = pending_on_a_tombstoned_pack(bare_live, monkeypatch)
    republished = []

    def hook(op, key):
        if op == "delete" and key.endswith(p1) and not republished:
            republished.append(bare_live.checkpoint())  # between the batch's relist and its request

    assert gc(bare_live.repo(HookStore(open_store(str(bare_live.store_path)), hook)),
              Policy(keep_last=1), 0.0)[1].deleted > 0
    assert republished and republished[0].seq == 3
    assert any("gc" in w and "dropped it" in w for w in republished[0].warnings), republished[0].warnings
    assert not bare_live.pack_file(p1).exists()     # the sweep took it after the commit

    again = bare_live.checkpoint()                   # the recheck puts it back
    assert any(p1 in w and "uploaded it again" in w for w in again.warnings), again.warnings
    assert missing_packs(bare_live, 3) == []
    assert verify(bare_live.repo(), full=True).ok
    restores_fx(bare_live, tmp_path, "X" * 1000)


def test_a_dropped_pending_manifest_keeps_a_tree_whose_live_directory_is_gone(bare_live, tmp_path, monkeypatch):
    notes = fx_notes(bare_live)
    codex = bare_live.local / "codex-home"
    codex.mkdir()
    (codex / "keep.txt").write_text("codex data " * 100)
    notes.write_text("A" * 1000)
    assert bare_live.checkpoint().seq == 1           # both trees
    notes.write_text("B" * 1000)
    (codex / "keep.txt").write_text("newer codex data " * 100)
    monkeypatch.setattr(Repository, "put_manifest", failing_put)
    with pytest.raises(ConnectionError):
        bare_live.checkpoint()                       # seq 2 pending, naming a new pack
    monkeypatch.undo()
    state = load_state(str(bare_live.local / ".journal"), bare_live.repo().store_id)
    pending = decode(decode_record(state.pending, key="pending"), Manifest)
    for pack in pending.packs:                       # the store lost the pending checkpoint's packs
        bare_live.pack_file(pack).unlink()
    subprocess.run(["rm", "-rf", str(codex)], check=True)   # and codex's live directory is gone: a dormant tree

    result = bare_live.checkpoint()                  # drops pending 2, uploads fx again, commits 2

    assert result.seq == 2 and any("dropped it" in w for w in result.warnings), result.warnings
    manifest, _ = bare_live.repo().load_manifest(2)
    assert manifest.trees["codex"].root is not None and manifest.trees["codex"].files == 1
    out = tmp_path / "out"
    restored = bare_live.restore(to=str(out))
    assert restored.complete, [(t.lost, t.error) for t in restored.trees]
    assert (out / "codex" / "keep.txt").read_text() == "codex data " * 100   # as in the parent, seq 1
    assert (out / "fx" / "notes.txt").read_text() == "B" * 1000
    assert bare_live.repo().manifest_seqs() == [1, 2]


def test_a_one_file_tick_in_a_large_tree_encodes_only_the_leaf_page_of_that_file(bare_live, monkeypatch, tmp_path):
    """The tree's other leaf pages are taken back from its last index (``build_index``'s
    ``previous``), and the index read back holds every path as it is now."""
    from journal.format import index

    live = bare_live
    root = live.local / "agent-state" / "claude" / "projects"
    for d in range(20):
        (root / f"p{d:02d}").mkdir(parents=True)
        for f in range(100):
            (root / f"p{d:02d}" / f"s{f:03d}.jsonl").write_bytes(b'{"d": %d, "f": %d}\n' % (d, f))
    live.checkpoint()
    leaves = []
    real = index.encode
    monkeypatch.setattr(index, "encode", lambda page: (page.level == 0 and leaves.append(0)) or real(page))
    for tick, (d, f) in enumerate(((7, 42), (7, 43), (19, 99), (0, 0)), 2):
        leaves.clear()
        with open(root / f"p{d:02d}" / f"s{f:03d}.jsonl", "ab") as fh:
            fh.write(b'{"more": %d}\n' % tick)

        assert live.checkpoint().seq == tick
        assert leaves == [0], tick  # one leaf of 30-odd encoded
    monkeypatch.undo()
    assert sum(1 for p in live.entries("claude") if p.endswith(".jsonl")) == 2000
    assert live.restore(to=str(tmp_path / "back")).complete
    back = tmp_path / "back" / "claude" / "projects"
    assert all((back / f"p{d:02d}" / f"s{f:03d}.jsonl").read_bytes() == (root / f"p{d:02d}" / f"s{f:03d}.jsonl").read_bytes()
               for d in range(20) for f in range(100))


def test_a_failure_in_the_pack_hash_thread_fails_the_checkpoint_and_publishes_nothing(live, monkeypatch):
    """A large record's share of its pack's name is hashed in a thread: if that thread
    fails, no pack is named from a partial hash and no manifest is published; the
    next checkpoint publishes the file whole."""
    live.checkpoint()
    big = live.local / "codex-home" / "weights.bin"
    big.write_bytes(os.urandom(AHEAD_FILE + 2 * CHUNK))
    real, failed = pack_module._update, []

    def failing(digest, pieces):
        if threading.current_thread() is not threading.main_thread():
            failed.append(1)
            raise MemoryError("hash thread")
        return real(digest, pieces)

    monkeypatch.setattr(pack_module, "_update", failing)
    with pytest.raises(MemoryError):
        live.checkpoint()
    monkeypatch.undo()

    assert failed and live.seqs() == [1]
    assert not list((live.state_dir / "spool").glob("*"))
    live.checkpoint()
    assert live.stored_bytes("codex", "weights.bin") == big.read_bytes()


def test_a_pack_whose_name_cannot_be_hashed_is_not_uploaded_and_leaves_no_spool_file(live, tmp_path, monkeypatch):
    """The hash thread fails on the pack's last record, so the failure surfaces when the
    pack is closed: nothing is uploaded, and the abort that follows removes the spool
    file (it was closed already, and left behind, before the name was taken)."""
    def failing(digest, pieces):
        raise MemoryError("hash thread")

    monkeypatch.setattr(pack_module, "_update", failing)
    writer = PackWriter(live.store, str(tmp_path / "spool"))
    writer.add_record("00" * 32, [b"head", os.urandom(pack_module.HASH_THREAD_MIN)], 1)
    with pytest.raises(MemoryError):
        writer.finish()
    writer.abort()

    assert writer.packs == [] and not list(live.store.list("packs/"))
    assert list((tmp_path / "spool").iterdir()) == []


def test_the_counts_of_a_tree_are_its_entries_through_adds_removals_held_deletions_and_quiet_rows(bare_live):
    """``TreeResult.files`` and ``directories`` are counted as the scan puts each path in
    (quiet rows in bulk, walked paths one by one, paths a deletion guard holds), not by
    a pass over every path: over random ticks of adds, removals, appends, links, new and
    removed directories and a vanished transcript the guard holds, they equal the
    entries of the state the checkpoint saved."""
    import random

    rng = random.Random(27)
    base = bare_live.local / "codex-home" / "memories"
    for d in range(6):
        (base / f"d{d}").mkdir(parents=True)
        for f in range(rng.randint(1, 30)):
            (base / f"d{d}" / f"n{f:02d}.md").write_text(f"{d}/{f}\n")
    big = bare_live.local / "codex-home" / "sessions" / "long.jsonl"
    big.parent.mkdir(parents=True)
    big.write_text('{"type": "message"}\n' * 400)
    for tick in range(12):
        for _ in range(rng.randint(1, 6)):
            d = base / f"d{rng.randrange(8)}"
            op = rng.choice(["add", "append", "remove", "link", "rmdir", "add"])
            files = sorted(d.glob("*")) if d.is_dir() else []
            if op == "add":
                d.mkdir(exist_ok=True)
                (d / f"t{tick}-{rng.randrange(99)}.md").write_text("x\n")
            elif op == "append" and files and files[0].is_file() and not files[0].is_symlink():
                with open(files[0], "a") as fh:
                    fh.write("more\n")
            elif op == "remove" and files:
                files[-1].unlink()
            elif op == "link":
                d.mkdir(exist_ok=True)
                link = d / f"l{tick}"
                if not link.exists() and not link.is_symlink():
                    link.symlink_to("n00.md")
            elif op == "rmdir" and d.is_dir() and rng.random() < 0.3:
                shutil.rmtree(d)
        if tick == 5:
            big.unlink()   # more history than the transcript guard lets go: held
        result = bare_live.checkpoint()
        state = load_state(str(bare_live.state_dir), bare_live.repo().store_id)
        for tr in result.trees:
            entries = [fs.entry for fs in state.trees[tr.name].files.values()]
            want = sum(e.kind != "dir" for e in entries)
            assert (tr.files, tr.directories) == (want, len(entries) - want), (tick, tr)
    assert any(tr.kept_deleted for tr in result.trees)


def test_the_packs_and_the_manifest_upload_together_and_the_manifest_is_published_after_both(tmp_path, monkeypatch):
    """Over a slow link (the hf-mount simulation, whose upload of a data pack is made to
    take 0.3 s at close) a busy checkpoint's two pack uploads overlap: the index pack's
    starts before the data pack's has ended, and so does the manifest's upload (a temp
    file, outside the key space); its rename, the commit point, waits for both packs."""
    from journal.format.objects import HEADER, KIND_MANIFEST, KIND_PAGE
    from journal.store.hfmount import HfMountFsOps

    live = Live(tmp_path / "home", f"hfsim://{tmp_path / 'store'}")
    live.write("codex-home/sessions/2026/12/05/rollout-a.jsonl", '{"n": 0}\n')
    checkpoint(live.cfg, live.store)
    live.append("codex-home/sessions/2026/12/05/rollout-a.jsonl", '{"n": 1}\n' * 1000)
    events: list[tuple[str, str]] = []
    real_pwrite, real_close, real_rename = HfMountFsOps.pwrite, HfMountFsOps.close, HfMountFsOps.rename_noclobber

    def holds(buf) -> str:
        kind = HEADER.unpack_from(bytes(buf[:HEADER.size]))[2]
        return "manifest" if kind == KIND_MANIFEST else "index" if kind == KIND_PAGE else "data"

    def pwrite(self, fd, data, offset):
        n = real_pwrite(self, fd, data, offset)
        if offset == 0:
            events.append(("began", holds(self._live(fd).buf)))
        return n

    def close(self, fd):
        what = holds(self._live(fd).buf) if len(self._live(fd).buf) >= HEADER.size else None
        if what == "data":
            time.sleep(0.3)
        real_close(self, fd)
        if what is not None:
            events.append(("landed", what))

    def rename_noclobber(self, src, dst):
        real_rename(self, src, dst)
        if "/manifests/" in dst:
            events.append(("published", "manifest"))

    monkeypatch.setattr(HfMountFsOps, "pwrite", pwrite)
    monkeypatch.setattr(HfMountFsOps, "rename_noclobber", rename_noclobber)
    monkeypatch.setattr(HfMountFsOps, "close", close)
    assert checkpoint(live.cfg, live.store).seq == 2
    order = [e for e in events if e[1] in ("data", "index", "manifest")]
    assert order.index(("began", "index")) < order.index(("landed", "data")), order
    assert order.index(("landed", "manifest")) < order.index(("landed", "data")), order
    assert order[-1] == ("published", "manifest") and order.count(("published", "manifest")) == 1, order
