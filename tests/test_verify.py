"""Verify: an audit of the store that finds damage done directly to its bytes."""

from __future__ import annotations

import json

import pytest

from journal.pack import pack_key
from journal.repository import blob_location, manifest_key
from journal.verify import CORRUPT_OBJECT, MISSING_OBJECT, SHORT_PACK, TORN_MANIFEST, UNSAFE_PATH, verify
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
    assert quick.stdout.startswith("ok: 2 manifest(s)") and "0 finding(s)" in full.stdout


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
    assert f"bytes up to {ref.offset + ref.length:,}" in findings[0]["detail"]


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
