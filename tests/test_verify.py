"""Verify: an audit of the store that finds damage done directly to its bytes."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys

import pytest
from faults import FaultyStore

from journal.checkpoint.run import checkpoint
from journal.errors import CorruptObject, StoreError
from journal.repository.errors import DamagedConfig
from journal.format.objects import HEADER, decode_record
from journal.repository.repository import pack_key
from journal.repository.repository import Repository, blob_location, manifest_key
from journal.format.inputs import Delivery, claim_key, delivery_key, encode_delivery, input_key, parse_id
from journal.inputs.log import InputLog
from journal.store.counting import CountingStore
from journal.verify import (CORRUPT_CONFIG, CORRUPT_INPUT, CORRUPT_OBJECT, DUPLICATE_CLIENT_ID, MISSING_OBJECT,
                            ODD_INPUT_KEY, SHORT_PACK, TORN_MANIFEST, UNREFERENCED_PACK, UNSAFE_PATH, verify)
from conftest import CodexLive, run_journal
from conftest import one_line_error
from test_restore import publish_crafted_manifest

ROLLOUT = "sessions/2026/02/23/rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"


@pytest.fixture
def stored(live):
    """A store with two checkpoints of the fixture trees."""
    live.checkpoint()
    (live.local / "codex-home" / "config.toml").write_text('model = "gpt-5.3-codex"\n')
    assert live.checkpoint().seq == 2
    return live


def kinds(proc) -> list[str]:
    return [f["kind"] for f in json.loads(proc.stdout)["findings"]]


def test_clean_store_verifies_ok(stored):
    quick, full = stored.run("verify"), stored.run("verify", "--full")

    assert (quick.returncode, full.returncode) == (0, 0), quick.stdout + full.stdout
    assert quick.stdout.startswith("ok: 2 manifests") and "0 errors" in full.stdout


def test_clean_store_full_verify_rehashes_every_blob(stored):
    result = verify(stored.repo(), full=True)

    assert result.ok and result.manifests == 2
    distinct = {(r.pack, r.offset) for seq in (1, 2) for tree in ("codex", "claude", "openclaw")
                for e in stored.entries(tree, seq).values() for r in e.refs}
    assert result.blobs == len(distinct)


def test_full_verify_catches_a_flipped_byte_that_quick_verify_does_not_read(stored):
    ref = stored.entries("codex")[ROLLOUT].refs[0]
    stored.corrupt_blob(ref)

    quick = stored.run("verify", "--json")
    full = stored.run("verify", "--full", "--json")

    assert quick.returncode == 0  # quick verify checks existence, not contents
    assert full.returncode == 1
    findings = json.loads(full.stdout)["findings"]
    assert [f["kind"] for f in findings] == [CORRUPT_OBJECT]
    assert findings[0]["key"] == blob_location(ref)


def test_full_verify_reports_a_changed_byte_that_leaves_the_record_decoding_to_its_payload(stored):
    """Some bits of a zstd frame's header (the window size) can change and the frame still
    decodes to the same bytes, so the record's own hash holds: the pack's name does not."""
    ref = stored.entries("codex")[ROLLOUT].refs[0]
    path = stored.pack_file(ref.pack)
    data = path.read_bytes()
    record = data[ref.offset:ref.offset + ref.length]
    at, bit = _harmless_flip(record, ref)
    path.write_bytes(data[:ref.offset + at] + bytes([record[at] ^ bit]) + data[ref.offset + at + 1:])

    full = stored.run("verify", "--full", "--json")

    assert full.returncode == 1
    findings = json.loads(full.stdout)["findings"]
    assert [(f["kind"], f["key"]) for f in findings] == [(CORRUPT_OBJECT, pack_key(ref.pack))]
    assert "do not hash to its name" in findings[0]["detail"]
    assert json.loads(full.stdout)["packs_hashed"] >= 1


def _harmless_flip(record: bytes, ref) -> tuple[int, int]:
    """The first (byte, bit) of ``record`` whose flip still decodes to its payload."""
    payload = decode_record(record, key="k", expect_id=ref.id, expect_size=ref.size)
    for at in range(HEADER.size, len(record)):
        for bit in (1 << b for b in range(8)):
            flipped = record[:at] + bytes([record[at] ^ bit]) + record[at + 1:]
            try:
                if decode_record(flipped, key="k", expect_id=ref.id, expect_size=ref.size) == payload:
                    return at, bit
            except CorruptObject:
                continue
    raise AssertionError("no harmless flip in this record")


def test_quick_verify_reports_a_deleted_pack_as_missing(stored):
    ref = stored.entries("codex", seq=2)["config.toml"].refs[0]
    (stored.store_path / pack_key(ref.pack)).unlink()

    proc = stored.run("verify", "--json")

    assert proc.returncode == 1
    findings = json.loads(proc.stdout)["findings"]
    assert {(f["kind"], f["manifest"], f["key"]) for f in findings} == {(MISSING_OBJECT, 2, pack_key(ref.pack))}
    assert "config.toml" in findings[0]["detail"]


def test_quick_verify_finds_a_pack_cut_short_without_reading_it(stored):
    """The pack sizes come with the listing: a pack truncated (an interrupted copy of
    the store, a torn upload) is found by the quick audit, once per manifest."""
    ref = stored.entries("codex", seq=2)[ROLLOUT].refs[-1]
    path = stored.store_path / pack_key(ref.pack)
    path.write_bytes(path.read_bytes()[:ref.offset + ref.length - 1])

    proc = stored.run("verify", "--json")

    assert proc.returncode == 1
    findings = json.loads(proc.stdout)["findings"]
    assert {(f["kind"], f["key"]) for f in findings} == {(SHORT_PACK, pack_key(ref.pack))}
    assert sorted(f["manifest"] for f in findings) == [1, 2]  # both checkpoints name the rollout's pack
    # which entry the detail names depends on the pack's order (the walk's, the file system's)
    assert re.search(rf"needs bytes up to [\d,]+, the pack holds {ref.offset + ref.length - 1:,}$", findings[0]["detail"])


def test_verify_reports_a_truncated_manifest_as_torn(stored):
    newest = stored.store_path / manifest_key(2)
    newest.write_bytes(newest.read_bytes()[:-7])

    proc = stored.run("verify", "--json")

    assert proc.returncode == 1
    assert [(f["kind"], f["manifest"], f["key"]) for f in json.loads(proc.stdout)["findings"]] == \
        [(TORN_MANIFEST, 2, manifest_key(2))]


def test_verify_reports_a_manifest_path_escaping_its_tree(stored):
    publish_crafted_manifest(stored, [("../escaped.txt", b"pwned\n")], [])

    proc = stored.run("verify", "--full", "--json")

    assert proc.returncode == 1 and kinds(proc) == [UNSAFE_PATH]


def test_verify_json_output_describes_the_audit(stored):
    proc = stored.run("verify", "--full", "--json")

    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["full"] is True
    assert report["manifests"] == 2 and report["packs"] == 4 and report["findings"] == []
    assert report["blobs"] > 0 and report["pages"] > 0


def test_verify_human_output_names_each_finding(stored):
    ref = stored.entries("codex")[ROLLOUT].refs[0]
    stored.corrupt_blob(ref)

    proc = stored.run("verify", "--full")

    assert proc.returncode == 1
    assert f"corrupt-object: manifest 2: {blob_location(ref)}:" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("FINDINGS:")


def test_verify_never_modifies_the_store(stored):
    stored.corrupt_blob(stored.entries("codex")[ROLLOUT].refs[0])
    before = {p: p.read_bytes() for p in stored.store_path.rglob("*") if p.is_file()}

    stored.run("verify", "--full")

    assert {p: p.read_bytes() for p in stored.store_path.rglob("*") if p.is_file()} == before


# --- packs no checkpoint names --------------------------------------------------------------------


def crash_a_checkpoint_after_its_data_pack(live) -> str:
    """A checkpoint whose index pack upload fails (the container died there): its data
    pack stays in the store, named by nothing; the file then changes again, so the next
    checkpoint uploads another one. Returns the orphan pack's key."""
    config = live.local / "codex-home" / "config.toml"
    config.write_text('model = "crashed"\n')
    before = {k for k in live.store.list("packs/")}
    puts = []

    def second_pack_put(method, key):
        if method == "put_if_absent" and key.startswith("packs/"):
            puts.append(key)
            return len(puts) == 2
        return False

    with pytest.raises(StoreError):
        checkpoint(live.cfg, FaultyStore(live.store, fail_when=second_pack_put))
    (orphan,) = set(live.store.list("packs/")) - before
    config.write_text('model = "after the crash"\n')
    assert live.checkpoint().seq == 3
    return orphan


