"""restore --at republishes (dirty tree) entries that reference packs only an expired
manifest reaches; a gc sweep between that restore and the next checkpoint deletes them,
and the next checkpoint publishes a manifest naming deleted packs."""
import os
from journal.checkpoint import checkpoint
from journal.restore import restore
from journal.config import load_config
from journal.store import open_store
from journal.repository import Repository
from journal.gc import gc
from journal.retention import Policy
from journal.verify import verify


def test_gc_after_rollback(tmp_path):
    local = tmp_path / "local"
    tree = local / "fx-home"
    tree.mkdir(parents=True)
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    store = open_store(env["JOURNAL_STORE"])
    cfg = lambda: load_config(env=env)
    for v in (1, 2, 3):
        (tree / "notes.txt").write_text(f"version {v}\n" * 50)
        os.utime(tree / "notes.txt", ns=(v * 10**18, v * 10**18))
        checkpoint(cfg(), store)
        (tree / "other.txt").write_text("stable\n")
    repo = Repository.open(store)
    print("mark", gc(repo, Policy(keep_last=1), 0.0)[0].tombstone)           # mark: manifests 1, 2 and their packs
    os.unlink(tree / "notes.txt")                # (or any local copy older than manifest 1)
    r = restore(cfg(), store, at="1")           # roll back to manifest 1 (documented feature)
    print("rollback:", [(t.name, t.actions) for t in r.trees])
    print("local:", (tree / "notes.txt").read_text()[:10])
    print("sweep", gc(repo, Policy(keep_last=1), 0.0)[1])           # sweep (grace elapsed)
    print(sorted(store.list("")))
    res = checkpoint(cfg(), store)               # publishes the rolled-back tree
    print("checkpoint seq", res.seq, res.trees, res.objects)
    from journal.history import ManifestCache
    print(ManifestCache(Repository.open(store)).tree(4, "fx")[0])
    out = tmp_path / "out"
    r2 = restore(cfg(), store, to=str(out))
    print("fresh restore complete:", r2.complete, [(t.name, t.lost, t.fallbacks) for t in r2.trees])
    print("restored notes.txt:", (out / "fx" / "notes.txt").read_text()[:10])
    missing = [r.pack for e in ManifestCache(Repository.open(store)).tree(4, "fx")[0] for r in e.refs
               if store.head("packs/%s/%s" % (r.pack[:2], r.pack)) is None]
    print("manifest 4 names missing packs:", missing)
    assert not missing
