"""Rewritten files stored as deltas of their previous version (format 6, journal/checkpoint/file_delta.py)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from journal.errors import CorruptObject
from journal.format.index import decode_page
from journal.format.model import BlobRef, Entry, Page, encode
from journal.format.objects import FLAG_DELTA, parse_header
from journal.verify import verify

TREE, NAME = "gemini", "logs.json"


def logs(n: int) -> bytes:
    """Gemini's logs.json after ``n`` messages: the whole file, rewritten each turn."""
    rows = [{"sessionId": "a1b2c3d4", "messageId": i, "type": "user" if i % 2 == 0 else "gemini",
             "message": f"turn {i}: please look at src/module_{i % 17}.py and fix the failing test",
             "timestamp": f"2026-03-01T10:{i // 60:02d}:{i % 60:02d}.000Z"} for i in range(n)]
    return json.dumps(rows, indent=2).encode()


def rewrite(path, data: bytes) -> None:
    """Write through a temp file and rename it over, as the harnesses do."""
    with open(f"{path}.tmp", "wb") as fh:
        fh.write(data)
    os.replace(f"{path}.tmp", path)


def flags_of(live, ref: BlobRef) -> int:
    data = live.pack_file(ref.pack).read_bytes()[ref.offset:ref.offset + ref.length]
    return parse_header(data, key="chunk").flags


@pytest.fixture
def gemini(bare_live):
    live = bare_live
    live.add_gemini_tree()
    path = live.local / "agent-state" / "gemini-home" / ".gemini" / NAME
    rewrite(path, logs(200))
    live.checkpoint()
    return live, path


def test_a_rewritten_file_is_stored_as_a_delta_of_its_previous_version(gemini, tmp_path):
    live, path = gemini
    rewrite(path, logs(201))        # the first rewrite is stored whole, and becomes the base
    live.checkpoint()
    first = live.entries(TREE)[NAME]
    assert first.bases == () and flags_of(live, first.refs[0]) == 0
    sizes = []
    for n in (202, 203, 204):
        rewrite(path, logs(n))
        before = live.store.put_bytes
        live.checkpoint()
        sizes.append(live.store.put_bytes - before)
        entry = live.entries(TREE)[NAME]
        assert entry.bases == (first.refs[0],), "the base is the whole chunk, never a delta"
        assert flags_of(live, entry.refs[0]) == FLAG_DELTA
        assert entry.refs[0].length < first.refs[0].length // 10
    whole = len(path.read_bytes())
    assert all(size < whole // 8 for size in sizes), (sizes, whole)
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / TREE / NAME).read_bytes() == path.read_bytes()
    for seq, n in ((live.repo().manifest_seqs()[-2], 203),):
        at = tmp_path / f"at-{seq}"
        assert live.run("restore", "--at", str(seq), "--to", str(at)).returncode == 0
        assert (at / TREE / NAME).read_bytes() == logs(n)


def test_a_drifting_file_gets_a_new_whole_base(gemini):
    live, path = gemini
    rewrite(path, logs(201))
    live.checkpoint()
    bases, noise = set(), b""
    for n in range(12):   # each rewrite adds bytes the base cannot predict
        noise += os.urandom(1500).hex().encode()
        rewrite(path, logs(201) + noise)
        live.checkpoint()
        entry = live.entries(TREE)[NAME]
        bases.add(entry.bases[0].id if entry.bases else entry.refs[0].id)
    assert len(bases) > 1, "a delta that no longer pays makes the chunk whole: a new base"
    assert verify(live.repo(), full=True).ok


def test_gc_keeps_the_base_of_a_kept_delta_chunk(gemini, tmp_path):
    live, path = gemini
    for n in (201, 202, 203):
        rewrite(path, logs(n))
        live.checkpoint()
    base = live.entries(TREE)[NAME].bases[0]
    for _ in range(2):  # mark, then sweep everything but the newest checkpoint
        proc = live.run("gc", "--keep-last", "1", "--grace", "0s")
        assert proc.returncode == 0, proc.stderr
    assert len(live.repo().manifest_seqs()) == 1
    assert live.pack_file(base.pack).exists()
    assert verify(live.repo(), full=True).ok
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / TREE / NAME).read_bytes() == logs(203)


