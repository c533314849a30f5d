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


def test_a_rollback_carries_a_tree_not_configured_here_as_the_newest_manifest_has_it(tmp_path):
    """`restore --at 1` on a machine that does not configure tree ``extra`` (another
    container's): the next checkpoint must carry ``extra`` as the newest manifest has it,
    not as manifest 1 had it (whose packs a gc sweep may already have deleted)."""
    local = tmp_path / "local"
    (local / "fx-home").mkdir(parents=True)
    extra = tmp_path / "extra-live"
    extra.mkdir()
    conf = tmp_path / ".config" / "journal" / "config.toml"
    conf.parent.mkdir(parents=True)
    conf.write_text(f'[[trees]]\nname = "extra"\npath = "{extra}"\n')
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    store = open_store(env["JOURNAL_STORE"])
    for v in (1, 2, 3):
        (extra / "data.txt").write_text(f"extra version {v}\n" * 100)
        (local / "fx-home" / "n.txt").write_text(f"fx {v}\n" * 10)
        checkpoint(load_config(env=env), store)
    conf.unlink()                                    # this container does not configure "extra"
    cfg = load_config(env=env)
    repo = Repository.open(store)
    gc(repo, Policy(keep_last=1), 0.0)               # mark manifests 1, 2 and their packs
    assert restore(cfg, store, at="1").complete
    gc(repo, Policy(keep_last=1), 0.0)               # sweep: manifest 1's packs are gone
    assert checkpoint(cfg, store).seq == 4
    result = verify(Repository.open(store), full=True)
    assert not result.findings, result.findings
    from journal.history import ManifestCache
    entries, _ = ManifestCache(Repository.open(store)).tree(4, "extra")
    assert [e.size for e in entries if e.path == "data.txt"] == [len("extra version 3\n" * 100)]
