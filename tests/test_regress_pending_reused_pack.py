"""A checkpoint whose data pack already exists (KeyExists) relies on confirm_existing()
after the commit; when the manifest put fails (crash / network) the manifest is kept
as *pending* and republished later, but confirm_existing never runs for it and the
spool copy is thrown away. A gc sweep in between deletes the tombstoned pack."""
import os
import pytest
from journal.checkpoint import checkpoint
from journal.restore import restore
from journal.config import load_config
from journal.store import open_store
from journal.repository import Repository
from journal.gc import gc
from journal.retention import Policy
from journal.history import ManifestCache


def test_pending_republish_after_sweep(tmp_path, monkeypatch):
    local = tmp_path / "local"
    tree = local / "fx-home"
    tree.mkdir(parents=True)
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    store = open_store(env["JOURNAL_STORE"])
    cfg = lambda: load_config(env=env)
    f = tree / "notes.txt"
    f.write_text("X" * 1000)
    checkpoint(cfg(), store)                         # seq 1: data pack P1 = [chunk X]
    f.write_text("Y" * 1000)
    checkpoint(cfg(), store)                         # seq 2
    repo = Repository.open(store)
    print("mark", [i.key for i in gc(repo, Policy(keep_last=1), 0.0)[0].tombstone])  # tombstones m1, P1
    f.write_text("X" * 1000)                         # content comes back: same pack bytes as P1
    real_put = Repository.put_manifest
    def failing_put(self, record, seq):
        raise ConnectionError("network down during the manifest put")
    monkeypatch.setattr(Repository, "put_manifest", failing_put)
    with pytest.raises(ConnectionError):
        checkpoint(cfg(), store)                     # seq 3 left pending in local state
    monkeypatch.setattr(Repository, "put_manifest", real_put)
    print("sweep", gc(repo, Policy(keep_last=1), 0.0)[1])    # grace elapsed: deletes m1 and P1
    res = checkpoint(cfg(), store)                   # republishes pending seq 3
    print("checkpoint seq", res.seq)
    entries, _ = ManifestCache(Repository.open(store)).tree(3, "fx")
    missing = [r.pack for e in entries for r in e.refs if store.head(f"packs/{r.pack[:2]}/{r.pack}") is None]
    print("manifest 3 names missing packs:", missing)
    out = tmp_path / "out"
    r = restore(cfg(), store, to=str(out))
    print("fresh restore:", r.complete, [(t.lost, t.fallbacks) for t in r.trees],
          (out / "fx" / "notes.txt").read_text()[:5] if (out / "fx" / "notes.txt").exists() else None)
    assert not missing