def test_without_a_local_base_copy_the_chunk_is_stored_whole(gemini):
    live, path = gemini
    for n in (201, 202):
        rewrite(path, logs(n))
        live.checkpoint()
    assert live.entries(TREE)[NAME].bases
    shutil.rmtree(live.local / ".journal" / "chunks")   # a fresh machine, or a lost cache
    rewrite(path, logs(203))
    live.checkpoint()
    entry = live.entries(TREE)[NAME]
    assert entry.bases == () and flags_of(live, entry.refs[0]) == 0
    rewrite(path, logs(204))
    live.checkpoint()
    assert live.entries(TREE)[NAME].bases == (entry.refs[0],)


def test_a_damaged_local_base_copy_is_never_used(gemini):
    live, path = gemini
    for n in (201, 202):
        rewrite(path, logs(n))
        live.checkpoint()
    base = live.entries(TREE)[NAME].bases[0]
    copy = live.local / ".journal" / "chunks" / base.id
    copy.write_bytes(copy.read_bytes().replace(b"turn", b"TURN"))
    rewrite(path, logs(203))
    live.checkpoint()
    entry = live.entries(TREE)[NAME]
    assert entry.bases == () and flags_of(live, entry.refs[0]) == 0
    assert verify(live.repo(), full=True).ok


def test_a_corrupt_base_in_the_store_is_found_and_restore_never_writes_wrong_bytes(gemini, tmp_path):
    live, path = gemini
    for n in (201, 202):
        rewrite(path, logs(n))
        live.checkpoint()
    base = live.entries(TREE)[NAME].bases[0]
    live.corrupt_blob(base)
    result = verify(live.repo(), full=True)
    assert not result.ok and {f.kind for f in result.findings} == {"corrupt-object"}
    out = tmp_path / "out"
    proc = live.run("restore", "--to", str(out), "--json")
    restored = (out / TREE / NAME).read_bytes()
    assert restored == logs(200), "falls back to the newest copy that verifies: the first one"
    report = json.loads(proc.stdout)
    assert any(NAME in line and "damaged" in line for tree in report["trees"] for line in tree["fallbacks"]), report