def test_verify_warns_of_a_crashed_checkpoints_pack_and_still_passes(stored):
    orphan = crash_a_checkpoint_after_its_data_pack(stored)

    proc = stored.run("verify", "--full")
    doc = json.loads(stored.run("verify", "--json").stdout)

    assert proc.returncode == 0, proc.stdout
    assert f"warning: {UNREFERENCED_PACK}: store: {orphan}:" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].endswith("0 errors, 1 warning")
    assert doc["ok"] is True
    assert [(f["kind"], f["severity"], f["key"]) for f in doc["findings"]] == [(UNREFERENCED_PACK, "warning", orphan)]


def test_verify_counts_what_kept_checkpoints_reach_and_gc_tombstoned_as_referenced(stored):
    """After gc deleted checkpoint 1, packs only it had uploaded are still reached by the
    kept ones; the crashed checkpoint's pack, once tombstoned, is garbage gc knows about."""
    orphan = crash_a_checkpoint_after_its_data_pack(stored)
    uploaded_by_1 = set(stored.repo().load_manifest(1)[0].packs)
    for _ in range(2):  # mark, then sweep: manifests 1 and 2 go
        assert stored.run("gc", "--keep-last", "1", "--grace", "0s").returncode == 0
    keys = set(stored.store.list())
    assert stored.repo().manifest_seqs() == [3] and orphan in keys
    assert any(pack_key(p) in keys for p in uploaded_by_1), "no pack of checkpoint 1 is still needed"

    doc = json.loads(stored.run("verify", "--json").stdout)

    assert doc["ok"] is True and doc["findings"] == []


