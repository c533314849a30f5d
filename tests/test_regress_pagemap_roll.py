"""A page map written right after the data pack reaches its target lands in a NEW pack,
but its records say SAME_PACK (0xFFFF) for the pages in the OLD pack."""
import os, sqlite3, shutil
from journal import pack as packmod
from journal.checkpoint import checkpoint
from journal.restore import restore
from journal.config import load_config
from journal.store import open_store
from journal.history import ManifestCache
from journal.repository import Repository


def mkbox(root):
    local = root / "local"
    (local / "hermes").mkdir(parents=True)
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(root / "store"), "HOME": str(root),
           "XDG_CONFIG_HOME": str(root / ".config"), "XDG_DATA_HOME": str(root / ".data")}
    db = local / "hermes" / "state.db"
    con = sqlite3.connect(db)
    con.execute("create table t(x)")
    for i in range(200):
        con.execute("insert into t values (?)", (os.urandom(300).hex(),))
    con.commit(); con.close()
    return env, db


def map_offset(env):
    store = open_store(env["JOURNAL_STORE"])
    repo = Repository.open(store)
    c = ManifestCache(repo)
    entries, _ = c.tree(repo.manifest_seqs()[-1], "hermes")
    e = [e for e in entries if e.path == "state.db"][0]
    return e.refs[0], e


def test_map_across_pack_roll(tmp_path, monkeypatch):
    env1, db1 = mkbox(tmp_path / "probe")
    checkpoint(load_config(env=env1), open_store(env1["JOURNAL_STORE"]))
    mref, _ = map_offset(env1)
    boundary = mref.offset  # pack size right after the last page was added
    # Same database bytes in a fresh box; the data pack target is exactly that size
    # (stands for "the last page's record ends at/after 64 MiB").
    env2, db2 = mkbox(tmp_path / "box")
    shutil.copyfile(db1, db2)
    monkeypatch.setattr(packmod.PackWriter.__init__, "__defaults__", (boundary,))
    res = checkpoint(load_config(env=env2), open_store(env2["JOURNAL_STORE"]))
    print("checkpoint ok, seq", res.seq)
    mref2, e = map_offset(env2)
    print("map ref pack", mref2.pack[:12], "offset", mref2.offset)
    monkeypatch.undo()
    out = tmp_path / "out"
    r = restore(load_config(env=env2), open_store(env2["JOURNAL_STORE"]), to=str(out))
    print("restore complete:", r.complete, [ (t.name, t.lost, t.error) for t in r.trees])
    # one more small transaction, normal pack target: delta map over the broken full map
    con = sqlite3.connect(db2); con.execute("insert into t values ('z')"); con.commit(); con.close()
    res = checkpoint(load_config(env=env2), open_store(env2["JOURNAL_STORE"]))
    r3 = restore(load_config(env=env2), open_store(env2["JOURNAL_STORE"]), to=str(tmp_path / "out2"))
    print("next checkpoint", res.seq, "restore complete:", r3.complete, [t.lost for t in r3.trees])
    assert r.complete, "published snapshot cannot be restored"