def test_a_multi_chunk_file_reuses_unchanged_chunks_and_deltas_the_changed_one(bare_live, tmp_path):
    live = bare_live
    live.add_gemini_tree()
    path = live.local / "agent-state" / "gemini-home" / ".gemini" / "big.json"
    body = bytearray(logs(14000)[: (5 << 20) // 2])
    assert len(body) == (5 << 20) // 2
    rewrite(path, bytes(body))
    live.checkpoint()
    for turn in range(3):
        body[100:110] = b"%010d" % turn
        rewrite(path, bytes(body))
        before = live.store.put_bytes
        live.checkpoint()
        entry = live.entries(TREE)["big.json"]
    assert len(entry.refs) == 3 and entry.bases[0] is not None and entry.bases[1:] == (None, None)
    assert live.store.put_bytes - before < 20_000
    out = tmp_path / "out"
    assert live.run("restore", "--to", str(out)).returncode == 0
    assert (out / TREE / "big.json").read_bytes() == bytes(body)


def test_an_entry_naming_bases_it_cannot_have_is_refused():
    """Its page is refused when it is read, before any blob it names is."""
    ref = BlobRef("00" * 32, "11" * 32, 0, 100, 10)
    for entry in (Entry(path="a.json", kind="file", mode=0o644, size=20, refs=(ref, ref), bases=(ref,)),
                  Entry(path="a.jsonl", kind="jsonl", mode=0o644, size=10, refs=(ref,), bases=(ref,))):
        with pytest.raises(CorruptObject, match="chunk bases"):
            decode_page(encode(Page(level=0, entries=(entry,))), "page")


def test_the_local_state_is_version_4_and_a_version_1_state_is_read_and_upgraded(gemini):
    """Entries may name chunk bases, which code that knows only state version 1 would drop
    and then publish delta chunks as whole ones: the state says version 2 or more, which
    that code refuses (its load_state wants 1). This code still reads a version 1 state."""
    import msgspec

    from journal.local.state import STATE_VERSION, load_state, save_state

    live, path = gemini
    for n in (201, 202):
        rewrite(path, logs(n))
        live.checkpoint()
    state_dir, store_id = live.cfg.state_dir, live.repo().store_id
    raw = msgspec.msgpack.decode(live.state_file.read_bytes())
    assert STATE_VERSION == 4 and raw["version"] == 4
    raw["version"] = 1
    live.state_file.write_bytes(msgspec.msgpack.encode(raw))
    state = load_state(state_dir, store_id)
    assert state is not None and state.version == 1
    save_state(state_dir, state)
    assert msgspec.msgpack.decode(live.state_file.read_bytes())["version"] == 4
    raw["version"] = 5   # a newer one is refused
    live.state_file.write_bytes(msgspec.msgpack.encode(raw))
    assert load_state(state_dir, store_id) is None


def test_a_base_copy_no_entry_names_any_more_is_removed_and_a_shared_one_kept(gemini, monkeypatch):
    """Each rewrite stored whole keeps a local copy of its chunk (a future base). A
    rewrite stored as a delta names its base and keeps every copy, with no pass over
    the tree's entries; a rewrite stored whole again (new content) drops the copy its
    last version named, unless another file still names that chunk (a file with the
    same bytes); a file gone drops the copy only it named."""
    from journal.checkpoint import chunk_copies

    live, path = gemini
    chunks = live.local / ".journal" / "chunks"
    rewrite(path, logs(201))  # stored whole: the first copy
    live.checkpoint()
    first = live.entries(TREE)[NAME].refs[0].id
    assert sorted(os.listdir(chunks)) == [first]
    passes = []
    real = chunk_copies.chunk_ids
    monkeypatch.setattr(chunk_copies, "chunk_ids", lambda trees: passes.append(1) or real(trees))
    rewrite(path, logs(202))  # a delta of the copy: nothing new kept, no pass
    live.checkpoint()
    assert live.entries(TREE)[NAME].bases[0].id == first and os.listdir(chunks) == [first] and not passes

    twin = path.parent / "twin.json"
    rewrite(twin, logs(201))  # another file with the first version's bytes: its chunk is the copy's
    live.checkpoint()
    assert live.entries(TREE)["twin.json"].refs[0].id == first
    rewrite(path, b"something else entirely, " * 200)  # stored whole: a new copy
    live.checkpoint()
    second = live.entries(TREE)[NAME].refs[0].id
    assert sorted(os.listdir(chunks)) == sorted([first, second]) and passes  # the twin still names the first

    rewrite(twin, b"the twin changed too " * 300)  # twin's rewrite stored whole: the first copy unused now
    live.checkpoint()
    third = live.entries(TREE)["twin.json"].refs[0].id
    assert sorted(os.listdir(chunks)) == sorted([second, third])
    os.unlink(twin)
    rewrite(path, b"and again something else " * 250)
    live.checkpoint()
    assert sorted(os.listdir(chunks)) == [live.entries(TREE)[NAME].refs[0].id]


def test_a_base_copy_of_a_file_that_became_a_directory_is_removed(gemini):
    """A rewritten file with a local base copy replaced by a directory: the first
    checkpoint after that which keeps a new copy drops the old one (no entry names it)."""
    live, path = gemini
    chunks = live.local / ".journal" / "chunks"
    other = path.parent / "other.json"
    rewrite(path, logs(201))
    rewrite(other, b"x" * 3000)
    live.checkpoint()
    rewrite(other, b"y" * 3100)
    live.checkpoint()
    first = live.entries(TREE)[NAME].refs[0].id
    assert first in os.listdir(chunks)
    third = path.parent / "third.json"
    rewrite(third, b"t" * 2000)
    live.checkpoint()
    os.unlink(path)
    os.mkdir(path)                 # logs.json becomes a directory
    rewrite(third, b"u" * 2100)    # a rewrite stored whole: a new copy, none of its own replaced
    live.checkpoint()
    assert live.entries(TREE)[NAME].kind == "dir"
    assert first not in os.listdir(chunks)