# --- the store's config ---------------------------------------------------------------------------


def test_a_flipped_character_of_the_config_is_a_corrupt_config_finding(stored):
    """One character of ``config`` changed (here in the store id): verify used to pass,
    and the next checkpoint blamed the local state. The other checks still run."""
    config = stored.store_path / "config"
    raw = config.read_bytes()
    at = raw.index(b'"store_id":"') + 12
    config.write_bytes(raw[:at] + (b"0" if raw[at:at + 1] != b"0" else b"1") + raw[at + 1:])

    proc = stored.run("verify", "--full", "--json")

    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert [(f["kind"], f["key"]) for f in doc["findings"]] == [(CORRUPT_CONFIG, "config")]
    assert "checksum" in doc["findings"][0]["detail"] and doc["manifests"] == 2 and doc["blobs"] > 0


def test_every_changed_byte_of_a_new_config_is_named_as_damage(stored):
    config = stored.store_path / "config"
    raw = config.read_bytes()
    for at in range(len(raw)):
        config.write_bytes(raw[:at] + bytes([raw[at] ^ 0x01]) + raw[at + 1:])
        with pytest.raises(DamagedConfig) as caught:
            Repository.open(stored.store)
        assert f"{stored.store_path}/config" in str(caught.value)
        assert verify(Repository.open(stored.store, audit=True)).findings[0].kind == CORRUPT_CONFIG
    config.write_bytes(raw)
    assert verify(Repository.open(stored.store)).ok


