"""journal's own temp directory in a live tree (``journal/local/tree_tmp.py``): made new each
time, left out of a checkpoint only while a live process holds it, removed once its
owner is gone, and never confused with a user's directory of a similar name. Real
processes, real flocks, real SIGKILLs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from journal.local.tree_tmp import PREFIX, TreeTmp

HOLDER = """
import os, sys
from journal.local.tree_tmp import TreeTmp
tmp = TreeTmp.make(sys.argv[1], sys.argv[2])
name, fd = tmp.new_file()
os.write(fd, b"half of a staged file")
print(tmp.path, flush=True)
sys.stdin.read()
"""


def test_a_temp_dir_is_left_out_while_its_owner_lives_and_swept_once_it_is_killed(bare_live):
    fx = bare_live.local / "fx-home"
    fx.mkdir()
    (fx / "notes.txt").write_text("notes\n")
    user = fx / (PREFIX + "0123456789abcdef")  # named like journal's, but the user's
    user.mkdir()
    (user / "mine.part").write_text("a user's file\n")
    assert bare_live.checkpoint().seq == 1
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(fx), str(bare_live.local / ".journal")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        held = holder.stdout.readline().strip()
        (fx / "notes.txt").write_text("notes, changed\n")

        assert bare_live.checkpoint().seq == 2
        assert os.path.isdir(held), "a temp dir a live process holds is not swept"
        entries = bare_live.entries("fx")
        assert not any(p.startswith(os.path.basename(held)) for p in entries)
        assert entries[f"{user.name}/mine.part"].size == len("a user's file\n")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    (fx / "notes.txt").write_text("notes, changed again\n")

    assert bare_live.checkpoint().seq == 3
    assert not os.path.exists(held), "the killed owner's temp dir is swept"
    assert (user / "mine.part").read_text() == "a user's file\n", "a user's directory is never swept"
    assert not any(p.startswith(os.path.basename(held)) for p in bare_live.entries("fx"))
    assert not bare_live.warnings


def test_a_temp_dir_holding_a_file_journal_did_not_make_is_left_with_a_warning(tmp_path):
    root, state = tmp_path / "tree", tmp_path / "state"
    root.mkdir()
    tmp = TreeTmp.make(str(root), str(state))
    name, fd = tmp.new_file()
    os.close(fd)
    planted = os.path.join(tmp.path, "planted.txt")
    with open(planted, "w") as fh:
        fh.write("someone else's\n")

    warning = tmp.close()

    assert warning is not None and "holds files journal did not make" in warning
    assert os.listdir(tmp.path) == ["planted.txt"], "journal's own file is removed, the other is kept"
    assert os.listdir(state / "tree-tmp") == [], "the directory is the tree's now: no record is left"


def test_each_temp_dir_is_new_private_and_gone_once_closed(tmp_path):
    root, state = tmp_path / "tree", tmp_path / "state"
    root.mkdir()
    first, second = TreeTmp.make(str(root), str(state)), TreeTmp.make(str(root), str(state))
    try:
        assert first.path != second.path
        assert os.path.basename(first.path).startswith(PREFIX)
        assert oct(os.stat(first.path).st_mode & 0o777) == oct(0o700)
    finally:
        first.close()
        second.close()
    assert os.listdir(root) == []
