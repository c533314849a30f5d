"""A pending manifest (the put failed after the state was saved) whose packs are
missing when it is republished.

A checkpoint whose data pack already exists (KeyExists) relies on a check after the
commit; when the manifest put fails, the manifest is kept as *pending* and the spool
copy is thrown away. A gc sweep in between deletes the tombstoned pack. The
republish must then not publish a manifest naming it."""
import shutil

import pytest

from journal.checkpoint import checkpoint
from journal.config import load_config
from journal.gc import gc
from journal.history import ManifestCache
from journal.localstate import load_state
from journal.model import Manifest, decode
from journal.objects import decode_record
from journal.pack import pack_key
from journal.repository import Repository
from journal.restore import restore
from journal.retention import Policy
from journal.store import open_store


@pytest.fixture
def fx(tmp_path):
    local = tmp_path / "local"
    tree = local / "fx-home"
    tree.mkdir(parents=True)
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    return tree / "notes.txt", open_store(env["JOURNAL_STORE"]), (lambda: load_config(env=env))


def missing_packs(store, seq: int) -> list[str]:
    entries, _ = ManifestCache(Repository.open(store)).tree(seq, "fx")
    return [r.pack for e in entries for r in e.refs if store.head(f"packs/{r.pack[:2]}/{r.pack}") is None]


def restores_whole(tmp_path, store, cfg, text: str) -> None:
    out = tmp_path / "out"
    r = restore(cfg(), store, to=str(out))
    assert r.complete, [(t.lost, t.error) for t in r.trees]
    assert (out / "fx" / "notes.txt").read_text() == text


def test_a_pending_manifest_whose_pack_a_sweep_took_is_dropped_and_uploaded_again(fx, tmp_path, monkeypatch):
    f, store, cfg = fx
    f.write_text("X" * 1000)
    checkpoint(cfg(), store)                         # seq 1: data pack P1 = [chunk X]
    f.write_text("Y" * 1000)
    checkpoint(cfg(), store)                         # seq 2
    repo = Repository.open(store)
    gc(repo, Policy(keep_last=1), 0.0)               # tombstones manifest 1 and P1
    f.write_text("X" * 1000)                         # content comes back: same pack bytes as P1

    def failing_put(self, record, seq):
        raise ConnectionError("network down during the manifest put")
    real_put = Repository.put_manifest
    monkeypatch.setattr(Repository, "put_manifest", failing_put)
    with pytest.raises(ConnectionError):
        checkpoint(cfg(), store)                     # seq 3 left pending in local state
    monkeypatch.setattr(Repository, "put_manifest", real_put)
    gc(repo, Policy(keep_last=1), 0.0)               # grace elapsed: deletes manifest 1 and P1

    res = checkpoint(cfg(), store)                   # drops pending 3, re-uploads, commits 3
    assert res.seq == 3
    assert any("dropped it" in w for w in res.warnings), res.warnings
    assert missing_packs(store, 3) == []
    restores_whole(tmp_path, store, cfg, "X" * 1000)


def test_a_pending_manifest_already_in_the_store_stands_and_the_next_checkpoint_uploads_again(
        fx, tmp_path, monkeypatch):
    f, store, cfg = fx
    f.write_text("A" * 1000)
    checkpoint(cfg(), store)                         # seq 1
    f.write_text("B" * 1000)

    def put_then_fail(self, record, seq):            # the put landed; its answer was lost
        real_put(self, record, seq)
        raise ConnectionError("connection reset after the manifest put")
    real_put = Repository.put_manifest
    monkeypatch.setattr(Repository, "put_manifest", put_then_fail)
    with pytest.raises(ConnectionError):
        checkpoint(cfg(), store)                     # seq 2 in the store, and pending locally
    monkeypatch.setattr(Repository, "put_manifest", real_put)
    lost = missing_packs(store, 2) or []
    assert lost == []
    packs = {r.pack for e in ManifestCache(Repository.open(store)).tree(2, "fx")[0] for r in e.refs}
    for p in packs:                                  # the store loses manifest 2's data pack
        (tmp_path / "store" / "packs" / p[:2] / p).unlink()

    res = checkpoint(cfg(), store)                   # manifest 2 stands (no conflict, no fork), and
    assert res.seq == 3                              # nothing changed, yet every file is uploaded again
    assert any("re-uploads every file" in w for w in res.warnings), res.warnings
    assert missing_packs(store, 3) == []
    assert checkpoint(cfg(), store).seq is None      # then idle again
    restores_whole(tmp_path, store, cfg, "B" * 1000)


def test_a_dropped_pending_manifest_keeps_a_tree_whose_live_directory_is_gone(fx, tmp_path, monkeypatch):
    f, store, cfg = fx
    codex = tmp_path / "local" / "codex-home"
    codex.mkdir()
    (codex / "keep.txt").write_text("codex data " * 100)
    f.write_text("A" * 1000)
    checkpoint(cfg(), store)                         # seq 1: both trees

    def failing_put(self, record, seq):
        raise ConnectionError("network down during the manifest put")
    f.write_text("B" * 1000)
    (codex / "keep.txt").write_text("newer codex data " * 100)
    real_put = Repository.put_manifest
    monkeypatch.setattr(Repository, "put_manifest", failing_put)
    with pytest.raises(ConnectionError):
        checkpoint(cfg(), store)                     # seq 2 pending, naming a new pack
    monkeypatch.setattr(Repository, "put_manifest", real_put)
    state = load_state(str(tmp_path / "local" / ".journal"), Repository.open(store).store_id)
    pending = decode(decode_record(state.pending, key="pending"), Manifest)
    for pack in pending.packs:                       # the store lost the pending checkpoint's packs
        (tmp_path / "store" / pack_key(pack)).unlink()
    shutil.rmtree(codex)                             # and codex's live directory is gone: a dormant tree

    res = checkpoint(cfg(), store)                   # drops pending 2, re-uploads fx, commits 2
    assert res.seq == 2 and any("dropped it" in w for w in res.warnings), res.warnings
    manifest, _ = Repository.open(store).load_manifest(2)
    assert manifest.trees["codex"].root is not None and manifest.trees["codex"].files == 1
    out = tmp_path / "out"
    r = restore(cfg(), store, to=str(out))
    assert r.complete, [(t.lost, t.error) for t in r.trees]
    assert (out / "codex" / "keep.txt").read_text() == "codex data " * 100   # as in the parent, seq 1
    assert (out / "fx" / "notes.txt").read_text() == "B" * 1000
    assert Repository.open(store).manifest_seqs() == [1, 2]