def test_a_config_written_before_the_checksum_is_read_strictly(stored):
    """Stores made by formats 1-6 have no checksum: they stay readable, and a changed
    member name (which the defaults used to hide: ``formaT`` read as the default format)
    is still damage."""
    config = stored.store_path / "config"
    info = json.loads(config.read_bytes())
    del info["checksum"]
    old = json.dumps(info, separators=(",", ":")).encode()
    config.write_bytes(old)
    assert stored.run("verify").returncode == 0
    (stored.local / "codex-home" / "config.toml").write_text('model = "old store"\n')
    assert stored.run("checkpoint").returncode == 0

    config.write_bytes(old.replace(b'"format"', b'"formaT"'))
    proc = stored.run("verify", "--json")

    assert proc.returncode == 1 and kinds(proc) == [CORRUPT_CONFIG]


def test_full_verify_with_a_full_temp_dir_names_the_file_and_the_filesystem_to_free(live, small_tmpfs):
    db = live.local / "opencode-share" / "opencode.db"
    db.parent.mkdir()
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.executemany("INSERT INTO t VALUES (?)", [("y" * 1000,)] * 300)
    con.commit()
    con.close()
    live.checkpoint()
    tmp = small_tmpfs("4k")

    line = one_line_error(run_journal("verify", "--full", env={**live.env, "TMPDIR": str(tmp)}))

    assert line.startswith(f"journal: error: {tmp}/journal-verify-")
    assert line.endswith(f"/snapshot.db: No space left on device; free space on the filesystem mounted at {tmp}")


# ---------------------------------------------------------------- the input journal (design §20)


@pytest.fixture
def journaled(stored):
    """``stored`` plus inputs in two sessions, one delivered."""
    log = InputLog(stored.repo())
    first = log.append("codex", "S", b"first", client_id="c1")
    log.append("codex", "S", b"second")
    log.append("claude", "T", b"other")
    log.mark_delivered(first.id)
    return stored, log, first


def test_full_verify_reads_every_input_and_quick_verify_only_lists_them(journaled):
    stored, _log, first = journaled
    sdir, seq = parse_id(first.id)
    path = stored.store_path / input_key(sdir, seq)
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))

    quick = stored.run("verify", "--json")
    full = stored.run("verify", "--full", "--json")

    assert quick.returncode == 0 and json.loads(quick.stdout)["inputs"] == 3
    assert full.returncode == 1 and kinds(full) == [CORRUPT_INPUT]
    assert json.loads(full.stdout)["findings"][0]["key"] == input_key(sdir, seq)
    (stored.store_path / input_key(sdir, 2)).write_bytes(b"short")
    assert kinds(stored.run("verify", "--json")) == [CORRUPT_INPUT], "a record shorter than its header"


def test_verify_finds_a_marker_of_another_input_and_warns_of_odd_keys_and_twice_stored_client_ids(journaled):
    stored, log, first = journaled
    sdir, seq = parse_id(first.id)
    marker = stored.store_path / delivery_key(sdir, seq)
    marker.unlink()
    crafted = Delivery(input="0" * 64, seq=seq, submitted_ns=1, delivered="2026-01-01T00:00:00.000Z",
                       delivered_ns=1, host="h")
    marker.write_bytes(encode_delivery(crafted))
    stored.store.delete(claim_key(sdir, "c1"))          # two processes sent c1 at the same moment
    log.append("codex", "S", b"first, again", client_id="c1")
    (stored.store_path / "inputs" / "notes.txt").write_text("someone else's")

    found = json.loads(stored.run("verify", "--full", "--json").stdout)["findings"]

    assert [(f["kind"], f["key"], f["severity"]) for f in found] == [
        (CORRUPT_INPUT, delivery_key(sdir, seq), "error"),
        (DUPLICATE_CLIENT_ID, input_key(sdir, 3), "warning"),
        (ODD_INPUT_KEY, "inputs/notes.txt", "warning")]
    assert "names input record 000000000000" in found[0]["detail"]


