"""restore's remove_tmp follows a symlinked .journal-tmp and unlinks the files it points at."""
import os
from journal.checkpoint import checkpoint
from journal.restore import restore
from journal.config import load_config
from journal.store import open_store


def test_remove_tmp_follows_symlink(tmp_path):
    local = tmp_path / "local"
    tree = local / "fx-home"
    tree.mkdir(parents=True)
    (tree / "a.txt").write_text("a\n")
    env = {"AM_LOCAL": str(local), "JOURNAL_STORE": str(tmp_path / "store"), "HOME": str(tmp_path),
           "XDG_CONFIG_HOME": str(tmp_path / ".config")}
    store = open_store(env["JOURNAL_STORE"])
    checkpoint(load_config(env=env), store)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.md").write_text("never part of any tree\n")
    os.symlink(precious, tree / ".journal-tmp")   # e.g. left by a tool, or a mount
    try:
        r = restore(load_config(env=env), store)
        print("restore returned", r.complete)
    except Exception as err:
        print("restore raised", type(err).__name__, err)
    print("precious now:", os.listdir(precious))
    assert (precious / "notes.md").exists()
