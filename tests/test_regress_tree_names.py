"""restore --to DIR joins DIR with tree names read from the manifest, unchecked."""
import msgspec
from journal.checkpoint import checkpoint
from journal.restore import restore
from journal.config import load_config
from journal.store import open_store
from journal.repository import Repository, encode_manifest


def test_tree_name_escapes_to(tmp_path):
    local = tmp_path / "local"
    (local / "fx-home").mkdir(parents=True)
    (local / "fx-home" / "payload.txt").write_text("written outside --to\n")
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    store = open_store(env["JOURNAL_STORE"])
    checkpoint(load_config(env=env), store)
    repo = Repository.open(store)
    m, mid = repo.load_manifest(1)
    # A manifest (e.g. written by another, buggy or hostile writer sharing the bucket)
    # whose tree name is "../../escaped".
    evil = msgspec.structs.replace(m, seq=2, parent=1, parent_id=mid,
                                   trees={"../../escaped": m.trees["fx"]})
    _, rec = encode_manifest(evil)
    repo.put_manifest(rec, 2)
    dest = tmp_path / "exports" / "x"
    r = restore(load_config(env=env), store, to=str(dest))
    print([(t.name, t.dest, t.actions, t.error) for t in r.trees])
    outside = tmp_path / "escaped" / "payload.txt"
    print("exists outside dest:", outside, outside.exists())
    assert not outside.exists()