def test_verify_counts_the_orphans_gc_marked_as_information(stored):
    """gc's orphans (packs no checkpoint names) are what verify counts as orphans: before
    gc marks them (each a warning too) and after (no finding; gc deletes them later)."""
    orphan = crash_a_checkpoint_after_its_data_pack(stored)
    size = stored.pack_file(orphan.rsplit("/", 1)[-1]).stat().st_size
    before = json.loads(stored.run("verify", "--json").stdout)
    assert stored.run("gc", "--keep-last", "5", "--grace", "0s").returncode == 0

    text = stored.run("verify").stdout
    after = json.loads(stored.run("verify", "--json").stdout)
    planned = stored.run("gc", "--keep-last", "5", "--grace", "0s", "--dry-run").stdout

    assert (before["orphans"], before["orphans_marked"], before["orphan_bytes"]) == (1, 0, size)
    assert [f["kind"] for f in before["findings"]] == [UNREFERENCED_PACK]
    assert after["ok"] and after["findings"] == []
    assert (after["orphans"], after["orphans_marked"], after["orphan_bytes"]) == (1, 1, size)
    assert f"orphans: 1 pack ({size:,} bytes) that no checkpoint names, 1 of them marked by a gc tombstone" in text
    assert "wait: 1 orphan pack, kept until" in planned


def test_a_record_whose_id_differs_past_twelve_characters_names_the_two_ids_apart(tmp_path):
    """A byte of a record's stored id changed past its first six: the finding shows as
    much of each id as tells them apart, not the same twelve characters twice."""
    box = CodexLive(tmp_path)
    box.write("config.toml", 'model = "x"\n')
    box.checkpoint()
    ref = box.entries("codex")["config.toml"].refs[0]
    path = box.pack_file(ref.pack)
    data = bytearray(path.read_bytes())
    data[ref.offset + HEADER.size - 32 + 20] ^= 0x01   # the id's 21st byte: its 41st and 42nd hex characters
    path.write_bytes(bytes(data))

    proc = box.run("verify", "--full")

    held, expected = re.search(r"record holds blob (\w+), expected (\w+)", proc.stdout).groups()
    assert proc.returncode == 1 and held != expected, proc.stdout
    assert ref.id.startswith(expected) and len(held) == len(expected) == 46


#: A checkpointer in a process of its own: for each line it reads, one event appended to
#: the rollout (argv[1]), then one checkpoint; it answers with the sequence committed.
CHECKPOINTER = r'''
import sys
from journal.checkpoint.run import checkpoint
from journal.config import load_config
from journal.store import open_store

cfg = load_config()
store = open_store(cfg.store)
for n, _ in enumerate(sys.stdin):
    with open(sys.argv[1], "a") as fh:
        fh.write('{"type": "event", "n": %d}\n' % n)
    print(checkpoint(cfg, store).seq, flush=True)
'''


class CommitsAfterThePackListing(CountingStore):
    """The store as verify reads it, with a checkpoint committed by another process
    right after verify's listing of ``packs/``, before it lists the manifests."""

    def __init__(self, inner, checkpointer):
        super().__init__(inner)
        self.checkpointer = checkpointer
        self.committed: list[int] = []

    def list_sizes(self, prefix: str = ""):
        listed = list(super().list_sizes(prefix))
        if prefix == "packs/":
            self.checkpointer.stdin.write("commit\n")
            self.checkpointer.stdin.flush()
            self.committed.append(int(self.checkpointer.stdout.readline()))
        return iter(listed)


def test_verify_during_concurrent_checkpoints_reports_no_pack_of_theirs_as_missing(stored):
    checkpointer = stored.popen(str(stored.codex / ROLLOUT), cmd=[sys.executable, "-c", CHECKPOINTER],
                                stdin=subprocess.PIPE)
    try:
        for n in range(3, 6):
            store = CommitsAfterThePackListing(stored.store, checkpointer)
            result = verify(Repository.open(store))
            assert store.committed == [n], checkpointer.stderr.read() if checkpointer.poll() else store.committed
            assert result.manifests == n                 # the checkpoint committed after the listing is audited
            assert result.ok, [f for f in result.findings if f.severity == "error"]
            assert not [f for f in result.findings if f.kind == MISSING_OBJECT]
    finally:
        checkpointer.stdin.close()
        assert checkpointer.wait(timeout=60) == 0, checkpointer.stderr.read()
